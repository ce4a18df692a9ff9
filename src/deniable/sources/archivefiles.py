"""The archive of raw reports: its layout, its Parquet schema and its checksum (one contract
for the collector that writes it and the re-analysis that reads it; docs/DESIGN.md pins it).

An archive is a directory, local or on an object store (any fsspec URL: a path,
``file://``, ``s3://`` with the ``s3fs`` package), holding one Parquet file per (metric,
period), Hive-partitioned: ``{root}/metric={name}/period={label}/reports.parquet``, zstd,
with ``manifest.json`` beside it (rows and checksum, written once the file was verified).
Columns: ``id`` (16 bytes), ``payload`` (the stored payload JSON text, exactly), ``received``
(date), and ``cell`` (text) when the collector stores raw reports' dimension cells. The
file's key-value metadata holds the metric's spec (``deniable.spec``) and the archive
format version (``deniable.archive``).

The checksum is SHA-256 over the rows in id order, each row its 16 id bytes, its payload
text (UTF-8), ``\\x1f``, its received date (ISO), then ``\\x1f`` and its cell if the file has
cells, and ``\\n``: independent of how the rows are split into pages or row groups, and
changed by any row lost, doubled or altered.

The manifest also holds ``counted_sha256``, a checksum of the columns an estimate reads
(``payload``, and ``cell`` when the file has cells): per column, the SHA-256 of its values'
lengths (4 bytes each, little-endian) and the SHA-256 of its values' bytes, in row order,
combined by :class:`CountedDigest`. Re-analysis checks a file against it reading those columns
alone, which costs a fifth of reading and hashing every column (a manifest without it is
checked against ``sha256``, as before).

A file of a metric whose payloads are category indices (brr, krr) holds ``groups_sha256``
instead, a checksum of its distinct payloads with their row counts, and, when it has cells,
``cell_groups_sha256``, of its distinct (cell, payload) pairs (:func:`groups_checksum`):
what a whole-period estimate and a breakdown reduce it to. Re-analysis checks the one its
answer needs on the groups its own scan counted, reading nothing more.

pyarrow and fsspec are imported by the functions that need them (the ``archive`` extra).
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import json
import os
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from deniable.client.errors import InvalidInput
from deniable.client.mechanisms import KRR
from deniable.client.spec import MetricSpec

ARCHIVE_VERSION = "1"
"""The archive format version, in each file's metadata."""
FILE_NAME = "reports.parquet"
"""The Parquet file of one (metric, period)."""
MANIFEST_NAME = "manifest.json"
"""The manifest beside it: metric, period, rows, sha256, counted_sha256 or groups_sha256
(and cell_groups_sha256), version."""
SPEC_KEY = "deniable.spec"
"""Parquet metadata key holding the metric's spec (JSON)."""
VERSION_KEY = "deniable.archive"
"""Parquet metadata key holding :data:`ARCHIVE_VERSION`."""
COMPRESSION = "zstd"
"""The Parquet compression codec."""
READ_BATCH = 65_536
"""Rows per batch when a file is read back."""
COUNTED_COLUMNS = ("payload", "cell")
"""The columns an estimate from the archive reads, which ``counted_sha256`` covers."""
COUNTED_KEY = "counted_sha256"
"""The manifest key of the counted columns' checksum (:class:`CountedDigest`)."""
GROUPS_KEY = "groups_sha256"
"""The manifest key of the payload groups' checksum (:func:`groups_checksum`)."""
CELL_GROUPS_KEY = "cell_groups_sha256"
"""The manifest key of the (cell, payload) groups' checksum, in a file with cells."""


def arrow_schema(with_cell: bool, spec_json: str | None = None) -> Any:
    """The pinned Arrow schema of an archive file (with the ``cell`` column if asked)."""
    import pyarrow as pa

    fields = [
        pa.field("id", pa.binary(16), nullable=False),
        pa.field("payload", pa.string(), nullable=False),
        pa.field("received", pa.date32(), nullable=False),
    ]
    if with_cell:
        fields.append(pa.field("cell", pa.string(), nullable=False))
    metadata = {VERSION_KEY: ARCHIVE_VERSION}
    if spec_json is not None:
        metadata[SPEC_KEY] = spec_json
    return pa.schema(fields, metadata=metadata)


class EphemeralArchive(InvalidInput):
    """An archive target on a filesystem that does not outlive the process (fsspec's
    ``memory``, or a caching wrapper such as ``simplecache::``): reports archived there would
    be verified, dropped from the database, and gone when the command exits."""


class ArchiveLink(InvalidInput):
    """A symbolic link where the archiver writes (a planted ``reports.parquet.partial``,
    ``manifest.json``, or partition directory): writing through it would overwrite its target,
    so nothing is written and nothing is dropped."""


class ArchiveCorrupt(InvalidInput):
    """An archived file that does not hold what its manifest says, or a row no honest device
    sends (a payload out of range for its mechanism): re-analysis stops, naming the file (and
    the row), rather than counting it."""


EPHEMERAL_PROTOCOLS = frozenset({"memory", "simplecache", "filecache", "blockcache", "cached"})
"""fsspec protocols whose files live in this process (memory) or in a local cache that is
written back, if at all, on close (the caching wrappers): never an archive target."""


def _layers(fs: Any) -> Iterator[Any]:
    """``fs`` and every filesystem it wraps (``dir::``, caching wrappers: their ``fs``)."""
    seen = 0
    while fs is not None and seen < 16:
        yield fs
        fs, seen = getattr(fs, "fs", None), seen + 1


def check_durable(fs: Any, url: str) -> None:
    """Raise :class:`EphemeralArchive` unless ``fs`` (and everything it wraps) keeps its files
    beyond this process."""
    from fsspec.implementations.cached import CachingFileSystem
    from fsspec.implementations.memory import MemoryFileSystem

    for layer in _layers(fs):
        protocols = {layer.protocol} if isinstance(layer.protocol, str) else set(layer.protocol)
        if isinstance(layer, MemoryFileSystem | CachingFileSystem) or (
            protocols & EPHEMERAL_PROTOCOLS
        ):
            raise EphemeralArchive(
                f"--archive-to {url}: {sorted(protocols)[0]}:// is not a durable store (memory, or a"
                " cache in front of a store), so archived reports would be lost once they are"
                " dropped; archive to a directory or an object store (s3://...)"
            )


def local_path(fs: Any, path: str) -> str | None:
    """The local path that ``path`` on ``fs`` names, through every ``dir::`` layer over the
    local filesystem (where links can be planted and refused), or None if ``fs`` is not local
    underneath (an object store has no links)."""
    from fsspec.implementations.dirfs import DirFileSystem
    from fsspec.implementations.local import LocalFileSystem

    for _ in range(16):
        if isinstance(fs, LocalFileSystem):
            return os.path.normpath(fs._strip_protocol(path))
        if not isinstance(fs, DirFileSystem):
            return None
        path, fs = fs._join(path), fs.fs
    return None


def refuse_links(fs: Any, root: str, path: str) -> None:
    """Raise :class:`ArchiveLink` if ``path`` or a directory between ``root`` and it is a
    symbolic link (on the local filesystem, under any ``dir::`` layers). ``root`` itself may
    be a link: an operator's choice, not a planted file."""
    local_root, local = local_path(fs, root), local_path(fs, path)
    if local_root is None or local is None:
        return
    relative = os.path.relpath(local, local_root)
    current = local_root
    for part in relative.split(os.sep):
        current = os.path.join(current, part)
        if os.path.islink(current):
            raise ArchiveLink(
                f"{current} is a symbolic link: the archiver does not write through links;"
                " remove it and run again (nothing was written or dropped)"
            )


def open_for_writing(fs: Any, path: str, mode: str = "wb") -> Any:
    """``path`` opened for writing, truncated; on a local filesystem with ``O_NOFOLLOW``, so
    a link planted after :func:`refuse_links` looked is refused, never written through."""
    local = local_path(fs, path)
    if local is None:
        return fs.open(path, mode)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    try:
        descriptor = os.open(local, flags, 0o644)
    except OSError:
        if os.path.islink(local):
            raise ArchiveLink(
                f"{local} is a symbolic link: the archiver does not write through links"
            ) from None
        raise
    return os.fdopen(descriptor, mode)


def open_archive(url: str) -> tuple[Any, str]:
    """The fsspec filesystem and root path of the archive at ``url`` (a path or a URL)."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(url)
    return fs, root.rstrip("/")


def partition_dir(root: str, metric: str, period: str) -> str:
    """The directory of (metric, period) under ``root``."""
    return f"{root}/metric={metric}/period={period}"


class Digest:
    """The running checksum of rows fed in id order (see the module's docstring)."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.rows = 0

    def update(
        self,
        ids: Sequence[bytes],
        payloads: Sequence[str],
        received: Sequence[str],
        cells: Sequence[str] | None = None,
    ) -> None:
        """Feed rows (ids as 16 bytes, received as ISO dates)."""
        if cells is None:
            parts: Iterable[bytes] = (
                i + f"{p}\x1f{r}\n".encode()
                for i, p, r in zip(ids, payloads, received, strict=True)
            )
        else:
            parts = (
                i + f"{p}\x1f{r}\x1f{c}\n".encode()
                for i, p, r, c in zip(ids, payloads, received, cells, strict=True)
            )
        self._hash.update(b"".join(parts))
        self.rows += len(ids)

    def hexdigest(self) -> str:
        """The SHA-256 so far, in hex."""
        return self._hash.hexdigest()


class CountedDigest:
    """The running ``counted_sha256`` of an archive file's batches (module docstring): for
    each counted column, one hash of its values' lengths and one of their bytes, so the
    value is the same however the rows are split into batches."""

    def __init__(self) -> None:
        self._parts: dict[str, tuple[Any, Any]] = {}
        self.rows = 0

    def update(self, batch: Any) -> None:
        """Feed a batch (of every column, or of the counted ones alone)."""
        import pyarrow as pa

        for name in COUNTED_COLUMNS:
            if name not in batch.schema.names:
                continue
            array = batch.column(name)
            if array.null_count:
                raise ValueError("an archive file has empty (null) values")
            if not pa.types.is_string(array.type):
                array = array.cast(pa.string())
            lengths, values = self._parts.setdefault(name, (hashlib.sha256(), hashlib.sha256()))
            offsets = np.frombuffer(array.buffers()[1], dtype=np.int32)
            offsets = offsets[array.offset : array.offset + len(array) + 1]
            lengths.update(np.diff(offsets).astype("<u4").tobytes())
            if len(array) and offsets[-1] > offsets[0]:
                values.update(memoryview(array.buffers()[2])[offsets[0] : offsets[-1]])
        self.rows += batch.num_rows

    def checksums(self) -> dict[str, str]:
        """The manifest's entry: ``counted_sha256``."""
        return {COUNTED_KEY: self.hexdigest()}

    def hexdigest(self) -> str:
        """The combined SHA-256, in hex: the columns by name, each its two hashes."""
        combined = hashlib.sha256(b"deniable.archive counted columns\n")
        for name in sorted(self._parts):
            lengths, values = self._parts[name]
            combined.update(name.encode() + b"\n" + lengths.digest() + values.digest())
        return combined.hexdigest()


def counted_by_groups(spec: MetricSpec) -> bool:
    """Whether ``spec``'s archive files carry the groups' checksums: its payloads are
    category indices (a krr or brr oracle), so a file's distinct payloads are few."""
    return isinstance(spec.frequency_oracle, KRR)


def groups_checksum(groups: Iterable[tuple[str, str, int]]) -> str:
    """``groups_sha256`` of a file whose distinct (cell, payload) pairs (cell ``""`` in a
    file without cells) hold the given row counts: SHA-256 over
    ``deniable.archive groups\n`` and then, in (cell, payload) order, each pair's cell and
    payload as their UTF-8 length (4 bytes, little-endian) and bytes, and its count (8 bytes,
    little-endian)."""
    written: dict[str, bytes] = {}  # a file's cells and payloads repeat: each written once
    parts = [b"deniable.archive groups\n"]
    for cell, payload, rows in sorted(groups):
        for text in (cell, payload):
            found = written.get(text)
            if found is None:
                encoded = text.encode()
                found = written[text] = _LENGTH.pack(len(encoded)) + encoded
            parts.append(found)
        parts.append(_ROWS.pack(rows))
    return hashlib.sha256(b"".join(parts)).hexdigest()


_LENGTH, _ROWS = struct.Struct("<I"), struct.Struct("<Q")
"""A value's length and a group's rows, as :func:`groups_checksum` writes them."""


class GroupsDigest:
    """The running groups' checksums of an archive file's batches: the row count of each
    (cell, payload) pair, grouped by Arrow."""

    def __init__(self) -> None:
        self.groups: collections.Counter[tuple[str, str]] = collections.Counter()
        self.cells = False
        self.rows = 0

    def update(self, batch: Any) -> None:
        """Feed a batch."""
        import pyarrow as pa

        keys = [name for name in ("cell", "payload") if name in batch.schema.names]
        table = pa.Table.from_batches([batch.select(keys)])
        if any(column.null_count for column in table.columns):
            raise ValueError("an archive file has empty (null) values")
        grouped = table.group_by(keys).aggregate([([], "count_all")]).to_pydict()
        self.cells = self.cells or "cell" in keys
        cells = grouped.get("cell") or [""] * len(grouped["payload"])
        for cell, payload, rows in zip(
            cells, grouped["payload"], grouped["count_all"], strict=True
        ):
            self.groups[(cell, payload)] += rows
        self.rows += batch.num_rows

    def checksums(self) -> dict[str, str]:
        """The manifest's entries: ``groups_sha256``, and ``cell_groups_sha256`` if the file
        has cells."""
        payloads: collections.Counter[str] = collections.Counter()
        for (_, payload), n in self.groups.items():
            payloads[payload] += n
        found = {GROUPS_KEY: groups_checksum(("", payload, n) for payload, n in payloads.items())}
        if self.cells:
            cells = ((cell, payload, n) for (cell, payload), n in self.groups.items())
            found[CELL_GROUPS_KEY] = groups_checksum(cells)
        return found


@dataclass(frozen=True)
class FileCheck:
    """What reading an archive file back found: its rows, its ``sha256`` over every column
    (empty when not read) and its other checksums by manifest key."""

    rows: int
    sha256: str
    checksums: dict[str, str]

    def checksum(self, key: str) -> str:
        """The checksum under the manifest key ``key`` (empty if it was not found)."""
        return self.sha256 if key == "sha256" else self.checksums.get(key, "")


@contextlib.contextmanager
def parquet_file(fs: Any, path: str) -> Iterator[Any]:
    """The archive file ``path`` open as a ``pyarrow.parquet.ParquetFile``: read by Arrow's own
    I/O where the file is local (through any ``dir::`` layers), else through ``fs``'s file
    object (a Python object Arrow reads through under the GIL; it made the archive's read-back
    check a sixth of its time)."""
    import pyarrow.parquet as pq

    local = local_path(fs, path)
    if local is not None:
        with pq.ParquetFile(local) as file:
            yield file
        return
    with fs.open(path, "rb") as handle:
        yield pq.ParquetFile(handle)


def file_batches(fs: Any, path: str, columns: Sequence[str] | None = None) -> Iterator[Any]:
    """The Arrow record batches of the archive file ``path`` (:func:`parquet_file`)."""
    with parquet_file(fs, path) as file:
        yield from file.iter_batches(batch_size=READ_BATCH, columns=columns)


def batch_rows(batch: Any) -> memoryview:
    """The bytes :class:`Digest` hashes for an Arrow batch of an archive file, joined by
    Arrow in C (no Python object per row): the same bytes as ``Digest.update`` of its
    columns, a test holds them equal."""
    import pyarrow as pa
    import pyarrow.compute as pc

    separator, newline = pa.scalar(b"\x1f", pa.binary()), pa.scalar(b"\n", pa.binary())
    parts = [
        batch.column("id").cast(pa.binary()),
        batch.column("payload").cast(pa.binary()),
        separator,
        batch.column("received").cast(pa.string()).cast(pa.binary()),
    ]
    if "cell" in batch.schema.names:
        parts += [separator, batch.column("cell").cast(pa.binary())]
    joined = pc.binary_join_element_wise(*parts, newline, pa.scalar(b"", pa.binary()))
    if joined.null_count:
        raise ValueError("an archive file has empty (null) values")
    if len(joined) == 0:
        return memoryview(b"")
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int32)
    start, end = offsets[joined.offset], offsets[joined.offset + len(joined)]
    return memoryview(joined.buffers()[2])[start:end]


def check_file(fs: Any, path: str, grouped: bool = False) -> FileCheck:
    """Read the archive file ``path`` back: its row count, its checksum and its counted
    columns' (their groups' if ``grouped``) (ValueError, from pyarrow, if it is not a whole
    Parquet file)."""
    digest = hashlib.sha256()
    counted: CountedDigest | GroupsDigest = GroupsDigest() if grouped else CountedDigest()
    for batch in file_batches(fs, path):
        digest.update(batch_rows(batch))
        counted.update(batch)
    return FileCheck(counted.rows, digest.hexdigest(), counted.checksums())


def check_counted(fs: Any, path: str) -> FileCheck:
    """Read the counted columns of the archive file ``path`` (those it has; Arrow skips a
    column a file lacks): its row count and ``counted_sha256`` (``sha256`` left empty)."""
    counted = CountedDigest()
    for batch in file_batches(fs, path, COUNTED_COLUMNS):
        counted.update(batch)
    return FileCheck(counted.rows, "", counted.checksums())


CHECKSUM_KEYS = (COUNTED_KEY, GROUPS_KEY, CELL_GROUPS_KEY, "sha256")
"""A manifest's checksums, in the order a whole read of the file prefers them."""


@dataclass(frozen=True)
class Manifest:
    """A file's manifest as read: its row count and its checksums by key (``sha256`` alone
    in a manifest older than the others)."""

    path: str
    rows: int
    checksums: dict[str, str]


def read_manifest(fs: Any, path: str, metric: str, period: str) -> Manifest | None:
    """The manifest beside the archive file ``path``, which must describe ``metric`` and
    ``period`` (:class:`ArchiveCorrupt` otherwise, naming it); None if there is none."""
    manifest = f"{path.rsplit('/', 1)[0]}/{MANIFEST_NAME}"
    if not fs.exists(manifest):
        return None
    try:
        with fs.open(manifest, "rb") as handle:
            document = json.loads(handle.read(1 << 16))
        described, rows = (document["metric"], document["period"]), document["rows"]
        checksums = {key: document[key] for key in CHECKSUM_KEYS if key in document}
        if not isinstance(rows, int) or not checksums:
            raise TypeError("rows and checksum")
        if not all(isinstance(value, str) for value in checksums.values()):
            raise TypeError("checksum")
    except (ValueError, KeyError, TypeError):
        raise ArchiveCorrupt(f"{manifest} is not an archive manifest") from None
    if described != (metric, period):
        raise ArchiveCorrupt(
            f"{manifest} describes {described[0]} {described[1]}, not {metric} {period}"
        )
    return Manifest(manifest, rows, checksums)


def check_manifest(path: str, manifest: Manifest, key: str, rows: int, checksum: str) -> None:
    """Refuse the archive file ``path`` (:class:`ArchiveCorrupt`) unless ``rows`` and
    ``checksum``, found in it, are the manifest's (its checksum under ``key``)."""
    expected = manifest.checksums.get(key, "")
    if (rows, checksum) != (manifest.rows, expected):
        raise ArchiveCorrupt(
            f"{path} does not match its manifest: {rows:,} row(s) with checksum"
            f" {checksum[:12]}..., the manifest says {manifest.rows:,} with"
            f" {expected[:12]}...: the file was altered after it was archived"
        )


def verify_manifest(fs: Any, path: str, manifest: Manifest) -> None:
    """Check the archive file ``path`` against ``manifest`` by reading it: its counted
    columns, or its groups, or every column for a manifest older than both
    (:class:`ArchiveCorrupt`, naming the file). Re-analysis checks a brr/krr file's groups on
    the counts its scan made instead (:func:`check_manifest`)."""
    key = next(key for key in CHECKSUM_KEYS if key in manifest.checksums)
    try:
        if key == COUNTED_KEY:
            found = check_counted(fs, path)
        else:
            found = check_file(fs, path, grouped=key != "sha256")
    except (ValueError, KeyError, OSError) as exc:
        raise ArchiveCorrupt(f"{path} cannot be read back: {exc}") from None
    check_manifest(path, manifest, key, found.rows, found.checksum(key))

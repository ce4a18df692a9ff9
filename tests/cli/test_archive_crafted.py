"""A crafted archive never changes a re-analysis silently: ``--from-archive`` refuses a payload
no device sends, for every kind, naming the file and the row; it checks each file against its
manifest and says loudly when a file has none."""

from __future__ import annotations

import hashlib
import itertools
import json
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deniable.client import MetricSpec, SeededRandomness
from deniable.client.spec import canonical_json
from deniable.client.wire import payload_text
from deniable.sources.archivefiles import (
    COMPRESSION,
    COUNTED_KEY,
    FILE_NAME,
    GROUPS_KEY,
    MANIFEST_NAME,
    CountedDigest,
    Digest,
    arrow_schema,
    batch_rows,
    counted_by_groups,
    partition_dir,
)
from testkit.archive_digest import counted_checksum, groups_reference
from testkit.cli import run_cli

PERIOD = "2026-06-02"
ROWS = 40
BAD_ROW = 17
"""The row (from 0) a crafted payload replaces; the error names it counting from 1."""
SPECS = {
    "brr": MetricSpec.boolean("crafted_flag", epsilon=1.0),
    "krr": MetricSpec.categorical("crafted_krr", list("abcde"), epsilon=2.0, mechanism="krr"),
    "oue": MetricSpec.categorical("crafted_oue", list("abcde"), epsilon=1.0, mechanism="oue"),
    "olh": MetricSpec.categorical("crafted_olh", list("abcde"), epsilon=2.0, mechanism="olh"),
    "pm": MetricSpec.numeric("crafted_pm", lower=0, upper=10, epsilon=1.0, mechanism="pm"),
    "duchi": MetricSpec.numeric("crafted_duchi", lower=0, upper=10, epsilon=1.0, mechanism="duchi"),
    "text": MetricSpec.text("crafted_text", max_length=4, epsilon=4.0),
}


def _honest(spec: MetricSpec) -> list[str]:
    """ROWS payload texts as devices send them."""
    rng = SeededRandomness(3)
    if spec.type == "numeric":
        return [payload_text(spec.numeric_randomizer.randomize(0.2, rng)) for _ in range(ROWS)]
    if spec.type == "text":
        sketch = spec.text_randomizer
        return [payload_text(sketch.randomize(sketch.encode("dark"), 1, rng)) for _ in range(ROWS)]
    return [payload_text(spec.randomizer.randomize(i % spec.k, rng)) for i in range(ROWS)]


def write_file(
    root: Path, spec: MetricSpec, payloads: list[str], manifest: bool = True, key: str = ""
) -> Path:
    """An archive file of ``payloads`` as the archiver lays it out, and its manifest: the
    archiver's (``groups_sha256`` for brr/krr, else ``counted_sha256``), or one with the
    checksum ``key`` ("sha256": one written before the other two)."""
    directory = Path(partition_dir(str(root), spec.name, PERIOD))
    directory.mkdir(parents=True, exist_ok=True)
    ids = sorted(uuid.UUID(int=i + 1).bytes for i in range(len(payloads)))
    received = [PERIOD] * len(payloads)
    schema = arrow_schema(False, canonical_json(spec.to_dict()))
    if None in payloads:  # a crafter's schema: the archiver's says non-nullable
        schema = schema.set(1, schema.field("payload").with_nullable(True))
    arrays = [
        pa.array(ids, pa.binary(16)),
        pa.array(payloads, pa.string()),
        pa.array([pa.scalar(PERIOD).cast(pa.date32()).as_py()] * len(payloads), pa.date32()),
    ]
    path = directory / FILE_NAME
    pq.write_table(pa.Table.from_arrays(arrays, schema=schema), path, compression=COMPRESSION)
    if manifest:
        digest = Digest()
        digest.update(ids, payloads, received)
        document = {"metric": spec.name, "period": PERIOD, "rows": digest.rows}
        document |= {"sha256": digest.hexdigest(), "version": "1"}
        key = key or (GROUPS_KEY if counted_by_groups(spec) else COUNTED_KEY)
        if key == GROUPS_KEY:
            document[key] = groups_reference(payloads)
        elif key == COUNTED_KEY:
            document[key] = counted_checksum(payloads)
        (directory / MANIFEST_NAME).write_text(json.dumps(document))
    return path


def _estimate(spec: MetricSpec, root: Path) -> Any:
    return run_cli("estimate", spec.name, "--from-archive", str(root), "--format", "json")


@pytest.mark.parametrize("kind", list(SPECS))
def test_an_honest_archive_is_read_without_a_word(kind: str, tmp_path: Path) -> None:
    spec = SPECS[kind]
    write_file(tmp_path, spec, _honest(spec))
    result = _estimate(spec, tmp_path)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    document = json.loads(result.stdout)
    assert document.get("n", document.get("reports", ROWS)) == ROWS


CRAFTED = [
    ("brr", "2"),
    ("brr", "-1"),
    ("krr", "-1"),
    ("krr", "5"),
    ("krr", "7"),
    ("krr", "1.0"),
    ("krr", '"1"'),
    ("oue", '"/w=="'),
    ("oue", '"AAAA"'),
    ("olh", '{"a":0,"b":1,"y":0}'),
    ("olh", '{"a":1,"b":1,"y":99}'),
    ("olh", '{"a":1,"b":-1,"y":0}'),
    ("pm", "1e9"),
    ("pm", "NaN"),
    ("duchi", "0.5"),
    ("text", {"l": 0}),
    ("text", {"l": 5}),
    ("text", {"r": -1}),
    ("text", {"r": 16}),
    ("text", {"b": "AAAA"}),
]
"""(kind, payload text) or (kind, keys replaced in an honest payload)."""


@pytest.mark.parametrize(("kind", "payload"), CRAFTED)
def test_a_payload_no_device_sends_is_refused_naming_the_file_and_the_row(
    kind: str, payload: str | dict[str, Any], tmp_path: Path
) -> None:
    """The crafter rewrote the manifest too, so only the payload check can catch it."""
    spec = SPECS[kind]
    payloads = _honest(spec)
    if isinstance(payload, dict):
        payload = json.dumps(json.loads(payloads[BAD_ROW]) | payload, separators=(",", ":"))
    payloads[BAD_ROW] = payload
    path = write_file(tmp_path, spec, payloads)
    result = _estimate(spec, tmp_path)
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1
    assert f"{path}: row {BAD_ROW + 1} holds a payload no device sends" in line
    assert "internal error" not in line


def test_an_empty_payload_is_refused_naming_the_row(tmp_path: Path) -> None:
    spec = SPECS["krr"]
    payloads: list[Any] = _honest(spec)
    payloads[BAD_ROW] = None
    path = write_file(tmp_path, spec, payloads, manifest=False)
    result = _estimate(spec, tmp_path)
    assert result.exit_code == 1, result.output
    assert f"{path}: row {BAD_ROW + 1} holds a payload no device sends ('null'" in result.stderr


@pytest.mark.parametrize("key", ["sha256", COUNTED_KEY, GROUPS_KEY])
def test_a_file_altered_after_its_manifest_is_refused(key: str, tmp_path: Path) -> None:
    """Every payload still valid, one changed to another category: only the checksum sees it
    (the whole file's, the counted columns', or the groups' the count checks)."""
    spec = SPECS["krr"]
    payloads = _honest(spec)
    path = write_file(tmp_path, spec, payloads, key=key)
    manifest = (path.parent / MANIFEST_NAME).read_text()
    assert f'"{key}"' in manifest
    payloads[BAD_ROW] = str((int(payloads[BAD_ROW]) + 1) % spec.k)
    write_file(tmp_path, spec, payloads)
    (path.parent / MANIFEST_NAME).write_text(manifest)
    result = _estimate(spec, tmp_path)
    assert result.exit_code == 1, result.output
    assert f"{path} does not match its manifest" in result.stderr


@pytest.mark.parametrize(
    "document",
    ['{"metric": "crafted_krr", "period": "2026-06-01", "rows": 40, "sha256": "x"}', "{", "[]"],
)
def test_a_manifest_of_something_else_is_refused(document: str, tmp_path: Path) -> None:
    spec = SPECS["krr"]
    path = write_file(tmp_path, spec, _honest(spec))
    (path.parent / MANIFEST_NAME).write_text(document)
    result = _estimate(spec, tmp_path)
    assert result.exit_code == 1, result.output
    assert str(path.parent / MANIFEST_NAME) in result.stderr
    assert "Traceback" not in result.stderr


def test_a_file_without_a_manifest_is_read_with_a_warning(tmp_path: Path) -> None:
    spec = SPECS["krr"]
    write_file(tmp_path, spec, _honest(spec), manifest=False)
    result = _estimate(spec, tmp_path)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)
    assert result.stderr.startswith(
        f"warning: the archive at {tmp_path} holds {spec.name} {PERIOD} without a manifest.json"
    )


@pytest.mark.parametrize("with_cell", [False, True])
def test_the_arrow_checksum_is_the_rows_checksum(with_cell: bool) -> None:
    """check_file hashes rows joined by Arrow; they are the bytes Digest hashes row by row
    (the archiver's database side), for any payload text, dates and cells, in any slice."""
    rows = 300
    ids = [uuid.UUID(int=(i * 7919) << 40).bytes for i in range(rows)]
    payloads = [json.dumps({"b": "é" * (i % 5), "n": i}) for i in range(rows)]
    days = [f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}" for i in range(rows)]
    cells = [f"os=ü{i % 3},v={i}" for i in range(rows)] if with_cell else None
    arrays = [
        pa.array(ids, pa.binary(16)),
        pa.array(payloads, pa.string()),
        pa.array(days).cast(pa.date32()),
    ]
    if cells is not None:
        arrays.append(pa.array(cells, pa.string()))
    batch = pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(with_cell))
    expected = Digest()
    expected.update(ids[100:250], payloads[100:250], days[100:250], cells and cells[100:250])
    assert hashlib.sha256(batch_rows(batch.slice(100, 150))).hexdigest() == expected.hexdigest()


@pytest.mark.parametrize("with_cell", [False, True])
def test_the_counted_checksum_is_the_reference_in_any_batches(with_cell: bool) -> None:
    """CountedDigest over Arrow buffers equals the row-by-row reference (docs/DESIGN.md) for
    any payload text and cells, however the rows are split into batches and sliced."""
    rows = 300
    payloads = [json.dumps({"b": "é" * (i % 5), "n": i}) if i % 7 else "" for i in range(rows)]
    cells = [f"os=ü{i % 3},v={i}" for i in range(rows)] if with_cell else None
    arrays = [
        pa.array([uuid.UUID(int=i + 1).bytes for i in range(rows)], pa.binary(16)),
        pa.array(payloads, pa.string()),
        pa.array(["2026-06-02"] * rows).cast(pa.date32()),
    ]
    if cells is not None:
        arrays.append(pa.array(cells, pa.string()))
    batch = pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(with_cell))
    expected = counted_checksum(payloads[20:290], cells and cells[20:290])
    for cuts in ([20, 290], [20, 21, 150, 151, 290], [20, 100, 101, 102, 290]):
        digest = CountedDigest()
        for start, end in itertools.pairwise(cuts):
            digest.update(batch.slice(start, end - start))
        assert (digest.rows, digest.hexdigest()) == (270, expected)
    assert counted_checksum(payloads[20:289], cells and cells[20:289]) != expected

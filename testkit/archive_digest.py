"""The archive manifest's ``counted_sha256`` and ``groups_sha256`` computed from Python
values, row by row, as docs/DESIGN.md defines them: the references the product's Arrow and
count-based implementations are held to."""

from __future__ import annotations

import collections
import hashlib
from collections.abc import Sequence


def counted_checksum(payloads: Sequence[str], cells: Sequence[str] | None = None) -> str:
    """``counted_sha256`` of a file holding ``payloads`` (and ``cells``, if it has them)."""
    columns = {"payload": payloads} if cells is None else {"payload": payloads, "cell": cells}
    combined = hashlib.sha256(b"deniable.archive counted columns\n")
    for name in sorted(columns):
        encoded = [value.encode() for value in columns[name]]
        lengths = b"".join(len(value).to_bytes(4, "little") for value in encoded)
        combined.update(
            name.encode()
            + b"\n"
            + hashlib.sha256(lengths).digest()
            + hashlib.sha256(b"".join(encoded)).digest()
        )
    return combined.hexdigest()


def groups_reference(payloads: Sequence[str], cells: Sequence[str] | None = None) -> str:
    """``groups_sha256`` of a file holding ``payloads`` (and ``cells``, if it has them)."""
    counts = collections.Counter(zip(cells or [""] * len(payloads), payloads, strict=True))
    digest = hashlib.sha256(b"deniable.archive groups\n")
    for (cell, payload), rows in sorted(counts.items()):
        for text in (cell, payload):
            digest.update(len(text.encode()).to_bytes(4, "little") + text.encode())
        digest.update(rows.to_bytes(8, "little"))
    return digest.hexdigest()

"""Which categories each report supports, for a whole batch at once with numpy.

The collector sums these rows per period at ingestion to keep the support counts C_v
that every estimate reads; :func:`support_matrix` is the vectorized twin of
``Mechanism.supported`` (a test checks they agree).
"""

from __future__ import annotations

import binascii
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from deniable.client.errors import InvalidInput
from deniable.client.mechanisms import (
    KRR,
    OLH,
    OLH_PRIME,
    OUE,
    Mechanism,
    Payload,
    PrefixSketch,
)


def oue_bits(encoded: np.ndarray, k: int) -> np.ndarray:
    """Decode equal-length base64 payloads, given as a (m, length) uint8 array of ASCII codes.

    Returns the (m, k) bool matrix of their bits, bit v = (byte[v // 8] >> (v % 8)) & 1.
    Raises :class:`~deniable.client.errors.InvalidInput` if a character is not standard base64.

    Once the padding is checked to sit exactly at each payload's end, it is replaced by
    ``A`` (zero bits, cut off below), so all payloads form one unpadded base64 text that
    ``binascii`` decodes (and checks) in a single call.
    """
    m, length = encoded.shape
    n_bytes = (k + 7) // 8
    pad = length // 4 * 3 - n_bytes
    if length % 4 or not 0 <= pad <= 2:
        raise InvalidInput(f"oue payloads must encode exactly {n_bytes} bytes for k={k}")
    is_pad = encoded == ord("=")
    if is_pad[:, : length - pad].any() or not is_pad[:, length - pad :].all():
        raise InvalidInput(f"oue payloads must encode exactly {n_bytes} bytes for k={k}")
    try:
        raw = binascii.a2b_base64(encoded.tobytes().replace(b"=", b"A"), strict_mode=True)
    except binascii.Error:
        raise InvalidInput("oue payload is not standard base64") from None
    data = np.frombuffer(raw, dtype=np.uint8).reshape(m, length // 4 * 3)[:, :n_bytes]
    return np.unpackbits(data, axis=1, bitorder="little")[:, :k].view(bool)


def olh_support(mechanism: OLH, a: np.ndarray, b: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The (m, k) bool matrix H_(a,b)(v) == y for OLH reports given as int64 columns.

    ``(a v + b) mod P`` is advanced by adding ``a`` once per category (one subtraction of P when
    it overflows), so the only division left is the final ``mod g``; everything stays below 2^32.
    """
    a = np.asarray(a, dtype=np.int64)
    y = np.asarray(y, dtype=np.int64)
    residue = np.array(b, dtype=np.int64)
    out = np.empty((mechanism.k, len(a)), dtype=bool)
    for v in range(mechanism.k):
        np.equal(residue % mechanism.g, y, out=out[v])
        residue += a
        residue -= OLH_PRIME * (residue >= OLH_PRIME)
    return out.T


def index_support(k: int, index: np.ndarray) -> np.ndarray:
    """One-hot (m, k) bool matrix for krr/brr payloads (the reported index)."""
    out = np.zeros((len(index), k), dtype=bool)
    out[np.arange(len(index)), index.astype(np.int64)] = True
    return out


def support_matrix(mechanism: Mechanism, payloads: Sequence[Payload]) -> np.ndarray:
    """Bool array (len(payloads), k): which categories each already-validated payload supports."""
    k = mechanism.k
    if len(payloads) == 0:
        return np.zeros((0, k), dtype=bool)
    if isinstance(mechanism, KRR):
        return index_support(k, np.fromiter(payloads, dtype=np.int64, count=len(payloads)))
    if isinstance(mechanism, OUE):
        # Validated oue payloads are base64 strings (OUE.parse_payload); join rechecks each.
        joined = "".join(cast("Sequence[str]", payloads)).encode("ascii")
        encoded = np.frombuffer(joined, dtype=np.uint8).reshape(len(payloads), -1)
        return oue_bits(encoded, k)
    if isinstance(mechanism, OLH):
        # Validated olh payloads are {"a", "b", "y"} integers (OLH.parse_payload).
        olh = cast("Sequence[dict[str, int]]", payloads)
        triples = np.array([(p["a"], p["b"], p["y"]) for p in olh], dtype=np.int64)
        return olh_support(mechanism, triples[:, 0], triples[:, 1], triples[:, 2])
    raise TypeError(f"no support rule for mechanism {mechanism.name!r}")


def text_encoded(
    sketch: PrefixSketch, payloads: Sequence[Payload]
) -> tuple[np.ndarray, np.ndarray]:
    """Per (already-validated) text payload, its sketch row ((level - 1) × rows + row, the
    ``chunk`` of ``text_cell_counts``) and its ``"b"`` text's ASCII codes, as an int64 vector
    and an (m, length) uint8 matrix: what the collector keeps until it adds the bits
    (:func:`oue_bits` of the matrix, ``sketch.cells`` wide) into its counts."""
    # Validated text payloads are {"l", "r", "b"} objects (PrefixSketch.parse_payload).
    objects = cast("Sequence[dict[str, Any]]", payloads)
    joined = "".join(p["b"] for p in objects).encode("ascii")
    encoded = np.frombuffer(joined, dtype=np.uint8).reshape(len(payloads), -1)
    levels = np.fromiter((p["l"] for p in objects), dtype=np.int64, count=len(payloads))
    rows = np.fromiter((p["r"] for p in objects), dtype=np.int64, count=len(payloads))
    return (levels - 1) * sketch.rows + rows, encoded


def text_bits(sketch: PrefixSketch, payloads: Sequence[Payload]) -> tuple[np.ndarray, np.ndarray]:
    """Per (already-validated) text payload, its sketch row and its cells' bits, as an int64
    vector and an (m, cells) bool matrix: what the collector sums per sketch row."""
    chunks, encoded = text_encoded(sketch, payloads)
    return chunks, oue_bits(encoded, sketch.cells)


def text_support(sketch: PrefixSketch, payloads: Sequence[Payload]) -> list[np.ndarray]:
    """Per (already-validated) text payload, the flat count indexes it adds one to: its set
    cells at its (level, row) and that pair's report tally (the vectorized twin of
    ``PrefixSketch.supported``; a test checks they agree)."""
    if len(payloads) == 0:
        return []
    chunks, bits = text_bits(sketch, payloads)
    base = chunks * sketch.cells
    tally = sketch.levels * sketch.rows * sketch.cells + chunks
    report, cell = np.nonzero(bits)
    flat = base[report] + cell
    split = np.searchsorted(report, np.arange(1, len(payloads)))
    return [np.append(cells, tally[i]) for i, cells in enumerate(np.split(flat, split))]

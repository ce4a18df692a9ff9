"""Sealed reports for the shuffler: a report padded to its metric's fixed size and sealed (HPKE)
to the collector's public key, so the shuffler cannot read it and the collector cannot see who
sent it.

The suite is HPKE base mode (RFC 9180) as ``cryptography`` implements it: DHKEM(X25519,
HKDF-SHA256), HKDF-SHA256, ChaCha20-Poly1305. The sealed bytes are the KEM's encapsulated key
(32 bytes) then the ciphertext with its tag. The HPKE ``info`` binds the envelope's outer header
(metric, mechanism, eps, fingerprint, key id), which travels in the clear for batching: a
shuffler that moves a sealed report to another batch makes it fail to open.

The plaintext is the report's wire text (``client.wire``, its id included, so exactly-once
holds end to end) followed by spaces up to :func:`padded_size` bytes: a length fixed by the
spec alone, so every report of a metric seals to the same number of bytes.

``cryptography`` is imported on first use, so ``import deniable.client`` stays light.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .canonical import canonical_json
from .errors import DeniableError
from .spec import OTHER, MetricSpec
from .wire import dims_text, report_text

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

SEALED_PATH = "/v1/sealed"
"""Where a device posts its sealed reports (on the shuffler)."""
KEYS_PATH = "/v1/keys"
"""Where the collector serves its public sealing keys."""
SHUFFLED_PATH = "/v1/shuffled"
"""Where the shuffler forwards released batches (on the collector)."""

PAD_BLOCK = 64
"""A metric's padded size is a multiple of this many bytes."""
PAD_BYTE = b" "
"""Padding: JSON whitespace after the report text."""
INFO_PREFIX = "deniable.sealed.v1"
"""The first field of the HPKE ``info``: the envelope format's version."""
KEY_ID_HEX = 16
"""A key id is the first 16 hex digits of SHA-256 over the raw 32-byte public key."""
PUBLIC_KEY_BYTES = 32
ENCAPSULATED_BYTES = 32
TAG_BYTES = 16

_LONGEST_PERIOD = "2026-11-21"
"""The longest period label (a day): padding covers every period kind."""
_ANY_ID = "00000000-0000-0000-0000-000000000000"


class SealingError(DeniableError, ValueError):
    """A report cannot be sealed or opened (no key, a bad key, a report past its padded size,
    an envelope that does not open)."""


def report_bound(spec: MetricSpec) -> int:
    """The most bytes a report text of ``spec`` can take (its id, name, fingerprint, the
    longest period label, the longest payload and dimension values)."""
    dims = {
        name: max((*values, OTHER), key=lambda value: len(value.encode()))
        for name, values in spec.dimensions
    }
    frame = report_text(_ANY_ID, spec.name, spec.fingerprint, _LONGEST_PERIOD, 0, dims_text(dims))
    return len(frame.encode()) - 1 + spec.payload_chars


def padded_size(spec: MetricSpec) -> int:
    """The plaintext size of every sealed report of ``spec``: :func:`report_bound` rounded up
    to a multiple of :data:`PAD_BLOCK`."""
    return PAD_BLOCK * math.ceil(report_bound(spec) / PAD_BLOCK)


@functools.lru_cache(maxsize=8)
def key_id(public: bytes) -> str:
    """A public key's id: the first 16 hex digits of SHA-256 over its 32 raw bytes (so a
    served key can be checked against its id, and two keys never share one)."""
    return hashlib.sha256(public).hexdigest()[:KEY_ID_HEX]


@dataclass(frozen=True)
class Header:
    """An envelope's outer header, in the clear: the batch it belongs to and the key."""

    metric: str
    mechanism: str
    epsilon: float
    fingerprint: str
    key: str

    def info(self) -> bytes:
        """The HPKE ``info``: the format's version and every header field, joined by ``|``
        (eps in its canonical JSON text, as in the spec's fingerprint)."""
        fields = (
            INFO_PREFIX,
            self.metric,
            self.mechanism,
            canonical_json(float(self.epsilon)),
            self.fingerprint,
            self.key,
        )
        return "|".join(fields).encode()

    def batch_key(self) -> tuple[str, str, float, str]:
        """What a shuffler batches by: (metric, mechanism, eps, fingerprint)."""
        return (self.metric, self.mechanism, float(self.epsilon), self.fingerprint)


@functools.cache
def _suite() -> Any:
    from cryptography.hazmat.primitives import hpke

    return hpke.Suite(hpke.KEM.X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.CHACHA20_POLY1305)


def sealed_size(spec: MetricSpec) -> int:
    """How many bytes every sealed report of ``spec`` takes."""
    return ENCAPSULATED_BYTES + padded_size(spec) + TAG_BYTES


def pad(text: str, size: int) -> bytes:
    """``text`` as UTF-8 followed by spaces up to ``size`` bytes."""
    raw = text.encode()
    if len(raw) > size:
        raise SealingError(f"a report of {len(raw)} bytes exceeds its padded size {size}")
    return raw + PAD_BYTE * (size - len(raw))


@dataclass(frozen=True)
class Plan:
    """What sealing a report of one metric needs, worked out once per spec (its fingerprint
    and padded size each cost a canonical JSON)."""

    metric: str
    mechanism: str
    epsilon: float
    fingerprint: str
    size: int

    @classmethod
    def of(cls, spec: MetricSpec) -> Plan:
        """The plan of ``spec``."""
        return cls(spec.name, spec.mechanism, spec.epsilon, spec.fingerprint, padded_size(spec))

    def header(self, key: str) -> Header:
        """The header of a report sealed under key ``key``."""
        return Header(self.metric, self.mechanism, self.epsilon, self.fingerprint, key)


@functools.lru_cache(maxsize=8)
def _public_key(public: bytes) -> Any:
    """The key object of raw X25519 bytes (parsed once per key)."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey

    if len(public) != PUBLIC_KEY_BYTES:
        raise SealingError("a sealing key is 32 raw X25519 bytes")
    return X25519PublicKey.from_public_bytes(public)


def seal(report: str, plan: Plan | MetricSpec, public: bytes) -> tuple[Header, bytes]:
    """Seal one report text of a metric (its :class:`Plan`, or its spec) to the collector's
    raw X25519 public key ``public``: its header and the sealed bytes."""
    if isinstance(plan, MetricSpec):
        plan = Plan.of(plan)
    header = plan.header(key_id(public))
    sealed = _suite().encrypt(pad(report, plan.size), _public_key(public), info=header.info())
    return header, sealed


@functools.lru_cache(maxsize=256)
def _info(header: Header) -> bytes:
    """A header's HPKE info, computed once per header (a part's reports share a few)."""
    return header.info()


def open_sealed(header: Header, sealed: bytes, private: X25519PrivateKey, size: int) -> str:
    """The report text inside ``sealed`` (padding removed); :class:`SealingError` if it does
    not open under ``private`` with this header, or is not exactly ``size`` bytes padded."""
    from cryptography.exceptions import InvalidTag

    try:
        plain = _suite().decrypt(sealed, private, info=_info(header))
    except (InvalidTag, ValueError):
        raise SealingError("the sealed report does not open with its header and key") from None
    if len(plain) != size:
        raise SealingError(f"the sealed report holds {len(plain)} bytes, not its metric's {size}")
    try:
        return plain.rstrip(PAD_BYTE).decode()
    except UnicodeDecodeError:
        raise SealingError("the sealed report is not UTF-8 text") from None


def envelope_id(report_id: str) -> str:
    """The envelope's id the shuffler dedupes resends by: derived from the report id (a
    resend repeats it) through SHA-256, so it is not the id the collector stores."""
    return hashlib.sha256(f"deniable.envelope.v1|{report_id}".encode()).hexdigest()[:32]


def envelope(report: str, plan: Plan | MetricSpec, public: bytes) -> dict[str, Any]:
    """The JSON object a device sends the shuffler for one report text of a metric (its
    :class:`Plan`, or its spec)."""
    header, sealed = seal(report, plan, public)
    return {
        "id": envelope_id(json.loads(report)["id"]),
        "metric": header.metric,
        "mechanism": header.mechanism,
        "epsilon": header.epsilon,
        "fingerprint": header.fingerprint,
        "key": header.key,
        "sealed": base64.b64encode(sealed).decode(),
    }


def decode_sealed(text: str) -> bytes:
    """The bytes of an envelope's standard base64 ``sealed`` field."""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise SealingError("sealed must be standard base64") from None


def public_key_of(entry: Any) -> tuple[str, bytes]:
    """(id, raw public key) of one served key ``{"id", "public"}``, checking the id is the
    key's own (a key re-served under another's id is refused)."""
    if not (isinstance(entry, dict) and isinstance(entry.get("public"), str)):
        raise SealingError("a served key is an object with 'id' and 'public'")
    public = decode_sealed(entry["public"])
    if len(public) != PUBLIC_KEY_BYTES or entry.get("id") != key_id(public):
        raise SealingError("a served key's id is not the SHA-256 of its public key")
    return entry["id"], public

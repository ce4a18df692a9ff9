"""Sealed reports: every report of a metric seals to one size, opens only under its own batch
header and key, and its padding bound holds for the longest payloads each mechanism makes."""

from __future__ import annotations

import json
import uuid

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from deniable.client import MetricSpec, SeededRandomness
from deniable.client.sealing import (
    Header,
    SealingError,
    decode_sealed,
    envelope,
    envelope_id,
    key_id,
    open_sealed,
    padded_size,
    public_key_of,
    report_bound,
    sealed_size,
)
from deniable.client.wire import dims_text, report_text

SPECS = [
    MetricSpec.boolean("flag", epsilon=1.0),
    MetricSpec.categorical(
        "krr_metric", [f"c{i}" for i in range(1500)], epsilon=1.0, mechanism="krr"
    ),
    MetricSpec.categorical(
        "oue_metric", [f"c{i}" for i in range(10_000)], epsilon=1.0, mechanism="oue"
    ),
    MetricSpec.categorical("olh_metric", ["a", "b", "c", "d"], epsilon=20.0, mechanism="olh"),
    MetricSpec.numeric("load_ms", lower=-1e300, upper=1e300, epsilon=0.001, mechanism="pm"),
    MetricSpec.numeric("duchi_metric", lower=0, upper=1, epsilon=0.5, mechanism="duchi"),
    MetricSpec.histogram("hist", [0, 1, 2, 3], epsilon=1.0, mechanism="oue"),
    MetricSpec.text("search_term", max_length=64, epsilon=4.0),
    MetricSpec.categorical(
        "with_dims",
        ["a", "b"],
        epsilon=1.0,
        mechanism="krr",
        dimensions={"platform": ["ios", "a-much-longer-value-of-32-chars"], "tier": ["x"]},
    ),
]


def keypair() -> tuple[X25519PrivateKey, bytes]:
    private = X25519PrivateKey.generate()
    public = private.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    return private, public


def reports_of(spec: MetricSpec, count: int, seed: int) -> list[str]:
    """``count`` report texts of ``spec`` with real randomized payloads (seeded), the
    longest period label and dimension values of every length."""
    rng = SeededRandomness(seed)
    texts = []
    for i in range(count):
        if spec.type == "numeric":
            payload = spec.numeric_randomizer.randomize(rng.random() * 2 - 1, rng)
        elif spec.type == "text":
            sketch = spec.text_randomizer
            payload = sketch.randomize(spec.padded("x" * 70), 1 + i % sketch.levels, rng)
        else:
            payload = spec.randomizer.randomize(i % len(spec.categories), rng)
        dims = {name: values[i % len(values)] for name, values in spec.dimensions}
        texts.append(
            report_text(
                str(uuid.uuid4()),
                spec.name,
                spec.fingerprint,
                "2026-11-21",
                payload,
                dims_text(dims),
            )
        )
    return texts


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_every_report_of_a_metric_seals_to_one_size_and_opens_back(spec: MetricSpec) -> None:
    private, public = keypair()
    texts = reports_of(spec, 6 if len(spec.categories) > 1000 else 60, seed=29)
    assert max(len(t.encode()) for t in texts) <= report_bound(spec)
    sizes = set()
    for text in texts:
        sealed_envelope = envelope(text, spec, public)
        sealed = decode_sealed(sealed_envelope["sealed"])
        sizes.add(len(sealed))
        header = Header(spec.name, spec.mechanism, spec.epsilon, spec.fingerprint, key_id(public))
        assert open_sealed(header, sealed, private, padded_size(spec)) == text
        assert sealed_envelope["id"] == envelope_id(json.loads(text)["id"])
    assert sizes == {sealed_size(spec)}
    assert padded_size(spec) % 64 == 0


def test_the_padding_bound_is_the_longest_payload_each_mechanism_can_make() -> None:
    """The bound is tight where a payload's longest form is known: krr's largest index, oue's
    base64 of ceil(k/8) bytes, a float of 24 characters."""
    krr, oue, pm = SPECS[1], SPECS[2], SPECS[4]
    longest_krr = report_text(str(uuid.uuid4()), krr.name, krr.fingerprint, "2026-11-21", 1499)
    assert len(longest_krr) == report_bound(krr)
    oue_payload = "A" * (4 * -(-1250 // 3))
    longest_oue = report_text(
        str(uuid.uuid4()), oue.name, oue.fingerprint, "2026-11-21", oue_payload
    )
    assert len(longest_oue) == report_bound(oue)
    longest_pm = report_text(
        str(uuid.uuid4()), pm.name, pm.fingerprint, "2026-11-21", -2.2250738585072014e-308
    )
    assert len(longest_pm) == report_bound(pm)


def test_a_sealed_report_opens_only_under_its_own_header_and_key() -> None:
    spec = SPECS[1]
    private, public = keypair()
    other_private, _ = keypair()
    text = reports_of(spec, 1, seed=1)[0]
    sealed = decode_sealed(envelope(text, spec, public)["sealed"])
    header = Header(spec.name, spec.mechanism, spec.epsilon, spec.fingerprint, key_id(public))
    moved = [
        Header("other_metric", spec.mechanism, spec.epsilon, spec.fingerprint, header.key),
        Header(spec.name, "oue", spec.epsilon, spec.fingerprint, header.key),
        Header(spec.name, spec.mechanism, 2.0, spec.fingerprint, header.key),
        Header(spec.name, spec.mechanism, spec.epsilon, "0" * 16, header.key),
        Header(spec.name, spec.mechanism, spec.epsilon, spec.fingerprint, "0" * 16),
    ]
    for wrong in moved:
        with pytest.raises(SealingError, match="does not open"):
            open_sealed(wrong, sealed, private, padded_size(spec))
    with pytest.raises(SealingError, match="does not open"):
        open_sealed(header, sealed, other_private, padded_size(spec))
    tampered = bytearray(sealed)
    tampered[40] ^= 1
    with pytest.raises(SealingError, match="does not open"):
        open_sealed(header, bytes(tampered), private, padded_size(spec))
    with pytest.raises(SealingError, match="not its metric's"):
        open_sealed(header, sealed, private, padded_size(spec) + 64)


def test_a_served_key_must_carry_its_own_id() -> None:
    import base64

    _, public = keypair()
    _, other = keypair()
    good = {"id": key_id(public), "public": base64.b64encode(public).decode()}
    assert public_key_of(good) == (key_id(public), public)
    for bad in (
        {"id": key_id(other), "public": good["public"]},
        {"id": good["id"], "public": base64.b64encode(other).decode()},
        {"id": good["id"], "public": "not base64!"},
        {"id": good["id"]},
        "a string",
    ):
        with pytest.raises(SealingError):
            public_key_of(bad)

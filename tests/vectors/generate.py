"""Write tests/vectors/wire.json: the wire contract as the Python client implements it.

Both test suites read the one file (tests/client/test_vectors.py and sdk/js/test/), so a
change to the wire format breaks both until the vectors are regenerated and the other SDK
follows: ``.venv/bin/python -m tests.vectors.generate``. Draws are recorded from a seeded
generator and replayed in the other language, so the randomizers' algorithms are pinned too,
not only their outputs' shapes.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import random
import tempfile
from pathlib import Path
from typing import Any

from deniable.client import sealing
from deniable.client.ledger import Ledger
from deniable.client.mechanisms import (
    NUMERIC_GRID,
    OLH,
    Piecewise,
    PrefixSketch,
    TwoLayers,
    _text_hash_coefficients,
    make_mechanism,
    make_numeric_mechanism,
)
from deniable.client.problems import Problems
from deniable.client.recorder import Recorder
from deniable.client.shuffling import device_pseudonym
from deniable.client.spec import MetricSpec
from deniable.client.specsource import SPECS_FILE, SpecSource
from deniable.client.stats import Counters
from deniable.client.wire import batch_body, dims_text, payload_text, report_text

PATH = Path(__file__).with_name("wire.json")

SPECS: list[dict[str, Any]] = [
    {"name": "dark_mode", "type": "boolean", "epsilon": 0.5, "mechanism": "brr", "period": "day"},
    {"name": "dark_mode2", "type": "boolean", "epsilon": 1, "mechanism": "auto", "period": "week"},
    {
        "name": "browser",
        "type": "categorical",
        "categories": ["chrome", "firefox", "safari", "other"],
        "epsilon": 1.0,
        "mechanism": "krr",
        "period": "day",
    },
    {"name": "pair", "type": "categorical", "categories": ["a", "b"], "epsilon": 2},
    {
        "name": "unicode.cats",
        "type": "categorical",
        "categories": ["é", "日本", 'a"b', "tab\tx", "\U0001f600"],
        "epsilon": 0.1,
        "mechanism": "auto",
        "period": "month",
    },
    {
        "name": "many",
        "type": "categorical",
        "categories": [f"c{i}" for i in range(40)],
        "epsilon": 4,
    },
    {
        "name": "many2",
        "type": "categorical",
        "categories": [f"c{i}" for i in range(40)],
        "epsilon": 1,
        "mechanism": "olh",
    },
    {
        "name": "few",
        "type": "categorical",
        "categories": [f"c{i}" for i in range(6)],
        "epsilon": 3.5,
    },
    {
        "name": "load_ms",
        "type": "numeric",
        "lower": 0,
        "upper": 5000,
        "epsilon": 1.0,
        "mechanism": "pm",
    },
    {"name": "temp", "type": "numeric", "lower": -40.5, "upper": 1e21, "epsilon": 0.25},
    {
        "name": "tiny",
        "type": "numeric",
        "lower": 1e-7,
        "upper": 0.3,
        "epsilon": 3,
        "mechanism": "auto",
    },
    {
        "name": "duchi_x",
        "type": "numeric",
        "lower": -1,
        "upper": 1,
        "epsilon": 2,
        "mechanism": "duchi",
    },
    {
        "name": "load_hist",
        "type": "histogram",
        "edges": [0, 100, 250, 500, 1000, 5000],
        "epsilon": 1.0,
        "mechanism": "oue",
    },
    {"name": "frac_hist", "type": "histogram", "edges": [-0.5, 0.1, 2.25, 1e22], "epsilon": 0.7},
    {
        "name": "dark_mode_by",
        "type": "boolean",
        "epsilon": 1,
        "dimensions": {"platform": ["web", "ios", "android"], "country": ["DE", "US"]},
    },
    {
        "name": "browser_by",
        "type": "categorical",
        "categories": ["chrome", "firefox", "safari"],
        "epsilon": 2,
        "mechanism": "oue",
        "dimensions": {"app_version": ["1.2.3", "2.0.0-beta+x", "Z_9"]},
    },
    {
        "name": "load_by",
        "type": "numeric",
        "lower": 0,
        "upper": 100,
        "epsilon": 1,
        "dimensions": {"a": ["x"]},
    },
    {
        "name": "hist_by",
        "type": "histogram",
        "edges": [0, 1, 2],
        "epsilon": 1,
        "dimensions": {"tier": ["free", "paid"]},
    },
    {
        "name": "at_the_cell_cap",
        "type": "boolean",
        "epsilon": 1,
        "dimensions": {"b": [f"v{i}" for i in range(12)], "a": ["x", "y", "z", "w"]},
    },
    {
        "name": "at_the_value_cap",
        "type": "boolean",
        "epsilon": 1,
        "dimensions": {"a": [f"v{i}" for i in range(64)]},
    },
    {"name": "search", "type": "text", "max_length": 8, "epsilon": 2},
    {"name": "search1", "type": "text", "max_length": 1, "epsilon": 0.5, "mechanism": "pem"},
    {"name": "search64", "type": "text", "max_length": 64, "epsilon": 4, "period": "week"},
    {
        "name": "search_by",
        "type": "text",
        "max_length": 8,
        "epsilon": 4,
        "dimensions": {"platform": ["web", "ios", "android"]},
    },
    {
        "name": "search_at_the_count_cap",
        "type": "text",
        "max_length": 8,
        "epsilon": 2,
        "dimensions": {"b": ["p", "q", "r", "s"], "a": ["x", "y"]},
    },
    {
        "name": "search_at_the_cell_cap",
        "type": "text",
        "max_length": 1,
        "epsilon": 1,
        "dimensions": {"a": [f"v{i}" for i in range(49)]},
    },
    {
        "name": "theme",
        "type": "categorical",
        "categories": ["light", "dark"],
        "epsilon": 2,
        "delivery": "shuffled",
    },
    {"name": "dark_mode_direct", "type": "boolean", "epsilon": 1, "delivery": "direct"},
]

INVALID_SPECS: list[dict[str, Any]] = [
    {"name": "Bad", "type": "boolean", "epsilon": 1},
    {"name": "x", "type": "boolean", "epsilon": 0},
    {"name": "x", "type": "boolean", "epsilon": 21},
    {"name": "x", "type": "boolean", "epsilon": 0.0009},
    {"name": "x", "type": "categorical", "categories": ["a"], "epsilon": 1},
    {"name": "x", "type": "categorical", "categories": ["a", "a"], "epsilon": 1},
    {"name": "x", "type": "categorical", "categories": ["a", ""], "epsilon": 1},
    {
        "name": "x",
        "type": "categorical",
        "categories": ["a", "b"],
        "epsilon": 1,
        "mechanism": "brr",
    },
    {"name": "x", "type": "categorical", "categories": ["a", "b"], "epsilon": 1, "mechanism": "pm"},
    {"name": "x", "type": "categorical", "categories": ["a", "b"], "epsilon": 1, "period": "year"},
    {"name": "x", "type": "numeric", "lower": 1, "upper": 1, "epsilon": 1},
    {"name": "x", "type": "numeric", "lower": 0, "upper": 1, "epsilon": 1, "mechanism": "krr"},
    {"name": "x", "type": "numeric", "lower": 0, "upper": 1e301, "epsilon": 1},
    {"name": "x", "type": "histogram", "edges": [0, 1], "epsilon": 1},
    {"name": "x", "type": "histogram", "edges": [0, 2, 1], "epsilon": 1},
    {"name": "x", "type": "gauge", "epsilon": 1},
    {"name": "x", "type": "boolean", "epsilon": 1, "dimensions": ["platform"]},
    {"name": "x", "type": "boolean", "epsilon": 1, "dimensions": {"Platform": ["ios"]}},
    {"name": "x", "type": "boolean", "epsilon": 1, "dimensions": {"p": []}},
    {"name": "x", "type": "boolean", "epsilon": 1, "dimensions": {"p": "ios"}},
    {"name": "x", "type": "boolean", "epsilon": 1, "dimensions": {"p": ["ios", "ios"]}},
    {"name": "x", "type": "boolean", "epsilon": 1, "dimensions": {"p": ["ios", "other"]}},
    {"name": "x", "type": "boolean", "epsilon": 1, "dimensions": {"p": ["a:b"]}},
    {"name": "x", "type": "boolean", "epsilon": 1, "dimensions": {"p": [1]}},
    {"name": "x", "type": "boolean", "epsilon": 1, "dimensions": {"p": ["-a"]}},
    {
        "name": "x",
        "type": "boolean",
        "epsilon": 1,
        "dimensions": {
            "a": [f"v{i}" for i in range(9)],
            "b": [f"v{i}" for i in range(9)],
            "c": [f"v{i}" for i in range(10)],
        },
    },
    {
        "name": "x",
        "type": "boolean",
        "epsilon": 1,
        "dimensions": {"a": [f"v{i}" for i in range(65)]},
    },
    {
        "name": "x",
        "type": "boolean",
        "epsilon": 1,
        "dimensions": {"b": [f"v{i}" for i in range(10)], "a": ["x", "y", "z", "w", "u"]},
    },
    {
        "name": "x",
        "type": "boolean",
        "epsilon": 1,
        "dimensions": {
            "uhi": [f"u{i:02d}" for i in range(31)],
            "ulo": [f"{i:02d}" for i in range(30)],
        },
    },
    {"name": "x", "type": "text", "epsilon": 1},
    {"name": "x", "type": "text", "max_length": 0, "epsilon": 1},
    {"name": "x", "type": "text", "max_length": 65, "epsilon": 1},
    {"name": "x", "type": "text", "max_length": 2.5, "epsilon": 1},
    {"name": "x", "type": "text", "max_length": 8, "epsilon": 21},
    {"name": "x", "type": "text", "max_length": 8, "epsilon": 1, "mechanism": "oue"},
    {"name": "x", "type": "text", "max_length": 8, "epsilon": 1, "categories": ["a", "b"]},
    {
        "name": "x",
        "type": "text",
        "max_length": 1,
        "epsilon": 1,
        "dimensions": {"a": [f"v{i}" for i in range(50)]},
    },
    {
        "name": "x",
        "type": "text",
        "max_length": 8,
        "epsilon": 1,
        "dimensions": {"a": ["x", "y", "z"], "b": ["p", "q", "r"]},
    },
    {"name": "x", "type": "text", "max_length": 64, "epsilon": 1, "dimensions": {"a": ["x"]}},
    {"name": "x", "type": "text", "max_length": 8, "epsilon": 1, "dimensions": {"p": []}},
    {"name": "x", "type": "boolean", "max_length": 8, "epsilon": 1},
    {"name": "x", "type": "boolean", "epsilon": 1, "delivery": "mixed"},
    {"name": "x", "type": "boolean", "epsilon": 1, "delivery": True},
]

CONTEXTS: list[dict[str, Any]] = [
    {},
    {"platform": "ios", "country": "US"},
    {"platform": "iOS", "country": "FR", "other": "x"},
    {"platform": "web"},
    {"app_version": "2.0.0-beta+x", "a": "x", "tier": "paid"},
    {"app_version": "other", "a": "y"},
]

TEXT_VALUES: list[Any] = [
    "",
    "a",
    "hello",
    "hello world, longer than eight",
    "日本語テキスト",
    "é" * 40,
    "\U0001f600" * 20,
    "a\x00b",
    5,
    None,
]

MOMENTS = [
    "2026-11-21T12:00:00Z",
    "2026-01-01T00:00:00Z",
    "2027-01-01T23:59:59Z",
    "2020-12-31T00:00:00Z",
    "2021-01-03T10:00:00Z",
    "2024-12-30T00:00:00Z",
    "2026-12-28T05:00:00Z",
]

PAYLOADS: list[tuple[str, int, float, list[Any]]] = [
    ("krr", 4, 1.0, [0, 3, 4, -1, 1.5, True, "1", None, [1]]),
    ("brr", 2, 1.0, [0, 1, 2, False]),
    ("oue", 10, 1.0, ["AAA=", "/wM=", "/wc=", "AA==", "AAAA", "AA A=", "AAA", 5, "_w8="]),
    ("oue", 16, 2.0, ["//8=", "AAA=", "AAAA"]),
    (
        "olh",
        50,
        2.0,
        [
            {"a": 1, "b": 0, "y": 0},
            {"a": 2147483646, "b": 2147483646, "y": 8},
            {"a": 0, "b": 0, "y": 0},
            {"a": 2147483647, "b": 0, "y": 0},
            {"a": 1, "b": 2147483647, "y": 0},
            {"a": 1, "b": 0, "y": 9},
            {"a": 1, "b": 0},
            {"a": 1, "b": 0, "y": 0, "z": 1},
            {"a": 1.5, "b": 0, "y": 0},
            [1, 0, 0],
        ],
    ),
]

NUMERIC_PAYLOADS: list[tuple[str, float, list[Any]]] = [
    ("duchi", 1.0, [2.163953413738653, -2.163953413738653, 2.1639534137, 1.0, 0, "1", None]),
    ("pm", 1.0, [0.0, 4.0, -4.0, 4.1, 3.9999999, 1e308, "0.5", True]),
    ("hybrid", 0.5, [2.0, 4.082988165073596, -4.082988165073596]),
    ("hybrid", 2.0, [0.1, -2.4, 2.5]),
]

FLOATS = [
    0.0,
    1.0,
    -1.0,
    0.1,
    1e-05,
    0.0001,
    123456789012345.0,
    1234567890123456.0,
    1e16,
    5.960464477539063e-08,
    -3.0517578125e-05,
    2.163953413738653,
    1e-300,
    1.7976931348623157e308,
]


class Recording:
    """A seeded generator that records every draw, for replay in the other language."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)
        self.draws: list[Any] = []

    def random(self) -> float:
        x = self._rng.random()
        self.draws.append(["f", x])
        return x

    def randbelow(self, n: int) -> int:
        r = self._rng.randrange(n)
        self.draws.append(["i", n, r])
        return r

    def token_bytes(self, n: int) -> bytes:
        data = self._rng.randbytes(n)
        self.draws.append(["b", n, base64.b64encode(data).decode("ascii")])
        return data


def _validity(parse: Any, payloads: list[Any], text: Any = payload_text) -> list[dict[str, Any]]:
    out = []
    for payload in payloads:
        try:
            out.append({"payload": payload, "valid": True, "canonical": text(parse(payload))})
        except ValueError:
            out.append({"payload": payload, "valid": False})
    return out


def build() -> dict[str, Any]:
    """Every vector, computed by the Python client."""
    specs = []
    for data in SPECS:
        spec = MetricSpec.from_dict(data)
        specs.append(
            {"input": data, "resolved": spec.to_dict(), "categories": list(spec.categories)}
        )
    invalid = []
    for data in INVALID_SPECS:
        try:
            MetricSpec.from_dict(data)
        except ValueError:
            invalid.append(data)
            continue
        raise AssertionError(f"{data} should be invalid")
    periods = []
    for moment in MOMENTS:
        when = dt.datetime.fromisoformat(moment)
        spec = MetricSpec.from_dict(SPECS[0])
        labels = {}
        for kind in ("day", "week", "month"):
            labels[kind] = MetricSpec.from_dict({**SPECS[0], "period": kind}).period_of(when)
        del spec
        periods.append({"moment": moment, **labels})
    rng = random.Random(28)
    olh_hash = []
    for eps in (0.5, 1.0, 2.0, 4.0, 7.3):
        olh = OLH(10, eps)
        for _ in range(8):
            a, b, v = 1 + rng.randrange(2**31 - 2), rng.randrange(2**31 - 1), rng.randrange(10_000)
            olh_hash.append({"a": a, "b": b, "v": v, "g": olh.g, "h": olh.hash(a, b, v)})
        olh_hash.append(
            {
                "a": 2**31 - 2,
                "b": 2**31 - 2,
                "v": 9999,
                "g": olh.g,
                "h": olh.hash(2**31 - 2, 2**31 - 2, 9999),
            }
        )
    parameters = []
    for name, k in (("brr", 2), ("krr", 4), ("krr", 30), ("oue", 10), ("olh", 10), ("olh", 1000)):
        for eps in (0.01, 0.5, 1.0, 3.0, 10.0, 20.0):
            m = make_mechanism(name, k, eps)
            parameters.append(
                {
                    "mechanism": name,
                    "k": k,
                    "epsilon": eps,
                    "p_star": m.p_star,
                    "q_star": m.q_star,
                    "g": getattr(m, "g", None),
                }
            )
    for name in ("duchi", "pm", "hybrid"):
        for eps in (0.01, 0.5, 0.6094, 0.7, 1.0, 3.0, 20.0):
            m = make_numeric_mechanism(name, eps)
            parameters.append(
                {
                    "mechanism": name,
                    "epsilon": eps,
                    "bound": m.bound,
                    "worst_case_variance": m.worst_case_variance,
                }
            )
    layers = []
    for name, k in (("brr", 2), ("krr", 4), ("krr", 50)):
        for eps in (0.1, 0.5, 1.0, 2.0, 4.0):
            for ratio in (1.5, 2.0, 4.0):
                two = TwoLayers(make_mechanism(name, k, eps), ratio)  # type: ignore[arg-type]
                layers.append(
                    {
                        "mechanism": name,
                        "k": k,
                        "epsilon": eps,
                        "ratio": ratio,
                        "permanent_epsilon": two.permanent_epsilon,
                        "instantaneous_epsilon": two.instantaneous_epsilon,
                        "p_star": two.p_star,
                        "q_star": two.q_star,
                    }
                )
    payloads = []
    for name, k, eps, cases in PAYLOADS:
        m = make_mechanism(name, k, eps)
        checked = _validity(m.parse_payload, cases)
        for case in checked:
            if case["valid"]:
                case["supported"] = m.supported(m.parse_payload(case["payload"]))
        payloads.append({"mechanism": name, "k": k, "epsilon": eps, "cases": checked})
    for name, eps, cases in NUMERIC_PAYLOADS:
        m = make_numeric_mechanism(name, eps)
        payloads.append(
            {"mechanism": name, "epsilon": eps, "cases": _validity(m.parse_payload, cases)}
        )
    grid = []
    for eps in (0.5, 1.0, 4.0):
        pm = Piecewise(eps)
        for y in (
            0.0,
            0.3,
            -0.3,
            1 / 3,
            2.5 * NUMERIC_GRID,
            3.5 * NUMERIC_GRID,
            -2.5 * NUMERIC_GRID,
            pm.bound,
            -pm.bound,
            pm.bound * (1 - 1e-12),
        ):
            grid.append({"epsilon": eps, "y": y, "grid": pm._on_grid(y)})
    draws = []
    seed = 0
    for data in SPECS:
        spec = MetricSpec.from_dict(data)
        values: list[Any]
        if spec.type == "text":
            continue
        if spec.type == "numeric":
            values = [spec.lower, spec.upper, (spec.lower + spec.upper) / 2, spec.lower - 1]  # type: ignore[operator]
        elif spec.type == "histogram":
            values = [spec.edges[0] - 1, spec.edges[1], spec.edges[-1] + 1]  # type: ignore[index]
        elif spec.type == "boolean":
            values = [True, False]
        else:
            values = list(spec.categories[:3])
        for value in values:
            for _ in range(3):
                seed += 1
                recording = Recording(seed)
                if spec.type == "numeric":
                    prepared: Any = spec.scale(value)
                    payload: Any = spec.numeric_randomizer.randomize(prepared, recording)  # type: ignore[arg-type]
                else:
                    prepared = spec.index_of(value)
                    payload = spec.randomizer.randomize(prepared, recording)  # type: ignore[arg-type]
                draws.append(
                    {
                        "metric": spec.name,
                        "value": value,
                        "prepared": prepared,
                        "draws": recording.draws,
                        "payload": payload,
                        "text": payload_text(payload),
                    }
                )
    reports = []
    for data, payload in (
        (SPECS[2], 2),
        (SPECS[12], "Ew=="),
        (SPECS[6], {"a": 5, "b": 7, "y": 1}),
        (SPECS[8], 0.125),
    ):
        spec = MetricSpec.from_dict(data)
        text = report_text(
            "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b",
            spec.name,
            spec.fingerprint,
            "2026-11-21",
            payload,
        )
        reports.append(
            {
                "id": "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b",
                "metric": spec.name,
                "fingerprint": spec.fingerprint,
                "period": "2026-11-21",
                "payload": payload,
                "text": text,
            }
        )
    dimensioned = [MetricSpec.from_dict(d) for d in SPECS if d.get("dimensions")]
    dimension_values = []
    for context in CONTEXTS:
        for spec in dimensioned:
            dims = spec.dimension_values(context)
            dimension_values.append(
                {"metric": spec.name, "context": context, "dims": dims, "text": dims_text(dims)}
            )
    for data, payload, context in (
        (SPECS[14], 1, {"platform": "android", "country": "DE"}),
        (SPECS[15], "Bg==", {}),
        (SPECS[16], 0.5, {"a": "x"}),
    ):
        spec = MetricSpec.from_dict(data)
        dims = dims_text(spec.dimension_values(context))
        text = report_text(
            "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b",
            spec.name,
            spec.fingerprint,
            "2026-11-21",
            payload,
            dims,
        )
        reports.append(
            {
                "id": "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b",
                "metric": spec.name,
                "fingerprint": spec.fingerprint,
                "period": "2026-11-21",
                "payload": payload,
                "context": context,
                "text": text,
            }
        )
    body = batch_body([r["text"] for r in reports]).decode()
    floats = [{"x": x, "text": payload_text(x)} for x in FLOATS]
    text = _text_vectors()
    return {
        "about": "Generated by `python -m tests.vectors.generate` from deniable.client; read by tests/client/test_vectors.py and sdk/js/test/vectors.test.mjs.",
        "specs": specs,
        "invalid_specs": invalid,
        "periods": periods,
        "olh_hash": olh_hash,
        "parameters": parameters,
        "two_layers": layers,
        "payloads": payloads,
        "numeric_grid": grid,
        "float_texts": floats,
        "draws": draws,
        "reports": reports,
        "batch_body": body,
        "dimension_values": dimension_values,
        "text": text,
        "sealing": _sealing_vectors(),
        "lifetime": _lifetime_vectors(),
        "stored_specs": _stored_spec_vectors(),
    }


def _sealing_vectors() -> dict[str, Any]:
    """What a device seals through a shuffler that does not depend on randomness: each spec's
    padded and sealed sizes and HPKE info, a key's id, an envelope id, a device pseudonym (the
    sealed bytes themselves are random: the JS tests open theirs with the collector's code)."""
    key = bytes(range(32))
    sizes = []
    for data in SPECS:
        spec = MetricSpec.from_dict(data)
        sizes.append(
            {
                "metric": spec.name,
                "report_bound": sealing.report_bound(spec),
                "padded_size": sealing.padded_size(spec),
                "sealed_size": sealing.sealed_size(spec),
                "info": sealing.Plan.of(spec).header(sealing.key_id(key)).info().decode(),
            }
        )
    report_id = "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b"
    secret = bytes(range(100, 132))
    return {
        "sizes": sizes,
        "key": {"public": base64.b64encode(key).decode(), "id": sealing.key_id(key)},
        "envelope_id": {"report_id": report_id, "id": sealing.envelope_id(report_id)},
        "pseudonym": {"secret": secret.hex(), "device": device_pseudonym(secret)},
    }


def _text_vectors() -> dict[str, Any]:
    """pem: the hash's public coefficients, prefix cells, padded strings, payload checks and
    replayed draws (their random bytes recorded as base64)."""
    a, b = _text_hash_coefficients()
    rng = random.Random(2028)
    cells = []
    for row in (0, 1, 7, 15):
        for length in (0, 1, 2, 5, 64):
            prefix = rng.randbytes(length)
            cells.append(
                {"row": row, "prefix": prefix.hex(), "cell": PrefixSketch(64, 1).cell(row, prefix)}
            )
    cells.append({"row": 3, "prefix": "ff" * 64, "cell": PrefixSketch(64, 1).cell(3, b"\xff" * 64)})
    encodings = []
    for max_length in (1, 8, 64):
        sketch = PrefixSketch(max_length, 1)
        for value in TEXT_VALUES:
            try:
                encodings.append(
                    {"max_length": max_length, "value": value, "padded": sketch.encode(value).hex()}
                )
            except ValueError:
                encodings.append({"max_length": max_length, "value": value, "padded": None})
    sketch = PrefixSketch(8, 1)
    valid = base64.b64encode(bytes(range(128))).decode()
    cases = [
        {"b": valid, "l": 1, "r": 0},
        {"b": valid, "l": 8, "r": 15},
        {"b": valid, "l": 0, "r": 0},
        {"b": valid, "l": 9, "r": 0},
        {"b": valid, "l": 1, "r": 16},
        {"b": valid, "l": 1.5, "r": 0},
        {"b": valid, "l": True, "r": 0},
        {"b": valid[:-4], "l": 1, "r": 0},
        {"b": valid + "AAAA", "l": 1, "r": 0},
        {"b": "not base64!", "l": 1, "r": 0},
        {"b": valid, "l": 1},
        {"b": valid, "l": 1, "r": 0, "x": 1},
        [valid, 1, 0],
        "x",
    ]
    payloads = _validity(sketch.parse_payload, cases)
    draws = []
    for seed, (max_length, epsilon, value, level) in enumerate(
        ((8, 2.0, "hello", 3), (1, 0.5, "", 1), (64, 4.0, "日本語テキスト", 64)), start=900
    ):
        sketch = PrefixSketch(max_length, epsilon)
        recording = Recording(seed)
        padded = sketch.encode(value)
        payload = sketch.randomize(padded, level, recording)  # type: ignore[arg-type]
        draws.append(
            {
                "max_length": max_length,
                "epsilon": epsilon,
                "value": value,
                "level": level,
                "draws": recording.draws,
                "text": payload_text(payload),
            }
        )
    return {
        "a": [list(row) for row in a],
        "b": list(b),
        "cells": cells,
        "encodings": encodings,
        "payloads": [{"max_length": 8, "epsilon": 1, "cases": payloads}],
        "draws": draws,
    }


LIFETIME_CASES: list[dict[str, Any]] = [
    {"memoize": False, "instantaneous_ratio": 2.0, "lifetime_epsilon": 2.5},
    {"memoize": True, "instantaneous_ratio": 2.0, "lifetime_epsilon": 6.0},
    {"memoize": True, "instantaneous_ratio": 2.0, "lifetime_epsilon": 3.0},
    {"memoize": True, "instantaneous_ratio": 2.0, "lifetime_epsilon": 0.5},
    {"memoize": True, "instantaneous_ratio": 3.0, "lifetime_epsilon": 7.0},
    {"memoize": True, "instantaneous_ratio": None, "lifetime_epsilon": 3.0},
    {"memoize": True, "instantaneous_ratio": 2.0, "lifetime_epsilon": 9.0, "per_period": 2},
]
"""Lifetime caps replayed by both SDKs on the daily krr metric "browser" (eps 1)."""

LIFETIME_HISTORIES = [
    ["chrome"] * 6,
    ["chrome", "firefox", "safari", "other", "chrome", "firefox"],
    ["chrome", "chrome", "safari", "chrome", "chrome", "chrome"],
]
"""Values recorded one a day (two a day with ``per_period`` 2): the same decisions for each."""


def _lifetime_vectors() -> list[dict[str, Any]]:
    """Which records a fresh device sends under a lifetime cap, one period a day, as the Python
    client's Recorder and Ledger decide: the decisions depend on no value (issue 37)."""
    spec = MetricSpec.from_dict(next(s for s in SPECS if s["name"] == "browser"))
    start = dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC)
    out = []
    for case in LIFETIME_CASES:
        per_period = case.get("per_period", 1)
        for history in LIFETIME_HISTORIES:
            now = [start]
            ledger = Ledger(
                bytes(32),
                max_reports_per_period=per_period,
                lifetime_epsilon=case["lifetime_epsilon"],
            )
            recorder = Recorder(
                ledger,
                Counters(),
                on_unknown=lambda name: None,
                memoize=case["memoize"],
                instantaneous_ratio=case["instantaneous_ratio"],
                max_queue=100,
                clock=lambda now=now: now[0],
            )
            recorder.install([spec])
            sent = []
            for index, value in enumerate(history):
                now[0] = start + dt.timedelta(days=index // per_period)
                sent.append(recorder.record(spec.name, value))
            out.append({**case, "per_period": per_period, "values": history, "sent": sent})
    return out


def _stored_spec_vectors() -> list[dict[str, Any]]:
    """Specs a device stored earlier (Python's metrics.json, the JS state's specs), read at
    start with a max_epsilon: those above it are kept (still pinned) but not used, and each is
    reported as a problem (issue 37, item 10)."""
    stored = [
        {"name": "calm", "type": "boolean", "epsilon": 1.0, "mechanism": "brr", "period": "day"},
        {"name": "loud", "type": "boolean", "epsilon": 20.0, "mechanism": "brr", "period": "day"},
        {
            "name": "choice",
            "type": "categorical",
            "categories": ["a", "b", "c"],
            "epsilon": 4.5,
            "mechanism": "krr",
        },
    ]
    specs = [MetricSpec.from_dict(data) for data in stored]
    out = []
    for max_epsilon in (4.0, 5.0, 20.0):
        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory)
            (path / SPECS_FILE).write_text(json.dumps([s.to_dict() for s in specs]))
            counters = Counters()
            source = SpecSource(path, None, counters, Problems(), max_epsilon=max_epsilon)  # type: ignore[arg-type]
            used = sorted(s.name for s in source.start(None))
        out.append(
            {
                "max_epsilon": max_epsilon,
                "stored": [s.to_dict() for s in specs],
                "used": used,
                "refused": sorted(s.name for s in specs if s.name not in used),
                "specs_refused": counters.specs_refused,
            }
        )
    return out


def render() -> str:
    """The vectors file's text."""
    return json.dumps(build(), indent=1, ensure_ascii=False) + "\n"


def main() -> None:
    PATH.write_text(render(), encoding="utf-8")
    print(f"wrote {PATH}")


if __name__ == "__main__":
    main()

"""Write tests/vectors/wire.json: the wire contract as the Python client implements it.

Both test suites read the one file (tests/client/test_vectors.py and sdk/js/test/), so a
change to the wire format breaks both until the vectors are regenerated and the other SDK
follows: ``.venv/bin/python -m tests.vectors.generate``. Draws are recorded from a seeded
generator and replayed in the other language, so the randomizers' algorithms are pinned too,
not only their outputs' shapes.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path
from typing import Any

from deniable.client.mechanisms import (
    NUMERIC_GRID,
    OLH,
    Piecewise,
    TwoLayers,
    make_mechanism,
    make_numeric_mechanism,
)
from deniable.client.spec import MetricSpec
from deniable.client.wire import batch_body, payload_text, report_text

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
        raise NotImplementedError("no wire-format randomizer of these vectors needs bytes")


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
    body = batch_body([r["text"] for r in reports]).decode()
    floats = [{"x": x, "text": payload_text(x)} for x in FLOATS]
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
    }


def render() -> str:
    """The vectors file's text."""
    return json.dumps(build(), indent=1, ensure_ascii=False) + "\n"


def main() -> None:
    PATH.write_text(render(), encoding="utf-8")
    print(f"wrote {PATH}")


if __name__ == "__main__":
    main()

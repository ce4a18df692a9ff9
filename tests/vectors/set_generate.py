"""Write tests/vectors/set.json: the ``set`` metric's randomizer as the Python client implements it.

A file of its own beside wire.json, which stays byte for byte as it is: both SDKs' tests read it
(tests/client/test_set_vectors.py and sdk/js/test/sets.test.mjs). Regenerate with
``python -m tests.vectors.set_generate``. Every draw of a seeded generator is recorded and
replayed in the other language, so the padding, the sampling and the oracle are pinned, not only
the payloads' shapes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from deniable.client.errors import SpecError
from deniable.client.mechanisms import PaddingSampling
from deniable.client.spec import MetricSpec
from deniable.client.wire import payload_text
from tests.vectors.generate import Recording

PATH = Path(__file__).with_name("set.json")

CASES: list[dict[str, Any]] = [
    {"k": 4, "max_items": 2, "epsilon": 1.0, "oracle": "krr"},
    {"k": 5, "max_items": 3, "epsilon": 0.5, "oracle": "oue"},
    {"k": 6, "max_items": 2, "epsilon": 2.0, "oracle": "olh"},
    {"k": 3, "max_items": 1, "epsilon": 1.0, "oracle": "auto"},
    {"k": 20, "max_items": 4, "epsilon": 1.0, "oracle": "auto"},
    {"k": 40, "max_items": 8, "epsilon": 3.0, "oracle": "auto"},
]
"""Parameters of the randomizers in the file; ``auto`` resolves by the oracle's variance."""

INVALID_CASES: list[dict[str, Any]] = [
    {"k": 1, "max_items": 2, "epsilon": 1.0, "oracle": "krr"},
    {"k": 4, "max_items": 0, "epsilon": 1.0, "oracle": "krr"},
    {"k": 4, "max_items": 65, "epsilon": 1.0, "oracle": "krr"},
    {"k": 4, "max_items": 2, "epsilon": 1.0, "oracle": "brr"},
    {"k": 4, "max_items": 2, "epsilon": 0, "oracle": "oue"},
    {"k": 4, "max_items": 2.5, "epsilon": 1.0, "oracle": "oue"},
    {"k": 9_990, "max_items": 11, "epsilon": 1.0, "oracle": "oue"},
]
"""Parameters both SDKs refuse."""

VALUES: list[list[int]] = [[], [0], [1, 0], [2, 0, 2], [0, 1, 2], [3, 2, 1, 0]]
"""Sets recorded in every case (as index lists: order and repeats do not matter), from empty
to above every case's L = 2 (and to L for the others)."""

INVALID_VALUES: list[Any] = ["ab", [4], [-1], [1.5], [True], {"0": 1}, 3, None]
"""Values the k = 4 randomizer refuses."""


SPECS: list[dict[str, Any]] = [
    {
        "name": "features",
        "type": "set",
        "categories": ["search", "share", "export", "print", "sync"],
        "max_items": 3,
        "epsilon": 1.0,
    },
    {
        "name": "features.krr",
        "type": "set",
        "categories": ["a", "b", "c"],
        "max_items": 1,
        "epsilon": 2,
        "mechanism": "krr",
        "period": "week",
    },
    {
        "name": "tabs",
        "type": "set",
        "categories": ["é", "日本", "x"],
        "max_items": 2,
        "epsilon": 0.5,
        "mechanism": "olh",
        "dimensions": {"platform": ["ios", "web"]},
        "delivery": "shuffled",
    },
]
"""Set specs as a collector serves them: both SDKs resolve each to the same fields and
fingerprint."""

INVALID_SPECS: list[dict[str, Any]] = [
    {"name": "s", "type": "set", "categories": ["a", "b"], "epsilon": 1},
    {"name": "s", "type": "set", "categories": ["a", "b"], "max_items": 0, "epsilon": 1},
    {"name": "s", "type": "set", "categories": ["a"], "max_items": 1, "epsilon": 1},
    {"name": "s", "type": "set", "categories": ["a", "a"], "max_items": 1, "epsilon": 1},
    {
        "name": "s",
        "type": "set",
        "categories": ["a", "b"],
        "max_items": 1,
        "epsilon": 1,
        "mechanism": "brr",
    },
    {
        "name": "s",
        "type": "set",
        "categories": ["a", "b"],
        "max_items": 1,
        "epsilon": 1,
        "mechanism": "pm",
    },
    {"name": "s", "type": "categorical", "categories": ["a", "b"], "max_items": 1, "epsilon": 1},
]
"""Set specs (and a max_items out of place) both SDKs refuse."""

SPEC_VALUES: list[list[str]] = [[], ["sync", "search"], ["search", "search"], ["print"]]
"""Values recorded for the first spec, as category names."""


def _spec_vectors() -> dict[str, Any]:
    """The specs' resolved forms, the refused ones, and values prepared as indices."""
    for data in INVALID_SPECS:
        try:
            MetricSpec.from_dict(data)
        except SpecError:
            continue
        raise AssertionError(f"an invalid set spec was accepted: {data}")
    first = MetricSpec.from_dict(SPECS[0])
    return {
        "specs": [{"input": d, "resolved": MetricSpec.from_dict(d).to_dict()} for d in SPECS],
        "invalid_specs": INVALID_SPECS,
        "values": [{"value": v, "prepared": list(first.items_of(v))} for v in SPEC_VALUES],
    }


def build() -> dict[str, Any]:
    """Every set vector, computed by the Python client."""
    cases, draws, seed = [], [], 0
    for case in CASES:
        ps = PaddingSampling(case["k"], case["max_items"], case["epsilon"], case["oracle"])
        cases.append(
            {
                **case,
                "resolved": ps.oracle.name,
                "width": ps.width,
                "p_star": ps.p_star,
                "q_star": ps.q_star,
            }
        )
        for value in VALUES:
            if max(value, default=0) >= ps.k:
                continue
            for _ in range(3):
                seed += 1
                recording = Recording(seed)
                prepared = ps.check_value(value)
                sampled = ps.sample(prepared, recording)
                payload = ps.oracle.randomize(sampled, recording)
                draws.append(
                    {
                        **case,
                        "value": value,
                        "prepared": list(prepared),
                        "sampled": sampled,
                        "draws": recording.draws,
                        "payload": payload,
                        "text": payload_text(payload),
                        "supported": ps.supported(payload),
                    }
                )
    return {
        "about": "The set metric's padding-and-sampling randomizer (docs/STATS.md section 16)"
        " as the Python client computes it; generated by tests/vectors/set_generate.py.",
        "cases": cases,
        "invalid_cases": INVALID_CASES,
        "invalid_values": INVALID_VALUES,
        "draws": draws,
        **_spec_vectors(),
    }


def render() -> str:
    """The vectors file's text."""
    return json.dumps(build(), indent=1, ensure_ascii=False) + "\n"


def main() -> None:
    """Write the file."""
    PATH.write_text(render(), encoding="utf-8")
    print(f"wrote {PATH}")


if __name__ == "__main__":
    main()

"""The shared vectors on what a device sends and which specs it uses (tests/vectors/wire.json,
``lifetime`` and ``stored_specs``), replayed through a real Python Client; the JS SDK's tests
(sdk/js/test/budget.test.mjs) replay the same ones (issue 37, items 2 and 10).

``lifetime``: under a lifetime cap, which records are sent is the same for every history of
values (the cap counts reports, never values). ``stored_specs``: a spec stored by an earlier
run above ``max_epsilon`` is not used (its records are not sent) and is reported as a problem.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from deniable.client import MetricSpec
from deniable.client.specsource import SPECS_FILE
from testkit import spare_port
from testkit.stub_collector import fast_client
from tests.vectors.generate import PATH

VECTORS = json.loads(PATH.read_text(encoding="utf-8"))
BROWSER = next(e["input"] for e in VECTORS["specs"] if e["input"]["name"] == "browser")


@pytest.mark.parametrize("case", VECTORS["lifetime"], ids=lambda c: json.dumps(c["values"]))
def test_a_lifetime_cap_sends_what_the_vectors_say(tmp_path: Path, case: dict[str, Any]) -> None:
    moment = [dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC)]
    client = fast_client(
        f"http://127.0.0.1:{spare_port()}",
        tmp_path,
        metrics=[MetricSpec.from_dict(BROWSER)],
        memoize=case["memoize"],
        instantaneous_ratio=case["instantaneous_ratio"],
        lifetime_epsilon=case["lifetime_epsilon"],
        max_reports_per_period=case["per_period"],
        clock=lambda: moment[0],
    )
    sent = []
    start = moment[0]
    for index, value in enumerate(case["values"]):
        moment[0] = start + dt.timedelta(days=index // case["per_period"])
        sent.append(client.record("browser", value))
    client.close(timeout=0.1)
    assert sent == case["sent"]


def test_the_lifetime_vectors_send_the_same_for_every_history() -> None:
    by_settings: dict[str, list[list[bool]]] = {}
    for case in VECTORS["lifetime"]:
        key = json.dumps({k: v for k, v in case.items() if k not in ("values", "sent")})
        by_settings.setdefault(key, []).append(case["sent"])
    assert len(by_settings) >= 5
    for outcomes in by_settings.values():
        assert len(outcomes) >= 3 and all(o == outcomes[0] for o in outcomes)
    assert any(0 < sum(o[0]) < len(o[0]) for o in by_settings.values())


@pytest.mark.parametrize("case", VECTORS["stored_specs"], ids=lambda c: str(c["max_epsilon"]))
def test_a_stored_spec_above_max_epsilon_is_not_used(tmp_path: Path, case: dict[str, Any]) -> None:
    (tmp_path / SPECS_FILE).write_text(json.dumps(case["stored"]))
    client = fast_client(
        f"http://127.0.0.1:{spare_port()}", tmp_path, max_epsilon=case["max_epsilon"]
    )
    try:
        for spec in case["stored"]:
            value = True if spec["type"] == "boolean" else spec["categories"][0]
            assert client.record(spec["name"], value) == (spec["name"] in case["used"])
        assert client.stats.specs_refused == case["specs_refused"] == len(case["refused"])
        problems = client.problems()
        for name in case["refused"]:
            assert any(f"metric {name}:" in p and "max_epsilon" in p for p in problems), name
        stored = {s["name"] for s in json.loads((tmp_path / SPECS_FILE).read_text())}
        assert stored == {s["name"] for s in case["stored"]}  # kept: still pinned
    finally:
        client.close(timeout=0.1)

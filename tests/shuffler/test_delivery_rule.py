"""A metric's delivery rule, end to end over the real HTTP API: the collector refuses a
shuffled-only metric's direct upload (422 naming the rule), the Python SDK without a shuffler
does not record it (a problem says why), ``deniable metrics create --delivery shuffled``
registers the rule, and a deployment mixing a shuffled-only metric, a
direct metric that also took a batch and a direct metric that took none publishes a statement
true of each: the shuffler's central eps only for what came through it, the share that did."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from deniable.cli.main import cli
from deniable.client import Client, MetricSpec
from deniable.client.wire import report_text
from deniable.estimators.shuffling import central_guarantee
from deniable.estimators.shufflingaccount import DEFAULT_DELTA
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    VIEWER_TOKEN,
    RunningCollector,
    unique_name,
)
from testkit.metrics import register
from tests.shuffler.test_collector_routes import (
    forward,
    part,
    sealed_reports,
    stored_rows,
)


def upload_direct(server: RunningCollector, spec: MetricSpec, count: int) -> Any:
    """``count`` reports of ``spec`` straight to ``POST /v1/reports``: the answer."""
    period = server.clock().date().isoformat()
    reports = [
        json.loads(report_text(str(uuid.uuid4()), spec.name, spec.fingerprint, period, i % 2))
        for i in range(count)
    ]
    with server.client(INGEST_KEY) as device:
        return device.post("/v1/reports", json={"reports": reports})


def stored(server: RunningCollector, spec: MetricSpec) -> int:
    """How many reports of ``spec`` the collector stored."""
    return len(stored_rows(server, spec.name))


def test_a_mixed_deployment_states_what_arrived_for_each_metric(
    any_server: RunningCollector, tmp_path: Path
) -> None:
    server = any_server
    only = MetricSpec.categorical(
        unique_name("only"), ["a", "b", "c"], epsilon=2.0, delivery="shuffled"
    )
    created = CliRunner().invoke(
        cli,
        [
            *("--collector", server.url, "--token", ADMIN_TOKEN, "metrics", "create", only.name),
            *("--categories", "a,b,c", "--epsilon", "2", "--delivery", "shuffled"),
        ],
    )
    assert created.exit_code == 0, created.output
    assert only.fingerprint in created.output
    assert "shuffled (only through a shuffler)" in created.output
    with server.client(ADMIN_TOKEN) as admin:
        mixed = register(
            admin, MetricSpec.categorical(unique_name("mix"), ["a", "b", "c"], epsilon=2.0)
        )
        plain = register(
            admin, MetricSpec.categorical(unique_name("pln"), ["a", "b", "c"], epsilon=2.0)
        )
        served = {m["name"]: m for m in admin.get("/v1/metrics").json()["metrics"]}
    assert served[only.name]["delivery"] == "shuffled"
    assert served[only.name]["fingerprint"] == only.fingerprint
    assert "delivery" not in served[mixed.name]

    refused = upload_direct(server, only, 2)
    assert refused.status_code == 422, refused.text
    assert "delivery rule 'shuffled'" in json.dumps(refused.json()["detail"])
    assert upload_direct(server, mixed, 40).status_code == 202
    assert upload_direct(server, plain, 2).status_code == 202
    for spec, count in ((only, 100), (mixed, 60)):
        _, envelopes = sealed_reports(server, spec, count)
        answer = forward(server, part(spec, envelopes))
        assert answer.json() == {"accepted": count, "duplicates": 0, "refused": 0}, answer.text
    assert (stored(server, only), stored(server, mixed), stored(server, plain)) == (100, 100, 2)

    with Client(
        server.url,
        ingest_key=INGEST_KEY,
        state_dir=tmp_path / "device",
        clock=server.clock,
        backoff_base=0.01,
        backoff_cap=0.02,
    ) as device:
        assert device.flush(timeout=10)  # the served specs, the rule among them
        assert device.record(plain.name, "a")
        assert not device.record(only.name, "a")
        assert device.flush(timeout=10), device.problems()
        (problem,) = device.problems()
        assert only.name in problem and "delivery rule 'shuffled'" in problem
    assert (stored(server, only), stored(server, plain)) == (100, 3)

    with server.client(VIEWER_TOKEN) as viewer:
        document = viewer.get("/v1/privacy").json()
    shuffled = document["shuffled"]
    statement = shuffled["statement"]
    assert statement in document["statement"]  # the statement an app publishes
    by_name = {m["metric"]: m for m in shuffled["metrics"]}
    assert (by_name[only.name]["shuffled_reports"], by_name[only.name]["direct_reports"]) == (
        100,
        0,
    )
    assert (by_name[mixed.name]["shuffled_reports"], by_name[mixed.name]["direct_reports"]) == (
        60,
        40,
    )
    assert plain.name not in by_name
    at_100 = central_guarantee(only.randomizer, 100, DEFAULT_DELTA).epsilon
    at_60 = central_guarantee(mixed.randomizer, 60, DEFAULT_DELTA).epsilon
    assert at_100 < 2.0 and at_60 < 2.0  # amplified: a claim a direct report must not borrow
    assert (
        f"{only.name} (only through the shuffler): ε = {at_100:.4g} with δ = 1e-06 instead of"
        " the local ε = 2" in statement
    )
    assert (
        f"{mixed.name}: ε = {at_60:.4g} with δ = 1e-06 instead of the local ε = 2 for the"
        " 60% of its reports that came through the shuffler (60 of 100), while its other"
        " 40 reports came to the collector directly and hold only the local ε = 2" in statement
    )
    assert f"{plain.name} has no released batch" in statement
    assert "Reports pass through a shuffler" not in statement

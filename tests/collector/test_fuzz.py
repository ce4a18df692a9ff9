"""Fuzzing the collector: schemathesis against its own OpenAPI schema (no 5xx), and hypothesis
batches of arbitrary reports for registered metrics (no 5xx, all-or-nothing, and every stored
report still passes validation), on SQLite and PostgreSQL.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from sqlalchemy import create_engine, select

from deniable.client import MetricSpec, SeededRandomness
from deniable.client.spec import period_label
from deniable.collector.storage.engine import normalize_url
from deniable.collector.storage.tables import reports
from deniable.collector.validation import PeriodWindow
from testkit import ADMIN_TOKEN, INGEST_KEY, TEST_NOW, RunningCollector, register, unique_name

FUZZ_SETTINGS = settings(
    max_examples=30,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
SCHEMA_SETTINGS = settings(FUZZ_SETTINGS, max_examples=6)
"""Examples per operation; tests/collector/test_bounded.py runs schemathesis over the API too."""


@pytest.fixture(scope="session")
def fuzz_specs(collector: RunningCollector) -> dict[str, MetricSpec]:
    """One registered metric per mechanism (names fixed so schemathesis examples can hit them)."""
    with collector.client(ADMIN_TOKEN) as admin:
        return {
            m: register(
                admin,
                MetricSpec.categorical(f"fuzz_{m}", list("abcdefghijk"), epsilon=1.0, mechanism=m),
            )
            for m in ("krr", "oue", "olh")
        } | {"brr": register(admin, MetricSpec.boolean("fuzz_brr", epsilon=1.0))}


def fuzz_operation(operation: Any, mode: Any, base_url: str, token: str) -> None:
    """Run schemathesis cases of one operation in one generation mode; fail on any 5xx."""

    @SCHEMA_SETTINGS
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case: Any) -> None:
        case.call_and_validate(
            base_url=base_url,
            headers={"Authorization": f"Bearer {token}"},
            checks=[not_a_server_error],
        )

    try:
        run()
    except Unsatisfiable:
        if mode != schemathesis.GenerationMode.NEGATIVE:
            raise
        # An operation without parameters or body has no invalid input to generate.


def test_no_request_the_schema_allows_gets_a_server_error(
    collector: RunningCollector, fuzz_specs: dict[str, MetricSpec]
) -> None:
    """Schemathesis cases (valid and invalid by the schema) for every operation: never a 5xx."""
    api = schemathesis.openapi.from_url(f"{collector.url}/openapi.json")
    operations = [result.ok() for result in api.get_all_operations()]
    assert len(operations) >= 9
    modes = (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE)
    for operation in operations:
        token = INGEST_KEY if operation.path == "/v1/reports" else ADMIN_TOKEN
        for mode in modes:
            fuzz_operation(operation, mode, collector.url, token)


def stored_reports_are_valid(collector: RunningCollector, specs: dict[str, MetricSpec]) -> int:
    """Re-validate every stored report of the fuzz metrics; return how many there are."""
    by_name = {spec.name: spec for spec in specs.values()}
    window = PeriodWindow(TEST_NOW.date(), collector.settings.retention_days)
    engine = create_engine(normalize_url(collector.settings.database_url))
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                select(reports.c.id, reports.c.metric, reports.c.period, reports.c.payload).where(
                    reports.c.metric.in_(list(by_name))
                )
            ).all()
    finally:
        engine.dispose()
    for report_id, metric, period, payload_text in rows:
        spec = by_name[metric]
        assert str(uuid.UUID(report_id)) == report_id
        assert window.check(spec.period, period) is None
        payload = json.loads(payload_text)
        assert spec.randomizer.parse_payload(payload) == payload
    return len(rows)


def _periods() -> st.SearchStrategy[str]:
    today = TEST_NOW.date()
    near = st.integers(-100, 3).map(lambda d: period_label("day", today + dt.timedelta(days=d)))
    return st.one_of(
        near, st.text(max_size=12), st.sampled_from(["2026-W47", "2026-11", "2026-02-30"])
    )


def _payloads() -> st.SearchStrategy[Any]:
    ints = st.one_of(st.integers(-3, 20), st.integers(), st.booleans())
    b64 = st.binary(min_size=0, max_size=4).map(
        lambda raw: __import__("base64").b64encode(raw).decode()
    )
    olh = st.fixed_dictionaries(
        {"a": st.integers(-2, 2**31 + 1), "b": st.integers(-2, 2**31 + 1), "y": st.integers(-1, 5)}
    )
    json_values = st.recursive(
        st.none() | st.booleans() | st.floats(allow_nan=False) | st.text(max_size=8),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
        ),
        max_leaves=6,
    )
    return st.one_of(ints, b64, st.text(max_size=8), olh, json_values)


def _ids() -> st.SearchStrategy[str]:
    return st.one_of(
        st.uuids(version=4).map(str),
        st.uuids().map(lambda u: str(u).upper()),
        st.uuids().map(lambda u: u.hex),
        st.text(max_size=40),
    )


@pytest.fixture
def ingest(collector: RunningCollector) -> Iterator[httpx.Client]:
    with collector.client(INGEST_KEY) as client:
        yield client


def test_fuzzed_batches_are_all_or_nothing_and_store_only_valid_reports(
    collector: RunningCollector, fuzz_specs: dict[str, MetricSpec], ingest: httpx.Client
) -> None:
    names = [spec.name for spec in fuzz_specs.values()] + [unique_name("nosuch")]
    fingerprints = {spec.name: spec.fingerprint for spec in fuzz_specs.values()}
    before = stored_reports_are_valid(collector, fuzz_specs)
    accepted_total = [0]

    def valid_report(metric: str, value: int, seed: int) -> dict[str, Any]:
        spec = next(s for s in fuzz_specs.values() if s.name == metric)
        rng = SeededRandomness(seed)
        return {
            "id": str(uuid.uuid4()),
            "metric": metric,
            "fingerprint": spec.fingerprint,
            "period": period_label("day", TEST_NOW.date()),
            "payload": spec.randomizer.randomize(value % spec.k, rng),
        }

    valid = st.builds(
        valid_report, st.sampled_from(names[:-1]), st.integers(0, 20), st.integers(0, 999)
    )
    fuzzed = st.fixed_dictionaries(
        {
            "id": _ids(),
            "metric": st.sampled_from(names),
            "period": _periods(),
            "payload": _payloads(),
        },
        optional={"extra": st.integers()},
    ).map(lambda r: {**r, "fingerprint": fingerprints.get(r["metric"], "0" * 16)})
    report = st.one_of(valid, fuzzed)

    @FUZZ_SETTINGS
    @given(batch=st.lists(report, max_size=8))
    def run(batch: list[dict[str, Any]]) -> None:
        response = ingest.post("/v1/reports", json={"reports": batch})
        assert response.status_code in (202, 422), response.text
        if response.status_code == 202:
            accepted_total[0] += response.json()["accepted"]
        else:
            assert {item["index"] for item in response.json()["detail"]} <= set(range(len(batch)))

    run()
    assert accepted_total[0] > 0
    assert stored_reports_are_valid(collector, fuzz_specs) == before + accepted_total[0]


def test_arbitrary_bodies_never_get_a_server_error(ingest: httpx.Client) -> None:
    bodies = st.one_of(
        st.binary(max_size=64),
        st.text(max_size=64).map(str.encode),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=6),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.sampled_from(["reports", "x"]), inner, max_size=2)
            ),
            max_leaves=8,
        ).map(lambda value: json.dumps(value).encode()),
    )

    @FUZZ_SETTINGS
    @given(body=bodies)
    def run(body: bytes) -> None:
        response = ingest.post(
            "/v1/reports", content=body, headers={"Content-Type": "application/json"}
        )
        assert response.status_code in (202, 400, 422), response.text

    run()

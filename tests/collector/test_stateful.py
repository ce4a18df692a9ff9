"""A hypothesis state machine against a real collector: uploads, resends of acknowledged batches,
invalid batches, retention runs (with the clock moving on) and collector restarts, in any order.

After every step the stored counts must equal the distinct accepted reports exactly (nothing
double-counted, nothing lost) and the raw reports must be exactly those accepted and not yet
past retention.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections import Counter
from typing import Any

import httpx
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)
from sqlalchemy import create_engine, select

from deniable.client import MetricSpec, SeededRandomness
from deniable.client.spec import period_label
from deniable.collector.storage.engine import normalize_url
from deniable.collector.storage.tables import period_counts, reports, support_counts
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    TEST_NOW,
    DatabaseFactory,
    RunningCollector,
    collector_settings,
    unique_name,
)

RETENTION_DAYS = 5
MECHANISMS = ("krr", "oue", "olh")


def run_machine(database_url: str, examples: int, steps: int) -> None:
    server = RunningCollector(
        collector_settings(database_url, retention_days=RETENTION_DAYS)
    ).start()
    engine = create_engine(normalize_url(database_url))
    with server.client(ADMIN_TOKEN) as admin:
        specs = {
            m: MetricSpec.from_dict(
                admin.post(
                    "/v1/metrics",
                    json={
                        "name": unique_name(m),
                        "type": "categorical",
                        "categories": list("abcde"),
                        "epsilon": 1.0,
                        "mechanism": m,
                    },
                ).json()
            )
            for m in MECHANISMS
        }

    class Collecting(RuleBasedStateMachine):
        """The model: accepted reports (id -> (metric, period, payload)) and which were purged."""

        @initialize()
        def fresh(self) -> None:
            server.clock.now = TEST_NOW
            self.metric_suffix = unique_name("run")
            self.accepted: dict[str, tuple[str, str, Any]] = {}
            self.purged: set[str] = set()
            self.acked_batches: list[list[dict[str, Any]]] = []
            self.names = set()
            with server.client(ADMIN_TOKEN) as admin:
                self.specs = {}
                for m, template in specs.items():
                    fields = dict(template.fingerprint_fields(), name=f"{m}_{self.metric_suffix}")
                    self.specs[m] = MetricSpec.from_dict(
                        admin.post("/v1/metrics", json=fields).json()
                    )
            self.names = {spec.name for spec in self.specs.values()}

        def make(self, seed: int, size: int, offsets: list[int]) -> list[dict[str, Any]]:
            rng = SeededRandomness(seed)
            today = server.clock.now.date()
            batch = []
            for i in range(size):
                spec = self.specs[MECHANISMS[rng.randbelow(len(MECHANISMS))]]
                day = today - dt.timedelta(days=offsets[i % len(offsets)])
                batch.append(
                    {
                        "id": str(uuid.uuid4()),
                        "metric": spec.name,
                        "fingerprint": spec.fingerprint,
                        "period": period_label("day", day),
                        "payload": spec.randomizer.randomize(rng.randbelow(spec.k), rng),
                    }
                )
            return batch

        def post(self, batch: list[dict[str, Any]]) -> httpx.Response:
            with server.client(INGEST_KEY) as client:
                return client.post("/v1/reports", json={"reports": batch})

        @rule(
            seed=st.integers(0, 2**32),
            size=st.integers(1, 40),
            offsets=st.lists(st.integers(0, RETENTION_DAYS), min_size=1, max_size=3),
            repeat=st.booleans(),
        )
        def upload(self, seed: int, size: int, offsets: list[int], repeat: bool) -> None:
            batch = self.make(seed, size, offsets)
            if repeat:
                batch.append(dict(batch[0]))
            response = self.post(batch)
            assert response.status_code == 202, response.text
            new = {r["id"] for r in batch} - set(self.accepted)
            assert response.json() == {"accepted": len(new), "duplicates": len(batch) - len(new)}
            for r in batch:
                self.accepted.setdefault(r["id"], (r["metric"], r["period"], r["payload"]))
            self.acked_batches.append(batch)

        @rule(data=st.data())
        def resend(self, data: st.DataObject) -> None:
            if not self.acked_batches:
                return
            batch = data.draw(st.sampled_from(self.acked_batches))
            response = self.post(batch)
            cutoff = period_label(
                "day", server.clock.now.date() - dt.timedelta(days=RETENTION_DAYS)
            )
            if all(r["period"] >= cutoff for r in batch):
                assert response.status_code == 202, response.text
                assert response.json() == {"accepted": 0, "duplicates": len(batch)}
            else:
                assert response.status_code == 422

        @rule(
            seed=st.integers(0, 2**32),
            size=st.integers(1, 20),
            flaw=st.sampled_from(["payload", "fingerprint", "metric", "future", "id", "expired"]),
        )
        def invalid(self, seed: int, size: int, flaw: str) -> None:
            batch = self.make(seed, size, [0, 1])
            bad = batch[-1]
            if flaw == "payload":
                bad["payload"] = {"a": 0, "b": 0, "y": 0} if isinstance(bad["payload"], int) else 99
            elif flaw == "fingerprint":
                bad["fingerprint"] = "f" * 16
            elif flaw == "metric":
                bad["metric"] = unique_name("ghost")
            elif flaw == "future":
                bad["period"] = period_label("day", server.clock.now.date() + dt.timedelta(days=2))
            elif flaw == "expired":
                old = server.clock.now.date() - dt.timedelta(days=RETENTION_DAYS + 1)
                bad["period"] = period_label("day", old)
            else:
                bad["id"] = bad["id"].replace("-", "")
            response = self.post(batch)
            assert response.status_code == 422, response.text
            assert [item["index"] for item in response.json()["detail"]] == [len(batch) - 1]

        @rule(days=st.integers(0, 4))
        def retention(self, days: int) -> None:
            server.clock.advance(days)
            with server.client(ADMIN_TOKEN) as admin:
                response = admin.post("/v1/admin/retention")
            assert response.status_code == 200, response.text
            before = response.json()["before"]
            gone = {
                i for i, (_, period, _) in self.accepted.items() if period < before
            } - self.purged
            # Earlier examples' metrics share the database, so the total may be larger; the
            # invariant checks this run's raw reports exactly.
            assert response.json()["deleted"] >= len(gone)
            self.purged |= gone

        @rule()
        def restart(self) -> None:
            server.restart()

        @invariant()
        def counts_equal_distinct_accepted_reports(self) -> None:
            if not hasattr(self, "accepted"):
                return
            with engine.connect() as conn:
                raw = set(
                    conn.execute(
                        select(reports.c.id).where(reports.c.metric.in_(self.names))
                    ).scalars()
                )
                n = {
                    (m, p): v
                    for m, p, v in conn.execute(
                        select(
                            period_counts.c.metric, period_counts.c.period, period_counts.c.n
                        ).where(period_counts.c.metric.in_(self.names))
                    )
                }
                support = {
                    (m, p, c): v
                    for m, p, c, v in conn.execute(
                        select(
                            support_counts.c.metric,
                            support_counts.c.period,
                            support_counts.c.category,
                            support_counts.c.support,
                        ).where(support_counts.c.metric.in_(self.names))
                    )
                    if v
                }
            assert raw == set(self.accepted) - self.purged
            expected_n = Counter((m, p) for m, p, _ in self.accepted.values())
            assert n == dict(expected_n)
            by_name = {spec.name: spec for spec in self.specs.values()}
            expected_support: Counter[tuple[str, str, int]] = Counter()
            for m, p, payload in self.accepted.values():
                for v in by_name[m].randomizer.supported(json.loads(json.dumps(payload))):
                    expected_support[(m, p, v)] += 1
            assert support == dict(expected_support)

    try:
        run_state_machine_as_test(
            Collecting,
            settings=settings(
                max_examples=examples,
                stateful_step_count=steps,
                deadline=None,
                database=None,
                derandomize=True,
                suppress_health_check=list(HealthCheck),
            ),
        )
    finally:
        server.stop()
        engine.dispose()


def test_counts_always_equal_the_distinct_accepted_reports(
    databases: DatabaseFactory, backend: str
) -> None:
    run_machine(databases.new(backend), examples=6, steps=14)

"""Privacy warnings that say what to change: registration warns whenever it raises one device's
30-day total with the SDK defaults above the level, when it crosses the level and when a later
metric adds to a total above it already (issue 41), never when the same spec is registered
again; a second daily metric at ε 1 is no cause; the dashboard's warning links to where an
operator acts. Over real HTTP."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from deniable.client import WARNING_LEVEL_30_DAYS, MetricSpec, privacy_account
from testkit import (
    ADMIN_TOKEN,
    VIEWER_TOKEN,
    DatabaseFactory,
    RunningCollector,
    signed_in,
    viewer_collector,
)


class Captured(logging.Handler):
    """Keeps the collector's log records."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def server(databases: DatabaseFactory) -> Iterator[RunningCollector]:
    """A collector of each test's own (the account covers every registered metric, so no test
    sees another's registrations)."""
    with viewer_collector(databases.new("sqlite")) as running:
        yield running


def total(specs: list[MetricSpec]) -> float:
    figure = privacy_account(specs).totals.per_30_days
    assert figure is not None
    return figure


def test_every_registration_that_raises_the_total_above_the_level_warns(
    server: RunningCollector,
) -> None:
    two = [MetricSpec.boolean(f"habit_{i}", epsilon=1.0) for i in range(2)]
    assert total(two) > 30, "the old level: any second daily metric at ε 1 warned"
    heavy = MetricSpec.categorical("region", ["eu", "us", "asia"], epsilon=1.0)
    crossing = MetricSpec.boolean("beta_user", epsilon=2.0)
    later = MetricSpec.boolean("tablet", epsilon=1.0)
    assert total([*two, heavy]) <= WARNING_LEVEL_30_DAYS < total([*two, heavy, crossing])
    captured = Captured()
    logger = logging.getLogger("deniable.collector")
    logger.addHandler(captured)
    try:
        with server.client(ADMIN_TOKEN) as admin:
            answers = {}
            for spec in [*two, heavy, crossing, later]:
                answers[spec.name] = admin.post("/v1/metrics", json=spec.fingerprint_fields())
                assert answers[spec.name].status_code == 201, answers[spec.name].text
            again = admin.post("/v1/metrics", json=crossing.fingerprint_fields())
    finally:
        logger.removeHandler(captured)
    assert again.status_code == 200 and again.json()["warnings"] == []
    warned = {name: answer.json()["warnings"] for name, answer in answers.items()}
    assert [name for name, w in warned.items() if w] == ["beta_user", "tablet"]
    (warning,) = warned["beta_user"]
    (added,) = warned["tablet"]
    before, after = total([*two, heavy, crossing]), total([*two, heavy, crossing, later])
    assert "with tablet (5 metrics in all)" in added
    assert f"(it raises the total from ε {before:g}, above the level already)" in added
    assert f"ε {after:g} over 30 days" in added
    figure = total([*two, heavy, crossing])
    assert f"ε {figure:g} over 30 days" in warning
    assert f"level of {WARNING_LEVEL_30_DAYS:g}" in warning
    assert "archive" in warning and "weekly or monthly period" in warning
    assert "Client(" not in warning, "it says what to change, not how to call the SDK"
    logged = [r.getMessage() for r in captured.records if "registered" in r.getMessage()]
    assert logged == [
        f"metric beta_user registered: {warning}",
        f"metric tablet registered: {added}",
    ]


def test_the_dashboard_warning_links_to_where_an_operator_acts(server: RunningCollector) -> None:
    above = [MetricSpec.boolean(f"daily_{i}", epsilon=2.0) for i in range(3)]
    assert total(above) > WARNING_LEVEL_30_DAYS
    with server.client(ADMIN_TOKEN) as admin:
        for spec in above:
            assert admin.post("/v1/metrics", json=spec.fingerprint_fields()).status_code == 201
    with server.client(VIEWER_TOKEN) as viewer:
        document = viewer.get("/v1/privacy").json()
    assert document["warnings"], "three daily metrics at ε 2 take the total above the level"
    with signed_in(server) as browser:
        page = browser.get("/dashboard/privacy").text
    notes = [part.split("</p>")[0] for part in page.split('<p class="note" role="status">')[1:]]
    assert len(notes) == len(document["warnings"]) == 1
    assert '<a href="/dashboard/plan">' in notes[0]
    assert "docs/privacy.md" not in notes[0] and "Client(" not in notes[0]

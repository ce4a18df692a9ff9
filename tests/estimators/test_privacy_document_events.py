"""The privacy document of event metrics (issue 40): as the API serializes it, the event
figures are in event metrics' rows only, the rows of other metrics are unchanged, and the
statement says what one day's events cost only when there are event metrics."""

from __future__ import annotations

from deniable.client import DeviceSettings
from deniable.estimators.privacy import eps_text, privacy_document
from testkit.privacy_events import EVENT_FIELDS, EVENTS, PLAIN, as_json, by_name


def test_the_document_carries_the_event_fields_for_event_metrics_only() -> None:
    plain = as_json(privacy_document(PLAIN))
    mixed = as_json(privacy_document([*PLAIN, *EVENTS]))
    rows = by_name(mixed["metrics"])
    for name, row in by_name(plain["metrics"]).items():
        assert rows[name] == row
        assert not EVENT_FIELDS & set(row)
    for spec in EVENTS:
        assert set(rows[spec.name]) >= EVENT_FIELDS
    assert rows["search_actives"]["per_day_of_events"] == 7.0
    assert rows["search_actives"]["window_days"] == 7


def test_the_statement_says_what_one_days_events_cost_only_with_event_metrics() -> None:
    plain = privacy_document(PLAIN).statement
    mixed = privacy_document([*PLAIN, *EVENTS]).statement
    assert "Event metrics" not in plain
    assert (
        "Event metrics (crashes, search_actives, used_export) count or aggregate events on the"
        " device and send one report per window" in mixed
    )
    assert "search_actives: the 7 daily reports of a 7-day rolling window, ε 7" in mixed
    assert "crashes: one report per day, ε 2" in mixed
    assert "used_export: one report per week, ε 0.5" in mixed
    assert "Memoized, an aggregate" not in mixed
    memoized = privacy_document(EVENTS, DeviceSettings(memoize=True))
    permanent = sorted(m.permanent_epsilon for m in memoized.metrics)
    assert (
        "Memoized, an aggregate that does not change (crashes, search_actives, used_export)"
        f" reveals at most ε {eps_text(permanent[0])} to {eps_text(permanent[-1])} over any"
        " number of windows" in memoized.statement
    )
    # 7 reports at eps_inst 2 see one day's events of search_actives.
    assert "7-day rolling window, ε 14;" in memoized.statement

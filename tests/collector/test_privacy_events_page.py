"""The dashboard's privacy page for event metrics (issue 40): ``table#event-windows`` lists
each event metric's window and figures, and is absent without event metrics."""

from __future__ import annotations

import dataclasses
import re

from deniable.collector.dashboard.pages import privacy_page
from deniable.estimators.privacy import privacy_document
from testkit.privacy_events import EVENTS, PLAIN

VALUES = {
    "max_reports_per_period": "1",
    "memoize": "false",
    "instantaneous_ratio": "2",
    "lifetime_epsilon": "",
}
"""The form's values (the SDK defaults)."""


def test_the_page_shows_the_event_table_for_event_metrics_only() -> None:
    plain = privacy_page(VALUES, dataclasses.asdict(privacy_document(PLAIN)), None)
    assert "event-windows" not in plain
    page = privacy_page(VALUES, dataclasses.asdict(privacy_document([*PLAIN, *EVENTS])), None)
    assert '<table id="event-windows">' in page
    events = page.split('<table id="event-windows">')[1].split("</table>")[0]
    cells = {
        name: re.findall(r"<td[^>]*>([^<]*)</td>", row)
        for name, row in re.findall(r'<tr data-metric="(\w+)">(.*?)</tr>', events)
    }
    assert cells["search_actives"] == ["any", "rolling 7 days", "1", "7", "–"]
    assert cells["crashes"] == ["count", "calendar day", "2", "2", "–"]
    assert "dark_mode" not in cells

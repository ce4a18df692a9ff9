"""``deniable privacy``'s table of event metrics (issue 40): printed only when the document
has event metrics, with each one's window, one window's ε, what one day's events cost and,
memoized, what an unchanged aggregate reveals; the account's table is unchanged."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from deniable.cli.commands.privacy import account_table, events_table
from deniable.client import DeviceSettings
from deniable.estimators.privacy import privacy_document
from testkit.privacy_events import EVENTS, PLAIN, as_json, by_name


def rendered(table: Any) -> str:
    """A rich table as plain text."""
    out = Console(file=io.StringIO(), width=220, color_system=None)
    out.print(table)
    return out.file.getvalue()  # type: ignore[attr-defined]


def rows(text: str) -> dict[str, list[str]]:
    """A rendered table's cells by the row's first cell."""
    found = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip(" │┃").split("│")]
        if len(cells) > 1:
            found[cells[0]] = cells
    return found


def test_the_event_table_is_printed_for_event_metrics_only() -> None:
    plain = as_json(privacy_document(PLAIN))
    assert events_table(plain) is None
    settings = DeviceSettings(memoize={"search_actives"})
    mixed = as_json(privacy_document([*PLAIN, *EVENTS], settings))
    table = rows(rendered(events_table(mixed)))
    assert set(table) >= {"search_actives", "crashes", "used_export"}
    assert "dark_mode" not in table
    permanent = by_name(mixed["metrics"])["search_actives"]["permanent_epsilon"]
    assert table["search_actives"] == [
        "search_actives",
        "any",
        "rolling 7 days",
        "1",
        "14",
        f"{permanent:.4g}",
    ]
    assert table["crashes"] == ["crashes", "count", "calendar day", "2", "2", "–"]
    assert table["used_export"] == ["used_export", "any", "calendar week", "0.5", "0.5", "–"]


def test_the_account_table_rows_of_other_metrics_do_not_change() -> None:
    plain = rows(rendered(account_table(as_json(privacy_document(PLAIN)))))
    mixed = rows(rendered(account_table(as_json(privacy_document([*PLAIN, *EVENTS])))))
    for name in ("dark_mode", "load_ms"):
        assert mixed[name] == plain[name]
    assert mixed["search_actives"][4:8] == ["1", "1", "7", "30"]

"""How ``deniable estimate`` prints a text metric's heavy hitters: a ranked table of the strings
with their shares and intervals (whiskers on one axis, the run's floor marked), then the floor
and what it means."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from .render import console, level_text, number_column, print_json, words_column, write_csv

_WIDTH = 40


def _axis(document: dict[str, Any]) -> float:
    """The largest share the whiskers' axis shows: the largest interval end, or the floor."""
    ends = [row["ci_high"] for row in document["strings"]]
    return max([document["floor"]["t95"], *ends, 0.01])


def _whisker(row: dict[str, Any], top: float, floor: float) -> str:
    """The interval as ├─┤ with ● at the share; │ marks the floor T95 where nothing is drawn."""
    cells = [" "] * _WIDTH

    def at(x: float) -> int:
        return min(_WIDTH - 1, max(0, round(x / top * (_WIDTH - 1))))

    mark = at(floor)
    if floor < 1:
        cells[mark] = "┆"
    low, high = at(row["ci_low"]), at(row["ci_high"])
    for i in range(low, high + 1):
        cells[i] = "─"
    cells[low], cells[high] = "├", "┤"
    cells[at(row["share"])] = "●"
    return "".join(cells)


def print_text_estimate(document: dict[str, Any], fmt: str) -> None:
    """Print a text estimate document as a table, JSON or CSV."""
    if fmt == "json":
        print_json(document)
        return
    floor = document["floor"]
    if fmt == "csv":
        write_csv(
            (
                "metric",
                "period",
                "reports",
                "mode",
                "value",
                "share",
                "ci_low",
                "ci_high",
                "truncated",
                "detected",
                "floor_t95",
                "cap_bound",
            ),
            (
                (
                    document["metric"],
                    document["end"],
                    document["n"],
                    document["mode"],
                    row["value"],
                    row["share"],
                    row["ci_low"],
                    row["ci_high"],
                    row["truncated"],
                    row["detected"],
                    floor["t95"],
                    document["cap_bound"],
                )
                for row in document["strings"]
            ),
        )
        return
    out = console()
    out.print(
        Text(
            f"{document['metric']} · pem ε={document['epsilon']:g} · {document['end']}"
            f" · strings of up to {document['max_length']} bytes",
            style="bold",
        )
    )
    t95 = "none: no string can be found" if floor["t95"] >= 1 else f"{floor['t95']:.2%}"
    out.print(
        Text(
            f"{document['n']:,} reports · {document['mode']} · floor T95 {t95} · "
            f"{level_text(document['confidence'])} intervals for all strings at once",
            style="dim",
        )
    )
    top = _axis(document)
    table = Table()
    words_column(table, "string")
    number_column(table, "share")
    number_column(table, "interval")
    table.add_column(f"0 … {top:.1%}  (┆ floor)", no_wrap=True)
    for row in document["strings"]:
        name = row["value"] + ("…" if row["truncated"] else "")
        if document["mode"] == "candidates" and not row["detected"]:
            name += " (not detected)"
        table.add_row(
            Text(name),
            f"{row['share']:.2%}",
            f"[{row['ci_low']:.2%}, {row['ci_high']:.2%}]",
            _whisker(row, top, floor["t95"]),
        )
    out.print(table)
    if not document["strings"]:
        out.print("no string found above the floor")
    out.print(
        Text(
            "every string held by at least the floor's share of this period's devices is"
            " listed with probability 0.95, and with probability 0.95 none listed is absent;"
            " a rarer string may be missed, and one held by few devices is never listed"
            " (… : it filled max_length and may have been cut)",
            style="dim",
        )
    )
    if document["cap_bound"]:
        out.print(
            Text(
                f"the survivor cap ({document['survivor_cap']}) bound in this run: its"
                " guarantee does not hold",
                style="bold red",
            )
        )


def print_text_series(document: dict[str, Any], fmt: str, top: int | None = None) -> None:
    """Print a text series: per period, its n, floor and the strings found (the ``top`` largest,
    5 by default), as lines or CSV."""
    shown = top or 5
    if fmt == "csv":
        write_csv(
            ("metric", "period", "reports", "floor_t95", "value", "share", "ci_low", "ci_high"),
            (
                (
                    document["metric"],
                    entry["end"],
                    entry["n"],
                    entry["floor"]["t95"],
                    row["value"],
                    row["share"],
                    row["ci_low"],
                    row["ci_high"],
                )
                for entry in document["series"]
                for row in entry["strings"]
            ),
        )
        return
    out = console()
    out.print(Text(f"{document['metric']} · one discovery per period", style="bold"))
    for entry in document["series"]:
        t95 = entry["floor"]["t95"]
        floor = "none" if t95 >= 1 else f"{t95:.2%}"
        found = ", ".join(
            f"{row['value']} {row['share']:.1%} [{row['ci_low']:.1%}, {row['ci_high']:.1%}]"
            for row in entry["strings"][:shown]
        )
        more = len(entry["strings"]) - shown
        tail = f" and {more} more" if more > 0 else ""
        out.print(
            Text(f"{entry['end']}  {entry['n']:,} reports  floor {floor}  {found or '—'}{tail}")
        )

"""The table ``deniable estimate`` prints for a set metric: each category's share of devices.

The render hook of the ``set`` kind (docs/STATS.md section 16): the categorical table (share,
interval, estimated count, whisker bar), under a heading that says what a share of a set
metric is (the devices holding the category; the shares need not sum to 100%) and what its
declared maximum size L does (sets above it count partly, so their shares read low).
"""

from __future__ import annotations

from typing import Any

from .render import FACT_SEPARATOR, console, estimate_heading, estimate_table, print_facts


def set_heading(document: dict[str, Any]) -> str:
    """The line saying what a set metric's shares are, and its L."""
    size = document.get("max_items")
    return FACT_SEPARATOR.join(
        [
            f"share of devices holding each category (sets of up to {size}; shares need not"
            " sum to 100%)",
            f"padding-and-sampling through {document.get('oracle')}",
            f"a device holding more than {size} counts partly: its categories read low",
        ]
    )


def print_set_estimate(document: dict[str, Any]) -> None:
    """Print a set metric's estimate document as a table."""
    out = console()
    head, how = estimate_heading(document)
    print_facts(out, head, "bold")
    print_facts(out, how, "dim")
    print_facts(out, set_heading(document), "dim")
    out.print(estimate_table(document))

"""The CLI's render hook of the ``set`` kind (docs/STATS.md section 16): how ``deniable
estimate`` asks for and prints a set metric, and how ``metrics show`` describes one.

Its estimate is the categorical table (share, interval, estimated count, whisker bar) under a
heading that says what a set metric's share is (the devices holding the category; the shares
need not sum to 100%) and what its declared maximum size L does (sets above it count partly,
so their shares read low). Its shares have one estimator, unbiased.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deniable.client.errors import InvalidInput
from deniable.client.kinds import SetSpec
from deniable.client.spec import MetricSpec
from deniable.estimators.setfrequency import set_margin

from .render import (
    FACT_SEPARATOR,
    console,
    estimate_heading,
    estimate_table,
    print_facts,
    print_shares,
)


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


def print_set_estimate(document: dict[str, Any], fmt: str) -> None:
    """Print a set metric's estimate document: JSON and CSV as any shares', else its table."""
    if fmt in ("json", "csv"):
        print_shares(document, fmt)
        return
    out = console()
    head, how = estimate_heading(document)
    print_facts(out, head, "bold")
    print_facts(out, how, "dim")
    print_facts(out, set_heading(document), "dim")
    out.print(estimate_table(document))


def set_options(spec: MetricSpec, chosen: dict[str, Any], quantiles: Sequence[float]) -> None:
    """A set's shares have one estimator (unbiased): another method is refused."""
    if chosen.pop("method", None) not in (None, "unbiased"):
        raise InvalidInput(
            f"{spec.name} is a set metric: its shares have one estimator, unbiased;"
            " leave out --method"
        )


def set_rows(served: dict[str, Any]) -> list[tuple[str, str]]:
    """A served set spec's categories and max_items rows."""
    categories = served.get("categories") or []
    return [
        ("categories", ", ".join(categories) + f"  (k={len(categories)})"),
        ("max_items", f"{served.get('max_items')} (a larger set is sampled down)"),
    ]


def set_device(spec: MetricSpec, index: int) -> Any:
    """Refused: a simulated device would have to hold a set, which simulate does not make."""
    raise InvalidInput(
        f"{spec.name} is a set metric: simulate does not make devices holding sets yet"
    )


def set_planning_margin(spec: MetricSpec, n: int, confidence: float, simultaneous: bool) -> float:
    """A set's worst-case margin at ``n`` reports: L times its oracle's (docs/STATS.md
    section 16)."""
    assert isinstance(spec, SetSpec)
    return set_margin(spec.set_randomizer, n, confidence, simultaneous)

"""The dashboard's render hook for a set metric (docs/STATS.md section 16): what its bars mean.

A set metric's estimate document has the categorical shape, so the metric page draws it with
the categorical bars and table; this hook gives the words that differ: the axis (a share of
devices holding the category, not of reports) and a note that the shares need not sum to 100%
and read low for devices holding more than the declared ``max_items``.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from deniable.client.kinds import SetSpec
from deniable.client.spec import MetricSpec
from deniable.estimators.setfrequency import set_margin

from .templating import render

AXIS_TITLE = "share of devices holding it"
"""The estimate chart's axis for a set metric."""


def set_note(document: dict[str, Any]) -> Markup:
    """The paragraph under a set metric's estimate chart (its L and oracle, escaped)."""
    return render(
        "set_note.html", size=str(document.get("max_items")), oracle=str(document.get("oracle"))
    )


def set_planned_margin(spec: MetricSpec, n: int) -> float:
    """A set's worst-case simultaneous margin at ``n`` reports (95%): L times its oracle's."""
    assert isinstance(spec, SetSpec)
    return set_margin(spec.set_randomizer, n)

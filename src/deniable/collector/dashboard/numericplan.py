"""The Plan page's form for a number: a numeric metric's mean, or a histogram of it.

``/dashboard/plan?kind=numeric``: the mechanism (the fewest-reports pick among duchi, pm and
hybrid, one of them, or a histogram of ``buckets`` buckets), eps, the range and a margin (value
units for a mean; a share for a histogram's buckets) give the reports needed, or ``reports``
give the margin. Every figure comes from the planner ``deniable plan`` uses
(:func:`~deniable.estimators.advisor.numeric_plan_document` for a mean, ``plan_document`` over
the buckets for a histogram): no second formula here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deniable.client.errors import InvalidInput
from deniable.client.mechanisms import MAX_CATEGORIES, MAX_EPSILON
from deniable.client.spec import NUMERIC_MAGNITUDE
from deniable.estimators.advisor import MAX_REPORTS, numeric_plan_document, plan_document

from ..numbers import NumberRule
from . import glossary
from .charts import share_text, value_text
from .pages import your_metrics
from .templating import render

KIND = "numeric"
"""The ``kind`` query value that asks the Plan page for this form."""

FEWEST = "fewest reports"
"""The mechanism choice that shows the mean's mechanism needing the fewest reports."""
HISTOGRAM = "histogram"
"""The mechanism choice that plans a histogram of the number instead of its mean."""
MECHANISM_CHOICES = (FEWEST, "duchi", "pm", "hybrid", HISTOGRAM)

DEFAULTS = {
    "mechanism": FEWEST,
    "lower": "0",
    "upper": "1000",
    "buckets": "10",
    "epsilon": "1",
    "margin": "10",
    "reports": "",
    "confidence": "0.95",
}
"""The form's values before it is sent: a mean on [0, 1000] within ±10 at eps 1."""

RULES = {
    "lower": NumberRule("lower", -NUMERIC_MAGNITUDE, NUMERIC_MAGNITUDE),
    "upper": NumberRule("upper", -NUMERIC_MAGNITUDE, NUMERIC_MAGNITUDE),
    "buckets": NumberRule("buckets", 2, MAX_CATEGORIES, whole=True),
    "epsilon": NumberRule("epsilon", 0, MAX_EPSILON, open_low=True),
    "margin": NumberRule("margin", 0, NUMERIC_MAGNITUDE, open_low=True),
    "share margin": NumberRule("margin", 0, 1, open_low=True, open_high=True),
    "reports": NumberRule("reports", 1, MAX_REPORTS, whole=True),
    "confidence": NumberRule("confidence", 0, 1, open_low=True, open_high=True),
}
"""How the form's numbers are read (a histogram's margin is a share, below 1)."""


def form_values(query: Any) -> dict[str, str]:
    """The form's values from the query (each at most 32 characters), the defaults where not
    given; an empty margin with reports given asks for the margin."""
    values = {key: (query.get(key) or default).strip()[:32] for key, default in DEFAULTS.items()}
    if query.get("reports") and not query.get("margin"):
        values["margin"] = ""
    return values


def plan_for(values: dict[str, str]) -> dict[str, Any]:
    """The planner's document for the form (a ``numeric_plan_document``, or a ``plan_document``
    over the buckets for a histogram) with ``chosen``, the row the answer reads;
    InvalidInput naming a bad value."""
    mechanism = values["mechanism"]
    if mechanism not in MECHANISM_CHOICES:
        raise InvalidInput(f"mechanism must be one of {', '.join(MECHANISM_CHOICES)}")
    if bool(values["margin"]) == bool(values["reports"]):
        raise InvalidInput("give a margin or a number of reports, not both")
    histogram = mechanism == HISTOGRAM
    epsilon = float(RULES["epsilon"].parse(values["epsilon"]))
    confidence = float(RULES["confidence"].parse(values["confidence"]))
    margin_rule = RULES["share margin"] if histogram else RULES["margin"]
    margin = float(margin_rule.parse(values["margin"])) if values["margin"] else None
    reports = int(RULES["reports"].parse(values["reports"])) if values["reports"] else None
    if histogram:
        k = int(RULES["buckets"].parse(values["buckets"]))
        document = plan_document(
            k, epsilon, margin=margin, reports=reports, confidence=confidence, simultaneous=True
        )
        document["chosen"] = document["advised"]
        return document
    lower = float(RULES["lower"].parse(values["lower"]))
    upper = float(RULES["upper"].parse(values["upper"]))
    if not lower < upper:
        raise InvalidInput("lower must be less than upper")
    document = numeric_plan_document(
        lower, upper, epsilon, margin=margin, reports=reports, confidence=confidence
    )
    document["chosen"] = document["advised"] if mechanism == FEWEST else mechanism
    return document


def _answer_text(row: dict[str, Any], histogram: bool, inverse: bool) -> str:
    """A row's answer: its reports needed, or its margin (± points for a histogram)."""
    if inverse:
        return f"±{share_text(row['margin'])}" if histogram else f"±{value_text(row['margin'])}"
    needed = row.get("reports_needed")
    return f"more than {MAX_REPORTS:.0e}" if needed is None else f"{needed:,}"


def answer(document: dict[str, Any]) -> dict[str, Any]:
    """The answer (reports needed or margin, and its mechanism), what it means and every
    mechanism's row, as the template lays them out."""
    histogram = "categories" in document
    inverse = "reports" in document
    chosen = document["chosen"]
    row = next(r for r in document["mechanisms"] if r["mechanism"] == chosen)
    level = f"{document['confidence'] * 100:g}%"
    if histogram:
        what = (
            f"each of {document['categories']} buckets' shares at once, {level}, worst case"
            " over the true shares"
        )
        given = (
            f"With {document['reports']:,} reports"
            if inverse
            else f"For ±{share_text(document['margin'])}"
        )
    else:
        what = (
            f"the mean on [{value_text(document['lower'])}, {value_text(document['upper'])}],"
            f" {level}, worst case (half the values at each end of the range)"
        )
        given = (
            f"With {document['reports']:,} reports"
            if inverse
            else f"For ±{value_text(document['margin'])}"
        )
    rows = []
    for entry in document["mechanisms"]:
        if not entry.get("supported", True):
            shown = [entry["mechanism"], "—", "—"]
        else:
            spread = entry["v_star"] if histogram else entry["worst_population_variance"]
            shown = [entry["mechanism"], _answer_text(entry, histogram, inverse), f"{spread:.4g}"]
        rows.append((entry["mechanism"] == document["advised"], shown))
    return {
        "label": "Margin" if inverse else "Reports needed",
        "value": _answer_text(row, histogram, inverse),
        "chosen": chosen,
        "given": given,
        "what": what,
        "flag": "--categories" if histogram else "--numeric",
        "answer_head": "margin" if inverse else "reports needed",
        "spread_head": "V* per report" if histogram else "variance per report, worst population",
        "rows": rows,
        "auto": document["auto"],
        "advised": document["advised"],
    }


def numeric_plan_page(
    values: dict[str, str],
    document: dict[str, Any] | None,
    problem: str | None,
    yours: Sequence[dict[str, Any]] = (),
) -> str:
    """The Plan page's number form, and its answer or the problem with the form; first what
    your metrics' reports give now (``yours``, :func:`.data.planner_metrics`), as the shares
    form shows it."""
    return render(
        "numeric_plan.html",
        yours=your_metrics(yours),
        kind=KIND,
        mechanisms=MECHANISM_CHOICES,
        mechanism_names=glossary.MECHANISMS,
        values=values,
        problem=problem,
        answer=None if problem is not None or document is None else answer(document),
        current="plan",
    )


def numeric_plan(query: Any, yours: Sequence[dict[str, Any]] = ()) -> tuple[str, int]:
    """The number form's page for ``query`` and its status: 200, or 422 with the problem;
    ``yours``, the planner's lines on your metrics."""
    values = form_values(query)
    try:
        document = plan_for(values)
    except (InvalidInput, ValueError) as exc:
        return numeric_plan_page(values, None, str(exc), yours), 422
    return numeric_plan_page(values, document, None, yours), 200

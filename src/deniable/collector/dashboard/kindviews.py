"""How the dashboard shows each metric kind: one :class:`KindView` per kind class, chosen by
:func:`view_of` (``functools.singledispatch`` on the client kind), so that the pages ask the
view rather than compare type strings, and a new kind adds one registration here.

tests/collector/test_dashboard_kindviews.py checks that every kind in
:data:`deniable.client.kinds.KINDS` has a view and that its page renders.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from fastapi import Request
from markupsafe import Markup

from deniable.client import kinds
from deniable.client.spec import MetricSpec
from deniable.estimators import margin_of_error, mean_margin

from ..queries.limits import categories_of
from . import setpage
from .charts import value_text

if TYPE_CHECKING:
    from .data import MetricRow

MAX_TOP = 20
"""The most categories a chart over time draws (a histogram with no more buckets draws all)."""


def top_categories(document: dict[str, Any], top: int) -> list[str]:
    """The ``top`` categories with the largest shares in an estimate document, largest first."""
    rows = sorted(
        document["estimates"],
        key=lambda r: -(r["frequency"] if r["frequency"] is not None else -1.0),
    )
    return [r["category"] for r in rows[:top]]


def _points(margin: float) -> str:
    """A share's margin in percentage points."""
    return f"±{margin * 100:.1f} pts"


def _share_margin(spec: MetricSpec, n: int) -> float:
    """The frequency oracle's worst-case simultaneous margin at ``n`` reports (95%)."""
    return margin_of_error(spec.k, spec.epsilon, n, mechanism=spec.randomizer, simultaneous=True)


def _top_largest(spec: MetricSpec, document: dict[str, Any], top: int) -> list[str]:
    """A categorical metric's ``top`` largest categories."""
    return top_categories(document, top)


def _always(spec: MetricSpec) -> bool:
    """A ``top`` picker on every metric of the kind."""
    return True


def _never(spec: MetricSpec) -> bool:
    """No ``top`` picker: the kind's charts show what they show."""
    return False


def _top_series(spec: MetricSpec, shown: Sequence[str]) -> str:
    """The series card's subject for categories."""
    return f"The top {len(shown)} categories, largest first,"


def _top_breakdown(spec: MetricSpec, shown: Sequence[str]) -> str:
    """The breakdown's subject for categories."""
    return "Each category's share" if len(shown) == spec.k else f"The top {len(shown)} categories"


@dataclass(frozen=True)
class OwnPages:
    """A kind's own pages, for a kind whose estimate is no list of category shares (text: the
    strings found): its metric page, breakdown page and breakdown document, and overview row."""

    metric: Callable[[Request, MetricSpec, Callable[[], dict[str, Any]]], Markup]
    breakdown: Callable[[Request, MetricSpec, dict[str, Any]], Markup]
    breakdown_document: Callable[[Request, MetricSpec, list[str], list[str]], dict[str, Any]]
    overview_row: Callable[[Request, MetricSpec, list[str]], MetricRow]


@dataclass(frozen=True)
class KindView:
    """What the dashboard's pages need to know of a kind; the defaults are a categorical
    metric's (shares of named categories, the largest first)."""

    shares: bool = True
    """Its estimate is a share per category (else a mean, in value units)."""
    lead: str | None = None
    """The one category its charts follow alone (a boolean's ``true``), or None."""
    item: str = "category"
    """What one of its categories is called in a caption."""
    quantiles: bool = False
    """Its page shows quantile intervals (and over time), and its axis the unit of its buckets."""
    margin_text: Callable[[float], str] = _points
    """The overview's margin cell from the planned margin."""
    planned_margin: Callable[[MetricSpec, int], float] = _share_margin
    """The planner's worst-case margin at n reports (95%, simultaneous for shares)."""
    overview_cells: Callable[[MetricSpec], int] = categories_of
    """The series cells one period of its overview trend costs."""
    shown: Callable[[MetricSpec, dict[str, Any], int], list[str]] = _top_largest
    """The categories its charts over time draw, from an estimate document and ``top``."""
    top_picker: Callable[[MetricSpec], bool] = _always
    """Whether its page offers the ``top`` picker."""
    series_what: Callable[[MetricSpec, Sequence[str]], str] = _top_series
    """The series card's subject for the categories shown."""
    breakdown_what: Callable[[MetricSpec, Sequence[str]], str] = _top_breakdown
    """The breakdown page's subject for the categories shown."""
    pages: OwnPages | None = None
    """Its own pages instead of the estimate pages, or None."""
    axis: str | None = None
    """Its estimate chart's axis title (None: a share of reports)."""
    note: Callable[[dict[str, Any]], Markup] | None = None
    """A paragraph under its estimate chart, from the estimate document (None: none)."""
    methods: bool = True
    """Its page offers the shares' method picker (a set's shares have one estimator)."""


@functools.singledispatch
def view_of(spec: MetricSpec) -> KindView:
    """The dashboard view of ``spec``'s kind; a kind without a registered view is refused."""
    kind = getattr(spec, "type", type(spec).__name__)
    raise TypeError(f"the dashboard has no view of the {kind} kind: register one in {__name__}")


def view_for(kind: type[MetricSpec]) -> KindView | None:
    """The view registered for the kind class ``kind`` (or a base of it), None for none."""
    chosen = view_of.dispatch(kind)
    return None if chosen is view_of.dispatch(object) else cast(KindView, chosen(None))


def _register(kind: type[MetricSpec], view: KindView) -> None:
    """Register ``view`` for ``kind`` (and its subclasses that register none of their own)."""
    view_of.register(kind, lambda spec: view)


def _true_only(spec: MetricSpec, document: dict[str, Any], top: int) -> list[str]:
    """A boolean's ``true`` share only: its ``false`` share is the mirror image."""
    return ["true"]


def _buckets_in_order(spec: MetricSpec, document: dict[str, Any], top: int) -> list[str]:
    """A histogram's buckets in bucket order (its shape is the point): every bucket up to
    :data:`MAX_TOP`, else its ``top`` largest."""
    if spec.k <= MAX_TOP:
        return list(spec.categories)
    largest = set(top_categories(document, top))
    return [bucket for bucket in spec.categories if bucket in largest]


def _many_buckets(spec: MetricSpec) -> bool:
    """A ``top`` picker only for more buckets than a chart draws."""
    return spec.k > MAX_TOP


def _bucket_series(spec: MetricSpec, shown: Sequence[str]) -> str:
    """The series card's subject for buckets."""
    if len(shown) == spec.k:
        return f"Every one of the {spec.k} buckets, in bucket order,"
    return f"The {len(shown)} largest of {spec.k} buckets, in bucket order,"


def _bucket_breakdown(spec: MetricSpec, shown: Sequence[str]) -> str:
    """The breakdown's subject for buckets."""
    return "Each bucket's share" if len(shown) == spec.k else "The largest buckets"


def _mean_margin(spec: MetricSpec, n: int) -> float:
    """The mean's worst-case margin at ``n`` reports (95%, value units)."""
    assert isinstance(spec, kinds.NumericSpec)
    return mean_margin(spec.lower, spec.upper, spec.epsilon, n, mechanism=spec.mechanism)


def _true_breakdown(spec: MetricSpec, shown: Sequence[str]) -> str:
    """The breakdown's subject for a boolean."""
    return "The share of true"


def _mean_breakdown(spec: MetricSpec, shown: Sequence[str]) -> str:
    """The breakdown's subject for a numeric metric."""
    return "The mean"


def _value_margin(margin: float) -> str:
    """A mean's margin in value units."""
    return f"±{value_text(margin)}"


def _floor_text(margin: float) -> str:
    """A text metric's planned detection floor (a run's own adds its collision noise)."""
    return f"floor ≥ {margin * 100:.1f}%"


def _one_cell(spec: MetricSpec) -> int:
    """A text metric's overview row costs one cell a period (its reports, no trend)."""
    return 1


def _text_metric(
    request: Request, spec: MetricSpec, query_of: Callable[[], dict[str, Any]]
) -> Markup:
    """A text metric's page: the strings found in the query's period (:mod:`.textpage`)."""
    from .breakdownpage import entry_card
    from .data import arrivals
    from .textpage import history_document, text_document, text_page

    document = text_document(request, spec, request.query_params.get("end") or None)
    history = history_document(request, spec, document["end"])
    arrival = arrivals(request, [spec.name])[spec.name]
    return text_page(spec, document, entry_card(spec, query_of()), history, arrival)


def _text_breakdown(request: Request, spec: MetricSpec, query: dict[str, Any]) -> Markup:
    """A text metric's breakdown page (:mod:`.textslices`)."""
    from .textslices import page

    return page(spec, request, query)


def _text_breakdown_document(
    request: Request, spec: MetricSpec, by: list[str], where: list[str]
) -> dict[str, Any]:
    """A text metric's breakdown document (:mod:`.textslices`)."""
    from .textslices import document

    return document(request, spec, by, where)


def _text_row(request: Request, spec: MetricSpec, labels: list[str]) -> MetricRow:
    """A text metric's overview row (:func:`.data.text_row`)."""
    from .data import text_row

    return text_row(request, spec, labels)


_register(kinds.CategoricalSpec, KindView())
_register(
    kinds.BooleanSpec,
    KindView(
        lead="true",
        shown=_true_only,
        top_picker=_never,
        breakdown_what=_true_breakdown,
    ),
)
_register(
    kinds.HistogramSpec,
    KindView(
        item="bucket",
        quantiles=True,
        shown=_buckets_in_order,
        top_picker=_many_buckets,
        series_what=_bucket_series,
        breakdown_what=_bucket_breakdown,
    ),
)
_register(
    kinds.NumericSpec,
    KindView(
        shares=False,
        margin_text=_value_margin,
        planned_margin=_mean_margin,
        top_picker=_never,
        breakdown_what=_mean_breakdown,
    ),
)
_register(
    kinds.TextSpec,
    KindView(
        margin_text=_floor_text,
        overview_cells=_one_cell,
        pages=OwnPages(_text_metric, _text_breakdown, _text_breakdown_document, _text_row),
    ),
)
_register(
    kinds.SetSpec,
    KindView(
        planned_margin=setpage.set_planned_margin,
        axis=setpage.AXIS_TITLE,
        note=setpage.set_note,
        methods=False,
    ),
)

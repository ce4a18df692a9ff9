"""What the CLI does differently per metric kind: one :class:`KindRender` per kind class, chosen
by :func:`render_of` (``functools.singledispatch`` on the client kind), so that the commands
ask it rather than compare type strings, and a new kind adds one registration here.

tests/cli/test_kindrender.py checks that every kind in :data:`deniable.client.kinds.KINDS`
has one and that it prints a document of its kind.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from deniable.client.errors import InvalidInput
from deniable.client.kinds import (
    KINDS,
    BooleanSpec,
    CategoricalSpec,
    HistogramSpec,
    NumericSpec,
    SetSpec,
    TextSpec,
)
from deniable.client.spec import MetricSpec
from deniable.estimators import DEFAULT_METHOD

from .render import print_mean_estimate, print_mean_series, print_shares, print_shares_series
from .setrender import (
    print_set_estimate,
    set_device,
    set_options,
    set_planning_margin,
    set_rows,
)
from .textrender import print_text_estimate, print_text_series

SeriesPrinter = Callable[[dict[str, Any], str, Sequence[str] | None, int | None], None]
"""Prints a series document: the document, the format, the categories and ``top`` asked."""


def share_options(spec: MetricSpec, chosen: dict[str, Any], quantiles: Sequence[float]) -> None:
    """Shares default to :data:`DEFAULT_METHOD`; quantiles (a histogram's) pass on."""
    chosen["method"] = chosen.get("method") or DEFAULT_METHOD
    if quantiles:
        chosen["quantiles"] = list(quantiles)


def mean_options(spec: MetricSpec, chosen: dict[str, Any], quantiles: Sequence[float]) -> None:
    """A mean has one estimator (a method given is refused) and one interval."""
    if chosen.pop("method", None) is not None:
        raise InvalidInput(
            f"{spec.name} is a numeric metric: its mean has one estimator; leave out --method"
        )
    chosen.pop("simultaneous", None)


def string_options(spec: MetricSpec, chosen: dict[str, Any], quantiles: Sequence[float]) -> None:
    """A text metric takes no method, no simultaneous and no pooling."""
    if chosen.pop("method", None) is not None:
        raise InvalidInput(f"{spec.name} is a text metric: leave out --method")
    chosen.pop("simultaneous", None)
    chosen.pop("pooling", None)


def category_value(spec: MetricSpec, index: int) -> Any:
    """What a device holding category ``index`` records: the category's name."""
    return spec.categories[index]


def bool_value(spec: MetricSpec, index: int) -> Any:
    """What a device holding a boolean's ``index`` records: a bool."""
    return bool(index)


def bounds_range(spec: MetricSpec) -> tuple[float, float]:
    """A numeric metric's values: [lower, upper]."""
    assert isinstance(spec, NumericSpec)
    return spec.lower, spec.upper


def edges_range(spec: MetricSpec) -> tuple[float, float]:
    """A histogram's values: between its outer edges."""
    assert isinstance(spec, HistogramSpec)
    return spec.edges[0], spec.edges[-1]


def categories_rows(served: dict[str, Any]) -> list[tuple[str, str]]:
    """A served spec's categories row (a boolean's are false, true)."""
    categories = served.get("categories") or ["false", "true"]
    return [("categories", ", ".join(categories) + f"  (k={len(categories)})")]


def range_rows(served: dict[str, Any]) -> list[tuple[str, str]]:
    """A served numeric spec's range row."""
    return [("range", f"[{served.get('lower')}, {served.get('upper')}] (values clamped)")]


def edges_rows(served: dict[str, Any]) -> list[tuple[str, str]]:
    """A served histogram spec's edges row."""
    edges = served.get("edges") or []
    return [("edges", ", ".join(f"{e:g}" for e in edges) + f"  ({len(edges) - 1} buckets)")]


def length_rows(served: dict[str, Any]) -> list[tuple[str, str]]:
    """A served text spec's max_length row."""
    return [("max_length", f"{served.get('max_length')} bytes (longer strings are cut)")]


def print_string_series(
    document: dict[str, Any], fmt: str, categories: Sequence[str] | None, top: int | None
) -> None:
    """A text series: JSON, or its strings per period (the ``top`` largest)."""
    if fmt == "json":
        from .render import print_json

        print_json(document)
        return
    print_text_series(document, fmt, top)


@dataclass(frozen=True)
class KindRender:
    """What the CLI needs to know of a kind to plan, simulate, ask for and print it; the
    defaults are a categorical metric's."""

    items: tuple[str, str] = ("category", "categories")
    """What one and many of its categories are called."""
    mean: bool = False
    """Its estimate is a mean in value units (else shares, or strings found)."""
    quantiles: bool = False
    """It takes --quantile, and its simulated truth has quantiles."""
    strings: bool = False
    """Its estimate is the strings found (heavy hitters): online only, with --candidate."""
    items_bound: bool = False
    """It takes ``metrics create --max-items`` (a set: the most categories a device holds)."""
    number_range: Callable[[MetricSpec], tuple[float, float]] | None = None
    """Its devices hold numbers between these bounds (None: category indices); it takes
    --unit."""
    number_flags: tuple[str, ...] = ()
    """The ``metrics create`` flags that give its domain as numbers (their names are its
    spec's fields)."""
    device_value: Callable[[MetricSpec, int], Any] = category_value
    """What a simulated device holding category index i records."""
    options: Callable[[MetricSpec, dict[str, Any], Sequence[float]], None] = share_options
    """Shapes the estimate options (in place) as the kind takes them."""
    spec_rows: Callable[[dict[str, Any]], list[tuple[str, str]]] = categories_rows
    """The rows of ``metrics show``'s table that describe a served spec's domain."""
    print_estimate: Callable[[dict[str, Any], str], None] = print_shares
    """Prints an estimate document of the kind."""
    print_series: SeriesPrinter = print_shares_series
    """Prints a series document of the kind."""
    planning_margin: Callable[[MetricSpec, int, float, bool], float] | None = None
    """The planner's worst-case margin at n reports, a confidence and simultaneous or not, of
    a kind with its own (a set's: L times its oracle's); None: the frequency oracle's, or the
    mean's for a kind with a number range."""


@functools.singledispatch
def render_of(spec: MetricSpec) -> KindRender:
    """The CLI's render of ``spec``'s kind; a kind without a registered one is refused."""
    kind = getattr(spec, "type", type(spec).__name__)
    raise TypeError(f"the CLI has no render of the {kind} kind: register one in {__name__}")


def render_for(kind: type[MetricSpec]) -> KindRender:
    """The CLI's render of the kind class ``kind``; a kind without one is refused."""
    chosen = render_of.dispatch(kind)
    if chosen is render_of.dispatch(object):
        raise TypeError(
            f"the CLI has no render of the {kind.type} kind: register one in {__name__}"
        )
    return cast(KindRender, chosen(None))


def kind_named(type_name: Any) -> type[MetricSpec] | None:
    """The kind class of a type string read at the edge (a flag, a served spec), through the
    client's registry; None for none it knows."""
    kinds = cast(dict[str, type[MetricSpec]], KINDS)
    return kinds.get(type_name) if isinstance(type_name, str) else None


def render_named(type_name: Any) -> KindRender | None:
    """The render of a type string read at the edge, None for a kind the registry lacks."""
    kind = kind_named(type_name)
    return None if kind is None else render_for(kind)


def _register(kind: type[MetricSpec], render: KindRender) -> None:
    """Register ``render`` for ``kind`` (and its subclasses that register none of their own)."""
    render_of.register(kind, lambda spec: render)


_register(CategoricalSpec, KindRender())
_register(BooleanSpec, KindRender(device_value=bool_value))
_register(
    HistogramSpec,
    KindRender(
        items=("bucket", "buckets"),
        quantiles=True,
        number_range=edges_range,
        number_flags=("--edges",),
        spec_rows=edges_rows,
    ),
)
_register(
    NumericSpec,
    KindRender(
        mean=True,
        number_range=bounds_range,
        number_flags=("--lower", "--upper"),
        options=mean_options,
        spec_rows=range_rows,
        print_estimate=print_mean_estimate,
        print_series=print_mean_series,
    ),
)
_register(
    TextSpec,
    KindRender(
        strings=True,
        options=string_options,
        spec_rows=length_rows,
        print_estimate=print_text_estimate,
        print_series=print_string_series,
    ),
)
_register(
    SetSpec,
    KindRender(
        items_bound=True,
        device_value=set_device,
        options=set_options,
        spec_rows=set_rows,
        print_estimate=print_set_estimate,
        planning_margin=set_planning_margin,
    ),
)

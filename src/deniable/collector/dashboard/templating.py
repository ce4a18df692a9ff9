"""The dashboard's one Jinja2 environment: every page and chart is a template whose values are
escaped by the engine (``autoescape`` for HTML and SVG), so no code escapes by hand and no
missed call can let a metric name or a category label inject markup."""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from deniable.estimators.documents import CLIPPED_MARKS

BREAK_MARKS = ("_", ".", "-")
"""The characters of a metric name after which a line may break (``<wbr>``)."""


def name_parts(name: str) -> list[str]:
    """``name`` cut after each of :data:`BREAK_MARKS`: a template joins the parts with
    ``<wbr>``, so a long metric name wraps between its words, never inside one."""
    parts, start = [], 0
    for i, char in enumerate(name):
        if char in BREAK_MARKS:
            parts.append(name[start : i + 1])
            start = i + 1
    return [*parts, name[start:]]


def number(value: float | None) -> str:
    """A ``data-*`` value: the float's shortest exact text, empty for None."""
    return "" if value is None else repr(float(value))


ENVIRONMENT = Environment(
    loader=PackageLoader("deniable.collector.dashboard", "templates"),
    autoescape=select_autoescape(("html", "svg"), default_for_string=True, default=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
"""Autoescaping, strict (an undefined name is an error, never an empty string)."""
ENVIRONMENT.filters["name_parts"] = name_parts
ENVIRONMENT.filters["number"] = number
ENVIRONMENT.globals["clipped_marks"] = CLIPPED_MARKS


def render(template: str, **context: Any) -> Markup:
    """``template`` rendered with ``context``: safe markup, which another template includes
    as it is."""
    return Markup(ENVIRONMENT.get_template(template).render(**context))

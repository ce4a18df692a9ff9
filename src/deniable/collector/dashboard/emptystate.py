"""A metric page with no reports yet: what to do instead of 0% estimates with 0-100% whiskers.

The card says there are no reports in the range, shows the SDK lines that send this metric (the
Python and the JavaScript client, docs/sdk.md and docs/sdk-js.md; ``event()``/``observe()``
for an event metric), where the ingest key goes, and the ``deniable simulate`` command that
fills it with simulated devices.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from markupsafe import Markup

from deniable.client.kinds import BooleanSpec, CategoricalSpec, HistogramSpec, SetSpec, TextSpec
from deniable.client.spec import MetricSpec

from .templating import render

COLLECTOR_URL = "https://telemetry.example.com"
"""The collector's URL in the snippets: a placeholder, never the Host a request named."""


def has_reports(series_doc: dict[str, Any]) -> bool:
    """Whether any period of a series document holds a report."""
    return any(point["n"] for point in series_doc["series"])


@functools.singledispatch
def example_value(spec: MetricSpec) -> Any:
    """A value of the metric's kind to put in the snippet: a number in a numeric metric's
    range (each other kind registers its own below)."""
    lower = spec.lower if spec.lower is not None else 0.0
    upper = spec.upper if spec.upper is not None else 1.0
    return round(lower + (upper - lower) / 4, 1)


@example_value.register
def _(spec: CategoricalSpec) -> Any:
    """The first category (a boolean's: True)."""
    return True if isinstance(spec, BooleanSpec) else spec.categories[0]


@example_value.register
def _(spec: HistogramSpec) -> Any:
    """The middle of the first bucket."""
    return round((spec.edges[0] + spec.edges[1]) / 2, 1)


@example_value.register
def _(spec: SetSpec) -> Any:
    """The first two categories."""
    return list(spec.categories[:2])


@example_value.register
def _(spec: TextSpec) -> Any:
    """A short string."""
    return "dark mode"


def _literal(value: Any, python: bool) -> str:
    """``value`` as a Python or a JavaScript literal."""
    if isinstance(value, bool):
        return ("True" if value else "False") if python else json.dumps(value)
    return json.dumps(value)


def _call(spec: MetricSpec, python: bool) -> str:
    """The SDK call that sends one value (or event) of ``spec``."""
    name = json.dumps(spec.name)
    rule = spec.events
    if rule is not None and rule.counted:
        return f"client.event({name})"
    value = example_value(spec)
    if rule is not None:
        if rule.aggregate == "mode":
            value = spec.categories[0]
        return f"client.observe({name}, {_literal(value, python)})"
    return f"client.record({name}, {_literal(value, python)})"


def snippets(spec: MetricSpec, url: str = COLLECTOR_URL) -> dict[str, str]:
    """The Python and JavaScript lines that send this metric to the collector at ``url``, and
    the ``deniable simulate`` command that sends simulated devices' reports."""
    python = "\n".join(
        (
            "from deniable.client import Client",
            "",
            "with Client(",
            f'    "{url}",',
            '    state_dir="/var/lib/myapp/deniable",',
            '    ingest_key="...",  # DENIABLE_INGEST_KEY',
            ") as client:",
            f"    {_call(spec, True)}",
        )
    )
    js = "\n".join(
        (
            'import { Client } from "deniable";',
            "",
            "const client = new Client({",
            f'  url: "{url}",',
            '  ingestKey: "...", // DENIABLE_INGEST_KEY',
            "});",
            f"{_call(spec, False)};",
            "await client.close();",
        )
    )
    simulate = "\n".join(
        (
            f"deniable --collector {url} \\",
            f"  simulate --metric {spec.name} --clients 2000 \\",
            "  --ingest-key $DENIABLE_INGEST_KEY",
        )
    )
    return {"python": python, "js": js, "simulate": simulate}


def card(spec: MetricSpec, start: str, end: str) -> Markup:
    """The empty state of a metric page whose range ``start``..``end`` holds no report."""
    return render(
        "empty_state.html",
        spec=spec,
        start=start,
        end=end,
        event=spec.events is not None,
        url=COLLECTOR_URL,
        **snippets(spec),
    )

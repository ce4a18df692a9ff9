"""The dashboard writes markup only in its templates, and the engine escapes every value in
them: no module escapes by hand (so none can forget to), and no template turns escaping off."""

from __future__ import annotations

import re
from pathlib import Path

from jinja2 import StrictUndefined

from deniable.collector.dashboard.templating import ENVIRONMENT

DASHBOARD = Path(__file__).resolve().parents[2] / "src" / "deniable" / "collector" / "dashboard"
HAND_ESCAPING = re.compile(r"\bhtml\.escape\b|from html import|from markupsafe import [^\n]*escape")
"""A module escaping markup itself instead of leaving it to the templates."""
UNESCAPED = re.compile(r"\|\s*safe\b|autoescape\s+false|Markup\(")
"""A template writing a value out raw."""


def test_no_dashboard_module_escapes_by_hand() -> None:
    offenders = [
        path.name for path in DASHBOARD.glob("*.py") if HAND_ESCAPING.search(path.read_text())
    ]
    assert offenders == []


def test_no_template_turns_escaping_off_and_every_one_compiles() -> None:
    names = ENVIRONMENT.list_templates()
    assert "base.html" in names and "charts/bar.svg" in names
    offenders = []
    for name in names:
        assert ENVIRONMENT.get_template(name) is not None
        source = (DASHBOARD / "templates" / name).read_text()
        if UNESCAPED.search(source):
            offenders.append(name)
    assert offenders == []


def test_the_environment_escapes_html_and_svg_and_refuses_undefined_names() -> None:
    assert ENVIRONMENT.undefined is StrictUndefined
    escapes = ENVIRONMENT.autoescape
    assert callable(escapes)
    assert all(escapes(name) for name in ("page.html", "chart.svg", None)), "html, svg, strings"
    rendered = ENVIRONMENT.from_string('<p title="{{ v }}">{{ v }}</p>').render(v='"><b>')
    assert rendered == '<p title="&#34;&gt;&lt;b&gt;">&#34;&gt;&lt;b&gt;</p>'

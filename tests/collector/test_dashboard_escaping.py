"""Every dashboard page kind escapes what a metric's registrant or its devices wrote: a
category, a description or owner, a text metric's strings. The pages are autoescaping
templates, so markup in any of them arrives as text, never as a tag or an attribute."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markupsafe import escape

from deniable.client import MetricSpec, SeededRandomness
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    TEST_NOW,
    RunningCollector,
    make_reports,
    register,
    signed_in,
    viewer_collector,
)
from testkit.databases import sqlite_url

SCRIPT = "<script>alert(1)</script>"
BREAKOUT = '"><img src=x onerror=alert(1)>'
"""A label that would close an attribute and open a tag if written unescaped."""
SHORT = '"<b>'
"""A text metric's string (at most 4 characters): closes an attribute, opens a tag."""
TODAY = TEST_NOW.date().isoformat()
PLATFORMS = {"platform": ["ios", "web"]}


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningCollector]:
    """A collector with a categorical metric whose labels and description are hostile, and a
    text metric whose devices report a hostile string, each with a dimension."""
    folder: Path = tmp_path_factory.mktemp("dashboard-escaping")
    with viewer_collector(sqlite_url(folder, "escaping")) as server:
        categorical = MetricSpec.categorical(
            "hostile_labels", [SCRIPT, BREAKOUT, "plain"], epsilon=4.0, dimensions=PLATFORMS
        )
        text = MetricSpec.text("hostile_text", max_length=4, epsilon=4, dimensions=PLATFORMS)
        with server.client(ADMIN_TOKEN) as admin:
            about = {"description": BREAKOUT + SCRIPT, "owner": BREAKOUT}
            answer = admin.post("/v1/metrics", json={**categorical.fingerprint_fields(), **about})
            assert answer.status_code == 201, answer.text
            register(admin, text)
        values = [0] * 300 + [1] * 200 + [2] * 100
        sketch = text.text_randomizer
        rng = SeededRandomness(5)
        with server.client(INGEST_KEY) as device:
            for seed, platform in enumerate(PLATFORMS["platform"]):
                reports = [
                    {**report, "dims": {"platform": platform}}
                    for report in make_reports(categorical, values, TODAY, seed)
                ]
                reports += [
                    {
                        "id": str(uuid.uuid4()),
                        "metric": text.name,
                        "fingerprint": text.fingerprint,
                        "period": TODAY,
                        "dims": {"platform": platform},
                        "payload": sketch.randomize(
                            sketch.encode(SHORT if i % 2 else f"{i:04d}"), 1 + (i // 2) % 4, rng
                        ),
                    }
                    for i in range(1000)
                ]
                for start in range(0, len(reports), 1000):
                    batch = {"reports": reports[start : start + 1000]}
                    assert device.post("/v1/reports", json=batch).status_code == 202
        yield server


def pages(running: RunningCollector) -> dict[str, str]:
    """Each page kind's text, fetched signed in."""
    day = {"start": TODAY, "end": TODAY}
    paths = {
        "overview": ("/dashboard/", {}),
        "metric": ("/dashboard/metrics/hostile_labels", day),
        "breakdown": ("/dashboard/metrics/hostile_labels/breakdown", {**day, "by": "platform"}),
        "text": ("/dashboard/metrics/hostile_text", {"end": TODAY}),
        "text breakdown": ("/dashboard/metrics/hostile_text/breakdown", {"by": "platform"}),
    }
    with signed_in(running) as browser:
        answers = {kind: browser.get(path, params=params) for kind, (path, params) in paths.items()}
    for kind, answer in answers.items():
        assert answer.status_code == 200, (kind, answer.text)
    return {kind: answer.text for kind, answer in answers.items()}


class Elements(HTMLParser):
    """The elements of a page and their attributes' names, as a browser's parser sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attributes: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes |= {name for name, _ in attrs}


def injected(page: str) -> list[str]:
    """Any markup the hostile labels could have added: a script, img or b element, an event
    handler attribute, or a label written out raw."""
    parsed = Elements()
    parsed.feed(page)
    found = sorted(parsed.tags & {"script", "img", "b"})
    found += sorted(name for name in parsed.attributes if name.startswith("on"))
    return found + [label for label in (SCRIPT, BREAKOUT, SHORT) if label in page]


def test_every_page_kind_renders_hostile_labels_as_text(running: RunningCollector) -> None:
    texts = pages(running)
    for kind, page in texts.items():
        assert injected(page) == [], kind
    for kind in ("overview", "metric", "breakdown"):
        assert str(escape(SCRIPT)) in texts[kind] or str(escape(BREAKOUT)) in texts[kind], kind
    for kind in ("metric", "breakdown"):
        for label in (SCRIPT, BREAKOUT):
            assert f'data-category="{escape(label)}"' in texts[kind], (kind, label)
    assert f'<p id="description">{escape(BREAKOUT + SCRIPT)}</p>' in texts["metric"]
    assert f'<span id="owner">{escape(BREAKOUT)}</span>' in texts["metric"]
    for kind in ("text", "text breakdown"):  # a string of the longest length ends in "…"
        assert f'data-category="{escape(SHORT)}' in texts[kind], kind
        assert re.search(f"<t[dh][^>]*>{re.escape(escape(SHORT))}…?</t[dh]>", texts[kind]), kind

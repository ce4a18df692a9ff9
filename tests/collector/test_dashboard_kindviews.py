"""Conformance of the dashboard's per-kind views (collector/dashboard/kindviews.py): every kind
in the client registry has one, and each kind's pages render from the recorded scenario's
seeded reports."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from deniable.client.kinds import KINDS
from deniable.client.spec import MetricSpec
from deniable.collector.dashboard.kindviews import KindView, view_for, view_of
from testkit import RunningCollector, signed_in
from tests.recorded.scenario import running, specs


@pytest.mark.parametrize(("type_name", "kind"), sorted(KINDS.items()))
def test_every_kind_has_a_dashboard_view(type_name: str, kind: type[MetricSpec]) -> None:
    view = view_for(kind)
    assert isinstance(view, KindView), (
        f"the dashboard has no view of the {type_name} kind: register one in"
        " deniable.collector.dashboard.kindviews"
    )


def test_a_kind_without_a_view_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="no view of the odd kind: register one in"):
        view_of(SimpleNamespace(type="odd"))


NEWER_KINDS = {"set": "tests/collector/test_set_metric.py renders its pages"}
"""Kinds added after tests/recorded's answers, which a metric of theirs in the scenario would
change (the metrics list, the privacy account): each names the test that renders its pages."""


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningCollector]:
    """The recorded scenario's collector: a metric of every kind with a week of reports."""
    with running(Path(tmp_path_factory.mktemp("kindviews"))) as server:
        yield server


@pytest.mark.parametrize("type_name", sorted(KINDS))
def test_each_kind_renders_its_pages(scenario: RunningCollector, type_name: str) -> None:
    names = [spec.name for spec in specs() if spec.type == type_name]
    if not names and type_name in NEWER_KINDS:
        pytest.skip(f"{type_name} is newer than the recorded answers: {NEWER_KINDS[type_name]}")
    assert names, f"tests/recorded/scenario.py has no {type_name} metric for its view to render"
    with signed_in(scenario, timeout=60) as client:
        assert client.get("/dashboard/").status_code == 200
        for name in names:
            page = client.get(f"/dashboard/metrics/{name}")
            assert page.status_code == 200, page.text
            assert name in page.text
        spec = next(spec for spec in specs() if spec.type == type_name and spec.dimensions)
        by = spec.dimensions[0][0]
        for path in ("breakdown", "breakdown.csv"):
            answer = client.get(f"/dashboard/metrics/{spec.name}/{path}?by={by}")
            assert answer.status_code == 200, answer.text

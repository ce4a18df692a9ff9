"""Conformance of the CLI's per-kind renders (cli/kindrender.py): every kind in the client
registry has one, and each prints its kind's recorded estimate and series documents (the
answers tests/recorded replays) as a table, CSV and JSON."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from deniable.cli.kindrender import KindRender, render_for, render_of
from deniable.client.kinds import KINDS
from deniable.client.spec import MetricSpec
from tests.recorded.answers import load
from tests.recorded.scenario import specs


@pytest.mark.parametrize(("type_name", "kind"), sorted(KINDS.items()))
def test_every_kind_has_a_cli_render(type_name: str, kind: type[MetricSpec]) -> None:
    assert isinstance(render_for(kind), KindRender)


def test_a_kind_without_a_render_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="no render of the odd kind: register one in"):
        render_of(SimpleNamespace(type="odd"))


NEWER_KINDS = {"set": "tests/cli/test_set_estimate.py prints its estimate and series"}
"""Kinds added after tests/recorded's answers, which a metric of theirs in the scenario would
change (the metrics list, the privacy account): each names the test that prints its documents."""


def recorded(name: str, which: str) -> dict[str, object]:
    """The first recorded 200 answer of ``name``'s estimate or series, as a document."""
    for answer in load():
        if answer["path"].startswith(f"/v1/metrics/{name}/{which}") and answer["status"] == 200:
            return json.loads(answer["body"])
    raise AssertionError(f"tests/recorded has no {which} of {name}")


@pytest.mark.parametrize("type_name", sorted(KINDS))
def test_each_kind_prints_its_documents(type_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    kinds = [spec for spec in specs() if spec.type == type_name]
    if not kinds and type_name in NEWER_KINDS:
        pytest.skip(f"{type_name} is newer than the recorded answers: {NEWER_KINDS[type_name]}")
    assert kinds, f"tests/recorded/scenario.py has no {type_name} metric for its render to print"
    spec = kinds[0]
    render = render_of(spec)
    estimate, series = recorded(spec.name, "estimate"), recorded(spec.name, "series")
    for fmt in ("table", "csv", "json"):
        render.print_estimate(estimate, fmt)
        assert spec.name in capsys.readouterr().out
        render.print_series(series, fmt, None, None)
        assert capsys.readouterr().out

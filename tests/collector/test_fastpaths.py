"""The ingestion fast paths agree with the authorities they shortcut.

``canonical_check`` may only accept payloads that the mechanism's ``parse_payload`` returns
unchanged, and the dict parser (``ReportIn``) must accept and refuse exactly what the
documented ``Report`` model does, with the same error types and locations; the per-period
(and per-cell) sums a batch precomputes must equal summing its rows period by period; a body
decoded by orjson must validate as its raw JSON does, and ingestion, which passes ``dims``
through the parser, must still refuse every ``dims`` the documented model or the spec refuses.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import string
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from deniable.client import MetricSpec
from deniable.client.mechanisms import make_mechanism, make_numeric_mechanism
from deniable.client.wire import payload_text
from deniable.collector.routes.reports import (
    _all_well_formed,
    _oversized,
    _well_formed,
    parse_batch,
)
from deniable.collector.schemas import BATCH_PARSER, REPORT_PARSER, Report
from deniable.collector.storage.kindrows import CELL_SEP, MetricRows, NumericRows, cell_rows
from deniable.collector.validation import (
    PeriodWindow,
    ValidReport,
    canonical_check,
    oue_canonical_plausible,
    validate_reports,
)
from testkit import FastRandomness, make_reports

MECHANISMS = [make_mechanism(name, k, 1.0) for name, k in [("oue", 100), ("oue", 8), ("oue", 3)]]
MECHANISMS += [make_mechanism("krr", 5, 1.0), make_mechanism("brr", 2, 1.0)]
NUMERIC = [
    make_numeric_mechanism(name, eps)
    for name, eps in [("duchi", 1.0), ("pm", 1.0), ("hybrid", 2.0), ("hybrid", 0.5)]
]

B64 = string.ascii_letters + string.digits + "+/="
payloads = st.one_of(
    st.integers(min_value=-3, max_value=2**70),
    st.booleans(),
    st.text(alphabet=B64, max_size=24),
    st.text(max_size=8),
    st.binary(max_size=16).map(lambda b: base64.b64encode(b).decode()),
    st.dictionaries(st.sampled_from("aby"), st.integers(0, 9)),
    st.none(),
    st.floats(min_value=-20, max_value=20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([m.bound for m in NUMERIC] + [-m.bound * (1 + 1e-12) for m in NUMERIC]),
)


def _parsed(mechanism: Any, payload: Any) -> Any:
    try:
        return mechanism.parse_payload(payload)
    except ValueError:
        return ValueError


@pytest.mark.parametrize("mechanism", MECHANISMS + NUMERIC, ids=repr)
@settings(max_examples=300, deadline=None)
@given(payload=payloads)
def test_canonical_check_accepts_only_what_parse_payload_returns_unchanged(
    mechanism: Any, payload: Any
) -> None:
    if canonical_check(mechanism)(payload):
        assert _parsed(mechanism, payload) == payload
        assert type(_parsed(mechanism, payload)) is type(payload)


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=repr)
def test_canonical_check_takes_the_randomized_payloads(mechanism: Any) -> None:
    source = FastRandomness(3)
    check = canonical_check(mechanism)
    reports = [mechanism.randomize(source.randbelow(mechanism.k), source) for _ in range(200)]
    assert all(check(p) for p in reports)


@pytest.mark.parametrize("mechanism", NUMERIC, ids=repr)
def test_canonical_check_takes_the_randomized_numeric_payloads(mechanism: Any) -> None:
    source = FastRandomness(4)
    check = canonical_check(mechanism)
    reports = [mechanism.randomize(2 * source.random() - 1, source) for _ in range(300)]
    assert all(check(y) for y in reports)
    assert not any(check(y) for y in (math.nan, math.inf, 2 * mechanism.bound, 1))


@pytest.mark.parametrize("payload", ["AR==", "AQ=", "AQ==\n", " AQ==", "AQ==AQ==", "AQE="])
def test_canonical_check_refuses_non_canonical_oue_text(payload: str) -> None:
    assert not canonical_check(make_mechanism("oue", 8, 1.0))(payload)
    assert canonical_check(make_mechanism("oue", 8, 1.0))("AQ==")


texts = st.one_of(
    st.text(max_size=70),
    st.uuids().map(str),
    st.uuids().map(lambda u: str(u).upper()),
    st.uuids().map(lambda u: str(u) + "\n"),
    st.integers(),
    st.none(),
)
reports = st.dictionaries(
    st.sampled_from(["id", "metric", "fingerprint", "period", "payload", "extra"]),
    st.one_of(texts, payloads),
    max_size=6,
)


def _outcome(validate: Any, value: Any) -> Any:
    try:
        return dict(validate(value))
    except ValidationError as exc:
        return sorted((e["type"], e["loc"]) for e in exc.errors())


@settings(max_examples=400, deadline=None)
@given(value=st.one_of(reports, st.integers(), st.text(max_size=4)))
def test_dict_parser_matches_the_documented_model(value: Any) -> None:
    model = _outcome(lambda v: Report.model_validate(v).model_dump(exclude_unset=True), value)
    fast = _outcome(REPORT_PARSER.validate_python, value)
    if isinstance(model, list) and model == [("model_type", ())]:
        assert fast == [("dict_type", ())]
    else:
        assert fast == model


@st.composite
def grouped_rows(draw: Any) -> tuple[list[str], Any, Any]:
    """Rows of a metric in a few periods, a 0/1 support matrix and a row mask."""
    n = draw(st.integers(0, 40))
    k = draw(st.integers(1, 6))
    periods = draw(
        st.lists(
            st.sampled_from(["2026-11-01", "2026-11-02", "2026-10-30"]), min_size=n, max_size=n
        )
    )
    bits = draw(st.lists(st.booleans(), min_size=n * k, max_size=n * k))
    mask = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return periods, np.array(bits, dtype=bool).reshape(n, k), np.array(mask, dtype=bool)


@settings(max_examples=300, deadline=None)
@given(case=grouped_rows())
def test_period_sums_match_a_loop_over_periods(case: tuple[list[str], Any, Any]) -> None:
    """``MetricRows.counts`` (sorted runs summed by reduceat) equals summing period by period."""
    periods, support, mask = case
    index: dict[str, int] = {}
    codes = np.array([index.setdefault(p, len(index)) for p in periods], dtype=np.int64)
    rows = MetricRows(np.arange(len(periods)), list(index), codes, support)
    for selected in (None, mask):
        chosen = np.ones(len(periods), dtype=bool) if selected is None else selected
        expected = {}
        for period in sorted(set(np.array(periods, dtype=object)[chosen].tolist())):
            where = chosen & (np.array(periods, dtype=object) == period)
            expected[("m", period)] = (int(where.sum()), support[where].sum(axis=0).tolist())
        got = {key: (n, sums.tolist()) for key, (n, sums) in rows.counts("m", selected).items()}
        assert got == expected
        assert all(sums.dtype == np.int64 for _, sums in rows.counts("m", selected).values())


@settings(max_examples=300, deadline=None)
@given(case=grouped_rows(), data=st.data())
def test_numeric_sums_match_a_loop_over_periods(
    case: tuple[list[str], Any, Any], data: Any
) -> None:
    """``NumericRows.sums`` (one bincount per statistic) equals summing period by period."""
    periods, _, mask = case
    ys = data.draw(
        st.lists(st.floats(-5, 5), min_size=len(periods), max_size=len(periods)), label="ys"
    )
    index: dict[str, int] = {}
    codes = np.array([index.setdefault(p, len(index)) for p in periods], dtype=np.int64)
    rows = NumericRows(np.arange(len(periods)), list(index), codes, np.array(ys, dtype=float))
    for selected in (None, mask):
        chosen = [True] * len(periods) if selected is None else selected.tolist()
        got = rows.sums("m", selected)
        assert set(got) == {("m", p) for p, c in zip(periods, chosen, strict=True) if c}
        for (_, period), (n, total, squares) in got.items():
            picked = [y for y, p, c in zip(ys, periods, chosen, strict=True) if c and p == period]
            assert n == len(picked)
            assert total == pytest.approx(math.fsum(picked), rel=1e-12, abs=1e-12)
            assert squares == pytest.approx(math.fsum(y * y for y in picked), rel=1e-12, abs=1e-12)


@settings(max_examples=300, deadline=None)
@given(
    items=st.lists(
        st.one_of(reports, reports.map(lambda r: {**r, "dims": {"p": "ios"}})), max_size=4
    )
)
def test_a_decoded_body_validates_as_its_raw_json(items: list[Any]) -> None:
    """Ingestion validates what orjson decoded instead of parsing the body again
    (``routes.reports.parse_batch``): for every body orjson takes, the outcome is the
    schema's own ``validate_json`` of the raw body."""
    body = json.dumps({"reports": items}).encode()
    try:
        decoded = orjson.loads(body)
    except orjson.JSONDecodeError:
        assert any(
            isinstance(v, float) and not math.isfinite(v) for item in items for v in item.values()
        )
        return
    raw = _outcome(BATCH_PARSER.validate_json, body)
    fast = _outcome(BATCH_PARSER.validate_python, decoded)
    assert fast == raw


@settings(max_examples=200, deadline=None)
@given(case=grouped_rows(), data=st.data())
def test_cell_rows_group_by_period_and_cell(case: tuple[list[str], Any, Any], data: Any) -> None:
    """``cell_rows`` (one integer per (period, cell)) sums the same rows as grouping by the
    joined label, row by row."""
    periods, support, _ = case
    cells = data.draw(
        st.lists(
            st.sampled_from(["ios,1", "android,1", "web,2", "other,other"]),
            min_size=len(periods),
            max_size=len(periods),
        ),
        label="cells",
    )
    batch = [
        ValidReport(str(i), "m", p, "", c)
        for i, (p, c) in enumerate(zip(periods, cells, strict=True))
    ]
    index: dict[str, int] = {}
    codes = np.array([index.setdefault(p, len(index)) for p in periods], dtype=np.int64)
    grouped = cell_rows(batch, MetricRows(np.arange(len(periods)), list(index), codes, support))
    expected: dict[tuple[str, str], tuple[int, list[int]]] = {}
    for (period, cell), row in zip(
        zip(periods, cells, strict=True), support.astype(int), strict=True
    ):
        label = period + CELL_SEP + cell
        n, sums = expected.get(("m", label), (0, [0] * support.shape[1]))
        expected[("m", label)] = (n + 1, [a + b for a, b in zip(sums, row.tolist(), strict=True)])
    got = {key: (n, sums.tolist()) for key, (n, sums) in grouped.counts("m").items()}  # type: ignore[union-attr]
    assert got == expected


_SOME_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=34)
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | _SOME_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_SOME_TEXT, inner, max_size=3),
    max_leaves=6,
)
_DIMS = st.one_of(
    st.dictionaries(
        st.sampled_from(["platform", "version", "p" * 33]),
        st.sampled_from(["ios", "android", "other", "tizen", "i" * 33]) | _JSON_VALUES,
        max_size=3,
    ),
    st.dictionaries(_SOME_TEXT, _SOME_TEXT, min_size=8, max_size=10),
    _JSON_VALUES,
)
_WITH_DIMS = MetricSpec.boolean(
    "with_dims", epsilon=1.0, dimensions={"platform": ["ios", "android"]}
)
_WITHOUT_DIMS = MetricSpec.boolean("without_dims", epsilon=1.0)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(dims=_DIMS, spec=st.sampled_from([_WITH_DIMS, _WITHOUT_DIMS]))
def test_ingestion_accepts_the_dims_the_documented_model_and_the_spec_accept(
    dims: Any, spec: MetricSpec
) -> None:
    """The parser passes ``dims`` through; validation must still accept a report exactly
    when the documented model accepts it and its spec takes its values, naming the dims."""
    today = dt.date.today()
    report = {**make_reports(spec, [1], spec.period_of(today), seed=1)[0], "dims": dims}
    try:
        Report.model_validate(report)
        spec.cell_of(dims)
        expected = True
    except (ValidationError, ValueError):
        expected = False
    lookup = {spec.name: spec}.get
    body = json.dumps({"reports": [report]}).encode()
    parsed, problems = parse_batch(body, 10, lookup)
    valid, refused, _ = validate_reports(parsed, lookup, PeriodWindow(today, 30))
    assert bool(valid) == expected, (problems, refused)
    assert all("dims" in p.message for p in problems + refused)


_SOME_DIMS = (
    st.sampled_from(
        [{"platform": "ios"}, {"platform": "android"}, {"platform": "other"}, {"platform": "tizen"}]
    )
    | _DIMS
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(dims=st.lists(_SOME_DIMS, min_size=1, max_size=6), picks=st.data())
def test_a_batch_with_dims_validates_as_its_reports_one_by_one(dims: list[Any], picks: Any) -> None:
    """A batch of one metric with dimensions (its reports' dims repeating, as a device's
    context does) is judged whole when every report is valid: it keeps the reports and cells
    that validating each report alone keeps, and refuses the same ones otherwise."""
    today = dt.date.today()
    spec = _WITH_DIMS
    lookup = {spec.name: spec}.get
    items = make_reports(spec, [1] * len(dims), spec.period_of(today), seed=3)
    chosen = [picks.draw(st.sampled_from(dims)) for _ in items]
    batch = [{**item, "dims": value} for item, value in zip(items, chosen, strict=True)]
    window = PeriodWindow(today, 30)
    parsed, problems = parse_batch(json.dumps({"reports": batch}).encode(), 10, lookup)
    valid, refused, _ = validate_reports(parsed, lookup, window)
    alone = [
        validate_reports([(index, item)], lookup, window)[:2]
        for index, item in parse_batch(json.dumps({"reports": batch}).encode(), 10, lookup)[0]
    ]
    assert valid == [report for kept, _ in alone for report in kept]
    assert [p.index for p in refused] == [p.index for _, gone in alone for p in gone]
    if not problems and not refused:
        assert [report.cell for report in valid] == [spec.cell_of(d) for d in chosen]


@settings(max_examples=400, deadline=None)
@given(value=st.one_of(reports, reports.map(lambda r: {**r, "dims": {"p": "ios"}}), st.integers()))
def test_well_formed_reports_are_the_ones_the_parser_takes_unchanged(value: Any) -> None:
    """``parse_batch`` passes a report ``_well_formed`` accepts without the parser: the parser
    must take it and return it as it is, and it must not be too large to validate."""
    if _well_formed(value):
        assert REPORT_PARSER.validate_python(value) == value
        assert _oversized(value) is None


_OUE = MetricSpec.categorical("oue", list("abcdefgh"), epsilon=1.0, mechanism="oue")
_UUID = "0f8fad5b-d9cb-469f-a165-70867728950e"
_NEAR_MISSES: dict[str, list[Any]] = {
    "id": [_UUID.upper(), _UUID + "\n", _UUID[:-1], _UUID[:-1] + "g", _UUID.replace("-", "_"), 7],
    "metric": ["", "m" * 65, None, ["m"]],
    "fingerprint": ["", "f" * 65, 3.5, {"f": 1}],
    "period": ["", "2026-12-01" * 2, 20261201, None],
    "payload": ["A" * 4097, True, None, [1], {"b": 1} | {str(i): i for i in range(8)}],
    "dims": [{str(i): "ios" for i in range(9)}, "ios", None, {"platform": 1}],
}
"""Per field, values one step from what ``_well_formed`` takes (and some it takes)."""


@st.composite
def usual_batches(draw: Any) -> list[Any]:
    """A batch as a device sends it (every report of one shape, with or without dims),
    a few of its reports then changed: a field given another value, dropped or added."""
    spec = draw(st.sampled_from([_WITH_DIMS, _WITHOUT_DIMS, _OUE]))
    size = draw(st.integers(1, 6))
    items: list[Any] = make_reports(spec, [1] * size, spec.period_of(dt.date.today()), seed=1)
    if spec.dimensions:
        items = [{**item, "dims": {"platform": "ios"}} for item in items]
    for _ in range(draw(st.integers(0, 2))):
        where = draw(st.integers(0, size - 1))
        field = draw(st.sampled_from(["id", "metric", "fingerprint", "period", "payload", "dims"]))
        change = draw(st.sampled_from(["value", "value", "value", "drop", "extra", "item"]))
        item = dict(items[where]) if isinstance(items[where], dict) else {}
        if change == "value":
            near = st.sampled_from(_NEAR_MISSES[field])
            item[field] = draw(near | near | payloads if field == "payload" else near)
        elif change == "drop":
            item.pop(field, None)
        elif change == "extra":
            item["extra"] = 1
        else:
            item = draw(st.one_of(st.integers(), st.lists(st.integers(), max_size=2)))
        items[where] = item
    return items


def _one_changed(spec: MetricSpec, field: str, value: Any) -> list[Any]:
    """Three reports of ``spec`` (with dims if it has dimensions), the second's ``field``
    set to ``value``."""
    items: list[Any] = make_reports(spec, [1, 1, 1], spec.period_of(dt.date.today()), seed=2)
    if spec.dimensions:
        items = [{**item, "dims": {"platform": "ios"}} for item in items]
    items[1] = {**items[1], field: value}
    return items


@settings(max_examples=500, deadline=None, derandomize=True)
@given(items=usual_batches())
@example(items=_one_changed(_OUE, "payload", "A" * 4097))
@example(items=_one_changed(_WITH_DIMS, "dims", {str(i): "ios" for i in range(9)}))
def test_a_batch_judged_whole_is_well_formed_report_by_report(items: list[Any]) -> None:
    """``_all_well_formed`` (the batch checked column by column) takes a batch only if
    ``_well_formed`` takes every report of it, and takes the usual batch itself: a report it
    must refuse is never let through to the parser unchecked."""
    whole = _all_well_formed(items)
    if whole:
        assert all(map(_well_formed, items))
    shapes = {frozenset(item) if isinstance(item, dict) else None for item in items}
    dims = [item["dims"] for item in items if isinstance(item, dict) and "dims" in item]
    if len(shapes) == 1 and all(isinstance(d, dict) for d in dims):
        assert whole == all(map(_well_formed, items))


OUE_MECHANISMS = [make_mechanism("oue", k, eps) for k, eps in [(100, 1.0), (8, 1.0), (3, 4.0)]]


@pytest.mark.parametrize("mechanism", OUE_MECHANISMS, ids=repr)
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_bulk_oue_check_accepts_only_what_the_one_by_one_path_accepts(
    mechanism: Any, data: Any
) -> None:
    """``oue_canonical_plausible`` may only accept a payload that ``parse_payload`` returns
    unchanged and ``implausible`` lets through (anything else goes one by one)."""
    width = len(mechanism.randomize(0, FastRandomness(1)))
    same_length = st.text(alphabet=B64 + "-_ \n", min_size=width, max_size=width)
    randomized = st.integers(0, 2**31).map(
        lambda seed: mechanism.randomize(seed % mechanism.k, FastRandomness(seed))
    )
    raw = st.binary(min_size=mechanism.n_bytes, max_size=mechanism.n_bytes).map(
        lambda b: base64.b64encode(b).decode()
    )
    payloads_ = data.draw(st.lists(st.one_of(same_length, randomized, raw), min_size=1))
    for payload, good in zip(
        payloads_, oue_canonical_plausible(mechanism, payloads_).tolist(), strict=True
    ):
        if good:
            assert _parsed(mechanism, payload) == payload
            assert mechanism.implausible(payload) is None


@pytest.mark.parametrize("mechanism", OUE_MECHANISMS, ids=repr)
def test_bulk_oue_check_takes_the_randomized_payloads(mechanism: Any) -> None:
    source = FastRandomness(5)
    sent = [mechanism.randomize(source.randbelow(mechanism.k), source) for _ in range(300)]
    plausible = [p for p in sent if mechanism.implausible(p) is None]
    assert oue_canonical_plausible(mechanism, plausible).all()
    assert not oue_canonical_plausible(mechanism, ["AR==" if mechanism.k == 8 else "!"]).any()


_TEXT = MetricSpec.text("text_fast", max_length=4, epsilon=1.0)
_TEXT_DIMS = MetricSpec.text(
    "text_fast_dims", max_length=4, epsilon=1.0, dimensions={"platform": ["ios", "android"]}
)


def _text_payloads(sketch: Any) -> Any:
    """Text payloads: randomized ones (their keys in any order), ones with another vector of
    the right length (any bits, non-canonical padding bits, bad characters), bad levels and
    rows, and other shapes."""
    width = 4 * -(-sketch.n_bytes // 3)
    randomized = st.integers(0, 2**31).map(
        lambda seed: sketch.randomize(
            sketch.encode("ab"), 1 + seed % sketch.levels, FastRandomness(seed)
        )
    )
    vectors = st.one_of(
        st.binary(min_size=sketch.n_bytes, max_size=sketch.n_bytes).map(
            lambda b: base64.b64encode(b).decode()
        ),
        st.text(alphabet=B64 + "-_ \n", min_size=width, max_size=width),
        randomized.map(lambda p: p["b"][:-3] + "B==" if p["b"].endswith("==") else p["b"]),
    )
    built = st.fixed_dictionaries(
        {"b": vectors, "l": st.integers(0, sketch.levels + 1), "r": st.integers(-1, sketch.rows)}
    )
    reordered = randomized.map(lambda p: {"r": p["r"], "b": p["b"], "l": p["l"]})
    odd = st.one_of(
        randomized.map(lambda p: {**p, "l": True}),
        randomized.map(lambda p: {**p, "x": 1}),
        randomized.map(lambda p: p["b"]),
        st.none(),
    )
    return st.one_of(randomized, randomized, reordered, built, odd)


@pytest.mark.parametrize("spec", [_TEXT, _TEXT_DIMS], ids=lambda s: s.name)
@settings(max_examples=200, deadline=None, derandomize=True)
@given(data=st.data())
def test_bulk_text_check_judges_as_the_one_by_one_path(spec: MetricSpec, data: Any) -> None:
    """A batch of text payloads, judged a batch at a time, keeps exactly the ones that
    ``parse_payload`` and ``implausible`` accept, each stored as the text of its canonical form
    (a payload already canonical is kept as received), and refuses the others by index (the
    parser refuses some shapes first)."""
    sketch = spec.text_randomizer
    sent = data.draw(st.lists(_text_payloads(sketch), min_size=1, max_size=12))
    today = dt.date.today()
    template = {
        "metric": spec.name,
        "fingerprint": spec.fingerprint,
        "period": spec.period_of(today),
    }
    dims = {"dims": {"platform": "ios"}} if spec.dimensions else {}
    reports = [
        {**template, "id": f"{i:08d}-0000-4000-8000-000000000000", "payload": p, **dims}
        for i, p in enumerate(sent)
    ]
    lookup = {spec.name: spec}.get
    parsed, problems = parse_batch(json.dumps({"reports": reports}).encode(), 20, lookup)
    valid, refused, _ = validate_reports(parsed, lookup, PeriodWindow(today, 30))
    expected_valid, expected_refused = [], []
    for i, payload in enumerate(sent):
        canonical = _parsed(sketch, payload)
        if canonical is ValueError or sketch.implausible(canonical) is not None:
            expected_refused.append(i)
        else:
            expected_valid.append(payload_text(canonical))
    assert [payload_text(r.payload) for r in valid] == expected_valid
    assert sorted(p.index for p in problems + refused) == expected_refused

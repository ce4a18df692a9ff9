"""Every request's work is bounded before it starts (issue 24, items 1-4).

A real collector (``deniable serve``, one worker, SQLite) in a child process, so its peak
memory can be read per request (``VmHWM`` of ``/proc/PID/status``, reset through
``/proc/PID/clear_refs``). Memory bounds are an order of magnitude below what the requests
took before the limits (1.2-1.8 GB for the 349,000-item upload, 1.7 GB for the long series),
and well above what they take now, so load cannot break them; the wait bounds only keep a
hang from blocking the suite.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from deniable.client import MetricSpec
from deniable.client.account import MAX_LIFETIME_EPSILON, DeviceSettings
from deniable.client.errors import InvalidInput
from deniable.client.ledger import lifetime_reports, within_lifetime
from deniable.collector.numbers import NumberRule
from testkit import (
    CollectorProcess,
    DatabaseFactory,
    RunningCollector,
    collector_settings,
    register_all,
)

Answer = TypeVar("Answer")

ANSWER_WAIT = 30.0
"""Seconds a request gets before the test fails (a hang bound, not a measurement)."""
PEAK_BOUND_MB = 300
"""The most memory above its resident size one bounded request may take (the unbounded ones
took 1,200 MB and more)."""

BIG = MetricSpec.categorical(
    "big_olh", [f"c{i:05d}" for i in range(10_000)], epsilon=1.0, mechanism="olh"
)
"""An olh metric with k = 10,000, the most categories a metric may have."""
FLAG = MetricSpec.boolean("bounded_flag", epsilon=1.0)
SMALL = MetricSpec.categorical("bounded_small", ["a", "b", "c"], epsilon=1.0)
SERIES_CELLS = 20_000
"""The test collector's ``max_series_cells`` (below the default, so the largest series allowed,
two periods of BIG, is quick to draw)."""
MARKER = "²"
"""A superscript digit: ``str.isdigit`` says yes, ``int`` says no."""


def open_collector(
    tmp_path_factory: pytest.TempPathFactory, specs: list[MetricSpec]
) -> Iterator[CollectorProcess]:
    """An open collector (no tokens, loopback) with ``specs`` registered."""
    directory = tmp_path_factory.mktemp("bounded")
    settings = collector_settings(
        f"sqlite:///{directory}/collector.db",
        admin_token=None,
        ingest_key=None,
        max_series_cells=SERIES_CELLS,
    )
    with CollectorProcess(settings, directory) as process:
        register_all(process.url, specs)
        yield process


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CollectorProcess]:
    """An open collector with BIG and FLAG registered."""
    yield from open_collector(tmp_path_factory, [BIG, FLAG])


@pytest.fixture(scope="module")
def small_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CollectorProcess]:
    """An open collector with small metrics only (FLAG and SMALL), for generated requests: the
    cost of BIG's pages is the subject of the tests above."""
    yield from open_collector(tmp_path_factory, [FLAG, SMALL])


@pytest.fixture
def client(server: CollectorProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=ANSWER_WAIT, trust_env=False) as http:
        yield http


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def peak_of(server: CollectorProcess, send: Callable[[], Answer]) -> tuple[Answer, float]:
    """What ``send`` returns and the collector's peak memory above its resident size before
    it, in MB."""
    clear = Path(f"/proc/{server.pid}/clear_refs")
    if not clear.exists():
        pytest.skip("needs Linux /proc/PID/clear_refs to reset the peak")
    clear.write_text("5")
    before = status_kb(server.pid, "VmRSS")
    answer = send()
    return answer, (status_kb(server.pid, "VmHWM") - before) / 1024


def peak_mb(
    server: CollectorProcess, request: httpx.Request, client: httpx.Client
) -> tuple[httpx.Response, float]:
    """The response to ``request`` and the collector's peak memory meanwhile (:func:`peak_of`)."""
    return peak_of(server, lambda: client.send(request))


def today() -> dt.date:
    return dt.datetime.now(dt.UTC).date()


def since(days: int) -> str:
    return (today() - dt.timedelta(days=days - 1)).isoformat()


# ---------------------------------------------------------------- item 1: the lifetime count


def test_the_lifetime_count_is_closed_form_and_exact_at_the_cap() -> None:
    count = lifetime_reports(MAX_LIFETIME_EPSILON, 1e-3)
    assert count == 10**9
    assert within_lifetime(count, 1e-3, MAX_LIFETIME_EPSILON)
    assert not within_lifetime(count + 1, 1e-3, MAX_LIFETIME_EPSILON)
    with pytest.raises(InvalidInput):
        lifetime_reports(1e300, 1.0)


def test_a_lifetime_cap_past_the_maximum_is_refused_everywhere(
    server: CollectorProcess, client: httpx.Client
) -> None:
    with pytest.raises(InvalidInput, match="at most"):
        DeviceSettings(lifetime_epsilon=MAX_LIFETIME_EPSILON * 10)
    for value in ("1e300", "1e23", "1e7", "inf", "nan"):
        response = client.get("/v1/privacy", params={"lifetime_epsilon": value})
        assert response.status_code == 422, (value, response.text)
        assert "lifetime_epsilon must be a number above 0 and at most 1,000,000" in response.text
        page = client.get("/dashboard/privacy", params={"lifetime_epsilon": value})
        assert page.status_code == 422 and "lifetime_epsilon must be" in page.text
    at_cap = client.get("/v1/privacy", params={"lifetime_epsilon": "1e6"})
    assert at_cap.status_code == 200
    row = next(m for m in at_cap.json()["metrics"] if m["metric"] == FLAG.name)
    assert row["lifetime"] == lifetime_reports(1e6, FLAG.epsilon) * FLAG.epsilon
    assert client.get("/healthz").status_code == 200


# ---------------------------------------------------------------- item 2: uploads


def test_an_upload_of_too_many_items_is_refused_before_validation(
    server: CollectorProcess, client: httpx.Client
) -> None:
    body = json.dumps({"reports": [{}] * 349_000}, separators=(",", ":")).encode()
    assert len(body) <= 1 << 20
    request = client.build_request(
        "POST", "/v1/reports", content=body, headers={"Content-Type": "application/json"}
    )
    response, peak = peak_mb(server, request, client)
    assert response.status_code == 413
    assert response.json()["detail"] == (
        "a batch holds at most 1000 reports (DENIABLE_MAX_BATCH); this one has 349,000"
    )
    assert peak < PEAK_BOUND_MB, peak


def test_oversized_reports_are_refused_by_index_without_validating_them(
    client: httpx.Client,
) -> None:
    reports = [
        {f"field{i}": 0 for i in range(1000)},
        {"payload": {str(i): "x" for i in range(5000)}},
        {"payload": "A" * 100_000},
        {},
    ]
    response = client.post("/v1/reports", json={"reports": reports})
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert [item["index"] for item in detail] == [0, 1, 2, 3]
    assert detail[0]["reason"] == "a report has five fields; this one has 1000"
    assert detail[1]["reason"] == "payload objects have at most 8 fields"
    assert detail[2]["reason"] == "payload strings have at most 4096 characters"
    assert "missing field 'id'" in detail[3]["reason"]


# ---------------------------------------------------------------- item 3: long reads


def test_a_series_past_the_cells_limit_is_refused_naming_it(
    server: CollectorProcess, client: httpx.Client
) -> None:
    fits = SERIES_CELLS // BIG.k
    request = client.build_request(
        "GET", f"/v1/metrics/{BIG.name}/series", params={"start": since(181)}
    )
    response, peak = peak_mb(server, request, client)
    assert response.status_code == 422
    assert response.json()["detail"] == (
        f"the series would cover 181 periods × 10,000 categories, more than the limit of"
        f" {SERIES_CELLS:,} cells (DENIABLE_MAX_SERIES_CELLS): ask for at most {fits}"
        f" periods of {BIG.name} (start, end)"
    )
    assert peak < PEAK_BOUND_MB, peak
    request = client.build_request(
        "GET", f"/v1/metrics/{BIG.name}/series", params={"start": since(fits)}
    )
    response, peak = peak_mb(server, request, client)
    assert response.status_code == 200 and len(response.json()["series"]) == fits
    assert peak < PEAK_BOUND_MB, peak


def test_a_long_estimate_is_refused_naming_its_limit(client: httpx.Client) -> None:
    response = client.get(f"/v1/metrics/{BIG.name}/estimate", params={"start": since(1100)})
    assert response.status_code == 422
    assert "DENIABLE_MAX_ESTIMATE_CELLS" in response.json()["detail"]
    assert (
        client.get(f"/v1/metrics/{FLAG.name}/estimate", params={"start": since(1100)}).status_code
        == 200
    )


def test_the_dashboard_metric_page_is_bounded(
    server: CollectorProcess, client: httpx.Client
) -> None:
    long = client.get(f"/dashboard/metrics/{BIG.name}", params={"start": since(1100)})
    assert long.status_code == 422 and "DENIABLE_MAX_SERIES_CELLS" in long.text
    request = client.build_request("GET", f"/dashboard/metrics/{BIG.name}")
    page, peak = peak_mb(server, request, client)
    assert page.status_code == 200
    assert f"{since(SERIES_CELLS // BIG.k)} to {today().isoformat()}" in page.text
    assert peak < PEAK_BOUND_MB, peak


def test_the_overview_is_paginated(server: CollectorProcess, client: httpx.Client) -> None:
    register_all(server.url, [MetricSpec.boolean(f"page_{i:02d}", epsilon=1.0) for i in range(30)])
    first = client.get("/dashboard/")
    assert first.status_code == 200
    rows = first.text.count("<tr data-metric=")
    assert "32 metrics" in first.text
    # The big metric's trend fills a page's cells budget on its own.
    assert 1 <= rows <= 25
    seen = rows
    number = 1
    while 'rel="next"' in client.get("/dashboard/", params={"page": number}).text:
        number += 1
        seen += client.get("/dashboard/", params={"page": number}).text.count("<tr data-metric=")
    assert seen == 32
    for bad in (str(number + 1), "0", MARKER, "1.5", "-1"):
        response = client.get("/dashboard/", params={"page": bad})
        assert response.status_code == 422, bad
        assert f"page must be a whole number from 1 to {number}" in response.text


# ---------------------------------------------------------------- item 4: numbers from outside


def test_the_number_parser_takes_ascii_only() -> None:
    rule = NumberRule("top", 1, 20, whole=True)
    assert rule.parse(" 7 ") == 7
    for text in (MARKER, "٣", "１", "1_0", "+3", "3.0", "", "99", "0", "1" * 40):
        with pytest.raises(InvalidInput, match="top must be a whole number from 1 to 20"):
            rule.parse(text)
    share = NumberRule("confidence", 0, 1, open_low=True, open_high=True)
    assert share.parse("0.95") == 0.95 and share.parse(".5") == 0.5
    for text in ("1", "0", "nan", "inf", "0x1p-1", "٠.5", "1e-400"):
        with pytest.raises(InvalidInput, match="confidence must be a number above 0 and below 1"):
            share.parse(text)


@pytest.mark.parametrize(
    ("path", "name"),
    [
        (f"/dashboard/metrics/{FLAG.name}", "top"),
        ("/dashboard/privacy", "max_reports_per_period"),
        ("/dashboard/plan", "k"),
        ("/v1/privacy", "max_reports_per_period"),
        (f"/v1/metrics/{FLAG.name}/estimate", "confidence"),
        (f"/v1/admin/metrics/{FLAG.name}/reports", "limit"),
    ],
)
def test_unicode_digits_are_a_422_naming_the_parameter_and_never_logged(
    server: CollectorProcess, client: httpx.Client, path: str, name: str
) -> None:
    response = client.get(path, params={name: f"1{MARKER}"})
    assert response.status_code == 422, response.text
    assert name in response.text
    assert MARKER not in server.log_path.read_text(encoding="utf-8", errors="replace")


# ---------------------------------------------------------------- property tests: no 5xx, bounded

PROPERTY_SETTINGS = settings(
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)


def checked(server: CollectorProcess, send: Callable[[], Any]) -> int:
    """Send a request: no 5xx, and the collector's memory peak within the bound; its status."""
    response, peak = peak_of(server, send)
    assert response.status_code < 500, (response.url, response.status_code, response.text[:300])
    assert peak < PEAK_BOUND_MB, (response.url, peak)
    return int(response.status_code)


def dashboard_document(names: list[str]) -> dict[str, Any]:
    """An OpenAPI document of the dashboard's GET routes (they are left out of the API's): each
    query parameter any text, the metric one of ``names``."""

    def query(name: str) -> dict[str, Any]:
        return {"name": name, "in": "query", "required": False, "schema": {"type": "string"}}

    metric = {"name": "name", "in": "path", "required": True, "schema": {"enum": names}}
    page = [metric, *map(query, ("start", "end", "method", "pooling", "top"))]

    def get(parameters: list[dict[str, Any]]) -> dict[str, Any]:
        return {"get": {"parameters": parameters, "responses": {"200": {"description": "page"}}}}

    paths = {
        "/dashboard/": get([query("page")]),
        "/dashboard/metrics/{name}": get(page),
        "/dashboard/metrics/{name}/estimate.csv": get(page),
        "/dashboard/metrics/{name}/series.csv": get(page),
        "/dashboard/plan": get([query(n) for n in ("k", "epsilon", "margin", "confidence")]),
        "/dashboard/privacy": get(
            [query(n) for n in ("max_reports_per_period", "memoize", "lifetime_epsilon")]
        ),
    }
    return {"openapi": "3.0.3", "info": {"title": "dashboard", "version": "1"}, "paths": paths}


def run_schema(server: CollectorProcess, api: Any, examples: int) -> int:
    """Schemathesis cases of every operation of ``api`` in both generation modes, each sent
    through :func:`checked`; how many requests were sent."""
    sent = [0]
    for result in api.get_all_operations():
        operation = result.ok()
        for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):

            @settings(PROPERTY_SETTINGS, max_examples=examples)
            @given(case=operation.as_strategy(generation_mode=mode))
            def run(case: Any) -> None:
                checked(server, lambda: case.call(base_url=server.url, timeout=ANSWER_WAIT))
                sent[0] += 1

            try:
                run()
            except Unsatisfiable:
                if mode != schemathesis.GenerationMode.NEGATIVE:
                    raise
    return sent[0]


def test_schemathesis_over_the_api_and_the_dashboard_finds_no_5xx(
    small_server: CollectorProcess,
) -> None:
    server = small_server
    api = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    dashboard = schemathesis.openapi.from_dict(dashboard_document([SMALL.name, FLAG.name]))
    sent = run_schema(server, api, 2) + run_schema(server, dashboard, 6)
    print(f"schemathesis: {sent} generated requests, none answered 5xx")
    assert sent >= 100
    log = server.log_path.read_text(encoding="utf-8", errors="replace")
    assert "Traceback" not in log and "internal error" not in log


NUMBER_TARGETS = [
    ("/v1/privacy", "max_reports_per_period"),
    ("/v1/privacy", "lifetime_epsilon"),
    (f"/v1/metrics/{FLAG.name}/estimate", "confidence"),
    (f"/v1/metrics/{FLAG.name}/estimate", "q"),
    (f"/v1/metrics/{FLAG.name}/series", "confidence"),
    (f"/v1/admin/metrics/{FLAG.name}/reports", "limit"),
    ("/dashboard/", "page"),
    (f"/dashboard/metrics/{FLAG.name}", "top"),
    ("/dashboard/plan", "k"),
    ("/dashboard/plan", "epsilon"),
    ("/dashboard/plan", "margin"),
    ("/dashboard/plan", "confidence"),
    ("/dashboard/privacy", "max_reports_per_period"),
    ("/dashboard/privacy", "lifetime_epsilon"),
]
"""Every route and parameter that takes a number from a query or a form."""

NUMBER_TEXTS = st.one_of(
    st.integers(-(10**30), 10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats(allow_nan=False).map(lambda x: f"{x:e}"),
    st.text(st.characters(categories=("Nd", "No", "Nl")), min_size=1, max_size=6),
    st.text(max_size=40),
    st.sampled_from(
        ["1e300", "-0", "0x10", "1_000", "²", "１０", "٣", " 5 ", "+1", "1e-400", "NaN", "1e6"]
    ),
)
"""Texts of numbers, near-numbers and anything else: Unicode digits, huge, tiny, signs."""


def test_any_number_text_is_a_200_or_a_422(small_server: CollectorProcess) -> None:
    server = small_server
    client = httpx.Client(base_url=server.url, timeout=ANSWER_WAIT, trust_env=False)
    sent = [0]

    @settings(PROPERTY_SETTINGS, max_examples=150)
    @given(target=st.sampled_from(NUMBER_TARGETS), text=NUMBER_TEXTS)
    def run(target: tuple[str, str], text: str) -> None:
        path, name = target
        status = checked(server, lambda: client.get(path, params={name: text}))
        assert status in (200, 422), (path, name, status)
        sent[0] += 1

    with client:
        run()
    print(f"hypothesis: {sent[0]} generated number requests, none answered 5xx")
    assert sent[0] == 150


# ---------------------------------------------------------------- no client value in a log line


def test_a_fault_is_logged_once_without_its_message(
    databases: DatabaseFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """A 500 is logged by the collector as types and frames; uvicorn never logs it again
    with the exception's message (which may quote a query value)."""
    marker = "client-value-4f2a"
    server = RunningCollector(collector_settings(databases.new("sqlite"))).start()

    def fault(value: str = "") -> None:
        raise ValueError(f"cannot read {value}")

    server.app.add_api_route("/fault", fault)
    uvicorn_errors = logging.getLogger("uvicorn.error")
    uvicorn_errors.addHandler(caplog.handler)
    caplog.set_level(logging.DEBUG)
    try:
        with httpx.Client(base_url=server.url, timeout=ANSWER_WAIT, trust_env=False) as client:
            response = client.get("/fault", params={"value": marker})
    finally:
        uvicorn_errors.removeHandler(caplog.handler)
        server.stop()
    assert response.status_code == 500
    assert response.json() == {"detail": "internal server error"}
    server_side = ("deniable", "uvicorn")
    logged = "\n".join(
        logging.Formatter().format(record)
        for record in caplog.records
        if record.name.startswith(server_side)
    )
    assert "internal error on GET /fault" in logged and "builtins.ValueError" in logged
    assert marker not in logged
    assert "Exception in ASGI application" not in logged


def test_a_bad_request_line_is_not_logged(server: CollectorProcess) -> None:
    marker = "bad-line-7c1e"
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=ANSWER_WAIT) as sock:
        sock.sendall(f"GET /\x00{marker} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert sock.recv(65536).startswith(b"HTTP/1.1 400")
    assert marker not in server.log_path.read_text(encoding="utf-8", errors="replace")

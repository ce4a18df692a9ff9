"""A small but real collector-shaped HTTP server for the client tests, with fault injection,
and canned answers for tests that drive the client through ``httpx.MockTransport`` instead.
(The real collector for end-to-end runs is ``testkit.real_collector``.)

It serves ``GET /v1/metrics`` and ``POST /v1/reports`` (validating each report against the
specs with the shared mechanisms, de-duplicating by id) on loopback, and can answer 503
or 429 a given number of times, drop acknowledgements after committing, answer 503 after
a number of commits, answer 413 above a body size or report count, answer any status the
test sets (as the collector's JSON problem document, or as a proxy's HTML page), hold each
upload until the test releases it, serve specs of the test's choosing, or be down.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from deniable.client import Client, MetricSpec
from deniable.client.spec import period_start

from .ports import listen_port

HOLD_SECONDS = 60.0
"""The longest a held upload waits for the test to release it."""
PROXY_PAGE = (
    "<html><head><title>{status} {phrase}</title></head><body><center><h1>{status} {phrase}"
    "</h1></center>{note}<hr><center>nginx</center></body></html>"
)
"""The page a proxy answers with (nginx's shape)."""
PROXY_NOTES = {400: "<center>The plain HTTP request was sent to HTTPS port</center>"}


def proxy_page(status: int) -> bytes:
    """The HTML page a proxy in front of the collector answers ``status`` with."""
    phrase, note = HTTPStatus(status).phrase, PROXY_NOTES.get(status, "")
    return PROXY_PAGE.format(status=status, phrase=phrase, note=note).encode()


def proxy_answer(status: int) -> httpx.Response:
    """A proxy's HTML answer, for an ``httpx.MockTransport`` handler."""
    return httpx.Response(status, content=proxy_page(status), headers={"Content-Type": "text/html"})


def problem_answer(
    status: int, detail: Any, headers: dict[str, str] | None = None
) -> httpx.Response:
    """The collector's JSON problem document, for an ``httpx.MockTransport`` handler."""
    return httpx.Response(status, json={"detail": detail}, headers=headers)


def reports_in(request: httpx.Request) -> list[dict[str, Any]]:
    """The reports an upload request carries."""
    reports: list[dict[str, Any]] = json.loads(request.content)["reports"]
    return reports


def serving_specs(
    specs: Sequence[MetricSpec], uploads: Callable[[httpx.Request], httpx.Response]
) -> httpx.MockTransport:
    """A mock collector that serves ``specs`` on ``GET /v1/metrics`` (a client compares the
    specs passed in code with them) and answers everything else with ``uploads``."""

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and request.url.path == "/v1/metrics":
            return httpx.Response(200, json={"metrics": [s.to_dict() for s in specs]})
        return uploads(request)

    return httpx.MockTransport(answer)


def accept_answer(request: httpx.Request) -> httpx.Response:
    """The collector's answer to an upload it takes whole, none of it seen before."""
    return httpx.Response(202, json={"accepted": len(reports_in(request)), "duplicates": 0})


class StubCollector:
    """A restartable loopback collector; its attributes record everything it received."""

    def __init__(
        self,
        metrics: Sequence[MetricSpec] = (),
        *,
        port: int = 0,
        ingest_key: str | None = None,
        served_metrics: list[dict[str, Any]] | None = None,
        max_body_bytes: int | None = None,
        max_batch_reports: int = 1000,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.specs = {s.name: s for s in metrics}
        self.served_metrics = served_metrics
        self.tls = tls
        self.ingest_key = ingest_key
        self.port = port
        self.max_body_bytes = max_body_bytes
        self.max_batch_reports = max_batch_reports
        self.fail_503 = 0
        self.fail_429 = 0
        self.retry_after = "1"
        self.drop_ack = 0
        self.down_after: int | None = None
        self.reject_all = False
        self.answer_status: int | None = None
        """Answer every POST with this status (a proxy's 403, a 405...) when set."""
        self.proxy_status: int | None = None
        """Answer every POST with this status and an HTML page, as a proxy in front of the
        collector would (nginx's 400 "plain HTTP request sent to HTTPS port"), when set."""
        self.hold: threading.Event | None = None
        """When set, each POST waits (up to ``HOLD_SECONDS``) for this event before it is
        handled; ``held`` counts the POSTs that arrived to wait."""
        self.held = 0
        self.refuse_periods: set[str] = set()
        self.commits = 0
        self.stored: dict[str, dict[str, Any]] = {}
        self.deliveries: Counter[str] = Counter()
        self.bodies: list[bytes] = []
        self.batch_sizes: list[int] = []
        self.post_times: list[float] = []
        self.statuses: list[int] = []
        """The status of each answer to an upload (``GET /v1/metrics`` counts in
        ``metric_fetches``)."""
        self.metric_fetches = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL clients use."""
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def start(self) -> StubCollector:
        """Listen (again) on the same port."""
        stub = self

        class Handler(_Handler):
            collector = stub

        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port or listen_port()), Handler)
        self._server.daemon_threads = True
        if self.tls is not None:
            self._server.socket = self.tls.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening: the collector is down until :meth:`start`."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def wait_for(self, n: int, timeout: float = 10.0) -> bool:
        """Wait until ``n`` distinct reports are stored."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.stored) >= n:
                return True
            time.sleep(0.02)
        return len(self.stored) >= n

    def _check(self, report: Any) -> str | None:
        if not isinstance(report, dict):
            return "a report must be an object"
        try:
            if str(uuid.UUID(report["id"])) != report["id"]:
                return "id is not a canonical uuid"
            spec = self.specs[report["metric"]]
            if report["fingerprint"] != spec.fingerprint:
                return "fingerprint does not match"
            period_start(spec.period, report["period"])
            if report["period"] in self.refuse_periods:
                return "period is outside the retention window"
            if spec.type == "text":
                spec.text_randomizer.parse_payload(report["payload"])
            else:
                oracle = spec.numeric_randomizer if spec.type == "numeric" else spec.randomizer
                oracle.parse_payload(report["payload"])
        except (KeyError, TypeError, ValueError) as exc:
            return f"bad report: {type(exc).__name__}"
        return None

    def handle_reports(self, body: bytes) -> tuple[int, dict[str, Any], dict[str, str], bool]:
        """Status, answer, headers, and whether to drop the connection instead of answering."""
        with self._lock:
            self.bodies.append(body)
            self.post_times.append(time.monotonic())
            if self.answer_status is not None:
                return self.answer_status, {"detail": "set by the test"}, {}, False
            if self.fail_503 or (self.down_after is not None and self.commits >= self.down_after):
                self.fail_503 = max(0, self.fail_503 - 1)
                return 503, {"detail": "unavailable"}, {}, False
            if self.fail_429:
                self.fail_429 -= 1
                return 429, {"detail": "slow down"}, {"Retry-After": self.retry_after}, False
            if self.max_body_bytes is not None and len(body) > self.max_body_bytes:
                return 413, {"detail": f"body over {self.max_body_bytes} bytes"}, {}, False
            try:
                reports = json.loads(body)["reports"]
            except (ValueError, KeyError, TypeError):
                return 422, {"detail": "body must be {reports: [...]}"}, {}, False
            if self.reject_all:
                return 422, {"detail": "refused by the test"}, {}, False
            if not isinstance(reports, list) or len(reports) > self.max_batch_reports:
                return 413, {"detail": f"at most {self.max_batch_reports} reports"}, {}, False
            problems = [
                {"index": i, "reason": reason}
                for i, report in enumerate(reports)
                if (reason := self._check(report))
            ]
            if problems:
                return 422, {"detail": problems}, {}, False
            self.batch_sizes.append(len(reports))
            duplicates = 0
            for report in reports:
                self.deliveries[report["id"]] += 1
                if report["id"] in self.stored:
                    duplicates += 1
                else:
                    self.stored[report["id"]] = report
            self.commits += 1
            answer = {"accepted": len(reports) - duplicates, "duplicates": duplicates}
            if self.drop_ack:
                self.drop_ack -= 1
                return 202, answer, {}, True
            return 202, answer, {}, False

    def metrics_answer(self) -> dict[str, Any]:
        """The body of ``GET /v1/metrics``."""
        self.metric_fetches += 1
        if self.served_metrics is not None:
            return {"metrics": self.served_metrics}
        return {"metrics": [s.to_dict() for s in self.specs.values()]}


class _Handler(BaseHTTPRequestHandler):
    collector: StubCollector
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the tests read the collector's attributes instead."""

    def _answer(
        self, status: int, body: dict[str, Any], headers: dict[str, str], upload: bool = True
    ) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        if upload:
            self.collector.statuses.append(status)

    def do_GET(self) -> None:
        if self.path == "/v1/metrics":
            self._answer(200, self.collector.metrics_answer(), {}, upload=False)
        else:
            self._answer(404, {"detail": "not found"}, {}, upload=False)

    def _answer_html(self, status: int) -> None:
        """Answer as a proxy would: an HTML page, no JSON."""
        data = proxy_page(status)
        self.collector.statuses.append(status)  # noted first: a client never counts it sooner
        self.send_response(status)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.collector.proxy_status is not None:
            self.collector.bodies.append(body)
            self._answer_html(self.collector.proxy_status)
            return
        gate = self.collector.hold
        if gate is not None:
            self.collector.held += 1
            gate.wait(HOLD_SECONDS)
        key = self.collector.ingest_key
        if key and self.headers.get("Authorization") != f"Bearer {key}":
            self._answer(401, {"detail": "missing or wrong ingest key"}, {})
            return
        if self.path != "/v1/reports":
            self._answer(404, {"detail": "not found"}, {})
            return
        status, answer, headers, drop = self.collector.handle_reports(body)
        if drop:
            self.close_connection = True
            return
        self._answer(status, answer, headers)


@contextmanager
def running(metrics: Sequence[MetricSpec] = (), **kwargs: Any) -> Iterator[StubCollector]:
    """A started stub collector, stopped afterwards."""
    stub = StubCollector(metrics, **kwargs).start()
    try:
        yield stub
    finally:
        stub.stop()


def eventually(condition: Callable[[], bool], timeout: float = 20.0) -> bool:
    """Poll ``condition`` until it holds or ``timeout`` seconds pass (a generous bound)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def fast_client(url: str | list[str], state_dir: Path, **kwargs: Any) -> Client:
    """A Client tuned for tests: short backoff, no timed flush, frequent persistence."""
    options: dict[str, Any] = {
        "backoff_base": 0.02,
        "backoff_cap": 0.2,
        "flush_interval": 60.0,
        "persist_interval": 0.1,
        "timeout": 2.0,
    }
    options.update(kwargs)
    return Client(url, state_dir=state_dir, **options)

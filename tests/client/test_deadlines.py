"""SDK timeouts are deadlines, and answers are capped in size (issue 24, item 6).

A real loopback server answers one byte a second, which never trips a per-read timeout: a
client's ``timeout`` and ``flush(timeout)`` must still bound the whole exchange. A spec answer
without end (or declaring 400 MB) is cut at the cap, and the client goes on with the specs it
cached. Times are taken on the monotonic clock and only bounded above, with t = 2 s and one
second to spare, so a loaded machine does not fail them.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest

from deniable.client import MetricSpec
from deniable.client.problems import Problems
from deniable.client.specsource import SpecSource
from deniable.client.stats import Counters
from deniable.client.transport import MAX_SPECS_BYTES, Transport
from testkit.folders import files_in
from testkit.hostile_server import (
    Script,
    endless,
    head,
    hostile,
    json_answer,
    trickled,
    whole,
)
from testkit.stub_collector import eventually, fast_client, running

SPECS = [MetricSpec.boolean("dark_mode", epsilon=0.5)]
T = 2.0
"""The timeout the tests give; each call must return within T + 1 s."""
SPEC_LIST = json_answer(200, {"metrics": [s.to_dict() for s in SPECS]})
ACK = json_answer(202, {"accepted": 1, "duplicates": 0})


def _trickle(answer: bytes, phase: str) -> Script:
    """``answer`` sent a byte a second, from its first byte or from its body's."""
    at_once = 0 if phase == "headers" else answer.index(b"\r\n\r\n") + 4
    return trickled(answer, at_once=at_once)


@pytest.mark.parametrize("phase", ["headers", "body"])
def test_a_client_fetching_specs_at_start_returns_within_its_timeout(
    tmp_path: Path, phase: str
) -> None:
    with hostile({"/v1/metrics": _trickle(SPEC_LIST, phase)}) as server:
        started = time.monotonic()
        client = fast_client(server.url, tmp_path, timeout=T)
        elapsed = time.monotonic() - started
        try:
            assert elapsed < T + 1, f"Client(timeout={T}) took {elapsed:.1f} s"
            assert client.metrics == {}
            assert server.requests == ["/v1/metrics"]
            assert any("no complete answer within" in p for p in client.problems())
            assert client.record("dark_mode", True), "held until specs arrive"
        finally:
            client.close(timeout=0.1)


@pytest.mark.parametrize("phase", ["headers", "body"])
def test_flush_against_a_trickling_collector_returns_within_its_timeout(
    tmp_path: Path, phase: str
) -> None:
    """The client's own ``timeout`` (30 s) is longer: flush's deadline binds the upload."""
    scripts = {"/v1/metrics": whole(SPEC_LIST), "/v1/reports": _trickle(ACK, phase)}
    with hostile(scripts) as server:
        client = fast_client(server.url, tmp_path, metrics=SPECS, timeout=30.0)
        try:
            assert client.record("dark_mode", True)
            started = time.monotonic()
            delivered = client.flush(timeout=T)
            elapsed = time.monotonic() - started
            assert elapsed < T + 1, f"flush(timeout={T}) took {elapsed:.1f} s"
            assert delivered is False
            assert "/v1/reports" in server.requests
            stats = client.stats
            assert (stats.queued, stats.delivered, stats.dropped_rejected) == (1, 0, 0)
        finally:
            client.close(timeout=0.1)


def test_an_upload_attempt_in_the_background_is_bounded_by_the_clients_timeout(
    tmp_path: Path,
) -> None:
    """Each attempt of the upload thread ends at ``timeout``, so the next one goes out (and a
    trickling collector costs retries, never a stuck thread)."""
    scripts = {"/v1/metrics": whole(SPEC_LIST), "/v1/reports": _trickle(ACK, "headers")}
    with hostile(scripts) as server:
        client = fast_client(server.url, tmp_path, metrics=SPECS, timeout=1.0, flush_interval=0.1)
        try:
            assert client.record("dark_mode", True)
            deadline = time.monotonic() + 30
            while server.requests.count("/v1/reports") < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert server.requests.count("/v1/reports") >= 3, "attempts after the first went out"
            assert client.stats.retries >= 2
        finally:
            client.close(timeout=0.1)


@pytest.mark.parametrize("kind", ["endless", "declared"])
def test_a_spec_answer_over_the_cap_is_refused_and_the_cached_specs_stay(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    with running(SPECS) as stub:
        fast_client(stub.url, tmp_path).close()  # caches the specs in state_dir
    if kind == "endless":
        script = endless(head(200, {"Content-Type": "application/json", "Connection": "close"}))
    else:
        declared = {"Content-Type": "application/json", "Content-Length": str(400 * 2**20)}
        script = whole(head(200, declared) + b'{"metrics": [')
    with hostile({"/v1/metrics": script}) as server:
        client = fast_client(server.url, tmp_path, timeout=30.0)
        try:
            assert client.metrics == {s.name: s for s in SPECS}, "the cached specs"
            started = time.monotonic()
            with caplog.at_level(logging.WARNING, logger="deniable.client"):
                assert client.flush(timeout=20) is True  # nothing queued; fetches the specs
            assert time.monotonic() - started < 20, "cut at the cap, not at the deadline"
            assert server.requests == ["/v1/metrics"]
            refused = [  # this client's: another test's client left running may log too
                r.getMessage()
                for r in caplog.records
                if "metric specs" in r.getMessage() and server.url in r.getMessage()
            ]
            assert len(refused) == 1
            assert f"{MAX_SPECS_BYTES:,} bytes" in refused[0]
            assert client.metrics == {s.name: s for s in SPECS}
            assert client.record("dark_mode", True)
        finally:
            client.close(timeout=0.1)
    if kind == "endless":
        # every answer ended (the client hung up); the spec answer is the largest
        assert eventually(lambda: len(server.sent) == len(server.requests))
        assert MAX_SPECS_BYTES < max(server.sent) < MAX_SPECS_BYTES + 64 * 2**20


def test_close_during_a_spec_fetch_leaves_nothing_running_that_writes_or_complains(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The upload thread is fetching specs (its answer's last byte comes a second later) when
    the app closes the client: ``close`` returns within its timeout, and once that fetch is
    over nothing has written to ``state_dir`` after ``close`` returned, and nothing logged an
    error for what ``close`` itself interrupted."""
    with running(SPECS) as stub:
        fast_client(stub.url, tmp_path).close()  # caches the specs, so the client refreshes
    last_byte = trickled(SPEC_LIST, at_once=len(SPEC_LIST) - 1)
    with hostile({"/v1/metrics": last_byte}) as server:
        before = set(threading.enumerate())
        with caplog.at_level(logging.WARNING, logger="deniable.client"):
            client = fast_client(server.url, tmp_path, timeout=10.0, flush_interval=0.05)
            assert eventually(lambda: server.requests == ["/v1/metrics"])
            started = time.monotonic()
            client.close(timeout=0.1)
            assert time.monotonic() - started < 2.5, "close waits no longer than its bound"
            closed = files_in(tmp_path)
            started_here = [t for t in threading.enumerate() if t not in before]
            for thread in started_here:
                thread.join(timeout=20)
            assert not [t.name for t in started_here if t.is_alive()]
        assert files_in(tmp_path) == closed, "state_dir written after close returned"
        complaints = [r.getMessage() for r in caplog.records if server.url in r.getMessage()]
        assert not [m for m in complaints if "loop error" in m or "could not" in m], complaints


def test_a_spec_source_closed_while_its_fetch_runs_drops_what_that_fetch_brings(
    tmp_path: Path,
) -> None:
    """The fetch's answer arrives whole after :meth:`SpecSource.close` (the transport still
    open): nothing is adopted and the cached specs on disk are untouched."""
    with running(SPECS) as stub:
        fast_client(stub.url, tmp_path).close()
    cached = files_in(tmp_path)
    served = json_answer(200, {"metrics": [MetricSpec.boolean("beta", epsilon=1).to_dict()]})
    with hostile({"/v1/metrics": trickled(served, at_once=len(served) - 1)}) as server:
        transport = Transport([server.url], ingest_key=None, timeout=10.0)
        source = SpecSource(tmp_path, transport, Counters(), Problems(), max_epsilon=10.0)
        assert [s.name for s in source.start(None)] == ["dark_mode"], "the cached specs"
        found: list[object] = []
        fetch = threading.Thread(target=lambda: found.append(source.refresh_if_due(force=True)))
        fetch.start()
        assert eventually(lambda: server.requests == ["/v1/metrics"])
        source.close()
        fetch.join(timeout=20)
        assert eventually(lambda: server.sent == [len(served)]), "the answer came whole"
        transport.close()
    assert found == [None]
    assert files_in(tmp_path) == cached

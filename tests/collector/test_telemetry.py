"""Prometheus totals under ``deniable serve --workers 2``: every scrape sums all workers.

A real server (two spawned uvicorn workers, one SQLite file) ingests batches over fresh
connections until both workers have counted some; every later scrape, whichever worker
answers it, must show the totals. The metrics directory ``serve`` made is gone after
SIGTERM; an operator's ``PROMETHEUS_MULTIPROC_DIR`` is cleared of stale files and kept.
"""

from __future__ import annotations

import datetime as dt
import signal
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.mmap_dict import MmapedDict, mmap_key
from prometheus_client.parser import text_string_to_metric_families

from deniable.client import MetricSpec, period_label
from deniable.collector import Settings
from deniable.collector.serve import RefusedToServe, clear_metrics_directory
from deniable.collector.telemetry import MULTIPROCESS_DIRECTORY
from testkit import CollectorProcess, make_reports, register, unique_name

ADMIN = "telemetry-admin-token"
BATCH = 5
MOST_BATCHES = 200
"""Upload attempts before giving up on both workers taking requests."""

pytestmark = pytest.mark.timeout(180)


def _start(tmp_path: Path, extra_env: dict[str, str]) -> CollectorProcess:
    """``deniable serve --workers 2`` on a fresh SQLite file, ready to answer."""
    url = f"sqlite:///{tmp_path / 'deniable.db'}"
    settings = Settings(database_url=url, admin_token=ADMIN, prometheus_metric_labels=True)  # type: ignore[arg-type]
    return CollectorProcess(settings, tmp_path, workers=2, env=extra_env).start()


def _spec(url: str, name: str) -> MetricSpec:
    """Register a small categorical metric ``name`` on the server at ``url``."""
    spec = MetricSpec.categorical(name, ["a", "b", "c"], epsilon=1.0)
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}) as admin:
        return register(admin, spec)


def _post_batch(url: str, spec: MetricSpec, seed: int) -> int:
    """POST one batch on a new connection; the number of reports accepted."""
    period = period_label(spec.period, dt.datetime.now(dt.UTC))
    reports = make_reports(spec, [seed % spec.k] * BATCH, period, seed)
    response = httpx.post(f"{url}/v1/reports", json={"reports": reports}, timeout=60)
    assert response.status_code == 202, response.text
    return int(response.json()["accepted"])


def _post_until_both_workers_counted(
    url: str, spec: MetricSpec, directory: Path, least: int
) -> tuple[int, int]:
    """Upload at least ``least`` batches, and on until two pids have counted some of them.

    A worker's counter file appears at its start (its counters made at zero), so what shows
    that a worker took uploads is its file holding this metric's accepted total.
    Returns (reports accepted, POSTs made).
    """
    accepted = posts = 0
    while posts < least or _workers_counting(directory, spec.name) < 2:
        assert posts < MOST_BATCHES, "one worker took every upload"
        accepted += _post_batch(url, spec, posts)
        posts += 1
    return accepted, posts


def _accepted_key(metric: str) -> str:
    """The multiprocess file's key of ``metric``'s accepted-reports total."""
    return mmap_key(
        "deniable_reports_accepted",
        "deniable_reports_accepted_total",
        ("metric",),
        (metric,),
        "New reports stored",
    )


def _workers_counting(directory: Path, metric: str) -> int:
    """How many workers' counter files hold a positive accepted total for ``metric``."""
    key = _accepted_key(metric)
    counting = 0
    for path in directory.glob("counter_*.db"):
        values = MmapedDict.read_all_values_from_file(str(path))
        counting += any(found == key and value > 0 for found, value, *_ in values)
    return counting


def _files_appear(directory: Path, pattern: str, count: int) -> bool:
    """Whether ``count`` files matching ``pattern`` are in ``directory`` within 60 s (room for
    a loaded machine; it returns as soon as they are there).

    A worker counts an upload while answering it but times it after the response is
    sent, so its histogram file may appear a moment after its counter file.
    """
    deadline = time.monotonic() + 60
    while len(list(directory.glob(pattern))) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return len(list(directory.glob(pattern))) == count


def _scrape(url: str, metric: str) -> tuple[float, float]:
    """One /metrics scrape on a new connection: (accepted for ``metric``, report POSTs timed)."""
    response = httpx.get(f"{url}/metrics", timeout=60)
    assert response.status_code == 200
    accepted = timed = 0.0
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name == "deniable_reports_accepted_total":
                accepted += sample.value if sample.labels["metric"] == metric else 0
            elif sample.name == "deniable_request_duration_seconds_count":
                labels = sample.labels
                is_upload = labels["route"] == "/v1/reports" and labels["method"] == "POST"
                timed += sample.value if is_upload else 0
    return accepted, timed


def _assert_every_scrape_shows(url: str, metric: str, accepted: int, posts: int) -> None:
    """Ten scrapes, each answered by either worker, all show exactly the totals.

    The latency of a request is observed just after its response is sent, so the first
    scrape may wait a moment for the last observation to land.
    """
    deadline = time.monotonic() + 60
    while _scrape(url, metric) != (accepted, posts) and time.monotonic() < deadline:
        time.sleep(0.05)
    for _ in range(10):
        assert _scrape(url, metric) == (accepted, posts)


def test_every_scrape_of_two_workers_shows_the_totals_and_serve_removes_its_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(MULTIPROCESS_DIRECTORY, raising=False)
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    server = _start(tmp_path, {"TMPDIR": str(temporary)})
    try:
        [directory] = temporary.glob("deniable-metrics-*")
        assert directory.stat().st_mode & 0o777 == 0o700
        spec = _spec(server.url, unique_name("tele"))
        accepted, posts = _post_until_both_workers_counted(server.url, spec, directory, 12)
        assert accepted == posts * BATCH
        assert _files_appear(directory, "histogram_*.db", 2)
        _assert_every_scrape_shows(server.url, spec.name, accepted, posts)
        server.signal(signal.SIGTERM)
        assert server.shut_down_gracefully(), server.log_tail()
    finally:
        server.stop()
    assert list(temporary.iterdir()) == []


def _stale_counter(directory: Path, metric: str) -> None:
    """A counter file left by an earlier run: 1000 reports accepted for ``metric``."""
    stale = MmapedDict(str(directory / "counter_1.db"))
    stale.write_value(_accepted_key(metric), 1000.0, 0.0)
    stale.close()


def test_an_operators_directory_is_cleared_of_stale_counts_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "prometheus"
    directory.mkdir()
    (directory / "README").write_text("not prometheus_client's")
    metric = unique_name("tele")
    _stale_counter(directory, metric)
    monkeypatch.setenv(MULTIPROCESS_DIRECTORY, str(directory))
    server = _start(tmp_path, {})
    try:
        assert not (directory / "counter_1.db").exists()
        spec = _spec(server.url, metric)
        accepted, posts = _post_until_both_workers_counted(server.url, spec, directory, 4)
        _assert_every_scrape_shows(server.url, metric, accepted, posts)
    finally:
        server.stop()
    assert (directory / "README").exists()
    assert len(list(directory.glob("counter_*.db"))) == 2, "the operator's directory is kept"


def test_a_metrics_directory_that_is_a_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "not-a-directory"
    path.write_text("")
    with pytest.raises(RefusedToServe, match=MULTIPROCESS_DIRECTORY):
        clear_metrics_directory(path)

"""Starting the shuffler and the collector (issue 41): each prints its set-up (the sealing
keys, the shuffler token set or not but never the token, the minimum batch, the collector URL,
the store), and a shuffler whose token the collector keeps refusing reports not ok on
``/healthz`` and names ``DENIABLE_SHUFFLER_TOKEN`` in its log. Real processes on loopback."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import httpx

from deniable.client import Client, MetricSpec
from testkit import unique_name
from testkit.configuration import INGEST_KEY
from testkit.shuffler_process import SHUFFLER_TOKEN, SHUFFLER_UPLOAD_KEY, Pipeline

ROOT = Path(__file__).resolve().parents[2]
MIN_BATCH = 2
WRONG_TOKEN = "not-the-collectors-shuffler-token-5d2f"


def deliver(pipeline: Pipeline, spec: MetricSpec, directory: Path) -> None:
    """``MIN_BATCH`` devices each send one report of yesterday through the shuffler."""
    assert pipeline.shuffler is not None
    yesterday = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    for i in range(MIN_BATCH):
        with Client(
            pipeline.collector.url,
            shuffler=pipeline.shuffler.url,
            shuffler_key=SHUFFLER_UPLOAD_KEY,
            state_dir=directory / f"device-{i}",
            metrics=[spec],
            ingest_key=INGEST_KEY,
            clock=lambda: yesterday,
            timeout=5.0,
        ) as client:
            assert client.record(spec.name, True)
            assert client.flush(timeout=30.0), client.problems()


def healthz_after(url: str, status: int, seconds: float = 60.0) -> httpx.Response:
    """``/healthz``'s answer once it is ``status`` (or the last one after ``seconds``)."""
    deadline = time.monotonic() + seconds
    with httpx.Client(timeout=5.0, trust_env=False) as http:
        while True:
            answer = http.get(url + "/healthz")
            if answer.status_code == status or time.monotonic() > deadline:
                return answer
            time.sleep(0.2)


def test_both_print_their_set_up_and_a_refused_token_makes_the_shuffler_not_ok(
    tmp_path: Path,
) -> None:
    spec = MetricSpec.boolean(unique_name("startup"), epsilon=1.0)
    pipeline = Pipeline(
        f"sqlite:///{tmp_path}/collector.db",
        tmp_path,
        min_batch=MIN_BATCH,
        shuffler_settings={"DENIABLE_SHUFFLER_TOKEN": WRONG_TOKEN},
    ).start([spec])
    try:
        assert pipeline.shuffler is not None
        shuffler = pipeline.shuffler
        deliver(pipeline, spec, tmp_path)
        answer = healthz_after(shuffler.url, 503)
        shuffler_log = shuffler.log_tail(200)
        collector_log = pipeline.collector.log_tail(200)
    finally:
        pipeline.stop()
    assert answer.status_code == 503, (answer.text, shuffler_log)
    assert answer.json()["status"] == "not ok"
    assert "DENIABLE_SHUFFLER_TOKEN" in answer.json()["detail"]
    assert "the collector refused the shuffler's token (HTTP 401)" in shuffler_log
    assert "set DENIABLE_SHUFFLER_TOKEN" in shuffler_log
    # The shuffler's set-up: the collector, the store, the token set, the batch, the keys.
    assert f"deniable shuffler on {shuffler.url}" in shuffler_log
    assert f"collector     {pipeline.collector.url}" in shuffler_log
    assert f"store         {shuffler.store}" in shuffler_log
    assert (
        "token         set" in shuffler_log and f"min batch     {MIN_BATCH} devices" in shuffler_log
    )
    assert f"sealing keys: 1 from {pipeline.collector.url}/v1/keys (current " in shuffler_log
    # The collector's: its sealing keys, the shuffler's token set and the minimum batch.
    assert f"sealing keys  1 loaded from {pipeline.keys_file} (current " in collector_log
    assert f"shuffler      token set, min batch {MIN_BATCH} devices" in collector_log
    for log in (shuffler_log, collector_log):
        assert (
            WRONG_TOKEN not in log and SHUFFLER_TOKEN not in log and SHUFFLER_UPLOAD_KEY not in log
        )


def test_the_operations_guide_says_what_healthz_and_the_set_up_show() -> None:
    guide = " ".join((ROOT / "docs" / "operations.md").read_text().split())
    assert '`/healthz` answers 503 `{"status": "not ok"' in guide
    assert "At start, `deniable shuffle` prints its set-up" in guide


def test_a_collector_without_keys_or_token_says_so(tmp_path: Path) -> None:
    from testkit import CollectorProcess, collector_settings

    server = CollectorProcess(collector_settings(f"sqlite:///{tmp_path}/c.db"), tmp_path).start()
    try:
        log = server.log_tail(60)
    finally:
        server.stop()
    assert "sealing keys  none (DENIABLE_SEALING_KEYS_FILE unset" in log
    assert "shuffler      token none (DENIABLE_SHUFFLER_TOKEN unset" in log

"""How long the SDK's timeouts take against a server that answers a byte a second, and what a
spec answer without end (or declaring 400 MB) costs a device in memory (issue 24, item 6).

Each row is one call against a loopback server from ``testkit.hostile_server``: the
trickle starts at the status line (``headers``) or after the head (``body``). Times are on the
monotonic clock; memory is the growth of the process's peak RSS over the call.
Run: ``.venv/bin/python -m bench.sdk_deadlines [--timeout 2]``.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from deniable.client import Client, MetricSpec
from testkit.hostile_server import (
    Script,
    endless,
    head,
    hostile,
    json_answer,
    trickled,
    whole,
)
from testkit.stub_collector import running

SPECS = [MetricSpec.boolean("dark_mode", epsilon=0.5)]
SPEC_LIST = json_answer(200, {"metrics": [s.to_dict() for s in SPECS]})
ACK = json_answer(202, {"accepted": 1, "duplicates": 0})


def trickle(answer: bytes, phase: str) -> Script:
    """``answer`` a byte a second, from its status line or from its body."""
    return trickled(answer, at_once=0 if phase == "headers" else answer.index(b"\r\n\r\n") + 4)


def client(url: str, state_dir: Path, **options: object) -> Client:
    """A client that neither uploads on its own nor waits long to close."""
    return Client(url, state_dir=state_dir, flush_interval=60.0, **options)  # type: ignore[arg-type]


def start_seconds(t: float, phase: str, directory: Path) -> float:
    """Seconds ``Client(timeout=t)`` takes when its first spec fetch trickles."""
    with hostile({"/v1/metrics": trickle(SPEC_LIST, phase)}) as server:
        started = time.monotonic()
        made = client(server.url, directory / f"start-{phase}", timeout=t)
        elapsed = time.monotonic() - started
        made.close(timeout=0.1)
    return elapsed


def flush_seconds(t: float, phase: str, directory: Path) -> float:
    """Seconds ``flush(timeout=t)`` takes when the upload's answer trickles."""
    scripts = {"/v1/metrics": whole(SPEC_LIST), "/v1/reports": trickle(ACK, phase)}
    with hostile(scripts) as server:
        made = client(server.url, directory / f"flush-{phase}", metrics=SPECS, timeout=30.0)
        made.record("dark_mode", True)
        started = time.monotonic()
        made.flush(timeout=t)
        elapsed = time.monotonic() - started
        made.close(timeout=0.1)
    return elapsed


def peak_rss_growth(kind: str, directory: Path) -> tuple[float, float]:
    """Seconds a flush takes refreshing specs from an oversized answer, and the MiB the
    process's peak RSS grew meanwhile (the client keeps its cached specs)."""
    state_dir = directory / f"cap-{kind}"
    with running(SPECS) as stub:
        client(stub.url, state_dir).close()
    if kind == "endless":
        script = endless(head(200, {"Content-Type": "application/json", "Connection": "close"}))
    else:
        declared = {"Content-Type": "application/json", "Content-Length": str(400 * 2**20)}
        script = whole(head(200, declared))
    with hostile({"/v1/metrics": script}) as server:
        made = client(server.url, state_dir, timeout=60.0)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.monotonic()
        made.flush(timeout=60)
        elapsed = time.monotonic() - started
        grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
        assert made.metrics, "the cached specs stay"
        made.close(timeout=0.1)
    return elapsed, grown


def main() -> None:
    """Print one table row per measurement."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--timeout", type=float, default=2.0)
    t = parser.parse_args().timeout
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        print("| call | trickle | seconds |")
        print("|---|---|---|")
        for phase in ("headers", "body"):
            print(f"| Client(timeout={t:g}) | {phase} | {start_seconds(t, phase, directory):.2f} |")
        for phase in ("headers", "body"):
            seconds = flush_seconds(t, phase, directory)
            print(f"| flush(timeout={t:g}) | {phase} | {seconds:.2f} |")
        print()
        print("| spec answer | seconds | peak RSS growth (MiB) |")
        print("|---|---|---|")
        for kind in ("endless", "declared 400 MB"):
            seconds, grown = peak_rss_growth(kind.split()[0], directory)
            print(f"| {kind} | {seconds:.2f} | {grown:.1f} |")


if __name__ == "__main__":
    main()

"""Where a stored report's CPU goes, step by step, in one process (issue 42's floors).

    python -m bench.ingest_steps [--backend sqlite|postgresql] [--dimensions] [--text EPS]
                                 [--rounds 3]

``bench.ingest --versus`` measures the product over HTTP against the engine alone; this
times the steps between them on the same bodies (200 of 500 reports over 90 daily periods, an
oue k = 100 metric, or a 16-byte text metric with ``--text``), the interpreter tuned as the
collector tunes it: the request thread's ``parse_batch``, ``validate_reports`` and
``prepare_batch``, then ``store_batches`` in groups of four bodies on a fresh database (its
partitions made first), then folding every text report left pending. Each round prints the CPU
per report of each step (this process; on PostgreSQL also its backends' while storing and
folding), the collector's own code, so a reader sees what share of a report's cost is the
engine's statement and commit and what is Python around it.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gc
import tempfile
import time
from collections.abc import Callable
from typing import Any

from bench.ingest import (
    _make_partitions,
    backend_cpu,
    build_bodies,
    periods,
    text_specs,
    versus_spec,
)
from deniable.collector.app import tune_interpreter
from deniable.collector.routes.reports import parse_batch
from deniable.collector.storage import open_database
from deniable.collector.storage.migrator import migrate
from deniable.collector.storage.prepare import prepare_batch
from deniable.collector.storage.queries import register_spec
from deniable.collector.storage.textbacklog import fold_all
from deniable.collector.storage.transaction import store_batches
from deniable.collector.validation import PeriodWindow, validate_reports
from testkit import fresh_database

BODIES = 200
GROUP = 4
"""Bodies per committed group, about what the collector's writer groups under load."""


def timed(step: Callable[[], Any], reports: int, url: str | None = None) -> tuple[Any, float]:
    """``step()``'s result and its CPU per report in microseconds (this process, and the
    PostgreSQL backends of ``url`` if given), after a full collection."""
    gc.collect()
    started = time.process_time() + (backend_cpu(url) if url else 0.0)
    result = step()
    used = time.process_time() + (backend_cpu(url) if url else 0.0) - started
    return result, used / reports * 1e6


def one_round(args: argparse.Namespace) -> dict[str, float]:
    """Each step's CPU per report, once."""
    postgres = args.backend == "postgresql"
    spec = (
        text_specs(args.backend, args)[f"text eps {args.text:g}"]
        if args.text
        else versus_spec(args.backend, args)
    )
    today = dt.datetime.now(dt.UTC).date()
    bodies = build_bodies(spec, periods(today), BODIES + 1, seed=1)[1:]
    reports = BODIES * 500
    lookup = {spec.name: spec}.get
    window = PeriodWindow(today, 400)
    parsed, parse = timed(lambda: [parse_batch(b, 1000, lookup) for b in bodies], reports)
    valid, validate = timed(
        lambda: [validate_reports(p[0], lookup, window, direct=True) for p in parsed], reports
    )
    prepared, prepare = timed(
        lambda: [
            prepare_batch(v[0], v[2], today, dialect=args.backend, received_at=time.time())
            for v in valid
        ],
        reports,
    )
    with contextlib.ExitStack() as stack:
        folder = stack.enter_context(tempfile.TemporaryDirectory())
        url = (
            stack.enter_context(fresh_database("bench_steps"))
            if postgres
            else f"sqlite:///{folder}/steps.db"
        )
        migrate(url)
        database = open_database(url)
        stack.callback(database.dispose)
        register_spec(database, spec, dt.datetime.now(dt.UTC))
        _make_partitions(url)
        groups = [prepared[i : i + GROUP] for i in range(0, len(prepared), GROUP)]
        backends = url if postgres else None
        _, store = timed(lambda: [store_batches(database, g) for g in groups], reports, backends)
        _, fold = timed(lambda: fold_all(database), reports, backends)
    return {"parse": parse, "validate": validate, "prepare": prepare, "store": store, "fold": fold}


def main() -> None:
    """Parse options, run the rounds, print each."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--dimensions", action="store_true", help="2 dimensions (40 cells)")
    parser.add_argument(
        "--text", type=float, choices=[1.0, 4.0], default=0, help="a text metric at this eps"
    )
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    args.mechanism, args.epsilon = "oue", 1.0  # the oue metric's (the text metrics carry their own)
    tune_interpreter()
    what = f"text eps {args.text:g}" if args.text else "oue k=100"
    what += ", 2 dimensions" if args.dimensions else ""
    print(f"CPU per stored report (us), {args.backend}, {what}, {BODIES} bodies of 500")
    print(
        f"{'round':>5} {'parse':>6} {'valid.':>6} {'prep.':>6} {'store':>6} {'fold':>6} {'sum':>6}"
    )
    for round_ in range(args.rounds):
        steps = one_round(args)
        cells = " ".join(f"{value:>6.2f}" for value in steps.values())
        print(f"{round_ + 1:>5} {cells} {sum(steps.values()):>6.2f}")


if __name__ == "__main__":
    main()

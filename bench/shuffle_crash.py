"""The shuffler under crashes at scale: SDK devices record 100,000 reports (devices x periods x
metrics) that go sealed through ``deniable shuffle`` to ``deniable serve``, while both servers
are SIGKILLed at seeded random moments and started again; devices resend whatever was not
acknowledged. Prints, per backend: reports recorded, stored by the collector, still waiting at
the shuffler for a batch, lost (recorded - stored - waiting), doubled (period counts above
the stored reports, or a period with more reports than devices), batches and the smallest,
kills, and seconds.

Run: ``.venv/bin/python -m bench.shuffle_crash [--backend sqlite|postgresql|both]
[--devices 100] [--periods 50] [--metrics 20] [--min-batch 50] [--kills 10]``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from deniable.client import MetricSpec
from testkit import scratch_database, unique_name
from testkit.shuffle_run import run_devices
from testkit.shuffler_process import Pipeline


def run(backend: str, args: argparse.Namespace) -> list[str]:
    """One run on ``backend``; its table row."""
    specs = [
        MetricSpec.categorical(unique_name("crash"), ["a", "b", "c", "d"], epsilon=2.0)
        for _ in range(args.metrics)
    ]
    with (
        tempfile.TemporaryDirectory() as tmp,
        scratch_database(backend, Path(tmp), "shuffle_crash") as url,
    ):
        pipeline = Pipeline(url, Path(tmp), min_batch=args.min_batch).start(specs)
        try:
            result = run_devices(
                pipeline,
                specs,
                Path(tmp),
                devices=args.devices,
                periods=args.periods,
                seed=args.seed,
                kills=args.kills,
                kill_pause=(2.0, 8.0),
                period_pause=0.2,
                deadline=3600.0,
            )
        finally:
            pipeline.stop()
    lost = result.recorded - result.stored - result.waiting
    doubled = result.counted - result.stored + max(0, result.max_per_period - args.devices)
    return [
        backend,
        f"{result.recorded:,}",
        f"{result.stored:,}",
        f"{result.waiting:,}",
        str(lost),
        str(doubled),
        f"{len(result.batches):,}",
        str(min(result.batches, default=0)),
        f"{result.kills.count('shuffler')}+{result.kills.count('collector')}",
        f"{result.seconds:.0f}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--devices", type=int, default=100)
    parser.add_argument("--periods", type=int, default=50)
    parser.add_argument("--metrics", type=int, default=20)
    parser.add_argument("--min-batch", type=int, default=50)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--seed", type=int, default=29)
    args = parser.parse_args()
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    header = ["backend", "recorded", "stored", "waiting", "lost", "doubled", "batches",
              "smallest", "kills s+c", "seconds"]  # fmt: skip
    rows = [header] + [run(backend, args) for backend in backends]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        print("  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()

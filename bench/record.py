"""``record()`` for an oue k=32 metric: the Python client against the JS SDK, in one run.

Run: ``.venv/bin/python -m bench.record [--records 100000] [--rounds 3]`` after
``npm run build`` in sdk/js. Each round times the Python client's ``record()`` in this process
and then the JS SDK's ``client.record()`` in a ``node`` child on the same spec and value
(alternated, so both see the same load), counting each side's CPU time; it prints every pair,
the median ratio Python/JS of records per CPU second, and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from deniable.client import Client, MetricSpec

CATEGORIES = [f"c{i}" for i in range(32)]
SPEC = MetricSpec.categorical("o", CATEGORIES, epsilon=1.0, mechanism="oue")
VALUE = "c3"
DIST = Path(__file__).resolve().parent.parent / "sdk" / "js" / "dist" / "index.js"
JS = """
import { Client, MemoryStorage } from "%s";
const n = Number(process.argv[2]);
const spec = { name: "o", type: "categorical", categories: %s, epsilon: 1, mechanism: "oue" };
const client = new Client({ url: "http://127.0.0.1:9", metrics: [spec], storage: new MemoryStorage(),
  maxReportsPerPeriod: n + 2000, maxQueue: n + 2000, flushInterval: 0, refreshInterval: 0 });
for (let i = 0; i < 1000; i++) client.record("o", "%s");
const cpu = process.cpuUsage();
const start = process.hrtime.bigint();
for (let i = 0; i < n; i++) client.record("o", "%s");
const seconds = Number(process.hrtime.bigint() - start) / 1e9;
const used = process.cpuUsage(cpu);
console.log(JSON.stringify({ seconds, cpu: (used.user + used.system) / 1e6 }));
process.exit(0);
"""


def python_side(n: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of ``n`` Python ``record()`` calls after 1,000 warm-up."""
    with tempfile.TemporaryDirectory() as state_dir:
        client = Client(
            "http://127.0.0.1:9",
            state_dir=state_dir,
            metrics=[SPEC],
            max_queue=n + 2000,
            max_reports_per_period=n + 2000,
            backoff_base=3600,
        )
        record = client.record
        for _ in range(1000):
            record("o", VALUE)
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(n):
            record("o", VALUE)
        result = time.perf_counter() - wall, time.process_time() - cpu
        client.close(timeout=0.1)
    return result


def js_side(script: Path, n: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of ``n`` JS ``client.record()`` calls, measured in node."""
    out = subprocess.run(
        ["node", str(script), str(n)], check=True, capture_output=True, text=True
    ).stdout
    figures = json.loads(out.strip().splitlines()[-1])
    return figures["seconds"], figures["cpu"]


def main() -> None:
    """Alternate the two sides and print every pair, the median ratio and the load."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not DIST.exists():
        raise SystemExit(f"{DIST} is missing: run npm run build in sdk/js first")
    n = args.records
    print(f"load average before: {os.getloadavg()}")
    print(
        "| round | Python records/CPU s | JS records/CPU s | ratio Python/JS | Python wall/s | JS wall/s |"
    )
    print("|---|---|---|---|---|---|")
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "record.mjs"
        names = json.dumps(CATEGORIES)
        script.write_text(JS % (DIST.as_uri(), names, VALUE, VALUE), encoding="utf-8")
        for index in range(args.rounds):
            py_wall, py_cpu = python_side(n)
            js_wall, js_cpu = js_side(script, n)
            ratio = (n / py_cpu) / (n / js_cpu)
            ratios.append(ratio)
            print(
                f"| {index + 1} | {n / py_cpu:,.0f} | {n / js_cpu:,.0f} | {ratio:.2f} |"
                f" {n / py_wall:,.0f} | {n / js_wall:,.0f} |"
            )
    print(f"median ratio Python/JS (records per CPU second): {statistics.median(ratios):.2f}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()

"""How often neighbouring stored reports come from one device, by how they were written.

30 devices send one report for each of 3 metrics. Three ways to write them: each device's
upload its own commit (the residual docs/security.md names), one upload relaying every
device's reports, and the writer's group commit of every device's upload. For each, the
same-device neighbours among the 89 neighbouring pairs, in a plain ``SELECT`` and (on
PostgreSQL) in physical order (``ctid``, as ``pg_dump`` writes them), beside the chance mean
and the 4.9-sd limit the tests use.
Run: ``.venv/bin/python -m bench.row_order``.
"""

from __future__ import annotations

import logging
import tempfile
from math import sqrt
from pathlib import Path
from typing import Any

from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    TEST_NOW,
    RunningCollector,
    collector_settings,
    fresh_database,
    post_reports,
    postgres_problem,
    register,
)
from testkit.row_order import (
    DEVICES,
    METRICS,
    boolean_specs,
    chance_limit,
    device_reports,
    ids_of,
    neighbour_moments,
    same_device_neighbours,
    stored_orders,
)


def write(url: str, how: str) -> list[list[dict[str, Any]]]:
    """Store the devices' reports in ``url`` as ``how`` says; the reports, by device."""
    from deniable.collector.storage import open_database
    from deniable.collector.storage.prepare import prepare_batch
    from deniable.collector.storage.transaction import store_batches
    from deniable.collector.validation import ValidReport

    server = RunningCollector(collector_settings(url)).start()
    try:
        with server.client(ADMIN_TOKEN) as admin:
            specs = [register(admin, spec) for spec in boolean_specs(how.replace("-", "_"))]
        reports = device_reports(specs, seed=8)
        if how == "group-commit":
            database = open_database(url)
            by_name = {spec.name: spec for spec in specs}
            batches = [
                prepare_batch(
                    [ValidReport(r["id"], r["metric"], r["period"], r["payload"]) for r in b],
                    by_name,
                    TEST_NOW.date(),
                    dialect=database.dialect,
                )
                for b in reports
            ]
            store_batches(database, batches)
            database.dispose()
            return reports
        with server.client(INGEST_KEY) as uploader:
            uploads = reports if how == "per-device" else [[r for b in reports for r in b]]
            for upload in uploads:
                assert post_reports(uploader, upload).status_code == 202
    finally:
        server.stop()
    return reports


def main() -> None:
    logging.getLogger("deniable.collector").setLevel(logging.ERROR)
    mean, variance = neighbour_moments(DEVICES, METRICS)
    print(
        f"{DEVICES} devices x {METRICS} metrics: chance mean {mean:.2f} of"
        f" {DEVICES * METRICS - 1}, sd {sqrt(variance):.2f}, limit {chance_limit():.2f}"
    )
    print(f"{'backend':<11}{'written as':<15}{'order':<8}same-device neighbours")
    backends = ["sqlite"] + ([] if postgres_problem() else ["postgresql"])
    for backend in backends:
        for how in ("per-device", "one-upload", "group-commit"):
            with tempfile.TemporaryDirectory() as directory:
                if backend == "sqlite":
                    url = f"sqlite:///{Path(directory) / 'rows.db'}"
                    reports = write(url, how)
                    orders = stored_orders(url)
                else:
                    with fresh_database("deniable_bench_rows") as url:
                        reports = write(url, how)
                        orders = stored_orders(url)
            device_of = {r["id"]: d for d, batch in enumerate(reports) for r in batch}
            for name, order in orders.items():
                count = same_device_neighbours(ids_of(order), device_of)
                print(f"{backend:<11}{how:<15}{name:<8}{count}")


if __name__ == "__main__":
    main()

"""Several collector processes on loopback sharing one database, as a scaled-out deployment.

The scale-out tests and ``bench/scale.py`` stand up this small cluster: N ``deniable serve``
processes on free loopback ports, each its own OS process so they can be killed
independently, after the schema was migrated once (``run_migrations`` runs that step as the
deployment's one-shot job does).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from deniable.collector import Settings

from .collector_process import CollectorProcess
from .service_process import DENIABLE

MIGRATION_TIMEOUT = 60.0
"""Seconds one ``deniable migrate`` run may take."""


def run_migrations(url: str, processes: int) -> list[int]:
    """Run ``deniable migrate`` from ``processes`` processes at once; their exit codes."""
    env = {**os.environ, "DENIABLE_DATABASE_URL": url}
    runs = [
        subprocess.Popen(
            [*DENIABLE, "migrate"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for _ in range(processes)
    ]
    codes = []
    for run in runs:
        _, err = run.communicate(timeout=MIGRATION_TIMEOUT)
        if run.returncode != 0:
            sys.stderr.write(err.decode(errors="replace"))
        codes.append(run.returncode)
    return codes


@dataclass
class Cluster:
    """N collectors on one database; stops every process still running on exit."""

    database_url: str
    collectors: list[CollectorProcess] = field(default_factory=list)

    @property
    def urls(self) -> list[str]:
        """Base URLs of every collector, in start order."""
        return [c.url for c in self.collectors]

    def stop(self) -> None:
        """Stop every collector (SIGTERM, then SIGKILL)."""
        for collector in self.collectors:
            collector.stop()


@contextlib.contextmanager
def cluster(
    url: str,
    replicas: int,
    admin_token: str,
    extra_env: Mapping[str, str] | None = None,
    workers: int = 1,
) -> Iterator[Cluster]:
    """Start ``replicas`` collectors (each with ``workers`` workers) on the migrated ``url``.

    They do not migrate on start (the schema is there already) unless ``extra_env`` says so.
    """
    settings = Settings(database_url=url, admin_token=admin_token, migrate_on_start=False)  # type: ignore[arg-type]
    with tempfile.TemporaryDirectory(prefix="deniable-cluster-") as logs:
        running = Cluster(url)
        try:
            for _ in range(replicas):
                server = CollectorProcess(settings, Path(logs), workers=workers, env=extra_env)
                running.collectors.append(server.launch())
            for collector in running.collectors:
                collector.wait_ready()
            yield running
        finally:
            running.stop()

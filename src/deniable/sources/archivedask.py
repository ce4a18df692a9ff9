"""Re-analysis on a Dask cluster: :func:`.archivecounts.file_counts` mapped over the archive's
files, one task per (metric, period) file, for archives beyond one machine.

Each worker opens the archive itself (the URL travels, never the data), reduces its file to
counts with the same DuckDB and numpy code as the embedded engine, and sends back only those
counts (k numbers per period and cell), so the answers are the embedded engine's. With a
scheduler address it connects to that cluster (``tcp://scheduler:8786``); without, it starts
a local cluster on this machine and stops it after. The ``dask`` extra installs it.
"""

from __future__ import annotations

from collections.abc import Sequence

from deniable.client.spec import MetricSpec, registered_specs

from .archivecounts import FileCounts, archive_files, file_counts

LOCAL_WORKERS = 2
"""Worker processes of the local cluster started when no scheduler is named."""


def _counts_of(
    url: str, spec: dict[str, object], period: str, path: str, by_cell: bool
) -> FileCounts:
    """One file's counts on a worker (the spec travels as its JSON document: a spec holds
    cached mechanisms that do not pickle)."""
    with registered_specs():
        archived = MetricSpec.from_dict(spec)
    return file_counts(url, archived, period, path, by_cell)


def dask_counts(
    url: str,
    spec: MetricSpec,
    periods: Sequence[str],
    by_cell: bool = False,
    scheduler: str | None = None,
) -> list[FileCounts]:
    """The counts of each archived file of ``spec``'s metric among ``periods``, computed by the
    Dask cluster at ``scheduler`` (a local one if None); by period."""
    from dask.distributed import Client, LocalCluster

    files = archive_files(url, spec.name, periods)
    if not files:
        return []
    cluster = None
    if scheduler is None:
        cluster = LocalCluster(
            n_workers=LOCAL_WORKERS,
            threads_per_worker=1,
            dashboard_address=":0",
            silence_logs=True,
        )
    client = Client(cluster if cluster is not None else scheduler)
    try:
        futures = [
            client.submit(_counts_of, url, spec.to_dict(), period, path, by_cell, pure=False)
            for period, path in files
        ]
        return list(client.gather(futures))
    finally:
        client.close()
        if cluster is not None:
            cluster.close()

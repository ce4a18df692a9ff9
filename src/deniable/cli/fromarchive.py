"""Estimates re-analysed from the Parquet archive of raw reports (``--from-archive URL``).

The archive's files are reduced to counts (:mod:`deniable.sources.archivecounts`, on DuckDB
or a Dask cluster) and the documents are built from those counts by the estimate engine the
collector uses (:mod:`deniable.estimators.engine`), so an estimate over archived periods is
the one the collector gave while their reports were online. Without a range, every archived period of the metric.
"""

from __future__ import annotations

from typing import Any

import click

from deniable.client.errors import InvalidInput
from deniable.client.kinds import TextSpec
from deniable.client.spec import MetricSpec, period_range

from .periods import check_range_size, resolve_range
from .specs import spec_from_served


def _counts(
    url: str,
    spec: MetricSpec,
    labels: list[str],
    by_cell: bool,
    engine: str,
    scheduler: str | None,
) -> list[Any]:
    """Each archived file's counts among ``labels``, on ``engine``."""
    try:
        if engine == "dask":
            from deniable.sources.archivedask import dask_counts

            return dask_counts(url, spec, labels, by_cell, scheduler)
        if scheduler is not None:
            raise InvalidInput("--scheduler goes with --engine dask")
        from deniable.sources.archivecounts import archive_counts

        return archive_counts(url, spec, labels, by_cell)
    except ImportError as exc:
        extra = "dask" if engine == "dask" else "archive"
        raise InvalidInput(
            f"--from-archive on {engine} needs {exc.name or 'a package'}:"
            f" pip install 'deniable[{extra}]'"
        ) from None


def _labels(
    url: str, spec: MetricSpec, start: str | None, end: str | None, last: int | None
) -> list[str]:
    from deniable.sources.archivecounts import archived_periods

    start, end = resolve_range(spec, start, end, last)
    if start is None or end is None:
        stored = archived_periods(url, spec.name)
        if not stored:
            raise InvalidInput(f"the archive at {url} holds no reports of {spec.name}")
        start, end = start or stored[0], end or stored[-1]
        if start > end:
            raise InvalidInput(f"start {start} is after end {end}")
    check_range_size(spec.period, start, end)
    return period_range(spec.period, start, end)


def _warn_unverified(url: str, name: str, files: dict[str, Any]) -> None:
    """Say on stderr, one line per file, which files had no manifest to be checked against."""
    for period, found in sorted(files.items()):
        if not found.verified:
            click.echo(
                f"warning: the archive at {url} holds {name} {period} without a manifest.json:"
                " its rows were not checked against the archiver's checksum",
                err=True,
            )


def archive_document(
    url: str,
    name: str,
    *,
    start: str | None,
    end: str | None,
    last: int | None,
    engine: str,
    scheduler: str | None,
    by: list[str] | None = None,
    where: list[str] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """The estimate document of ``name`` from the archive at ``url`` (a breakdown with ``by``
    or ``where``); ``options`` as :func:`.commands.estimate.options_for` makes them. The
    document is the estimate engine's over the archived counts, as online over the stored."""
    from deniable.estimators.engine import DocumentOptions, document
    from deniable.sources.archivecounts import archived_spec
    from deniable.sources.archivesource import ArchiveCounts

    from .commands.estimate import options_for

    try:
        spec = spec_from_served(archived_spec(url, name))
    except (FileNotFoundError, ValueError) as exc:
        raise InvalidInput(f"cannot read the archive at {url}: {exc}") from None
    chosen = options_for(spec, options)
    labels = _labels(url, spec, start, end, last)
    if isinstance(spec, TextSpec):
        labels = labels[-1:]
    sliced = bool(by or where)
    files = {found.period: found for found in _counts(url, spec, labels, sliced, engine, scheduler)}
    _warn_unverified(url, name, files)
    if sliced:
        return _breakdown(spec, labels, files, by or [], where or [], chosen)
    return document(spec, ArchiveCounts(spec, labels, files), DocumentOptions.of(chosen))


def _breakdown(
    spec: MetricSpec,
    labels: list[str],
    files: dict[str, Any],
    by: list[str],
    where: list[str],
    chosen: dict[str, Any],
) -> dict[str, Any]:
    """The breakdown document from the archive's per-cell counts (InvalidInput if the archive
    holds no cells: raw reports kept their dimension cell only from a later schema on)."""
    from deniable.collector.queries.breakdown import (
        Slicing,
        breakdown_of_cells,
        parse_by,
        parse_where,
    )
    from deniable.collector.queries.refusal import QueryRefused
    from deniable.collector.settings import Settings
    from deniable.sources.archivesource import ArchiveCounts

    if any(not found.cells for found in files.values()):
        raise InvalidInput(
            f"the archive of {spec.name} holds no dimension cells: breakdowns read them from"
            " the collector's counts (leave out --from-archive)"
        )
    cells = ArchiveCounts(spec, labels, files).cells()
    try:
        dims, kept = parse_by(spec, by or None), parse_where(spec, where or None)
        return breakdown_of_cells(
            cells,
            Slicing(spec, labels, dims, kept),
            minimum=Settings().min_slice_reports,
            confidence=chosen["confidence"],
            method=chosen.get("method") or "unbiased",
            pooling=chosen.get("pooling", "overlap-safe"),
            candidates=chosen.get("candidates"),
        )
    except QueryRefused as exc:
        raise InvalidInput(exc.detail) from None

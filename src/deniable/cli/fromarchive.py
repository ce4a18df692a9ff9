"""Estimates re-analysed from the Parquet archive of raw reports (``--from-archive URL``).

The archive's files are reduced to counts (:mod:`deniable.estimators.archivecounts`, on DuckDB
or a Dask cluster) and the documents are built from those counts by the builders the
collector's routes use, so an estimate over archived periods is the one the collector gave
while their reports were online. Without a range, every archived period of the metric.
"""

from __future__ import annotations

from typing import Any

import click
import numpy as np

from deniable.client.errors import InvalidInput
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
            from deniable.estimators.archivedask import dask_counts

            return dask_counts(url, spec, labels, by_cell, scheduler)
        if scheduler is not None:
            raise InvalidInput("--scheduler goes with --engine dask")
        from deniable.estimators.archivecounts import archive_counts

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
    from deniable.estimators.archivecounts import archived_periods

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
    or ``where``); ``options`` as :func:`.commands.estimate.options_for` makes them."""
    from deniable.estimators import (
        PeriodCounts,
        PeriodSums,
        estimate,
        estimate_document,
        estimate_quantiles,
        histogram_document,
        mean_document,
    )
    from deniable.estimators.archivecounts import archived_spec, count_width
    from deniable.estimators.heavyhitters import text_document

    from .commands.estimate import options_for

    try:
        spec = spec_from_served(archived_spec(url, name))
    except (FileNotFoundError, ValueError) as exc:
        raise InvalidInput(f"cannot read the archive at {url}: {exc}") from None
    chosen = options_for(spec, options)
    labels = _labels(url, spec, start, end, last)
    if spec.type == "text":
        labels = labels[-1:]
    sliced = bool(by or where)
    files = {found.period: found for found in _counts(url, spec, labels, sliced, engine, scheduler)}
    _warn_unverified(url, name, files)
    first, last_label = labels[0], labels[-1]
    confidence = chosen["confidence"]
    if sliced:
        return _breakdown(spec, labels, files, by or [], where or [], chosen)
    if spec.type == "text":
        counts = files[labels[0]].whole.support if labels[0] in files else None
        if counts is None:
            counts = np.zeros(count_width(spec), dtype=np.int64)
        return text_document(
            name,
            labels[0],
            spec.text_randomizer,
            counts,
            confidence=confidence,
            candidates=chosen.get("candidates"),
        )
    if spec.type == "numeric":
        sums = [
            PeriodSums(
                label,
                files[label].whole.n,
                files[label].whole.total,
                files[label].whole.total_squares,
            )
            if label in files
            else PeriodSums(label, 0, 0.0, 0.0)
            for label in labels
        ]
        return mean_document(
            spec, first, last_label, sums, confidence=confidence, pooling=chosen["pooling"]
        )
    periods = [
        PeriodCounts(label, files[label].whole.n, files[label].whole.support.tolist())
        if label in files
        else PeriodCounts(label, 0, [0] * spec.k)
        for label in labels
    ]
    quantiles = chosen.pop("quantiles", None)
    result = estimate(spec.randomizer, spec.categories, periods, **chosen)
    if spec.type != "histogram":
        return estimate_document(name, first, last_label, result)
    from deniable.estimators import check_quantiles

    intervals = estimate_quantiles(
        spec.randomizer,
        spec.edges,  # type: ignore[arg-type]
        periods,
        check_quantiles(quantiles),
        confidence=confidence,
        pooling=chosen["pooling"],
    )
    return histogram_document(name, first, last_label, result, intervals, spec.edges)  # type: ignore[arg-type]


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
    from deniable.collector.queries.breakdown import breakdown_of_cells, parse_by, parse_where
    from deniable.collector.queries.refusal import QueryRefused
    from deniable.collector.settings import Settings
    from deniable.collector.storage.queries import CellStats
    from deniable.estimators.archivecounts import count_width

    if any(not found.cells for found in files.values()):
        raise InvalidInput(
            f"the archive of {spec.name} holds no dimension cells: breakdowns read them from"
            " the collector's counts (leave out --from-archive)"
        )
    size, k = len(labels), count_width(spec)
    cells: dict[str, CellStats] = {}
    for i, label in enumerate(labels):
        found = files.get(label)
        for cell, counts in (found.cells if found else {}).items():
            stats = cells.get(cell)
            if stats is None:
                stats = cells[cell] = CellStats.empty(size, k)
            stats.n[i] = counts.n
            if counts.support is not None:
                stats.counts[i] = counts.support
            stats.total[i], stats.total_squares[i] = counts.total, counts.total_squares
    try:
        dims, kept = parse_by(spec, by or None), parse_where(spec, where or None)
        return breakdown_of_cells(
            cells,
            spec,
            labels,
            dims,
            kept,
            minimum=Settings().min_slice_reports,
            confidence=chosen["confidence"],
            method=chosen.get("method") or "unbiased",
            pooling=chosen.get("pooling", "overlap-safe"),
            candidates=chosen.get("candidates"),
        )
    except QueryRefused as exc:
        raise InvalidInput(exc.detail) from None

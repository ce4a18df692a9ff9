"""Estimates from an exported file of raw randomized reports, without a collector.

The metric's spec travels inside Parquet files written by ``deniable export`` (see
:mod:`deniable.sources.reportfile`, the file's format); for other files, ``--spec
FILE.json`` gives it. Reports made under another fingerprint are refused, never mixed in.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from deniable.client.errors import InvalidInput
from deniable.client.kinds import HistogramSpec, NumericSpec
from deniable.client.spec import MetricSpec
from deniable.estimators import (
    Estimate,
    PeriodCounts,
    PeriodSums,
    check_numeric_method,
    check_quantiles,
)
from deniable.estimators.kinds import estimator_of
from deniable.sources.reportfile import read_embedded_spec, read_report_file

from .periods import check_range_size, resolve_range
from .specs import spec_from_served

if TYPE_CHECKING:
    import numpy as np

    from deniable.estimators.engine import CellStats


def read_spec(path: Path, spec_file: Path | None) -> dict[str, Any]:
    """The metric spec: from ``spec_file`` if given, else from the Parquet file's metadata."""
    if spec_file is None:
        return read_embedded_spec(path)
    try:
        return json.loads(spec_file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"{spec_file} is not valid JSON ({exc.msg} at line {exc.lineno})"
        ) from None


@dataclass(frozen=True)
class FileReports:
    """One metric's reports from an exported file, within the range asked for.

    ``frame`` is a polars frame of the reports; ``first`` and ``last`` are the range's labels
    (where the range was not named, those of the first and last report found; None if none).
    """

    spec: MetricSpec
    frame: Any
    first: str | None
    last: str | None

    def estimate(self, period: str | None = None, **options: Any) -> Estimate:
        """The estimate from every report (or from those of ``period`` only); without reports,
        the API's explicit no-data answer."""
        import polars as pl

        frame = self.frame if period is None else self.frame.filter(pl.col("period") == period)
        return estimator_of(self.spec).reports_estimate(self.spec, frame, **options)

    def sums(self) -> list[PeriodSums]:
        """A numeric metric's per-period sums of its reports' payloads, in label order."""
        from deniable.estimators import report_sums

        return report_sums(self.frame)

    def labels(self) -> list[str]:
        """Every period label of first..last, reports or not (none if the range is unknown)."""
        from deniable.client.spec import period_range

        if not (self.first and self.last):
            return []
        check_range_size(self.spec.period, self.first, self.last)
        return period_range(self.spec.period, self.first, self.last)


def load_reports(
    name: str,
    path: Path,
    spec_file: Path | None,
    start: str | None,
    end: str | None,
    last: int | None = None,
) -> FileReports:
    """The reports of ``name`` in ``path`` within start..end (or the ``last`` N periods)."""
    import polars as pl

    if not path.exists():
        raise InvalidInput(f"no such file: {path}")
    spec = spec_from_served(read_spec(path, spec_file))
    if spec.name != name:
        raise InvalidInput(f"the file holds metric {spec.name!r}, not {name!r}")
    start, end = resolve_range(spec, start, end, last)
    frame = read_report_file(path, spec.mechanism).filter(pl.col("metric") == name)
    foreign = frame.filter(pl.col("fingerprint") != spec.fingerprint).height
    if foreign:
        raise InvalidInput(
            f"{foreign} report(s) of {name} in {path} were made under another spec than"
            f" fingerprint {spec.fingerprint}; refusing to mix them"
        )
    frame = frame.with_columns(pl.col("period").cast(pl.String))
    if start is not None:
        frame = frame.filter(pl.col("period") >= start)
    if end is not None:
        frame = frame.filter(pl.col("period") <= end)
    periods = sorted(frame["period"].unique().to_list())
    return FileReports(
        spec,
        frame,
        start or (periods[0] if periods else None),
        end or (periods[-1] if periods else None),
    )


@contextmanager
def fitting_progress(method: str) -> Iterator[Callable[[int, float], None] | None]:
    """For ``method="mle"`` (the exact likelihood, which iterates and can take seconds), a
    callback drawing each iteration and its gap on a stderr progress line; else None."""
    if method != "mle":
        yield None
        return
    from .progress import progress_bar

    with progress_bar() as bar:
        task = bar.add_task("exact mle", total=None)

        def show(iteration: int, gap: float) -> None:
            bar.update(
                task,
                completed=iteration,
                description=f"exact mle: iteration {iteration:,}, at most {gap:.2g} nats to go",
            )

        yield show


class ExportCounts:
    """An export file's reports as a :class:`~deniable.estimators.engine.CountsSource`: their
    counts per period, a numeric metric's sums over every period of the range, and the shares
    estimated from the reports themselves (an exact mle draws its ``progress``)."""

    def __init__(
        self, reports: FileReports, progress: Callable[[int, float], None] | None = None
    ) -> None:
        self.reports = reports
        self.progress = progress

    @property
    def first(self) -> str | None:
        """The range's first label (None if unknown)."""
        return self.reports.first

    @property
    def last(self) -> str | None:
        """The range's last label (None if unknown)."""
        return self.reports.last

    def counts(self) -> list[PeriodCounts]:
        """The counts of each period with reports."""
        from deniable.estimators import report_counts

        return report_counts(self.reports.spec.randomizer, self.reports.frame)

    def sums(self) -> list[PeriodSums]:
        """A numeric metric's sums of every period of the range, none where it has no report."""
        found = {period.period: period for period in self.reports.sums()}
        labels = self.reports.labels()
        return [found.get(label) or PeriodSums(label, 0, 0.0, 0.0) for label in labels]

    def text_counts(self) -> np.ndarray:
        """Refused: a text metric's heavy hitters are decoded from the collector's counts."""
        raise InvalidInput(f"{self.reports.spec.name} is a text metric: estimate it online")

    def cells(self) -> dict[str, CellStats]:
        """Refused: breakdowns read the collector's counts."""
        raise InvalidInput("--by and --where read the collector's counts; leave out --from-file")

    def shares(self, spec: MetricSpec, options: dict[str, Any]) -> Estimate:
        """The shares' estimate from every report (an exact mle over the distinct ones)."""
        return self.reports.estimate(progress=self.progress, **options)


def file_document(
    kind: Literal["estimate", "series"],
    reports: FileReports,
    quantiles: Sequence[float] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """The ``kind`` document (the API's shape) from ``reports``: the estimate pooled over them
    all (the estimate engine's, :func:`deniable.estimators.engine.document`), or one estimate
    per period of the range, periods without reports included.

    ``options`` are the estimate's (confidence, method, simultaneous, and pooling for
    ``estimate``); ``quantiles`` a histogram's (the defaults if none). A numeric metric's
    documents carry its mean, from the sums of its reports' payloads. An exact mle shows its
    progress on stderr.
    """
    from deniable.estimators import mean_series_document, series_document
    from deniable.estimators.documents import counted_series
    from deniable.estimators.engine import DocumentOptions, document

    spec = reports.spec
    name = spec.name
    if quantiles and not isinstance(spec, HistogramSpec):
        raise InvalidInput(f"quantiles are for histogram metrics; {name} is {spec.type}")
    qs = check_quantiles(quantiles)
    if isinstance(spec, NumericSpec):
        check_numeric_method(options.get("method", "unbiased"))
        if kind == "series":
            periods = ExportCounts(reports).sums()
            found = mean_series_document(spec, periods, confidence=options["confidence"])
            return counted_series(spec, found)
    if spec.fixed_method is not None:  # the kind's one estimator, which the documents name
        options = {**options, "method": spec.fixed_method}
    with fitting_progress(options.get("method", "")) as progress:
        if kind == "estimate":
            query = DocumentOptions.of({**options, "quantiles": qs})
            return document(spec, ExportCounts(reports, progress), query)
        points = [
            (label, reports.estimate(label, progress=progress, **options))
            for label in reports.labels()
        ]
    return counted_series(spec, series_document(name, points, **options))

"""Estimates from an exported file of raw randomized reports, without a collector.

The metric's spec travels inside Parquet files written by ``deniable export`` (see
:mod:`deniable.estimators.reportfile`, the file's format); for other files, ``--spec
FILE.json`` gives it. Reports made under another fingerprint are refused, never mixed in.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from deniable.client.errors import InvalidInput
from deniable.estimators import read_embedded_spec, read_report_file

from .periods import check_range_size, resolve_range
from .specs import spec_from_served


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


def load_reports(
    name: str,
    path: Path,
    spec_file: Path | None,
    start: str | None,
    end: str | None,
    last: int | None = None,
) -> tuple[Any, Any, str | None, str | None]:
    """The spec, the reports of ``name`` in start..end (a polars frame), and the resolved labels."""
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
    return (
        spec,
        frame,
        start or (periods[0] if periods else None),
        end or (periods[-1] if periods else None),
    )


def _estimate_frame(spec: Any, frame: Any, **options: Any) -> Any:
    """Estimate from a frame of reports; an empty frame gives the API's explicit no-data answer."""
    from deniable.estimators import estimate_reports

    return estimate_reports(spec.randomizer, spec.categories, frame, **options)


def file_document(
    kind: Literal["estimate", "series"],
    name: str,
    path: Path,
    *,
    spec_file: Path | None,
    start: str | None,
    end: str | None,
    last: int | None = None,
    **options: Any,
) -> dict[str, Any]:
    """The ``kind`` document (the API's shape) for ``name`` from a file of raw reports."""
    spec, frame, first, final = load_reports(name, path, spec_file, start, end, last)
    build = _estimate_document if kind == "estimate" else _series_document
    return build(name, spec, frame, first, final, **options)


def _estimate_document(
    name: str, spec: Any, frame: Any, first: str | None, last: str | None, **options: Any
) -> dict[str, Any]:
    """The estimate pooled over every report of the frame."""
    from deniable.estimators import estimate_document

    return estimate_document(name, first, last, _estimate_frame(spec, frame, **options))


def _series_document(
    name: str,
    spec: Any,
    frame: Any,
    first: str | None,
    last: str | None,
    *,
    confidence: float,
    method: str,
    simultaneous: bool = False,
) -> dict[str, Any]:
    """One estimate per period of first..last, periods without reports included."""
    import polars as pl
    from deniable.client.spec import period_range
    from deniable.estimators import series_document

    labels: list[str] = []
    if first and last:
        check_range_size(spec.period, first, last)
        labels = period_range(spec.period, first, last)
    options = {"confidence": confidence, "method": method, "simultaneous": simultaneous}
    points = [
        (label, _estimate_frame(spec, frame.filter(pl.col("period") == label), **options))
        for label in labels
    ]
    return series_document(name, points, **options)

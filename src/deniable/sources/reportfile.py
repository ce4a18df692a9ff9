"""The export file of raw randomized reports: its columns, and reading and writing it.

``deniable export`` writes it and the CLI's offline estimates read it (the estimators'
``estimate_reports`` aggregates its frame; its payload columns are
:func:`deniable.estimators.columns.payload_columns`), so its layout is a contract that lives
here, with the other files reports are read from. Columns: ``id``,
``metric``, ``fingerprint``, ``period`` (strings), then the payload: ``payload`` Int64 for
brr/krr, ``payload`` Float64 for the numeric mechanisms (duchi, pm, hybrid: y on the [-1, 1]
axis, not in value units; a float64 column holds every finite double exactly, and both
formats write the shortest text that reads back to the same double), ``payload`` String
(base64) for oue, ``a``, ``b``, ``y`` Int64 for olh; brr/krr
exports also name the randomized category their index stands for (``reported_category``,
for other tools; the estimators read only the index); a metric with dimensions adds one
String column per dimension, ``dim_<name>`` (null for a report stored before the collector
kept its dimensions). A Parquet
file carries the metric's spec in its metadata (key :data:`SPEC_METADATA_KEY`); a CSV file
needs the spec given beside it.

polars is imported by the functions that read or write, not with the module, so the CLI can
name the formats in its options without loading it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

from deniable.client.errors import InvalidInput
from deniable.client.mechanisms import NUMERIC_MECHANISMS
from deniable.client.spec import MetricSpec
from deniable.estimators.columns import payload_columns

if TYPE_CHECKING:
    import polars as pl

StoredReport = tuple[str, str, Any] | tuple[str, str, Any, dict[str, str] | None]
"""One stored report as the collector pages it out: (id, period, payload as decoded JSON) and,
from the collector, its dimension values (None: none kept)."""

DIMENSION_PREFIX = "dim_"
"""An export's column of a dimension is named this and the dimension's name."""

FileFormat = Literal["parquet", "csv"]
"""The two formats an export file comes in."""

SPEC_METADATA_KEY = "deniable.spec"
"""Parquet key-value metadata key holding the exported metric's spec (JSON)."""

NAMED_COLUMN = "reported_category"
"""The column naming the (randomized) category a brr/krr report's index stands for."""

INDEX_MECHANISMS = ("brr", "krr")
"""The mechanisms whose payload is one category's index, so that an export can name it."""


def report_columns(mechanism: str) -> dict[str, Any]:
    """Every column of an export of ``mechanism`` reports, with its polars type, in order."""
    import polars as pl

    payload_type = (
        pl.String
        if mechanism == "oue"
        else pl.Float64
        if mechanism in NUMERIC_MECHANISMS
        else pl.Int64
    )
    payload = dict.fromkeys(payload_columns(mechanism), payload_type)
    if mechanism == "pem":
        payload = {"b": pl.String, "l": pl.Int64, "r": pl.Int64}
    return {
        "id": pl.String,
        "metric": pl.String,
        "fingerprint": pl.String,
        "period": pl.String,
        **payload,
    }


def export_columns(mechanism: str) -> dict[str, Any]:
    """The columns ``deniable export`` writes: :func:`report_columns`, and for brr/krr the
    randomized category's name."""
    import polars as pl

    named = {NAMED_COLUMN: pl.String} if mechanism in INDEX_MECHANISMS else {}
    return {**report_columns(mechanism), **named}


def file_columns(spec: MetricSpec) -> dict[str, Any]:
    """Every column of ``spec``'s export file: :func:`export_columns`, then one per dimension."""
    import polars as pl

    dimensions = {DIMENSION_PREFIX + name: pl.String for name, _ in spec.dimensions}
    return {**export_columns(spec.mechanism), **dimensions}


def frame_of(spec: MetricSpec, rows: Sequence[StoredReport]) -> pl.DataFrame:
    """The reports ``rows`` of metric ``spec`` as a frame; payloads are checked by the mechanism.

    Raises :class:`InvalidInput` naming the first report whose payload does not fit the spec.
    """
    import polars as pl

    parse = spec.check_payload
    payloads = []
    for report_id, _, payload, *_ in rows:
        try:
            payloads.append(parse(payload))
        except ValueError as exc:
            raise InvalidInput(f"report {report_id} of {spec.name}: {exc}") from None
    columns: dict[str, Any] = {
        "id": [r[0] for r in rows],
        "metric": [spec.name] * len(rows),
        "fingerprint": [spec.fingerprint] * len(rows),
        "period": [r[1] for r in rows],
    }
    if spec.mechanism in ("olh", "pem"):
        keys = payload_columns(spec.mechanism)
        columns.update({key: [p[key] for p in payloads] for key in keys})
    else:
        columns["payload"] = payloads
    if spec.mechanism in INDEX_MECHANISMS:
        extra = spec.count_width - spec.k  # a set's L padding items after its categories
        names = [*spec.categories, *(f"(padding {j + 1})" for j in range(extra))]
        columns[NAMED_COLUMN] = [names[index] for index in payloads]
    kept = [(row[3] if len(row) > 3 else None) or {} for row in rows]
    for name, _ in spec.dimensions:
        columns[DIMENSION_PREFIX + name] = [dims.get(name) for dims in kept]
    return pl.DataFrame(columns, schema=file_columns(spec))


def write_report_file(
    frames: Sequence[pl.DataFrame], spec: MetricSpec, path: Path, fmt: FileFormat
) -> int:
    """Write the pages ``frames`` of ``spec``'s reports to ``path``; the number of reports.

    The file appears complete or not at all: it is written beside ``path`` and renamed over it.
    """
    import polars as pl

    frame = pl.concat(frames, how="vertical") if frames else pl.DataFrame(schema=file_columns(spec))
    partial = path.with_name(path.name + ".partial")
    if fmt == "parquet":
        frame.write_parquet(partial, metadata={SPEC_METADATA_KEY: json.dumps(spec.to_dict())})
    else:
        frame.write_csv(partial)
    partial.replace(path)
    return frame.height


def file_format(path: Path) -> FileFormat | None:
    """The format ``path``'s extension names (``.parquet`` or ``.csv``, any case), or None."""
    suffix = path.suffix.lower().removeprefix(".")
    if suffix not in get_args(FileFormat):
        return None
    return cast(FileFormat, suffix)


def read_embedded_spec(path: Path) -> dict[str, Any]:
    """The metric spec (JSON) a Parquet export carries in its metadata.

    Raises :class:`InvalidInput` if the file is not Parquet or carries no valid spec.
    """
    import polars as pl

    try:
        metadata = pl.read_parquet_metadata(path)
    except FileNotFoundError:
        raise
    except Exception:
        raise InvalidInput(
            f"{path} is not a readable Parquet file; for a CSV export also pass --spec SPEC.json"
        ) from None
    if SPEC_METADATA_KEY not in metadata:
        raise InvalidInput(
            f"{path} carries no metric spec; pass --spec SPEC.json"
            " (from `deniable metrics show NAME --format json`)"
        )
    try:
        return json.loads(metadata[SPEC_METADATA_KEY])
    except json.JSONDecodeError:
        raise InvalidInput(f"{path}: its embedded metric spec is not valid JSON") from None


def read_report_file(path: Path, mechanism: str) -> pl.DataFrame:
    """The reports in the export file ``path`` (CSV if its extension says so, else Parquet).

    Raises :class:`InvalidInput` if the file cannot be read or lacks a column a ``mechanism``
    export needs (``id`` may be missing: estimates do not use it).
    """
    import polars as pl

    csv = file_format(path) == "csv"
    try:
        if csv:
            typed = mechanism == "oue" or mechanism in NUMERIC_MECHANISMS
            payload = {"payload": report_columns(mechanism)["payload"]} if typed else {}
            frame = pl.read_csv(path, schema_overrides={**payload, "period": pl.String})
        else:
            frame = pl.read_parquet(path)
    except FileNotFoundError:
        raise
    except Exception:
        kind = "CSV" if csv else "Parquet"
        raise InvalidInput(f"{path} is not a readable {kind} file of reports") from None
    wanted = [column for column in report_columns(mechanism) if column != "id"]
    missing = [column for column in wanted if column not in frame.columns]
    if missing:
        raise InvalidInput(
            f"{path} lacks the column(s) {', '.join(missing)} of a {mechanism} export"
        )
    return frame

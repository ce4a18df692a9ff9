"""deniable.estimators: population shares with honest confidence intervals from LDP reports.

Works from per-period support counts (the sufficient statistics the collector keeps) or from a
table of raw reports; see docs/STATS.md for every formula and docs/multi-period.md for ranges.
"""

from .advisor import TooManyReports, margin_of_error, reports_needed, v_opt
from .documents import (
    MetricRange,
    RangeEstimate,
    Series,
    SeriesPoint,
    estimate_document,
    series_document,
)
from .frequency import METHODS, Method, estimate
from .pooling import POOLINGS, Pooling
from .reportfile import (
    SPEC_METADATA_KEY,
    FileFormat,
    StoredReport,
    file_format,
    frame_of,
    read_embedded_spec,
    read_report_file,
    report_columns,
    write_report_file,
)
from .reports import estimate_reports, report_counts
from .results import CategoryEstimate, Estimate, PeriodCounts
from .support import support_matrix

__all__ = [
    "METHODS",
    "POOLINGS",
    "SPEC_METADATA_KEY",
    "CategoryEstimate",
    "Estimate",
    "FileFormat",
    "Method",
    "MetricRange",
    "PeriodCounts",
    "Pooling",
    "RangeEstimate",
    "Series",
    "SeriesPoint",
    "StoredReport",
    "TooManyReports",
    "estimate",
    "estimate_document",
    "estimate_reports",
    "file_format",
    "frame_of",
    "margin_of_error",
    "read_embedded_spec",
    "read_report_file",
    "report_columns",
    "report_counts",
    "reports_needed",
    "series_document",
    "support_matrix",
    "v_opt",
    "write_report_file",
]

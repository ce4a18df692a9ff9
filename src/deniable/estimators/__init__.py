"""deniable.estimators: population shares with honest confidence intervals from LDP reports.

Works from per-period support counts (the sufficient statistics the collector keeps) or from a
table of raw reports; see docs/STATS.md for every formula and docs/multi-period.md for ranges.

The value types, the documents (the privacy document too) and the estimate options load at
once (none needs numpy or polars; the export file's format is :mod:`deniable.sources.reportfile`); the numerical functions are imported on first use, so that
the CLI can build its options and help without loading numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deniable.client.lazy import lazy_exports

from .choices import (
    DEFAULT_METHOD,
    DEFAULT_PERIODS,
    DEFAULT_QUANTILES,
    METHODS,
    POOLINGS,
    Method,
    Pooling,
    check_numeric_method,
    check_quantiles,
)
from .documents import (
    AnyRangeEstimate,
    AnySeries,
    HistogramEstimate,
    HistogramSeries,
    HistogramSeriesPoint,
    MeanRangeEstimate,
    MeanSeries,
    MeanSeriesPoint,
    MetricAbout,
    MetricRange,
    RangeEstimate,
    Series,
    SeriesPoint,
    estimate_document,
    histogram_document,
    histogram_series_document,
    mean_document,
    mean_series_document,
    plain,
    quantile_bounds,
    series_document,
)
from .privacy import (
    PrivacyDocument,
    PrivacySettings,
    privacy_document,
    registration_warnings,
)
from .results import (
    CategoryEstimate,
    Estimate,
    MeanEstimate,
    PeriodCounts,
    PeriodSums,
    QuantileInterval,
)

if TYPE_CHECKING:
    from .advisor import (
        MAX_REPORTS,
        TooManyReports,
        fewest_reports,
        margin_of_error,
        mean_margin,
        mean_reports_needed,
        report_bytes,
        reports_needed,
        v_opt,
    )
    from .audit import (
        AuditError,
        AuditResult,
        audit_document,
        audit_spec,
        audit_specs,
        mechanism_sweep,
    )
    from .frequency import estimate
    from .numeric import estimate_mean, in_value_units
    from .quantiles import cdf_band, estimate_quantiles, quantile_intervals
    from .reports import estimate_reports, report_counts, report_sums
    from .support import support_matrix

__getattr__ = lazy_exports(
    __name__,
    {
        ".advisor": (
            "MAX_REPORTS",
            "TooManyReports",
            "fewest_reports",
            "margin_of_error",
            "mean_document",
            "mean_margin",
            "mean_reports_needed",
            "report_bytes",
            "reports_needed",
            "v_opt",
        ),
        ".audit": (
            "AuditError",
            "AuditResult",
            "audit_document",
            "audit_spec",
            "audit_specs",
            "mechanism_sweep",
        ),
        ".frequency": ("estimate",),
        ".numeric": ("estimate_mean", "in_value_units"),
        ".quantiles": ("cdf_band", "estimate_quantiles", "quantile_intervals"),
        ".reports": ("estimate_reports", "report_counts", "report_sums"),
        ".support": ("support_matrix",),
    },
)

__all__ = [
    "DEFAULT_METHOD",
    "DEFAULT_PERIODS",
    "DEFAULT_QUANTILES",
    "MAX_REPORTS",
    "METHODS",
    "POOLINGS",
    "AnyRangeEstimate",
    "AnySeries",
    "AuditError",
    "AuditResult",
    "CategoryEstimate",
    "Estimate",
    "HistogramEstimate",
    "HistogramSeries",
    "HistogramSeriesPoint",
    "MeanEstimate",
    "MeanRangeEstimate",
    "MeanSeries",
    "MeanSeriesPoint",
    "Method",
    "MetricAbout",
    "MetricRange",
    "PeriodCounts",
    "PeriodSums",
    "Pooling",
    "PrivacyDocument",
    "PrivacySettings",
    "QuantileInterval",
    "RangeEstimate",
    "Series",
    "SeriesPoint",
    "TooManyReports",
    "audit_document",
    "audit_spec",
    "audit_specs",
    "cdf_band",
    "check_numeric_method",
    "check_quantiles",
    "estimate",
    "estimate_document",
    "estimate_mean",
    "estimate_quantiles",
    "estimate_reports",
    "fewest_reports",
    "histogram_document",
    "histogram_series_document",
    "in_value_units",
    "margin_of_error",
    "mean_document",
    "mean_margin",
    "mean_reports_needed",
    "mean_series_document",
    "mechanism_sweep",
    "plain",
    "privacy_document",
    "quantile_bounds",
    "quantile_intervals",
    "registration_warnings",
    "report_bytes",
    "report_counts",
    "report_sums",
    "reports_needed",
    "series_document",
    "support_matrix",
    "v_opt",
]

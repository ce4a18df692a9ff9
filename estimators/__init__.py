"""deniable.estimators: population shares with honest confidence intervals from LDP reports.

Works from per-period support counts (the sufficient statistics the collector keeps) or from a
table of raw reports; see docs/STATS.md for every formula and docs/multi-period.md for ranges.
"""

from .advisor import choose_mechanism, margin_of_error, reports_needed, v_opt
from .frequency import estimate
from .reports import estimate_reports, report_counts
from .results import CategoryEstimate, Estimate, PeriodCounts
from .support import support_matrix

__all__ = [
    "CategoryEstimate",
    "Estimate",
    "PeriodCounts",
    "choose_mechanism",
    "estimate",
    "estimate_reports",
    "margin_of_error",
    "report_counts",
    "reports_needed",
    "support_matrix",
    "v_opt",
]

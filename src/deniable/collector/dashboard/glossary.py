"""The dashboard's words for its jargon, shown where the jargon is: the method and pooling
pickers, the planners' mechanism names and V*, and how a margin typed in points is read."""

from __future__ import annotations

METHODS = {
    "unbiased": (
        "the plain debiased estimate: right on average, but noise can push a share below 0 or"
        " above 100%"
    ),
    "consistent": "the debiased shares adjusted to be at least 0 and add up to 100% (the default)",
    "mle": (
        "maximum likelihood: the shares most likely to have produced the reports, always"
        " between 0 and 100%"
    ),
}
"""The shares' estimators, as the method picker explains them."""

POOLINGS = {
    "overlap-safe": (
        "the interval over several periods holds even when the same devices report in each of"
        " them (the usual case), so a week is no more precise than its best day (the default)"
    ),
    "independent": (
        "assumes each period's reports come from different devices: narrower over several"
        " periods, and too narrow when devices report every day"
    ),
}
"""How periods combine, as the pooling picker explains them."""

MECHANISMS = {
    "krr": "k-ary randomized response: each device sends one category, its own more often",
    "brr": "binary randomized response: a yes/no answer, flipped with a known probability",
    "oue": (
        "optimized unary encoding: one noisy bit per category; the least noise for many"
        " categories, at k bits a report"
    ),
    "olh": (
        "optimized local hashing: a hashed category in a small range; OUE's noise in a few"
        " bytes a report"
    ),
    "duchi": "Duchi's mechanism: each device sends one of two extreme values (best at small ε)",
    "pm": "the piecewise mechanism: a noisy value near the true one (best at large ε)",
    "hybrid": "the hybrid mechanism: Duchi's or the piecewise one at random, the mix least noisy",
    "histogram": "the number's bucket, sent as a category (for quantiles, not only the mean)",
    "fewest reports": "whichever mechanism needs the fewest reports here",
}
"""The mechanisms the planners name, each in one line."""

MARGIN_HINT = (
    "In percentage points: 2 means ±2 points. A value below 1 is read as a share (0.02 is 2"
    " points too)."
)
"""How the share planner reads its margin field."""


def margin_share(value: float) -> float:
    """A margin typed in the planner as a share: 1 or more is percentage points (2 is 0.02),
    less than 1 is a share already (0.02)."""
    return value / 100 if value >= 1 else value

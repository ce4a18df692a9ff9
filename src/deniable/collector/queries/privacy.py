"""The privacy account: the most eps one device spends on the registered metrics (archived ones
left out: devices stop recording them), for the SDK settings a :class:`PrivacyQuery` gives.

The document is :func:`deniable.estimators.privacy.privacy_document`'s, the one the CLI prints;
``GET /v1/privacy`` answers it and the dashboard's privacy page shows it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from deniable.client.account import MAX_LIFETIME_EPSILON, SDK_DEFAULTS, DeviceSettings
from deniable.client.spec import METRIC_NAME, MetricSpec
from deniable.estimators.privacy import PrivacyDocument, privacy_document
from deniable.estimators.shufflingaccount import (
    DEFAULT_DELTA,
    LISTED_BATCHES,
    MAX_BATCH,
    MAX_DELTA,
    MIN_DELTA,
    ShuffleSection,
    assumed_batches,
    shuffle_section,
)

from ..context import Collector
from ..numbers import NumberRule
from ..storage.engine import Database
from ..storage.queries import list_specs
from ..storage.shuffled import batch_groups, recent_batches, reports_received
from .refusal import refuse

MEMOIZE_HELP = "true, false, or registered metric names separated by commas"
DEFAULT_MEMOIZE = str(SDK_DEFAULTS.memoize).lower()
"""The ``memoize`` query's default: the SDK's (``false``)."""

MAX_REPORTS_PER_PERIOD = 1_000_000
"""The largest ``max_reports_per_period`` the account answers for (a bound of the query only)."""

REPORTS_RULE = NumberRule("max_reports_per_period", 1, MAX_REPORTS_PER_PERIOD, whole=True)
"""How ``max_reports_per_period`` is read, in the API's query and the dashboard's form."""
LIFETIME_RULE = NumberRule("lifetime_epsilon", 0, MAX_LIFETIME_EPSILON, open_low=True)
"""How ``lifetime_epsilon`` is read: above 0, at most the SDK's largest accepted cap."""

SHUFFLE_BATCH_RULE = NumberRule("shuffle_batch", 2, MAX_BATCH, whole=True)
"""How ``shuffle_batch`` is read: a batch of at least 2 devices, at most the accountant's
largest."""
SHUFFLE_DELTA_RULE = NumberRule("shuffle_delta", MIN_DELTA, MAX_DELTA)
"""How ``shuffle_delta`` is read: the accountant's range of delta."""

RATIO_HELP = (
    "the SDK's instantaneous_ratio: memoized reports' fresh layer, eps_inst = ratio x eps;"
    " a number above 1, or none (no fresh layer)"
)
DEFAULT_RATIO = str(SDK_DEFAULTS.instantaneous_ratio)
"""The ``instantaneous_ratio`` query's default: the SDK's."""


@dataclass(frozen=True)
class PrivacyQuery:
    """The SDK settings an account is made for, as given (the defaults: the SDK's), and the
    shuffler's assumed batch size and delta."""

    max_reports_per_period: int = SDK_DEFAULTS.max_reports_per_period
    memoize: str = DEFAULT_MEMOIZE
    lifetime_epsilon: float | None = SDK_DEFAULTS.lifetime_epsilon
    instantaneous_ratio: str = DEFAULT_RATIO
    shuffle_batch: int | None = None
    shuffle_delta: float = DEFAULT_DELTA


def ratio_setting(value: str) -> float | None:
    """The ``instantaneous_ratio`` query as the SDK takes it; 422 naming the problem."""
    if value.strip().lower() == "none":
        return None
    try:
        ratio = float(value)
    except ValueError:
        ratio = math.nan
    if not (math.isfinite(ratio) and ratio > 1):
        raise refuse(f"instantaneous_ratio: give {RATIO_HELP}")
    return ratio


def memoize_setting(value: str, specs: list[MetricSpec]) -> bool | frozenset[str]:
    """The ``memoize`` query as the SDK takes it; 422 naming the problem (a name that is not a
    metric name is not repeated back)."""
    if value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    names = [name.strip() for name in value.split(",")]
    registered = {spec.name for spec in specs}
    for position, name in enumerate(names, start=1):
        if not METRIC_NAME.fullmatch(name):
            raise refuse(f"memoize: item {position} is not a metric name; give {MEMOIZE_HELP}")
        if name not in registered:
            raise refuse(
                f"memoize: {name} is not a registered metric (archived ones are not in the account)"
            )
    return frozenset(names)


def privacy(state: Collector, query: PrivacyQuery) -> PrivacyDocument:
    """One device's privacy account for the query's settings: the most eps it spends per
    period, day, 7 and 30 days and over its lifetime, what a memoized metric reveals per
    value, per registered metric and in total, with warnings, a statement, and the shuffler
    section (:func:`shuffled`)."""
    database = state.database
    specs = list_specs(database, archived=False)
    settings = DeviceSettings(
        query.max_reports_per_period,
        memoize_setting(query.memoize, specs),
        query.lifetime_epsilon,
        ratio_setting(query.instantaneous_ratio),
    )
    min_batch = state.settings.shuffle_min_batch
    section = shuffled(database, specs, query.shuffle_batch, query.shuffle_delta, min_batch)
    return privacy_document(specs, settings, section)


def shuffled(
    database: Database,
    specs: list[MetricSpec],
    shuffle_batch: int | None,
    delta: float,
    min_batch: int,
) -> ShuffleSection:
    """The account's shuffler section: the assumed batch size if one is asked, else the
    released batches, each at its accounted n (the reports the collector refused left out)
    and flagged below ``min_batch``. Bounded work: one bound per (metric, mechanism, local eps)
    at its smallest batch (eps is non-increasing in n, so it covers every batch of the group)
    and one per distinct batch among the :data:`LISTED_BATCHES` most recent, whatever the
    number stored."""
    if shuffle_batch is not None:
        return shuffle_section(specs, assumed_batches(specs, shuffle_batch, delta), "assumed")
    recent = recent_batches(database, LISTED_BATCHES, delta)
    if not recent:
        return shuffle_section(specs, [], "none")
    groups = batch_groups(database, delta, min_batch)  # read after: it covers every batch listed
    received = reports_received(database)  # after the groups: no batch counts more than this
    return shuffle_section(specs, recent, "released", groups, min_batch, received)

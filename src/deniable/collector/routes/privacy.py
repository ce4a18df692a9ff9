"""The privacy account: ``GET /v1/privacy``, the most eps one device spends on the registered
metrics (archived ones left out: devices stop recording them), for the SDK settings asked.

The document is :func:`deniable.estimators.privacy.privacy_document`'s, the one the CLI prints.
"""

from __future__ import annotations

import math
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request

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

from ..auth import VIEWER
from ..context import collector
from ..numbers import NumberRule, query_number
from ..storage.engine import Database
from ..storage.queries import list_specs
from ..storage.shuffled import batch_groups, recent_batches, reports_received
from .common import problem_responses

router = APIRouter(tags=["privacy"])

MEMOIZE_HELP = "true, false, or registered metric names separated by commas"
DEFAULT_MEMOIZE = str(SDK_DEFAULTS.memoize).lower()
"""The ``memoize`` query's default: the SDK's (``false``)."""

MAX_REPORTS_PER_PERIOD = 1_000_000
"""The largest ``max_reports_per_period`` the route answers for (a bound of the query only)."""

REPORTS_RULE = NumberRule("max_reports_per_period", 1, MAX_REPORTS_PER_PERIOD, whole=True)
"""How ``max_reports_per_period`` is read, in the API's query and the dashboard's form."""
LIFETIME_RULE = NumberRule("lifetime_epsilon", 0, MAX_LIFETIME_EPSILON, open_low=True)
"""How ``lifetime_epsilon`` is read: above 0, at most the SDK's largest accepted cap."""

SHUFFLE_BATCH_RULE = NumberRule("shuffle_batch", 2, MAX_BATCH, whole=True)
"""How ``shuffle_batch`` is read: a batch of at least 2 devices, at most the accountant's
largest."""
SHUFFLE_DELTA_RULE = NumberRule("shuffle_delta", MIN_DELTA, MAX_DELTA)
"""How ``shuffle_delta`` is read: the accountant's range of delta."""
ShuffleBatchQuery = Annotated[
    int | None,
    SHUFFLE_BATCH_RULE.validator(),
    SHUFFLE_BATCH_RULE.query(
        "a shuffler's batch size (distinct devices) to assume for every metric: the account"
        " adds the central ε against an analyst per metric, in place of the batches a"
        " shuffler released (default: none; the released batches, if any, are shown)"
    ),
]
ShuffleDeltaQuery = query_number(
    SHUFFLE_DELTA_RULE,
    float,
    "the δ of the central guarantee, for the released batches or shuffle_batch",
)

ReportsQuery = query_number(
    REPORTS_RULE, int, "reports per metric and period a device sends (the SDK's)"
)
LifetimeQuery = Annotated[
    float | None,
    LIFETIME_RULE.validator(),
    LIFETIME_RULE.query("the SDK's lifetime_epsilon: per metric"),
]
MemoizeQuery = Annotated[str, Query(max_length=4096, description=MEMOIZE_HELP)]
RATIO_HELP = (
    "the SDK's instantaneous_ratio: memoized reports' fresh layer, eps_inst = ratio x eps;"
    " a number above 1, or none (no fresh layer)"
)
RatioQuery = Annotated[str, Query(max_length=32, description=RATIO_HELP)]
DEFAULT_RATIO = str(SDK_DEFAULTS.instantaneous_ratio)
"""The ``instantaneous_ratio`` query's default: the SDK's."""


def ratio_setting(value: str) -> float | None:
    """The ``instantaneous_ratio`` query as the SDK takes it; 422 naming the problem."""
    if value.strip().lower() == "none":
        return None
    try:
        ratio = float(value)
    except ValueError:
        ratio = math.nan
    if not (math.isfinite(ratio) and ratio > 1):
        raise HTTPException(status_code=422, detail=f"instantaneous_ratio: give {RATIO_HELP}")
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
            raise HTTPException(
                status_code=422,
                detail=f"memoize: item {position} is not a metric name; give {MEMOIZE_HELP}",
            )
        if name not in registered:
            raise HTTPException(
                status_code=422,
                detail=f"memoize: {name} is not a registered metric (archived ones are not in"
                " the account)",
            )
    return frozenset(names)


@router.get(
    "/v1/privacy",
    dependencies=[VIEWER],
    operation_id="getPrivacyAccount",
    summary="The most ε one device spends on the registered metrics",
    response_model=PrivacyDocument,
    responses=problem_responses(401, 422),
)
def get_privacy(
    request: Request,
    max_reports_per_period: ReportsQuery = SDK_DEFAULTS.max_reports_per_period,
    memoize: MemoizeQuery = DEFAULT_MEMOIZE,
    lifetime_epsilon: LifetimeQuery = SDK_DEFAULTS.lifetime_epsilon,
    instantaneous_ratio: RatioQuery = DEFAULT_RATIO,
    shuffle_batch: ShuffleBatchQuery = None,
    shuffle_delta: ShuffleDeltaQuery = DEFAULT_DELTA,
) -> PrivacyDocument:
    """One device's privacy account: the most eps it spends per period, day, 7 and 30 days and
    over its lifetime over any two histories of its values (null: unbounded), and what a
    memoized metric reveals per value, per registered metric and in total, with warnings and
    a statement an app can publish. The query gives the SDK settings (default: the SDK's
    defaults). ``shuffled`` gives the central (ε, δ) against an analyst and the local ε that
    alone holds against the shuffler or a shuffler and collector together: for the batches a
    shuffler released (source ``released``: per metric the weakest, which covers every batch,
    and the most recent batches one by one), or, with ``shuffle_batch``, per metric at that
    assumed batch size (source ``assumed``)."""
    state = collector(request)
    database = state.database
    specs = list_specs(database, archived=False)
    settings = DeviceSettings(
        max_reports_per_period,
        memoize_setting(memoize, specs),
        lifetime_epsilon,
        ratio_setting(instantaneous_ratio),
    )
    min_batch = state.settings.shuffle_min_batch
    return privacy_document(
        specs, settings, _shuffled(database, specs, shuffle_batch, shuffle_delta, min_batch)
    )


def _shuffled(
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

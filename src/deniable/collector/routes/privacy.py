"""The privacy account: ``GET /v1/privacy``, the most eps one device spends on the registered
metrics, for the SDK settings asked (the account itself: :mod:`..queries.privacy`).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from deniable.client.account import SDK_DEFAULTS
from deniable.estimators.privacy import PrivacyDocument
from deniable.estimators.shufflingaccount import DEFAULT_DELTA

from ..auth import VIEWER
from ..context import collector
from ..numbers import query_number
from ..queries.privacy import (
    DEFAULT_MEMOIZE,
    DEFAULT_RATIO,
    LIFETIME_RULE,
    MEMOIZE_HELP,
    RATIO_HELP,
    REPORTS_RULE,
    SHUFFLE_BATCH_RULE,
    SHUFFLE_DELTA_RULE,
    PrivacyQuery,
    privacy,
)
from .common import problem_responses

router = APIRouter(tags=["privacy"], dependencies=[VIEWER])
"""The privacy account is a read: the viewer token (or the admin one) may call it."""

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
RatioQuery = Annotated[str, Query(max_length=32, description=RATIO_HELP)]


@router.get(
    "/v1/privacy",
    operation_id="getPrivacyAccount",
    summary="The most ε one device spends on the registered metrics",
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
    query = PrivacyQuery(
        max_reports_per_period,
        memoize,
        lifetime_epsilon,
        instantaneous_ratio,
        shuffle_batch,
        shuffle_delta,
    )
    return privacy(collector(request), query)

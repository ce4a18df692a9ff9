"""What a group of prepared batches adds to the stored counts, from the new reports only.

Pure: the period counts, support counts, numeric sums and cells the writer upserts, summed
over the whole group in sorted key order (so concurrent writers lock rows in one order). A
resent report adds nothing; when every report is new (the usual case), the sums the request
threads precomputed are added as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat

import numpy as np

from .kindrows import CELL_SEP, NO_SUPPORT, Counts, NumericRows, Sums, period_n, reports_per_period
from .prepare import PreparedBatch

CountRow = tuple[str, str, int]
"""A period count increment: (metric, period, n)."""

SupportRow = tuple[str, str, int, int]
"""A support count increment: (metric, period, category, support)."""

SumRow = tuple[str, str, int, float, float]
"""A numeric sums increment: (metric, period, n, sum of y, sum of y^2)."""

CellRow = tuple[str, str, str, int, float, float, np.ndarray]
"""A cell increment: (metric, period, cell, n, sum of y, sum of y^2, support per category;
empty for a numeric metric)."""


def add_counts(total: Counts, more: Counts) -> None:
    """Add ``more``'s reports and support sums into ``total``, key by key."""
    for key, (n, sums) in more.items():
        if key in total:
            n0, sums0 = total[key]
            total[key] = (n0 + n, sums0 + sums)
        else:
            total[key] = (n, sums)


def add_sums(total: Sums, more: Sums) -> None:
    """Add ``more``'s numeric sums into ``total``, key by key."""
    for key, (n, y, y2) in more.items():
        n0, y0, y20 = total.get(key, (0, 0.0, 0.0))
        total[key] = (n0 + n, y0 + y, y20 + y2)


def count_rows(
    batches: Sequence[PreparedBatch], new: Sequence[np.ndarray] | None
) -> tuple[list[CountRow], list[SupportRow], list[SumRow]]:
    """Period-count, support-count and numeric-sum increments of the new reports, in sorted
    key order.

    ``new`` holds each batch's mask of new reports; None means every report is new. Only the
    new reports count: a resent numeric report adds nothing to the sums.
    """
    total: Counts = {}
    sums: Sums = {}
    for b, batch in enumerate(batches):
        is_new = None if new is None else new[b]
        if is_new is None or is_new.all():
            add_counts(total, batch.counts)
            if batch.sums:
                add_sums(sums, batch.sums)
            continue
        for metric, group in batch.metrics.items():
            mask = is_new[group.positions]
            if not mask.any():
                continue
            if metric in batch.cells or metric in batch.text_cells:
                add_counts(total, reports_per_period(group, metric, mask))
            else:
                add_counts(total, group.counts(metric, mask))
        for metric, values in batch.numeric.items():
            mask = is_new[values.positions]
            if mask.any():
                more = values.sums(metric, mask)
                add_sums(sums, more)
                add_counts(total, period_n(more))
    keys = sorted(total)
    n_rows = [(m, p, total[(m, p)][0]) for m, p in keys]
    support_rows: list[SupportRow] = []
    for m, p in keys:
        support = total[(m, p)][1]
        nonzero = np.flatnonzero(support)
        support_rows += zip(
            repeat(m), repeat(p), nonzero.tolist(), support[nonzero].tolist(), strict=False
        )
    sum_rows = [(m, p, *sums[(m, p)]) for m, p in sorted(sums)]
    return n_rows, support_rows, sum_rows


def cell_increments(
    batches: Sequence[PreparedBatch], new: Sequence[np.ndarray] | None
) -> list[CellRow]:
    """The cell increments of the new reports of metrics with dimensions, summed over the
    whole group (one per touched (metric, period, cell)), in sorted key order (``new`` as in
    :func:`count_rows`)."""
    counts: Counts = {}
    sums: Sums = {}
    for b, batch in enumerate(batches):
        if new is None or new[b].all():
            add_counts(counts, batch.cell_counts)
            add_sums(sums, batch.cell_sums)
            continue
        for metric, group in batch.cells.items():
            mask = new[b][group.positions]
            if not mask.any():
                continue
            if isinstance(group, NumericRows):
                add_sums(sums, group.sums(metric, mask))
            else:
                add_counts(counts, group.counts(metric, mask))
    rows: list[CellRow] = []
    for (metric, label), (n, support) in counts.items():
        period, cell = label.split(CELL_SEP)
        rows.append((metric, period, cell, n, 0.0, 0.0, support))
    for (metric, label), (n, y, y2) in sums.items():
        period, cell = label.split(CELL_SEP)
        rows.append((metric, period, cell, n, y, y2, NO_SUPPORT))
    rows.sort(key=lambda row: row[:3])
    return rows

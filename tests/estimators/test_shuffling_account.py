"""The privacy account's shuffled section from plain batch records: per batch the bound of
its metric's mechanism, per metric its weakest batch, and words saying which guarantee holds
against whom."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from deniable.client import MetricSpec
from deniable.client.errors import InvalidInput
from deniable.estimators.privacy import privacy_document
from deniable.estimators.shuffling import (
    fmt21_numerical_epsilon,
    krr_epsilon,
    strong_clone_epsilon,
)
from deniable.estimators.shufflingaccount import (
    BatchGroup,
    ShuffledBatch,
    assumed_batches,
    devices_text,
    group_batches,
    shuffle_section,
)

SPECS = [
    MetricSpec.boolean("dark_mode", epsilon=4.0),
    MetricSpec.categorical("browser", [f"b{i}" for i in range(10)], epsilon=4.0, mechanism="krr"),
    MetricSpec.categorical("country", [f"c{i}" for i in range(50)], epsilon=4.0, mechanism="oue"),
]


def test_released_batches_get_their_mechanisms_bound_and_each_metric_its_weakest() -> None:
    batches = [
        ShuffledBatch("dark_mode", "brr", 4.0, 100_000, batch="a"),
        ShuffledBatch("dark_mode", "brr", 4.0, 10_000, batch="b"),
        ShuffledBatch("browser", "krr", 4.0, 100_000),
        ShuffledBatch("country", "oue", 4.0, 100_000),
    ]
    section = shuffle_section(SPECS, batches, "released")
    central = [row.central_epsilon for row in section.batches]
    assert central == [
        strong_clone_epsilon(4.0, 100_000),
        strong_clone_epsilon(4.0, 10_000),
        krr_epsilon(4.0, 10, 100_000),
        fmt21_numerical_epsilon(4.0, 100_000),
    ]
    assert [row.bound for row in section.batches] == [
        "strong-clone",
        "strong-clone",
        "krr-pair-clone",
        "fmt21-numerical",
    ]
    weakest = {m.metric: m for m in section.metrics}
    assert weakest["dark_mode"].batches == 2 and weakest["dark_mode"].smallest_batch == 10_000
    assert weakest["dark_mode"].central_epsilon == strong_clone_epsilon(4.0, 10_000)
    assert "against an analyst who sees only the released batches" in section.statement
    assert "only each report's local ε holds" in section.statement
    assert "n − 1 fake reports" in section.statement
    assert "count toward a batch's n but hide nobody" in section.statement
    assert "do not count toward" not in section.statement  # the collector counts valid ones


def test_a_batch_of_an_unknown_metric_gets_the_generic_bound() -> None:
    section = shuffle_section(SPECS, [ShuffledBatch("gone", "krr", 4.0, 100_000)], "released")
    assert section.batches[0].bound == "fmt21-numerical"
    assert section.batches[0].central_epsilon == fmt21_numerical_epsilon(4.0, 100_000)


def test_no_batches_say_so_and_leave_the_statement_alone() -> None:
    plain = privacy_document(SPECS)
    assert plain.shuffled.source == "none" and not plain.shuffled.batches
    assert "No shuffled batches" in plain.shuffled.statement
    assert "shuffler" not in plain.statement
    shuffled = shuffle_section(SPECS, assumed_batches(SPECS, 100_000), "assumed")
    with_shuffler = privacy_document(SPECS, shuffled=shuffled)
    assert with_shuffler.statement.startswith(plain.statement)
    assert "If reports passed through a shuffler" in with_shuffler.statement
    assert with_shuffler.metrics == plain.metrics and with_shuffler.total == plain.total


def test_a_tiny_batch_is_no_better_than_the_local_eps() -> None:
    section = shuffle_section(SPECS, [ShuffledBatch("country", "oue", 4.0, 2)], "released")
    assert section.batches[0].bound == "none" and section.batches[0].central_epsilon == 4.0
    assert "no lower than the local ε = 4" in section.statement


@pytest.mark.parametrize(("n", "delta"), [(-1, 1e-6), (100, 0.0), (100, 1.0)])
def test_out_of_range_batches_are_refused(n: int, delta: float) -> None:
    with pytest.raises(InvalidInput):
        shuffle_section(SPECS, [ShuffledBatch("dark_mode", "brr", 4.0, n, delta)], "released")


def test_a_batch_above_the_limit_is_counted_at_the_limit() -> None:
    """eps never grows with n, so the figure at MAX_BATCH is a valid bound for a larger batch."""
    from deniable.estimators.shufflingaccount import MAX_BATCH

    big = ShuffledBatch("dark_mode", "brr", 4.0, 3 * MAX_BATCH)
    row = shuffle_section(SPECS, [big], "released").batches[0]
    assert row.n == 3 * MAX_BATCH
    assert row.central_epsilon == strong_clone_epsilon(4.0, MAX_BATCH)


def test_groups_cover_batches_not_listed() -> None:
    """Given the groups (every batch) and a few listed batches, each metric's weakest is the
    bound of its group's smallest batch, over both local eps, counting every batch."""
    groups = [
        BatchGroup(ShuffledBatch("dark_mode", "brr", 4.0, 5_000), 900),
        BatchGroup(ShuffledBatch("dark_mode", "brr", 2.0, 1_000), 100),
    ]
    listed = [ShuffledBatch("dark_mode", "brr", 4.0, 80_000, batch="last")]
    section = shuffle_section(SPECS, listed, "released", groups)
    (weakest,) = section.metrics
    assert section.batch_count == weakest.batches == 1_000
    assert weakest.smallest_batch == 1_000
    worst = max(strong_clone_epsilon(4.0, 5_000), strong_clone_epsilon(2.0, 1_000))
    assert weakest.central_epsilon == worst
    assert [row.batch for row in section.batches] == ["last"]
    everything = [ShuffledBatch("dark_mode", "brr", 4.0, n) for n in (9, 7, 8)]
    assert group_batches(everything) == [
        BatchGroup(everything[1], 3, reports=sum(b.n for b in everything))
    ]


def test_a_batch_left_below_the_minimum_by_refused_reports_is_counted_and_stated() -> None:
    """A batch counts the devices whose reports the collector took: one of 1,000 stated with
    10 refused is counted at 990, below a minimum of 1,000, its eps computed at 990; one whose
    every report was refused hides nobody (the local eps); the words say which and why."""
    batches = [
        ShuffledBatch("dark_mode", "brr", 4.0, 990, batch="a", refused=10),
        ShuffledBatch("dark_mode", "brr", 4.0, 5_000, batch="b"),
        ShuffledBatch("browser", "krr", 4.0, 0, batch="c", refused=7),
    ]
    section = shuffle_section(SPECS, batches, "released", min_batch=1_000)
    rows = {row.batch: row for row in section.batches}
    assert (rows["a"].n, rows["a"].refused, rows["a"].below_minimum) == (990, 10, True)
    assert rows["a"].central_epsilon == strong_clone_epsilon(4.0, 990)
    assert (rows["b"].refused, rows["b"].below_minimum) == (0, False)
    assert (rows["c"].bound, rows["c"].central_epsilon, rows["c"].below_minimum) == (
        "none",
        4.0,
        True,
    )
    weakest = {m.metric: m for m in section.metrics}
    assert (weakest["dark_mode"].below_minimum, weakest["dark_mode"].smallest_batch) == (1, 990)
    assert weakest["browser"].below_minimum == 1
    assert section.min_batch == 1_000
    assert "2 batches hold fewer than the minimum of 1,000 devices" in section.statement
    assert "dark_mode (1), browser (1)" in section.statement
    assert devices_text(asdict(rows["a"])) == "990 (10 refused, below minimum)"
    assert devices_text({"n": 5_000}) == "5,000"
    assert (
        devices_text({"n": 2, "declared": 100_000_000, "incomplete": True})
        == "2 (100,000,000 stated, incomplete)"
    )


def test_without_a_minimum_or_below_it_nothing_is_flagged() -> None:
    batches = [ShuffledBatch("dark_mode", "brr", 4.0, 990, batch="a", refused=10)]
    assert "minimum" not in shuffle_section(SPECS, batches, "released").statement
    assert not shuffle_section(SPECS, batches, "released", min_batch=990).batches[0].below_minimum
    assert group_batches(batches, 991) == [BatchGroup(batches[0], 1, 1, reports=990)]
    assert group_batches(batches, 990) == [BatchGroup(batches[0], 1, 0, reports=990)]


def test_the_statement_claims_the_shuffler_only_for_what_came_through_it() -> None:
    """Per metric, from what arrived: a metric all of whose reports came in batches gets its
    central eps; one that also took direct reports gets it for the share that came through,
    the rest at the local eps; one whose batches delivered nothing claims nothing; a direct
    metric without batches is said to have come directly, a shuffled-only one to hold none."""
    specs = [
        MetricSpec.boolean("all_in", epsilon=4.0, delivery="shuffled"),
        MetricSpec.boolean("half", epsilon=4.0),
        MetricSpec.boolean("empty", epsilon=4.0),
        MetricSpec.boolean("plain", epsilon=4.0),
        MetricSpec.boolean("waiting", epsilon=4.0, delivery="shuffled"),
    ]
    batches = [
        ShuffledBatch("all_in", "brr", 4.0, 60_000, batch="a"),
        ShuffledBatch("all_in", "brr", 4.0, 40_000, batch="b"),
        ShuffledBatch("half", "brr", 4.0, 25_000, batch="c"),
        ShuffledBatch("empty", "brr", 4.0, 0, batch="d", refused=9),
    ]
    received = {"all_in": 100_000, "half": 100_000, "empty": 30, "plain": 7}
    section = shuffle_section(specs, batches, "released", received=received)
    by_name = {m.metric: m for m in section.metrics}
    assert {name: (m.shuffled_reports, m.direct_reports) for name, m in by_name.items()} == {
        "empty": (0, 30),
        "all_in": (100_000, 0),
        "half": (25_000, 75_000),
    }
    statement = section.statement
    at_40k = strong_clone_epsilon(4.0, 40_000)
    at_25k = strong_clone_epsilon(4.0, 25_000)
    assert at_40k < 4.0 and at_25k < 4.0  # amplified: a claim a direct report must not borrow
    assert (
        f"all_in (only through the shuffler): ε = {at_40k:.4g} with δ = 1e-06 instead of the"
        " local ε = 4;" in statement
    )
    assert (
        f"half: ε = {at_25k:.4g} with δ = 1e-06 instead of the local ε = 4 for the 25% of its"
        " reports that came through the shuffler (25,000 of 100,000), while its other 75,000 reports"
        " came to the collector directly and hold only the local ε = 4" in statement
    )
    assert "empty: none of its reports came through the shuffler" in statement
    assert "plain has no released batch: its reports came to the collector directly" in statement
    assert "waiting is sent only through the shuffler and has no released batch yet" in statement
    assumed = shuffle_section(specs, assumed_batches(specs, 1_000), "assumed").statement
    assert "came to the collector directly" not in assumed

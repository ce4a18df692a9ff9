"""The privacy document's words: what the statement and the warnings say for each setting."""

from __future__ import annotations

import math

import pytest

from deniable.client import WARNING_LEVEL_30_DAYS, DeviceSettings, MetricSpec, privacy_account
from deniable.estimators.privacy import eps_text, privacy_document, registration_warnings, times

DAILY = [MetricSpec.boolean(f"flag_{i}", epsilon=2.0) for i in range(3)]
"""Together above the warning level with the SDK defaults (ε 180 over 30 days)."""


@pytest.mark.parametrize("epsilon", [0, 1e-9, 0.001, 0.05, 0.5, 1, 2, 4, 9.5, 20, 150, 1e6])
def test_times_reads_back_as_e_to_the_eps(epsilon: float) -> None:
    """The factor printed is e^eps to the precision it shows (2.7 for 1, 4.9 × 10^8 for 20)."""
    text = times(epsilon).replace(",", "")
    if "×" in text:
        mantissa, power = text.split(" × 10^")
        shown = math.log(float(mantissa)) + int(power) * math.log(10)
        assert shown == pytest.approx(epsilon, abs=0.05)
    else:
        assert float(text) == pytest.approx(math.exp(epsilon), rel=0.05)
        assert float(text) > 1 or epsilon == 0


def test_the_statement_for_the_defaults_says_the_figures_and_that_nothing_caps_them() -> None:
    document = privacy_document(DAILY)
    assert "e^2 ≈ 7.4 times" in document.statement
    assert "ε up to 180" in document.statement
    assert "too large to limit much" in document.statement
    assert "No lifetime cap is set" in document.statement
    assert "Memoized" not in document.statement
    assert len(document.warnings) == 1 and "ε 180 over 30 days" in document.warnings[0]


def test_with_memo_and_cap_the_statement_claims_the_capped_lifetime() -> None:
    """Issue 37: the cap counts a memoized metric's reports (eps, then eps_inst each), so a
    lifetime ε over any two histories is claimed, and the per-value figure stays below it."""
    settings = DeviceSettings(memoize=True, lifetime_epsilon=10.0)
    document = privacy_document(DAILY, settings)
    account = privacy_account(DAILY, settings)
    lifetime = account.totals.lifetime
    assert lifetime == pytest.approx(len(DAILY) * 8.0)  # two reports at eps_inst 4 each
    assert f"whole lifetime its reports together have ε at most {eps_text(lifetime)}" in (
        document.statement
    )
    per_value = account.totals.per_value_lifetime
    assert per_value is not None and per_value <= lifetime
    assert "Memoized metrics (flag_0, flag_1, flag_2)" in document.statement
    assert "randomize it afresh for every report" in document.statement


def test_without_the_fresh_layer_a_cap_admits_one_report_and_no_change_shows() -> None:
    settings = DeviceSettings(memoize=True, instantaneous_ratio=None, lifetime_epsilon=5.0)
    document = privacy_document(DAILY, settings)
    account = privacy_account(DAILY, settings)
    assert account.totals.lifetime == pytest.approx(sum(s.epsilon for s in DAILY))
    assert not any(m.change_shows for m in account.metrics)
    assert "whether the value changed shows" not in document.statement
    assert "one report over a device's lifetime" in document.statement


def test_without_the_fresh_layer_the_statement_claims_no_finite_eps_over_30_days() -> None:
    settings = DeviceSettings(memoize=True, instantaneous_ratio=None)
    document = privacy_document(DAILY, settings)
    assert document.total.per_30_days is None and document.total.per_7_days is None
    assert "No finite ε bounds what its reports reveal over 30 days" in document.statement
    assert "whether the value changed shows, and no ε bounds that" in document.statement
    assert "Over any 30 days" not in document.statement
    assert "no finite ε bounds" in document.warnings[0]


def test_two_reports_a_period_without_the_fresh_layer_have_no_finite_eps_per_period() -> None:
    """The second report of a period shows whether the value changed, so a period's eps is
    unbounded (None); the statement still states each report's eps (it raised a TypeError
    comparing None with 0 before)."""
    settings = DeviceSettings(memoize=True, instantaneous_ratio=None, max_reports_per_period=2)
    document = privacy_document(DAILY, settings)
    assert all(m.per_period is None for m in privacy_account(DAILY, settings).metrics)
    assert "Each report is randomized" in document.statement
    assert "No finite ε bounds what its reports reveal over 30 days" in document.statement


def test_a_memoized_number_is_said_to_save_little() -> None:
    numeric = MetricSpec.numeric("load", lower=0, upper=1, epsilon=0.5)
    document = privacy_document([numeric], DeviceSettings(memoize=True, instantaneous_ratio=None))
    assert "memoizing load saves little" in document.statement
    assert "No lifetime cap is set" in document.statement


def test_a_number_asked_to_be_memoized_is_said_to_be_reported_afresh() -> None:
    numeric = MetricSpec.numeric("load", lower=0, upper=1, epsilon=0.5)
    document = privacy_document([numeric], DeviceSettings(memoize=True))
    assert "Asked to be memoized, load is reported afresh" in document.statement
    assert document.metrics[0].memoized is False


def test_a_cap_below_a_metrics_eps_is_warned_about() -> None:
    specs = [MetricSpec.boolean("big", epsilon=2.0), MetricSpec.boolean("small", epsilon=0.5)]
    document = privacy_document(specs, DeviceSettings(lifetime_epsilon=1.0))
    assert any("devices never send it" in w and "big" in w for w in document.warnings)
    assert "big" not in document.statement.split("per report")[0]


def test_no_metric_means_no_report() -> None:
    document = privacy_document([])
    assert document.warnings == [] and "send no reports" in document.statement


def test_registration_warns_whenever_it_raises_the_total_above_the_level() -> None:
    """The new metric counts once (a name registered already is replaced, not added); the
    metric that takes the total above the level is warned about, and so is one that adds to a
    total above it already."""
    heavy = [MetricSpec.boolean(f"heavy_{i}", epsilon=4.0) for i in range(2)]
    assert privacy_account(heavy[:1]).totals.per_30_days == WARNING_LEVEL_30_DAYS
    assert registration_warnings(heavy[0], heavy[:1]) == []
    warned = registration_warnings(heavy[1], heavy[:1])
    assert len(warned) == 1 and "with heavy_1 (2 metrics in all)" in warned[0]
    (added,) = registration_warnings(DAILY[0], heavy)
    assert "(it raises the total from ε" in added and "above the level already" in added

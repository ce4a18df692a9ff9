"""The privacy document: one device's privacy account in figures and in plain words.

What the collector answers at ``GET /v1/privacy`` and what ``deniable privacy`` prints, built
once here from the registered specs and the SDK settings asked about. Its dataclasses are the
API's response model, as in :mod:`.documents`; the figures are
:func:`deniable.client.account.privacy_account`'s. :func:`registration_warnings` says when a
new metric takes a device past :data:`~deniable.client.account.WARNING_LEVEL_30_DAYS`: once,
when the total crosses it, not again for each metric registered above it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from deniable.client.account import (
    SDK_DEFAULTS,
    WARNING_LEVEL_30_DAYS,
    AccountTotals,
    DeviceSettings,
    EventMetricAccount,
    MetricAccount,
    PrivacyAccount,
    privacy_account,
)
from deniable.client.kinds import KINDS, NumericSpec
from deniable.client.spec import MetricSpec

from .shufflingaccount import ShuffleSection, shuffle_section

LOOSE_30_DAYS = 30.0
"""The 30-day total above which the statement says the window's bound limits little on its
own (e^30 ≈ 10^13): a plain fact about the figure, said whether or not the total is above
the warning level, which is about what deployments choose."""

PRIVACY_DOC = "docs/privacy.md"
"""Where the warning level and the ways to lower a device's total are explained; a warning
ends with it in parentheses (the dashboard puts a link in its place)."""

LOWER_IT = (
    "to lower it, archive the metrics no one reads, register the others again under new names"
    " with a weekly or monthly period or a lower ε, or have the app set a lifetime cap"
    f" (lifetime_epsilon) ({PRIVACY_DOC})"
)
"""What a warning says to change: each lowers the 30-day total (a spec never changes, so a
new period or ε is a new metric)."""


@dataclass(frozen=True)
class PrivacySettings:
    """The SDK settings the account is for; ``memoize`` is true, false or the sorted metric
    names, ``instantaneous_ratio`` the memoized reports' fresh layer (``None``: none), and
    ``sdk_defaults`` says whether they are the SDK's defaults."""

    max_reports_per_period: int
    memoize: bool | list[str]
    lifetime_epsilon: float | None
    sdk_defaults: bool
    instantaneous_ratio: float | None = SDK_DEFAULTS.instantaneous_ratio


@dataclass(frozen=True)
class ClearDimension:
    """One dimension a metric's reports carry in the clear: its name and how many values a
    report can carry (the listed ones and ``other``)."""

    name: str
    values: int


@dataclass(frozen=True)
class ClearAttributes:
    """What a metric's reports carry besides the randomized value, NOT randomized: its
    dimensions and the cells they make together."""

    metric: str
    dimensions: list[ClearDimension]
    cells: int


def clear_attributes(specs: Iterable[MetricSpec]) -> list[ClearAttributes]:
    """Each metric with dimensions, its dimensions' cardinalities and their product."""
    found = []
    for spec in specs:
        if spec.dimensions:
            dimensions = [ClearDimension(name, len(values) + 1) for name, values in spec.dimensions]
            cells = math.prod(d.values for d in dimensions)
            found.append(ClearAttributes(spec.name, dimensions, cells))
    return found


@dataclass(frozen=True)
class PrivacyDocument:
    """One device's worst-case eps per metric and in total, the warnings and a statement an
    app can publish; ``shuffled``: the central guarantee of each shuffled batch against an
    analyst, beside the local one against the shuffler (:mod:`.shufflingaccount`)."""

    settings: PrivacySettings
    metrics: list[EventMetricAccount | MetricAccount]
    """One row per metric; an event metric's also states its window, one window's ε and what
    the reports that see one day's events spend together (absent for other metrics)."""
    total: AccountTotals
    warning_level_30_days: float
    warnings: list[str]
    statement: str
    shuffled: ShuffleSection = field(default_factory=lambda: ShuffleSection(source="none"))
    in_the_clear: list[ClearAttributes] = field(default_factory=list)
    """Each metric's dimensions and their cardinality: sent in the clear, no ε covers them."""


def eps_text(x: float) -> str:
    """An eps figure as people write it: 60, 2.5, 0.3, 30,000 (never 0.30000000000000004)."""
    return f"{x:,.0f}" if x >= 1e4 else f"{x:.4g}"


def times(epsilon: float) -> str:
    """e^eps as a factor a reader can picture: 1, 1.05, 2.7, 55, 2,981 or 4.9 × 10^8."""
    if epsilon == 0:
        return "1"
    if epsilon < math.log(1.1):
        grown = math.expm1(epsilon)
        decimals = min(12, max(2, -math.floor(math.log10(grown))))
        return f"{1 + grown:.{decimals}f}"
    if epsilon < math.log(10):
        return f"{math.exp(epsilon):.1f}"
    if epsilon < math.log(1e4):
        return f"{round(math.exp(epsilon)):,}"
    power = epsilon / math.log(10)
    exponent = math.floor(power)
    mantissa = round(10 ** (power - exponent), 1)
    if mantissa >= 10:
        mantissa, exponent = 1.0, exponent + 1
    return f"{mantissa:.1f} × 10^{exponent}"


def _settings(settings: DeviceSettings) -> PrivacySettings:
    """The settings as the document states them."""
    memoize = settings.memoize
    return PrivacySettings(
        max_reports_per_period=settings.max_reports_per_period,
        memoize=memoize if isinstance(memoize, bool) else sorted(memoize),
        lifetime_epsilon=settings.lifetime_epsilon,
        sdk_defaults=settings == SDK_DEFAULTS,
        instantaneous_ratio=settings.instantaneous_ratio,
    )


def _over_level(account: PrivacyAccount, lead: str) -> list[str]:
    """A warning if ``account``'s 30-day total exceeds the level; ``lead`` says for whom."""
    total = account.totals.per_30_days
    if total is None:
        return [
            f"{lead}, no finite ε bounds one device's reports over 30 days: memoized metrics"
            f" without a fresh layer ({_names(m for m in account.metrics if m.change_shows)})"
            " show whether their value changed; keep the SDK's instantaneous_ratio"
            " (docs/privacy.md)"
        ]
    if total <= WARNING_LEVEL_30_DAYS:
        return []
    return [
        f"{lead}, one device can spend ε {eps_text(total)} over 30 days, above the warning level"
        f" of {eps_text(WARNING_LEVEL_30_DAYS)}; {LOWER_IT}"
    ]


def _never_sent(account: PrivacyAccount) -> list[str]:
    """A warning naming the metrics a lifetime cap below their ε keeps from ever reporting."""
    silent = [m.metric for m in account.metrics if m.per_period == 0]
    if not silent:
        return []
    return [
        f"lifetime_epsilon {eps_text(account.settings.lifetime_epsilon or 0)} is below the ε of"
        f" {', '.join(silent)}: devices never send {'it' if len(silent) == 1 else 'them'}"
    ]


def _names(metrics: Iterable[MetricAccount]) -> str:
    """The metrics' names, separated by commas."""
    return ", ".join(m.metric for m in metrics)


def _per_report(metrics: list[MetricAccount]) -> str:
    """The sentence on each report's eps: one figure, or the range and the largest."""
    low = min(m.epsilon for m in metrics)
    high = max(m.epsilon for m in metrics)
    if low == high:
        return (
            "Each report is randomized so that any one answer changes its probability by at most"
            f" e^{eps_text(high)} ≈ {times(high)} times, whatever the true value (ε ="
            f" {eps_text(high)} per report)."
        )
    largest = ", ".join(m.metric for m in metrics if m.epsilon == high)
    return (
        "Each report is randomized so that any one answer changes its probability by at most"
        f" e^ε times, whatever the true value, with ε from {eps_text(low)} to {eps_text(high)} per"
        f" report: at most {times(high)} times ({largest}, ε = {eps_text(high)})."
    )


def _over_30_days(account: PrivacyAccount) -> str:
    """The sentences on reports per period and the 30-day total, and what the total means."""
    total = account.totals.per_30_days
    r = account.settings.max_reports_per_period
    if total is None:
        return (
            f"A device sends at most {r:,} report{'s' if r > 1 else ''} per metric per period."
            " No finite ε bounds what its reports reveal over 30 days, for the reason below."
        )
    sentence = (
        f"A device sends at most {r:,} report{'s' if r > 1 else ''} per metric per period. Over"
        f" any 30 days one device's reports together have ε up to {eps_text(total)} (their ε add"
        f" up): everything it sends in that time changes in probability by at most"
        f" e^{eps_text(total)} ≈ {times(total)} times with its true values"
    )
    if total <= LOOSE_30_DAYS:
        return sentence + "."
    return (
        f"{sentence}, a bound too large to limit much on its own: over weeks, the protection"
        " rests on each report's randomization, and many reports of an unchanged value can"
        " reveal it."
    )


def window_text(metric: EventMetricAccount) -> str:
    """An event metric's window in words: ``rolling 7 days`` or ``calendar week``."""
    if metric.rolling:
        return f"rolling {metric.window_days:,} day{'s' if metric.window_days > 1 else ''}"
    return f"calendar {metric.period}"


def _day_of_events_text(metric: EventMetricAccount) -> str:
    """What the reports that see one day's events reveal together, for the statement."""
    figure = metric.per_day_of_events
    bound = "no finite ε" if figure is None else f"ε {eps_text(figure)}"
    if not metric.rolling:
        return f"{metric.metric}: one report per {metric.period}, {bound}"
    days = metric.window_days
    return f"{metric.metric}: the {days:,} daily reports of a {days:,}-day rolling window, {bound}"


def _event_windows(account: PrivacyAccount) -> list[str]:
    """The sentences on event metrics (none without them): one report per window whatever
    the number of events, and what the reports that see one day's events reveal together."""
    events = [m for m in account.metrics if isinstance(m, EventMetricAccount)]
    if not events:
        return []
    sentences = [
        f"Event metrics ({_names(events)}) count or aggregate events on the device and send one"
        " report per window, whatever the number of events: each window's report has the"
        " metric's ε. Every report whose window covers a day sees that day's events, so"
        " together they reveal at most: " + "; ".join(_day_of_events_text(m) for m in events) + "."
    ]
    layered = [m for m in events if m.memoized and m.instantaneous_epsilon is not None]
    if layered:
        sentences.append(
            f"Memoized, an aggregate that does not change ({_names(layered)}) reveals at most"
            " ε " + _epsilons(m.permanent_epsilon for m in layered) + " over any number of"
            " windows."
        )
    return sentences


def _memo_and_lifetime(account: PrivacyAccount) -> list[str]:
    """The sentences on memoization (if on) and on the lifetime total."""
    sentences = []
    layered = [m for m in account.metrics if m.memoized and m.instantaneous_epsilon is not None]
    if layered:
        sentences.append(
            f"Memoized metrics ({_names(layered)}) keep one randomized answer per true value"
            " and randomize it afresh for every report (the ε figures above count that fresh"
            " layer, ε " + _epsilons(m.instantaneous_epsilon for m in layered) + " per report):"
            " all reports of a value that does not change reveal at most ε "
            + _epsilons(m.permanent_epsilon for m in layered)
            + " about it, however many are sent."
        )
    showing = [m for m in account.metrics if m.change_shows]
    if showing:
        sentences.append(
            f"Memoized metrics without a fresh layer ({_names(showing)}) send the same answer"
            " every time for the same value: all their reports reveal at most ε "
            + _epsilons(m.permanent_epsilon for m in showing)
            + " per value, but whether the value changed shows, and no ε bounds that."
        )
    single = [
        m
        for m in account.metrics
        if m.memoized and m.instantaneous_epsilon is None and not m.change_shows
    ]
    if single:
        sentences.append(
            f"Memoized metrics without a fresh layer ({_names(single)}) send at most one report"
            " over a device's lifetime: the lifetime cap admits no second one, which would show"
            " whether the value changed."
        )
    afresh = [m for m in account.metrics if account.settings.memoized(m.metric) and not m.memoized]
    if afresh:
        sentences.append(
            f"Asked to be memoized, {_names(afresh)} {'is' if len(afresh) == 1 else 'are'}"
            " reported afresh instead: only krr and brr metrics have a permanent answer that"
            " can be randomized again for every report."
        )
    numeric = [m.metric for m in showing if KINDS.get(m.type) is NumericSpec]
    if numeric:
        sentences.append(
            f"A number rarely repeats exactly, so memoizing {', '.join(numeric)} saves little."
        )
    lifetime = account.totals.lifetime
    if lifetime is not None:
        sentences.append(
            f"Over a device's whole lifetime its reports together have ε at most"
            f" {eps_text(lifetime)}."
        )
    else:
        sentences.append("No lifetime cap is set: the total grows with every period.")
    return sentences


def _epsilons(figures: Iterable[float | None]) -> str:
    """One ε figure, or the range of several."""
    values = sorted({f for f in figures if f is not None})
    if len(values) == 1:
        return eps_text(values[0])
    return f"{eps_text(values[0])} to {eps_text(values[-1])}"


def statement(account: PrivacyAccount) -> str:
    """A short plain-language statement of ``account`` that an app can publish."""
    if not account.metrics:
        return "No metric is registered: devices send no reports."
    if account.totals.per_30_days == 0:
        return "With these settings a device sends no report: each metric's ε exceeds its lifetime cap."
    return " ".join(
        [
            "Every value is randomized on the device before it is sent.",
            _per_report([m for m in account.metrics if m.per_period is None or m.per_period > 0]),
            _over_30_days(account),
            *_event_windows(account),
            *_memo_and_lifetime(account),
        ]
    )


def privacy_document(
    specs: Iterable[MetricSpec],
    settings: DeviceSettings = SDK_DEFAULTS,
    shuffled: ShuffleSection | None = None,
) -> PrivacyDocument:
    """The privacy document of a device recording ``specs`` with ``settings`` (archived
    metrics are left out by the caller: devices stop recording them), with ``shuffled``, the
    section on batches released by a shuffler (None: no shuffled batches). The local figures
    hold whatever the shuffler does; the statement adds the shuffled section's words when it
    has batches."""
    specs = list(specs)
    if shuffled is None:
        shuffled = shuffle_section(specs, [], "none")
    account = privacy_account(specs, settings)
    warnings = _over_level(account, "with these settings") + _never_sent(account)
    if settings != SDK_DEFAULTS:
        warnings += _over_level(privacy_account(specs), "with the SDK defaults")
    return PrivacyDocument(
        settings=_settings(settings),
        metrics=list(account.metrics),
        total=account.totals,
        warning_level_30_days=WARNING_LEVEL_30_DAYS,
        warnings=warnings,
        statement=" ".join(
            filter(
                None,
                [
                    statement(account),
                    dimensions_sentence(specs),
                    shuffled.statement if shuffled.batches else "",
                ],
            )
        ),
        shuffled=shuffled,
        in_the_clear=clear_attributes(specs),
    )


def dimensions_sentence(specs: Iterable[MetricSpec]) -> str:
    """What the statement says of dimensions: which metrics' reports carry which public
    attributes in the clear (empty if none declares any)."""
    dimensioned = clear_attributes(specs)
    if not dimensioned:
        return ""
    carried = "; ".join(
        f"{metric.metric}: "
        + ", ".join(f"{d.name} (one of {d.values:,} values)" for d in metric.dimensions)
        for metric in dimensioned
    )
    return (
        f"Some reports also carry attributes of the device in the clear, NOT randomized ({carried}):"
        " coarse public attributes, each one of a short published list or 'other', sent so"
        " that estimates can be broken down by them; the ε figures do not cover them."
    )


def registration_warnings(new_spec: MetricSpec, registered: Iterable[MetricSpec]) -> list[str]:
    """Why newly registering ``new_spec`` beside the ``registered`` metrics (not archived)
    deserves a warning: it leaves the 30-day total with the SDK defaults above the level
    (empty if not).

    Said by every registration that raises the total above the level, whether it crosses it
    or adds to a total above it already: each such metric is one more an operator could drop
    or make less frequent. A registration that raises nothing (a spec registered again is
    never counted twice) says nothing.
    """
    others = [spec for spec in registered if spec.name != new_spec.name]
    specs = [*others, new_spec]
    before = privacy_account(others).totals.per_30_days
    account = privacy_account(specs)
    after = account.totals.per_30_days
    if before is not None and after is not None and after <= before:
        return []
    above = before is not None and before > WARNING_LEVEL_30_DAYS
    raised = f" (it raises the total from ε {eps_text(before or 0)}, above the level already)"
    lead = f"with {new_spec.name} ({len(specs)} metrics in all) and the SDK defaults"
    return _over_level(account, lead + (raised if above else ""))

"""The on-device privacy ledger: per-period report budgets, lifetime eps caps and the memo.

The ledger decides, before anything is randomized, whether a record may become a report.
Its decisions depend only on public facts, the period and how many reports of the metric were
already sent (never on the value being recorded nor on how many distinct values were seen:
whether a report is sent is itself an output, docs/STATS.md section 13), and every
change it makes is collected as a delta that the outbox commits in the same SQLite
transaction as the reports it admitted, so a crash can never grant a second report.
"""

from __future__ import annotations

import hashlib
import hmac
import math
from dataclasses import dataclass, field

from .errors import InvalidInput
from .guarantees import PureDP
from .mechanisms import Payload, TwoLayers, two_layers
from .randomness import Randomness
from .spec import MetricSpec

PIN_PREFIX = "pin:"
"""Memo keys that hold a text metric's pinned prefix level, not a memoized answer."""


def within_lifetime(reports: int, epsilon: float, lifetime_epsilon: float) -> bool:
    """Whether ``reports`` reports at ``epsilon`` fit a lifetime cap: their composed guarantee
    against the cap, exactly under the rounding rule of :mod:`.guarantees` (so ten reports at
    0.1 fit a cap of 1, with no slack)."""
    return reports * PureDP(epsilon) <= PureDP(lifetime_epsilon)


_MAX_LIFETIME_REPORTS = 2**52
"""The most reports :func:`lifetime_reports` counts (the settings bound ``lifetime_epsilon``
far below it): a count a float still holds exactly."""


def _reports_within(guarantee: PureDP, lifetime_epsilon: float) -> int:
    """The most reports at ``guarantee`` a lifetime cap admits, exactly; a count past
    :data:`_MAX_LIFETIME_REPORTS` is refused (``InvalidInput``) rather than counted."""
    count = guarantee.reports_within(PureDP(lifetime_epsilon))
    if count is None or not count < _MAX_LIFETIME_REPORTS:
        raise InvalidInput(
            f"lifetime_epsilon / epsilon must be below {_MAX_LIFETIME_REPORTS:,} reports"
        )
    return count


def lifetime_reports(lifetime_epsilon: float, epsilon: float) -> int:
    """The most reports at ``epsilon`` a lifetime cap admits: the largest n that
    :func:`within_lifetime` allows (what :meth:`Ledger.admit` ends at), in closed form (the
    exact floor of cap / eps). A ratio past :data:`_MAX_LIFETIME_REPORTS` is refused
    (``InvalidInput``)."""
    return _reports_within(PureDP(epsilon), lifetime_epsilon)


@dataclass(frozen=True)
class ReportCost:
    """How one metric's reports add up on a device: what the ledger counts and the account
    states (docs/privacy.md).

    ``memoized`` says a permanent answer per value is kept; ``instantaneous_epsilon`` is the
    fresh layer each memoized report adds (``None``: none, the permanent answer is sent as
    is); ``permanent_epsilon`` is what all reports of one unchanged value reveal (the
    metric's eps when not memoized). These floats are the figures the account shows; the
    guarantees the ledger composes are :attr:`local`, :attr:`permanent` and :attr:`fresh`
    (given by the two layers, whose fresh layer is ratio x eps exactly; else read from the
    floats).
    """

    epsilon: float
    memoized: bool = False
    permanent_epsilon: float = 0.0
    instantaneous_epsilon: float | None = None
    fresh: PureDP | None = None
    local: PureDP = field(init=False, repr=False, compare=False)
    permanent: PureDP = field(init=False, repr=False, compare=False)
    _most: list[tuple[PureDP, int | None]] = field(
        default_factory=list, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if not self.memoized:
            object.__setattr__(self, "permanent_epsilon", self.epsilon)
        object.__setattr__(self, "local", PureDP(self.epsilon))
        object.__setattr__(self, "permanent", PureDP(self.permanent_epsilon))
        if self.fresh is None and self.instantaneous_epsilon is not None:
            object.__setattr__(self, "fresh", PureDP(self.instantaneous_epsilon))

    def guarantee(self, reports: int) -> PureDP:
        """The most ``reports`` reports reveal over any two histories of true values.

        One report is the metric's own mechanism: eps. Fresh reports compose: n eps. A
        memoized report is its value's permanent answer randomized afresh at eps_inst, so n
        reports differ by at most n eps_inst between any two histories (the same permanent
        answers drawn for both, only the fresh layers differ). Without the fresh layer two
        reports of one value are always equal and of two values seldom: whether the value
        changed shows, and no finite eps bounds it (unbounded).
        """
        if reports <= 1 or not self.memoized:
            return reports * self.local
        if self.fresh is None:
            return PureDP(math.inf)
        return reports * self.fresh

    def histories(self, reports: int) -> float:
        """:meth:`guarantee` as the figure the account and :meth:`Ledger.spent` show (``inf``:
        unbounded)."""
        return self.guarantee(reports).figure

    def within(self, reports: int, lifetime_epsilon: float) -> bool:
        """Whether ``reports`` reports fit a lifetime cap over any two histories: their
        :meth:`guarantee` against the cap, exactly (the rounding rule, no slack)."""
        return self.guarantee(reports) <= PureDP(lifetime_epsilon)

    def most_reports(self, cap: PureDP) -> int | None:
        """The most reports whose :meth:`guarantee` fits ``cap`` (``None``: no limit), exactly:
        ``n`` reports fit exactly when ``n`` is at most it (the guarantee grows with n). The
        answer for the last cap asked is kept, since the ledger asks on every record."""
        kept = self._most[0] if self._most else None
        if kept is not None and kept[0] is cap:
            return kept[1]
        if not self.memoized:
            most = self.local.reports_within(cap)
        elif not self.local <= cap:
            most = 0
        elif self.fresh is None:
            most = 1
        else:
            fresh = self.fresh.reports_within(cap)
            most = None if fresh is None else max(1, fresh)
        self._most[:] = [(cap, most)]
        return most

    def lifetime_reports(self, lifetime_epsilon: float) -> int:
        """The most reports a lifetime cap admits: the largest n :meth:`within` allows, where
        :meth:`Ledger.admit` stops. Fresh reports: :func:`lifetime_reports` at eps. Memoized:
        none if one report (eps) does not fit, else n at eps_inst each once n >= 2 fit, else
        one (without the fresh layer a second report is unbounded, so one at most)."""
        if not self.memoized:
            return _reports_within(self.local, lifetime_epsilon)
        if not self.within(1, lifetime_epsilon):
            return 0
        if self.fresh is None:
            return 1
        return max(1, _reports_within(self.fresh, lifetime_epsilon))


def report_cost(
    spec: MetricSpec, memoize: bool, instantaneous_ratio: float | None
) -> tuple[ReportCost, TwoLayers | None]:
    """The cost rule of ``spec`` on a device that asks to ``memoize`` it, and the two layers
    its memoized reports use.

    With an ``instantaneous_ratio`` (the SDK's default), a metric is memoized only where two
    layers exist (krr and brr: :func:`~.mechanisms.two_layers`); others are reported afresh.
    With ``None`` every asked metric keeps one permanent answer per value, sent as is. A kind
    that is not :attr:`~.spec.MetricSpec.memoizable` (a set) is always reported afresh.
    """
    if not memoize or not spec.memoizable:
        return ReportCost(spec.epsilon), None
    if instantaneous_ratio is None:
        return ReportCost(spec.epsilon, True, spec.epsilon), None
    oracle = spec.frequency_oracle
    layers = None if oracle is None else two_layers(oracle, instantaneous_ratio)
    if layers is None:
        return ReportCost(spec.epsilon), None
    cost = ReportCost(
        spec.epsilon,
        True,
        layers.permanent_epsilon,
        layers.instantaneous_epsilon,
        layers.instantaneous_guarantee,
    )
    return cost, layers


@dataclass(frozen=True)
class PrivacySpent:
    """Epsilon spent by one metric: over any two histories in the current period and in all
    (``inf``: unbounded, see :meth:`ReportCost.histories`), and per value, what the reports
    of unchanged values reveal (a memoized metric's distinct values x its permanent eps)."""

    period_epsilon: float
    total_epsilon: float
    per_value_epsilon: float | None = None


@dataclass
class LedgerDelta:
    """Ledger changes not yet durable: new period counts and new memo entries."""

    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    memo: dict[str, tuple[str, Payload]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.counts or self.memo)


class Ledger:
    """Budget counts per (metric, period), lifetime totals, and memoized randomized answers.

    Not thread-safe on its own: the client calls it under its single record lock.
    Memo entries are keyed by HMAC-SHA256 over ``metric|fingerprint|index`` (for a numeric
    metric ``metric|fingerprint|t=<t as float.hex>``, see :meth:`memo_key`) with a
    device-local secret, so the memo never holds a plain value. The secret lives in the same
    ``state_dir``, so whoever can read that whole directory can test which values have memo
    entries (as with any on-device memo, RAPPOR's included): keep it in app-private storage.
    """

    def __init__(
        self,
        secret: bytes,
        *,
        max_reports_per_period: int,
        lifetime_epsilon: float | None,
    ) -> None:
        if max_reports_per_period < 1:
            raise InvalidInput("max_reports_per_period must be at least 1")
        if lifetime_epsilon is not None and not lifetime_epsilon > 0:
            raise InvalidInput("lifetime_epsilon must be > 0")
        self._secret = secret
        self.max_reports_per_period = max_reports_per_period
        self.lifetime_epsilon = lifetime_epsilon
        self._cap = None if lifetime_epsilon is None else PureDP(lifetime_epsilon)
        self._counts: dict[tuple[str, str], int] = {}
        self._totals: dict[str, int] = {}
        self._memo: dict[str, Payload] = {}
        self._memo_sizes: dict[str, int] = {}
        self._pins: dict[str, int] = {}
        self.malformed: list[str] = []
        """Metrics whose remembered answer or pinned level did not fit them and was drawn
        afresh (a state this client did not write); the recorder reports and empties it."""
        self._dirty: set[tuple[str, str]] = set()
        self._delta = LedgerDelta()

    def load(
        self, counts: dict[tuple[str, str], int], memo: dict[str, tuple[str, Payload]]
    ) -> None:
        """Start from the durable state (counts per metric and period, memo entries)."""
        for (metric, period), n in counts.items():
            self._counts[(metric, period)] = n
            self._totals[metric] = self._totals.get(metric, 0) + n
        for key, (metric, payload) in memo.items():
            if key.startswith(PIN_PREFIX):
                if type(payload) is not int:  # the outbox sets such a memo aside before loading
                    raise ValueError(f"memo entry {key!r} holds no pinned level")
                self._pins[key] = payload
                continue
            self._memo[key] = payload
            self._memo_sizes[metric] = self._memo_sizes.get(metric, 0) + 1

    def memo_key(
        self, metric: str, fingerprint: str, value: int | float | bytes, permanent: bool = False
    ) -> str:
        """The HMAC under which a memoized answer for this value is stored.

        ``value`` is a category index (an ``int``: boolean, categorical, and histogram
        metrics, whose categories are buckets) or a numeric metric's value after clamping and
        scaling, t in [-1, 1] (a ``float``, written exactly as ``float.hex``, so two values
        share an answer only when they are the same point on the metric's axis). Only the
        HMAC is stored, never t: with the secret, a numeric value can be tested only by
        guessing it exactly among all floats of the range, which is harder than testing the k
        categories of a categorical metric. A text metric's value is its padded bytes (written
        as hex, ``s=...``): only the HMAC is stored. ``permanent`` keys a two-layer permanent answer
        (a category index, :class:`~.mechanisms.TwoLayers`) apart from a payload memoized
        as is, so neither is ever read as the other.
        """
        if isinstance(value, bytes):
            message = f"{metric}|{fingerprint}|s={value.hex()}".encode()
        elif isinstance(value, float):
            message = f"{metric}|{fingerprint}|t={value.hex()}".encode()
        else:
            message = f"{metric}|{fingerprint}|{value}".encode()
        if permanent:
            message += b"|permanent"
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def pinned_level(self, metric: str, fingerprint: str, levels: int, rng: Randomness) -> int:
        """A text metric's prefix level on this device, in 1..``levels``, for its lifetime.

        Drawn uniformly from ``rng`` (the OS CSPRNG) on the metric's first report, whatever
        the value, and kept in the memo under ``pin:`` + an HMAC of ``metric|fingerprint``; the
        entry is committed with the first report it admitted (the ledger delta), so no report
        is ever sent under a level the device could later forget and redraw. Redrawing it
        would let each period reveal another prefix of the same string (STATS.md section 11).
        Pins are not memoized values: the lifetime accounting never counts them.
        """
        digest = hmac.new(self._secret, f"{metric}|{fingerprint}".encode(), hashlib.sha256)
        key = PIN_PREFIX + digest.hexdigest()
        level = self._pins.get(key)
        if level is not None and not (type(level) is int and 1 <= level <= levels):
            self.malformed.append(metric)
            level = None
        if level is None:
            level = self._pins[key] = 1 + rng.randbelow(levels)
            self._delta.memo[key] = (metric, level)
        return level

    def _over_lifetime(self, metric: str, cost: ReportCost) -> bool:
        """Whether one more report would take the metric past the lifetime cap over any two
        histories (:meth:`ReportCost.within`), counted in reports sent, memoized or not."""
        if self._cap is None:
            return False
        most = cost.most_reports(self._cap)
        return most is not None and self._totals.get(metric, 0) + 1 > most

    def admit(self, metric: str, period: str, cost: ReportCost) -> bool:
        """Whether one more report of ``metric`` fits the budget now; counts it if so.

        Both rules count reports already sent, in this period and in all: the decision
        depends on the period and on those counts only, never on the value, nor (memoized)
        on how many distinct values the memo holds. A cap counted per distinct value would
        send fewer reports for a device whose value changed, which shows with certainty.
        """
        key = (metric, period)
        used = self._counts.get(key, 0)
        if used >= self.max_reports_per_period:
            return False
        if self._over_lifetime(metric, cost):
            return False
        self._counts[key] = used + 1
        self._totals[metric] = self._totals.get(metric, 0) + 1
        self._dirty.add(key)
        return True

    def refusal(self, metric: str, cost: ReportCost) -> str:
        """The rule that made :meth:`admit` refuse ``metric`` just now, in words (for the log)."""
        if self._over_lifetime(metric, cost):
            reports = self._totals.get(metric, 0) + 1
            return (
                f"not sent: {reports} report{'s' if reports > 1 else ''} would have epsilon"
                f" {cost.histories(reports):g} over any two histories, above the"
                f" lifetime_epsilon of {self.lifetime_epsilon:g} on this device"
            )
        n = self.max_reports_per_period
        return (
            f"not sent: a device sends at most {n} report{'s' if n > 1 else ''} per metric and"
            f" period (max_reports_per_period={n}); further records in this period are not sent"
        )

    def memoized(self, key: str) -> Payload | None:
        """The remembered randomized answer under ``key``, if any."""
        return self._memo.get(key)

    def remember(self, metric: str, key: str, payload: Payload) -> None:
        """Keep ``payload`` as the permanent randomized answer under ``key``."""
        self._memo[key] = payload
        self._memo_sizes[metric] = self._memo_sizes.get(metric, 0) + 1
        self._delta.memo[key] = (metric, payload)

    def take_delta(self) -> LedgerDelta:
        """Hand over the changes since the last call (for the outbox to commit)."""
        delta, self._delta = self._delta, LedgerDelta()
        delta.counts = {key: self._counts[key] for key in self._dirty}
        self._dirty = set()
        return delta

    def restore_delta(self, delta: LedgerDelta) -> None:
        """Put back changes whose commit failed, so the next commit carries them."""
        self._dirty.update(delta.counts)
        for key, entry in delta.memo.items():
            self._delta.memo.setdefault(key, entry)

    def spent(self, metric: str, period: str, cost: ReportCost) -> PrivacySpent:
        """Epsilon spent by ``metric`` in ``period`` and over its lifetime, over any two
        histories (:meth:`ReportCost.guarantee`), and per value: without memoization every
        report costs eps; with it, a device reveals at most its permanent eps per distinct
        value it ever reported, however many periods repeat it (and never more than its
        total). The guarantees are composed here; the figures are what it states."""
        total = cost.guarantee(self._totals.get(metric, 0))
        per_value = min(self._memo_sizes.get(metric, 0) * cost.permanent, total)
        return PrivacySpent(
            cost.histories(self._counts.get((metric, period), 0)),
            total.figure,
            per_value.figure if cost.memoized else total.figure,
        )

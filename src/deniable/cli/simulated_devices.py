"""Simulated devices that report through the real SDK, for ``simulate`` and ``demo``.

Failures are raised as :class:`~deniable.client.errors.DeniableError` (a bad distribution
file, a refusing or unreachable collector), for the command to report.

Honesty rules. Each simulated device holds one true value per metric and sends exactly one
report per metric per period, randomized by the SDK's own mechanism with fresh randomness.
A full :class:`~deniable.client.Client` per device (its own SQLite state and threads) would be
too slow for 20,000 devices, so one Client stands in for a *batch* of devices: its per-period
budget is raised to the batch's size and memoization is off. Memoization must stay off: a
shared memo would give every device with the same value the same randomized answer, which no
real fleet does. The reports that reach the collector are then distributed exactly as those of
independent devices each running its own Client.

True values are allocated exactly (largest remainder), then shuffled, so the realized shares
equal the printed distribution up to rounding to whole devices. Numeric and histogram metrics
get numbers instead: lognormal load times (:func:`number_population`), clamped to the metric's
range as the SDK clamps them, so the printed truth is what the devices report on.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import random
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from deniable.client.errors import (
    BudgetExceeded,
    CollectorRefused,
    CollectorUnavailable,
    InvalidInput,
)

from .kindrender import render_of

FLUSH_STEP_SECONDS = 0.5
DEVICES_PER_CLIENT = 1000
"""Simulated devices that share one SDK Client (and one upload batch)."""

ZIPF_EXPONENT = 1.0
"""s of the Zipf distribution: the share of the i-th category is proportional to 1/i^s."""


def zipf_weights(k: int, exponent: float = ZIPF_EXPONENT) -> list[float]:
    """Zipf shares over k categories, largest first."""
    raw = [1.0 / (i + 1) ** exponent for i in range(k)]
    total = sum(raw)
    return [w / total for w in raw]


def parse_distribution(text: str, source: str, categories: Sequence[str]) -> list[float]:
    """Shares from a JSON object {category: weight} or ``category,weight`` lines; ``source``
    names where the text came from in messages (a file, or "--distribution")."""
    weights: dict[str, float] = {}
    try:
        if text.lstrip().startswith("{"):
            weights = {str(k): float(v) for k, v in json.loads(text).items()}
        else:
            for number, line in enumerate(text.splitlines(), start=1):
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                name, _, value = line.rpartition(",")
                if not name:
                    raise InvalidInput(f"{source}:{number}: expected 'category,weight'")
                if name.strip() == "category" and value.strip() == "weight":
                    continue
                weights[name.strip()] = float(value)
    except InvalidInput:
        raise
    except (ValueError, TypeError, AttributeError) as exc:
        raise InvalidInput(
            f"{source} is not a distribution (category,weight lines or a JSON object): {exc}"
        ) from None
    unknown = sorted(set(weights) - set(categories))
    if unknown:
        raise InvalidInput(f"{source} names {unknown[0]!r}, which is not a category of this metric")
    values = [weights.get(c, 0.0) for c in categories]
    if not all(math.isfinite(w) and w >= 0 for w in values) or sum(values) <= 0:
        raise InvalidInput(f"{source}: weights must be non-negative with a positive sum")
    total = sum(values)
    return [w / total for w in values]


def read_distribution(path: Path, categories: Sequence[str]) -> list[float]:
    """Shares from a file: a JSON object {category: weight} or ``category,weight`` lines."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInput(f"no such distribution file: {path}") from None
    return parse_distribution(text, str(path), categories)


def is_inline(kind: str) -> bool:
    """Whether a ``--distribution`` value is an inline JSON object rather than a name or file."""
    return kind.lstrip().startswith("{")


def distribution(kind: str, categories: Sequence[str]) -> list[float]:
    """The true shares for ``zipf``, ``uniform``, an inline JSON object or a file name."""
    if kind == "uniform":
        return [1.0 / len(categories)] * len(categories)
    if kind == "zipf":
        return zipf_weights(len(categories))
    if is_inline(kind):
        return parse_distribution(kind, "--distribution", categories)
    return read_distribution(Path(kind), categories)


def allocate(n: int, weights: Sequence[float], rng: random.Random) -> list[int]:
    """n category indices with exactly round(n * w) of each (largest remainder), shuffled."""
    exact = [n * w for w in weights]
    counts = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: exact[i] - counts[i], reverse=True)
    for i in order[: n - sum(counts)]:
        counts[i] += 1
    values = [i for i, c in enumerate(counts) for _ in range(c)]
    rng.shuffle(values)
    return values


LOGNORMAL_MEDIAN = 0.08
"""Where the simulated numbers' median lies, as a fraction of the way from the range's low
end to its high end (load times of 400 ms on [0, 5000])."""

LOGNORMAL_SIGMA = 0.8
"""The spread (sigma of the logarithm) of the simulated numbers."""


@dataclass(frozen=True)
class Population:
    """The simulated devices' true values for one metric, and the shares they realize.

    ``values`` are category indices, or numbers (value units) for a numeric or histogram
    metric.
    """

    spec: Any
    values: list[Any]

    @property
    def numbers(self) -> bool:
        """Whether the devices hold numbers (a numeric or histogram metric)."""
        return render_of(self.spec).number_range is not None

    @property
    def shares(self) -> dict[str, float]:
        """The realized share of each category (a histogram's buckets) among the devices."""
        n = len(self.values)
        counts = [0] * self.spec.k
        for v in self.values:
            counts[self.spec.bucket_of(v) if self.numbers else v] += 1
        return {c: counts[i] / n for i, c in enumerate(self.spec.categories)}

    @property
    def mean(self) -> float:
        """The devices' mean value (numbers only)."""
        return sum(self.values) / len(self.values)

    def quantile(self, q: float) -> float:
        """The devices' q-quantile, the least value with at least a share q at or below it."""
        ordered = sorted(self.values)
        return float(ordered[max(0, math.ceil(q * len(ordered)) - 1)])

    def record_value(self, device: int) -> Any:
        """What device ``device`` passes to ``Client.record``: a bool, a category name or a
        number."""
        value = self.values[device]
        if self.numbers:
            return value
        return render_of(self.spec).device_value(self.spec, value)


def population(spec: Any, n: int, weights: Sequence[float], rng: random.Random) -> Population:
    """n devices whose values follow ``weights`` exactly (up to rounding)."""
    return Population(spec, allocate(n, weights, rng))


def number_population(spec: Any, n: int, rng: random.Random) -> Population:
    """n devices holding lognormal numbers (median :data:`LOGNORMAL_MEDIAN` of the way up the
    range), clamped to a numeric metric's [lower, upper] or a histogram's outer edges."""
    bounds = render_of(spec).number_range
    if bounds is None:
        raise InvalidInput(f"{spec.name} is a {spec.type} metric: its devices hold no numbers")
    low, high = bounds(spec)
    median = low + LOGNORMAL_MEDIAN * (high - low)
    offset = median - low
    values = [
        min(high, max(low, low + offset * math.exp(rng.gauss(0.0, LOGNORMAL_SIGMA))))
        for _ in range(n)
    ]
    return Population(spec, values)


class RefusalWitness:
    """Why the collector refused the simulated devices' reports, as it said it.

    The SDK drops the reports a collector refuses with 422 and only logs the reason; a
    simulation must show that reason to its user instead (a period outside the retention
    window, an archived metric), so every 422 answer to an upload passes through a
    :class:`WitnessedTransport` on its way to the SDK, and its reasons are kept here, in
    order, without duplicates.
    """

    def __init__(self) -> None:
        """Start with no reason noted; one verifying TLS context for every transport."""
        self._tls = httpx.create_ssl_context()
        self.reasons: list[str] = []

    def transport(self) -> WitnessedTransport:
        """A new transport (each SDK client closes its own) reporting to this witness."""
        return WitnessedTransport(self, verify=self._tls)

    def note(self, response: httpx.Response) -> None:
        """Keep the reasons of a 422 problem document (``{"detail": [{"reason": ...}]}``)."""
        try:
            detail = response.json().get("detail")
        except (ValueError, AttributeError):
            return
        items = detail if isinstance(detail, list) else [{"reason": detail}]
        for item in items:
            reason = item.get("reason") if isinstance(item, dict) else None
            if isinstance(reason, str) and reason not in self.reasons:
                self.reasons.append(reason)

    def summary(self) -> str:
        """The reasons noted, joined (the first three), or a hint when none was given."""
        if not self.reasons:
            return "check --ingest-key / DENIABLE_INGEST_KEY and that the metric specs match"
        more = len(self.reasons) - 3
        shown = "; ".join(self.reasons[:3]) + (f"; and {more} more" if more > 0 else "")
        return f"the collector said: {shown}"


class WitnessedTransport(httpx.HTTPTransport):
    """httpx's network transport, showing every 422 answer to a :class:`RefusalWitness`."""

    def __init__(self, witness: RefusalWitness, **options: Any) -> None:
        """A transport with httpx's ``options`` whose 422 answers ``witness`` sees."""
        super().__init__(**options)
        self.witness = witness

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request``; let the witness read a 422 answer before the SDK does."""
        response = super().handle_request(request)
        if response.status_code == 422:
            response.read()
            self.witness.note(response)
        return response


@dataclass(frozen=True)
class Delivery:
    """What the SDK reported after the simulation: recorded, delivered and refused reports."""

    recorded: int
    delivered: int
    duplicates: int
    rejected: int
    over_budget: int


def _flush(client: Any, timeout: float) -> bool:
    """Flush in short steps, giving up early once the collector refuses the uploads outright
    (the SDK keeps such reports and retries, which would only wait out ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        step = min(FLUSH_STEP_SECONDS, deadline - time.monotonic())
        if client.flush(max(step, 0.05)):
            return True
        if client.stats.refused or time.monotonic() >= deadline:
            return False


def check_batch(
    collector_url: str,
    stats: Any,
    kept_back: int,
    delivered: bool,
    witness: RefusalWitness,
    timeout: float,
) -> None:
    """Raise if a batch's Client (its ``stats`` after the flush) kept back reports (budget or
    queue: the simulation would not be one report per device) or could not deliver them (a
    refusing or unreachable collector)."""
    if kept_back or stats.dropped_queue_full:
        raise BudgetExceeded(
            f"the SDK kept back {kept_back + stats.dropped_queue_full} report(s) of a batch"
            " (privacy budget or queue); the simulation would not be one report per device"
        )
    if stats.refused and not delivered:
        raise CollectorRefused(
            f"the collector at {collector_url} refused {stats.queued} report(s) (HTTP"
            " 401/403/404); check --ingest-key / DENIABLE_INGEST_KEY and the URL"
        )
    if stats.dropped_rejected:
        raise CollectorRefused(
            f"the collector at {collector_url} refused {stats.dropped_rejected}"
            f" report(s); {witness.summary()}"
        )
    if not delivered:
        raise CollectorUnavailable(
            f"could not deliver the reports to {collector_url} within {timeout:g} s;"
            " is the collector running?"
        )


def run_devices(
    collector_url: str,
    populations: Sequence[Population],
    *,
    ingest_key: str | None = None,
    seed: int | None = None,
    moment: dt.datetime | None = None,
    on_batch: Callable[[int], None] | None = None,
    timeout: float = 60.0,
    contexts: Sequence[dict[str, str]] | None = None,
) -> Delivery:
    """Drive every device of ``populations`` (same device count each) through the SDK.

    Each device records one value per metric at ``moment`` (default now), so it reports once
    per metric in that period; ``contexts[device]``, if given, is its public context (its
    dimensions' values), set before it records. ``on_batch(devices)`` is called after each
    batch is delivered.
    """
    from deniable.client import Client, SeededRandomness, system_randomness
    from deniable.client.mechanisms import MAX_EPSILON

    if not populations:
        return Delivery(0, 0, 0, 0, 0)
    devices = len(populations[0].values)
    if any(len(p.values) != devices for p in populations):
        raise ValueError("every metric needs the same number of devices")
    rng = SeededRandomness(seed) if seed is not None else system_randomness
    fixed = moment or dt.datetime.now(dt.UTC)
    specs = [p.spec for p in populations]
    totals = dict.fromkeys(
        ("recorded", "delivered", "duplicates", "dropped_rejected", "over_budget"), 0
    )
    witness = RefusalWitness()
    with tempfile.TemporaryDirectory(prefix="deniable-sim-") as state_root:
        for start in range(0, devices, DEVICES_PER_CLIENT):
            stop = min(start + DEVICES_PER_CLIENT, devices)
            client = Client(
                collector_url,
                state_dir=Path(state_root) / f"batch-{start}",
                ingest_key=ingest_key,
                metrics=specs,
                max_epsilon=MAX_EPSILON,  # simulated devices take the registered specs as they are
                max_reports_per_period=stop - start,
                memoize=False,
                clock=lambda: fixed,
                randomness=rng,
                flush_interval=3600.0,
                transport=witness.transport(),
            )
            try:
                current: dict[str, str] | None = None
                for device in range(start, stop):
                    if contexts is not None and contexts[device] != current:
                        current = contexts[device]
                        client.set_context(current)
                    for pop in populations:
                        client.record(pop.spec.name, pop.record_value(device))
                delivered = _flush(client, timeout)
                stats = client.stats
            finally:
                client.close(timeout=1.0)
            for key in totals:
                totals[key] += getattr(stats, key)
            kept_back = (stop - start) * len(populations) - stats.admitted
            check_batch(collector_url, stats, kept_back, delivered, witness, timeout)
            if on_batch is not None:
                on_batch(stop - start)
    return Delivery(
        totals["recorded"],
        totals["delivered"],
        totals["duplicates"],
        totals["dropped_rejected"],
        totals["over_budget"],
    )

"""End to end for event metrics (issue 40): 2,000 devices with known event streams over 30
simulated days, through the SDK's recording core and a real collector (HTTP, SQLite).

Each device has its own recorder (one device's windows live in one SDK state), a simulated
clock moved one day at a time and seeded randomness. Devices open the app on some days only
(an active day); on those days they crash (Poisson, a rate per device), load pages in bursts
whose first load of the day is a slow cold start, and sometimes use a feature. The metrics:

* crashes per device-day, as a histogram (``count``) and as a numeric mean (``count``);
* the per-device mean load time of a day, as a numeric mean (``mean``) and as a histogram
  whose median is read (``mean``);
* 7-day actives of the feature (boolean ``any``, rolling 7 days);
* the old way: ``record()`` of every load on a plain numeric metric, which keeps the first
  load of the day.

Every device goes through :class:`~deniable.client.recorder.Recorder`, the part of
:class:`~deniable.client.Client` that aggregates events, closes windows and randomizes: a
whole Client per device costs about 90 ms over 30 days (its SQLite state, threads and an
upload per day: 2,000 devices would take 3 minutes of one core), the recorder 5 ms. The first
test shows the two are the same: devices run through real Clients (state on disk, uploads
captured by a mock transport) send exactly the payloads the recorder path sends with the
same seeds. Reports are then posted to the collector in batches of 1,000, as the SDK sends.

The truths are the simulated population's own (clamped, as devices clamp) values over the
devices that reported, which the collector counts exactly. Intervals are asked at 90%:
under nominal coverage the misses of m independent cells are at most Binomial(m, 0.1), and
a family fails when its misses pass that law's 1 - ALPHA quantile (ALPHA = 1e-4 / FAMILIES,
Bonferroni; docs/STATS.md section 8). Randomization is fresh for each report, so the
estimates' errors are independent across days, rolling windows included; the buckets of one
histogram share their days, so each bucket is a family of its own.
"""

from __future__ import annotations

import collections
import datetime as dt
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from scipy import stats

from deniable.client import Client, MetricSpec, SeededRandomness
from deniable.client.calendar import period_label
from deniable.client.ledger import Ledger
from deniable.client.recorder import Recorder
from deniable.client.stats import Counters
from deniable.client.wire import batch_body, report_text
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    DatabaseFactory,
    RunningCollector,
    collector_settings,
    register,
    unique_name,
)
from testkit.stub_collector import reports_in, serving_specs

pytestmark = pytest.mark.slow

DEVICES = 2000
DAYS = 30
SEED = 40
CONFIDENCE = 0.9
FAMILIES = 11
"""Coverage checks in this module (5 crash buckets, crash mean, load mean, load median,
first-value mean of first loads, actives, and all but the buckets pooled): the Bonferroni
divisor."""
ALPHA = 1e-4 / FAMILIES
CRASH_EDGES = (0.0, 1.0, 2.0, 3.0, 5.0, 100.0)
CRASH_UPPER = 10.0
LOAD_UPPER = 5000.0
LOAD_EDGES = (0.0, 200.0, 300.0, 400.0, 600.0, 900.0, 1500.0, 5000.0)
EPSILON = 2.0
CHECKED = 8
"""Devices also run through whole Clients, to show the recorder path is the SDK's."""


def event_specs() -> dict[str, MetricSpec]:
    """The simulation's metrics by role, with unique names (the collector is shared)."""
    return {
        "crash_hist": MetricSpec.histogram(
            unique_name("crashes"), CRASH_EDGES, epsilon=EPSILON
        ).with_events("count"),
        "crash_mean": MetricSpec.numeric(
            unique_name("crashes_mean"), lower=0.0, upper=CRASH_UPPER, epsilon=EPSILON
        ).with_events("count"),
        "load_mean": MetricSpec.numeric(
            unique_name("load_ms"), lower=0.0, upper=LOAD_UPPER, epsilon=EPSILON
        ).with_events("mean"),
        "load_hist": MetricSpec.histogram(
            unique_name("load_ms_hist"), LOAD_EDGES, epsilon=EPSILON
        ).with_events("mean"),
        "first": MetricSpec.numeric(
            unique_name("load_ms_first"), lower=0.0, upper=LOAD_UPPER, epsilon=EPSILON
        ),
        "feature": MetricSpec.boolean(unique_name("feature"), epsilon=EPSILON).with_events(
            "any", window=7
        ),
    }


@dataclass(frozen=True)
class Population:
    """Known event streams: per device and day, whether the app was open, the crashes, the
    feature uses, and the page loads (flat, by device-day, the first of each day first)."""

    active: np.ndarray  # (DEVICES, DAYS) bool
    crashes: np.ndarray  # (DEVICES, DAYS) int
    uses: np.ndarray  # (DEVICES, DAYS) int, feature uses
    load_start: np.ndarray  # (DEVICES * DAYS + 1,) offsets of each device-day's loads
    loads: np.ndarray  # flat load times, ms

    def day_loads(self, device: int, day: int) -> np.ndarray:
        """The loads of ``device`` on ``day``, in order."""
        cell = device * DAYS + day
        return self.loads[self.load_start[cell] : self.load_start[cell + 1]]


def population(seed: int) -> Population:
    """The devices' streams: activity 40-100% of days (day 0, the install, always), crash
    rates Gamma(0.5, 0.6) per day (mean 0.3, overdispersed), 1 + Poisson(1) bursts of
    1 + Poisson(2) loads on an active day around a device speed, the day's first load a cold
    start about 3x slower, and a feature used on an active day with a device propensity."""
    rng = np.random.default_rng(seed)
    active = rng.random((DEVICES, DAYS)) < rng.uniform(0.4, 1.0, (DEVICES, 1))
    active[:, 0] = True
    rates = rng.gamma(0.5, 0.6, DEVICES)
    crashes = rng.poisson(rates[:, None], (DEVICES, DAYS)) * active
    propensity = rng.beta(0.4, 2.0, DEVICES)
    used = (rng.random((DEVICES, DAYS)) < propensity[:, None]) & active
    uses = used * (1 + rng.poisson(1.5, (DEVICES, DAYS)))
    bursts = 1 + rng.poisson(1.0, (DEVICES, DAYS))
    per_burst = bursts + rng.poisson(2.0 * bursts)  # bursts of 1 + Poisson(2) loads each
    counts = np.where(active, per_burst, 0).ravel()
    starts = np.concatenate(([0], np.cumsum(counts)))
    speed = rng.lognormal(np.log(280.0), 0.35, DEVICES)
    owner = np.repeat(np.arange(DEVICES * DAYS) // DAYS, counts)
    loads = speed[owner] * rng.lognormal(0.0, 0.3, owner.size)
    first = starts[:-1][counts > 0]
    loads[first] *= rng.lognormal(np.log(3.0), 0.2, first.size)
    return Population(active, crashes, uses, starts, loads)


@dataclass(frozen=True)
class Truth:
    """Per day (or rolling window ending that day): the reporting devices and the true values
    over them."""

    reporting: np.ndarray  # (DAYS,) devices active that day
    crash_mean: np.ndarray  # (DAYS,) mean clamped crashes per device-day
    crash_shares: np.ndarray  # (DAYS, buckets) share of device-days per crash bucket
    load_mean: np.ndarray  # (DAYS,) mean of the per-device mean load (clamped)
    load_median: np.ndarray  # (DAYS,) median of the per-device mean load
    first_mean: np.ndarray  # (DAYS,) mean of the first load of the day (clamped)
    window_devices: np.ndarray  # (DAYS,) devices active in the 7 days ending that day
    actives: np.ndarray  # (DAYS,) share of them that used the feature in those 7 days


def truths(people: Population) -> Truth:
    """The population's values, computed apart from the SDK (numpy over the streams)."""
    active = people.active
    counts = np.diff(people.load_start).reshape(DEVICES, DAYS)
    sums = np.add.reduceat(people.loads, people.load_start[:-1][counts.ravel() > 0])
    day_mean = np.zeros(DEVICES * DAYS)
    day_mean[counts.ravel() > 0] = sums / counts.ravel()[counts.ravel() > 0]
    day_mean = np.clip(day_mean.reshape(DEVICES, DAYS), 0.0, LOAD_UPPER)
    first = np.zeros(DEVICES * DAYS)
    first[counts.ravel() > 0] = people.loads[people.load_start[:-1][counts.ravel() > 0]]
    first = np.clip(first.reshape(DEVICES, DAYS), 0.0, LOAD_UPPER)
    buckets = np.digitize(np.minimum(people.crashes, CRASH_EDGES[-1]), CRASH_EDGES[1:-1])
    reporting = active.sum(axis=0)
    windows = np.zeros(DAYS, dtype=int)
    actives = np.full(DAYS, np.nan)
    for day in range(6, DAYS):
        seen = active[:, day - 6 : day + 1].any(axis=1)
        windows[day] = seen.sum()
        actives[day] = (people.uses[:, day - 6 : day + 1].sum(axis=1) > 0)[seen].mean()
    return Truth(
        reporting=reporting,
        crash_mean=np.array(
            [np.minimum(people.crashes[active[:, d], d], CRASH_UPPER).mean() for d in range(DAYS)]
        ),
        crash_shares=np.array(
            [
                np.bincount(buckets[active[:, d], d], minlength=len(CRASH_EDGES) - 1) / reporting[d]
                for d in range(DAYS)
            ]
        ),
        load_mean=np.array([day_mean[active[:, d], d].mean() for d in range(DAYS)]),
        load_median=np.array([lower_median(day_mean[active[:, d], d]) for d in range(DAYS)]),
        first_mean=np.array([first[active[:, d], d].mean() for d in range(DAYS)]),
        window_devices=windows,
        actives=actives,
    )


def lower_median(values: np.ndarray) -> float:
    """The population's median as the estimate defines it, inf{x: F(x) >= 1/2}."""
    ordered = np.sort(values)
    return float(ordered[int(np.ceil(0.5 * len(ordered))) - 1])


def noon(first_day: dt.date, day: int) -> dt.datetime:
    """Noon UTC of simulated ``day``."""
    return dt.datetime.combine(first_day + dt.timedelta(days=day), dt.time(12), tzinfo=dt.UTC)


class Device:
    """One device's day: what the app does on an active day, through any recording object
    with the SDK's ``event``/``observe``/``record`` (a Client or its Recorder)."""

    def __init__(self, people: Population, specs: dict[str, MetricSpec], index: int) -> None:
        self.people, self.index = people, index
        self.names = {role: spec.name for role, spec in specs.items()}

    def act(self, sdk: Any, day: int) -> None:
        """Crash, load pages (each load observed, and recorded the old way) and use the
        feature, as the streams say."""
        names, i = self.names, self.index
        for _ in range(int(self.people.crashes[i, day])):
            sdk.event(names["crash_hist"])
            sdk.event(names["crash_mean"])
        for load in self.people.day_loads(i, day).tolist():
            sdk.observe(names["load_mean"], load)
            sdk.observe(names["load_hist"], load)
            sdk.record(names["first"], load)
        for _ in range(int(self.people.uses[i, day])):
            sdk.event(names["feature"])


def recorder_reports(
    people: Population, specs: dict[str, MetricSpec], index: int, first_day: dt.date
) -> list[tuple[Any, ...]]:
    """Device ``index``'s reports through its own recorder: made the day before day 0 (the
    install: a spec's windows start the day after it arrives), each
    active day it commits first (as the SDK's periodic commit does, closing yesterday's
    windows) and then acts; on day DAYS it commits the last windows."""
    moment = [noon(first_day, -1)]  # installed the day before: day 0 is a whole window
    recorder = Recorder(
        Ledger(
            b"device-secret-" + index.to_bytes(4, "big"),
            max_reports_per_period=1,
            lifetime_epsilon=None,
        ),
        Counters(),
        on_unknown=lambda metric: None,
        max_queue=10**6,
        clock=lambda: moment[0],
        randomness=SeededRandomness(SEED * 100_000 + index),
    )
    recorder.install(list(specs.values()))
    device = Device(people, specs, index)
    reports: list[tuple[Any, ...]] = []
    for day in [*np.flatnonzero(people.active[index]).tolist(), DAYS]:
        moment[0] = noon(first_day, day)
        drained, _, _ = recorder.drain()
        recorder.drained()
        reports += drained
        if day < DAYS:
            device.act(recorder, day)
    return reports


def client_reports(
    people: Population,
    specs: dict[str, MetricSpec],
    index: int,
    first_day: dt.date,
    state_dir: Path,
) -> list[tuple[Any, ...]]:
    """Device ``index``'s reports through a whole Client (state on disk, a flush on each
    active day, uploads captured by a mock collector), as (metric, fingerprint, period,
    payload) rows."""
    sent: list[dict[str, Any]] = []

    def accept(request: httpx.Request) -> httpx.Response:
        reports = reports_in(request)
        sent.extend(reports)
        return httpx.Response(202, json={"accepted": len(reports), "duplicates": 0})

    moment = [noon(first_day, -1)]  # installed the day before: day 0 is a whole window
    client = Client(
        "http://127.0.0.1:9",
        state_dir=state_dir,
        metrics=list(specs.values()),
        clock=lambda: moment[0],
        randomness=SeededRandomness(SEED * 100_000 + index),
        transport=serving_specs(list(specs.values()), accept),
        flush_interval=3600.0,
    )
    device = Device(people, specs, index)
    with client:
        for day in [*np.flatnonzero(people.active[index]).tolist(), DAYS]:
            moment[0] = noon(first_day, day)
            assert client.flush(timeout=10)
            if day < DAYS:
                device.act(client, day)
    return [(r["metric"], r["fingerprint"], r["period"], r["payload"]) for r in sent]


@dataclass(frozen=True)
class Simulation:
    """What the module's tests read: the specs, the truths, the estimates by role and day."""

    specs: dict[str, MetricSpec]
    truth: Truth
    labels: list[str]
    first_day: dt.date
    people: Population
    estimates: dict[str, list[dict[str, Any] | None]]


@pytest.fixture(scope="module")
def sqlite_collector(databases: DatabaseFactory) -> Iterator[RunningCollector]:
    """A collector of its own on an SQLite file (one backend keeps the test within budget)."""
    server = RunningCollector(collector_settings(databases.new("sqlite"))).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def simulation(sqlite_collector: RunningCollector) -> Iterator[Simulation]:
    """Simulate the devices, post their reports, and read every day's estimate."""
    sdk_log = logging.getLogger("deniable.client")
    level = sdk_log.level
    sdk_log.setLevel(logging.ERROR)  # the old way's budget refusals: one per device and day
    try:
        yield simulate(sqlite_collector)
    finally:
        sdk_log.setLevel(level)


def simulate(collector: RunningCollector) -> Simulation:
    """The body of the fixture, timed in the report: devices, upload, estimates."""
    first_day = collector.app_state().today() - dt.timedelta(days=DAYS)
    labels = [period_label("day", noon(first_day, d)) for d in range(DAYS)]
    people = population(SEED)
    with collector.client(ADMIN_TOKEN) as admin:
        specs = {role: register(admin, spec) for role, spec in event_specs().items()}
    texts: list[str] = []
    for index in range(DEVICES):
        texts += [report_text(*r) for r in recorder_reports(people, specs, index, first_day)]
    with collector.client(INGEST_KEY) as uploader:
        for at in range(0, len(texts), 1000):
            response = uploader.post(
                "/v1/reports",
                content=batch_body(texts[at : at + 1000]),
                headers={"Content-Type": "application/json"},
            )
            assert response.status_code == 202, response.text
            assert response.json()["accepted"] == len(texts[at : at + 1000])
    estimates: dict[str, list[dict[str, Any] | None]] = {}
    with collector.client(ADMIN_TOKEN) as admin:
        for role, spec in specs.items():
            rows: list[dict[str, Any] | None] = []
            for day, label in enumerate(labels):
                if role == "feature" and day < 6:
                    rows.append(None)
                    continue
                params: dict[str, Any] = {"start": label, "end": label, "confidence": CONFIDENCE}
                if role == "load_hist":
                    params["q"] = [0.5]
                response = admin.get(f"/v1/metrics/{spec.name}/estimate", params=params)
                assert response.status_code == 200, response.text
                rows.append(response.json())
            estimates[role] = rows
    return Simulation(specs, truths(people), labels, first_day, people, estimates)


def most_misses(cells: int) -> int:
    """The most misses of ``cells`` independent 90% intervals that nominal coverage allows at
    ALPHA: the 1 - ALPHA quantile of Binomial(cells, 0.1)."""
    return int(stats.binom.isf(ALPHA, cells, 1.0 - CONFIDENCE))


def check_coverage(name: str, held: list[bool]) -> None:
    """Fail if the misses among ``held`` exceed what nominal coverage allows."""
    misses = held.count(False)
    assert misses <= most_misses(len(held)), (name, misses, len(held))


def days_from(simulation: Simulation, role: str) -> list[tuple[int, dict[str, Any]]]:
    """The days that have an estimate of ``role``, with it."""
    return [(d, doc) for d, doc in enumerate(simulation.estimates[role]) if doc is not None]


def test_the_recorder_path_sends_what_whole_clients_send(
    sqlite_collector: RunningCollector, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="deniable.client")  # the old way's refusals
    people = population(SEED)
    specs = event_specs()
    first_day = sqlite_collector.app_state().today() - dt.timedelta(days=DAYS)
    for index in range(CHECKED):
        through_recorder = collections.Counter(
            r[1:5] for r in recorder_reports(people, specs, index, first_day)
        )
        through_client = collections.Counter(
            client_reports(people, specs, index, first_day, tmp_path / f"device{index}")
        )
        assert through_client == through_recorder, index
        active = people.active[index]
        windows = sum(active[day - 6 : day + 1].any() for day in range(6, DAYS))
        assert sum(through_client.values()) == 5 * active.sum() + windows


def test_each_window_counts_the_devices_active_in_it(simulation: Simulation) -> None:
    truth = simulation.truth
    for role in ("crash_hist", "crash_mean", "load_mean", "load_hist", "first"):
        for day, doc in days_from(simulation, role):
            assert doc["n"] == truth.reporting[day], (role, day)
    for day, doc in days_from(simulation, "feature"):
        assert doc["n"] == truth.window_devices[day], day
    assert len(days_from(simulation, "feature")) == DAYS - 6


def test_seven_day_actives_cover_their_truth(simulation: Simulation) -> None:
    held = []
    for day, doc in days_from(simulation, "feature"):
        row = {r["category"]: r for r in doc["estimates"]}["true"]
        held.append(row["ci_low"] <= simulation.truth.actives[day] <= row["ci_high"])
    check_coverage("actives", held)


def test_crashes_per_device_day_cover_their_truth(simulation: Simulation) -> None:
    truth = simulation.truth
    held = []
    for day, doc in days_from(simulation, "crash_mean"):
        mean = doc["mean"]
        held.append(mean["ci_low"] <= truth.crash_mean[day] <= mean["ci_high"])
    check_coverage("crash mean", held)
    for bucket in range(len(CRASH_EDGES) - 1):
        held = []
        for day, doc in days_from(simulation, "crash_hist"):
            row = doc["estimates"][bucket]
            held.append(row["ci_low"] <= truth.crash_shares[day, bucket] <= row["ci_high"])
        check_coverage(f"crash bucket {bucket}", held)


def test_the_per_device_mean_load_time_covers_its_truth(simulation: Simulation) -> None:
    truth = simulation.truth
    held = []
    for day, doc in days_from(simulation, "load_mean"):
        mean = doc["mean"]
        held.append(mean["ci_low"] <= truth.load_mean[day] <= mean["ci_high"])
    check_coverage("load mean", held)
    held = []
    for day, doc in days_from(simulation, "load_hist"):
        (entry,) = doc["quantiles"]
        low, high = entry["low"], entry["high"]
        median = truth.load_median[day]
        held.append((low is None or low <= median) and (high is None or median <= high))
    check_coverage("load median", held)


def test_the_first_value_of_the_day_is_biased_against_the_per_device_mean(
    simulation: Simulation,
) -> None:
    truth = simulation.truth
    held_first, missed_mean = [], []
    for day, doc in days_from(simulation, "first"):
        mean = doc["mean"]
        held_first.append(mean["ci_low"] <= truth.first_mean[day] <= mean["ci_high"])
        missed_mean.append(not mean["ci_low"] <= truth.load_mean[day] <= mean["ci_high"])
        assert mean["ci_low"] > truth.load_mean[day], day  # cold starts read high
    check_coverage("first loads", held_first)  # it estimates first loads, well
    assert all(missed_mean)


def test_the_cells_of_every_metric_pooled_cover_at_the_nominal_rate(
    simulation: Simulation,
) -> None:
    """One bucket's days and each other metric's days are cells of independent reports
    (fresh randomization, one metric's reports each), so pooled their misses are at most
    Binomial(144, 0.1): a check that finds intervals covering less than about 75%."""
    truth = simulation.truth
    held = []
    for role, values in (
        ("crash_mean", truth.crash_mean),
        ("load_mean", truth.load_mean),
        ("first", truth.first_mean),
    ):
        for day, doc in days_from(simulation, role):
            held.append(doc["mean"]["ci_low"] <= values[day] <= doc["mean"]["ci_high"])
    for day, doc in days_from(simulation, "crash_hist"):
        row = doc["estimates"][0]
        held.append(row["ci_low"] <= truth.crash_shares[day, 0] <= row["ci_high"])
    for day, doc in days_from(simulation, "feature"):
        row = {r["category"]: r for r in doc["estimates"]}["true"]
        held.append(row["ci_low"] <= truth.actives[day] <= row["ci_high"])
    assert len(held) == 4 * DAYS + DAYS - 6
    check_coverage("pooled", held)

"""A run of SDK devices through a shuffler to a collector while both servers are SIGKILLed at
seeded random moments, and its ledger: what the devices recorded, what the collector stored,
what still waits at the shuffler. Used by tests/shuffler and bench/shuffle_crash.py."""

from __future__ import annotations

import datetime as dt
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import create_engine, text

from deniable.client import Client, MetricSpec
from deniable.collector.storage import open_database, read_batches

from .configuration import INGEST_KEY
from .shuffler_process import SHUFFLER_UPLOAD_KEY, Pipeline


@dataclass
class RunResult:
    """What a run recorded, stored and left waiting, and what it killed."""

    recorded: int = 0
    stored: int = 0
    counted: int = 0
    waiting: int = 0
    batched: int = 0
    batches: list[int] = field(default_factory=list)
    max_per_period: int = 0
    kills: list[str] = field(default_factory=list)
    seconds: float = 0.0


class Killer:
    """SIGKILLs the shuffler and the collector ``kills`` times in all, each as often (in a
    seeded order), after seeded random pauses, starting each again on the same port."""

    def __init__(
        self, pipeline: Pipeline, seed: int, pause: tuple[float, float], kills: int
    ) -> None:
        self.pipeline = pipeline
        self.rng = random.Random(seed)
        self.pause = pause
        self.victims = ["shuffler", "collector"] * (kills // 2)
        self.rng.shuffle(self.victims)
        self.kills: list[str] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None

    def __enter__(self) -> Killer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._thread.join(timeout=300)

    def _run(self) -> None:
        try:
            for victim in self.victims:
                time.sleep(self.rng.uniform(*self.pause))
                self.kills.append(victim)
                if victim == "shuffler":
                    assert self.pipeline.shuffler is not None
                    self.pipeline.shuffler.kill()
                    self.pipeline.shuffler.start()
                else:
                    self.pipeline.collector.kill()
                    self.pipeline.collector.start(self.pipeline.collector.port)
        except BaseException as exc:
            self.error = exc


def _stored(database_url: str, metrics: Sequence[str]) -> tuple[int, int, int]:
    """(reports stored, their count in period_counts, the most in one period) of ``metrics``."""
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            stored = 0
            counted = 0
            most = 0
            for name in metrics:
                stored += connection.execute(
                    text("SELECT COUNT(*) FROM reports WHERE metric = :m"), {"m": name}
                ).scalar_one()
                for (n,) in connection.execute(
                    text("SELECT n FROM period_counts WHERE metric = :m"), {"m": name}
                ):
                    counted += n
                    most = max(most, n)
    finally:
        engine.dispose()
    return stored, counted, most


def run_devices(
    pipeline: Pipeline,
    specs: Sequence[MetricSpec],
    directory: Path,
    *,
    devices: int,
    periods: int,
    seed: int,
    kill_pause: tuple[float, float] = (0.3, 1.2),
    kills: int = 0,
    period_pause: float = 0.05,
    deadline: float = 300.0,
) -> RunResult:
    """Each of ``devices`` SDK clients records one value of every metric in each of
    ``periods`` days (a simulated clock, ``period_pause`` seconds apart) while ``kills``
    kills happen; once the last is over, every client flushes until the shuffler has
    acknowledged all, and the shuffler forwards until nothing it can
    release is left. Returns the ledger."""
    assert pipeline.shuffler is not None
    rng = random.Random(seed)
    start = dt.datetime.now(dt.UTC) - dt.timedelta(days=periods)
    now = [start]
    clients = [
        Client(
            pipeline.collector.url,
            shuffler=pipeline.shuffler.url,
            shuffler_key=SHUFFLER_UPLOAD_KEY,
            state_dir=directory / f"device-{i}",
            metrics=list(specs),
            ingest_key=INGEST_KEY,
            clock=lambda: now[0],
            flush_interval=0.2,
            backoff_base=0.05,
            backoff_cap=0.5,
            timeout=5.0,
        )
        for i in range(devices)
    ]
    result = RunResult()
    began = time.monotonic()
    killer = Killer(pipeline, seed, kill_pause, kills) if kills else None
    try:
        if killer:
            killer.__enter__()
        for day in range(periods):
            now[0] = start + dt.timedelta(days=day)
            for client in clients:
                for spec in specs:
                    value = rng.choice(spec.categories)
                    result.recorded += client.record(
                        spec.name, value == "true" if spec.type == "boolean" else value
                    )
            time.sleep(period_pause)
        if killer:
            killer.__exit__()
            if killer.error is not None:
                raise killer.error
            result.kills = killer.kills
        end = time.monotonic() + deadline
        for client in clients:
            while not client.flush(timeout=10.0):
                if time.monotonic() > end:
                    raise AssertionError(f"a device could not deliver: {client.problems()}")
        while True:
            counts = pipeline.shuffler.counts()
            if counts["batched"] == 0 and counts["ready"] == 0:
                break
            if time.monotonic() > end:
                raise AssertionError(f"the shuffler did not finish: {counts}")
            time.sleep(0.2)
    finally:
        for client in clients:
            client.close(timeout=1.0)
    result.seconds = time.monotonic() - began
    counts = pipeline.shuffler.counts()
    result.waiting, result.batched = counts["received"], counts["batched"]
    url = pipeline.collector.settings.database_url
    result.stored, result.counted, result.max_per_period = _stored(url, [s.name for s in specs])
    database = open_database(url)
    try:
        result.batches = [b.n for s in specs for b in read_batches(database, s.name)]
    finally:
        database.dispose()
    return result

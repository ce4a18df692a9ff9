"""Resource benchmark: hostile requests against a collector held to its pod's memory limit.

It starts a real collector (``deniable serve`` on a SQLite file or PostgreSQL) inside a memory
cgroup limited like the shipped pod (512 MiB by default), registers an olh metric with
k = 10,000, a duchi metric with 30 reports, a small metric for other clients' uploads and
(``--overview-metrics``) enough others for a long dashboard overview. For each request of
issue 24, and for the largest reads the limits allow, it sends one copy and then ``--copies``
concurrent copies (each client giving up after ``--client-timeout`` seconds), while another
client uploads a small batch every 0.2 s. Each row
says what the requests got, the collector's peak memory (the cgroup's high-water mark), the
slowest of the other client's uploads during the round (the target is under 2 s) and whether
the collector was still alive and healthy afterwards. Issue 38's rows: 1,000 all-ones text
reports (refused by the plausibility bound, while the other client's uploads go on);
estimates of a 64-byte text metric holding 10,000 honest reports (one, then 4 at once; cached,
then each at a confidence of its own so none is) and of one holding 10,000 reports at the
bound's edge (each sets the most bits the bound lets through, all the same cells), which must
cost at most what the honest uncached ones cost; and a scrape every second of every page of 25
metrics (``--only-text``; the text metrics are on pages of their own) for 20 s while another
viewer asks for the written-to metric's estimate at a new confidence each time (its p99, the
scrapes' median and the share of their lookups the read cache answered, from ``/metrics``).
Every row says which targets it missed: alive, no 5xx, the other client's uploads under 2 s
and all taken, and the row's own. Run (as root, for the cgroup):
``.venv/bin/python -m bench.resources [--backend sqlite|postgresql] [--copies 50]``.
"""

from __future__ import annotations

import argparse
import base64
import collections
import concurrent.futures
import contextlib
import dataclasses
import datetime as dt
import itertools
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx

from deniable.client import MetricSpec, SeededRandomness
from testkit import (
    INGEST_KEY,
    VIEWER_TOKEN,
    CollectorProcess,
    collector_settings,
    make_numeric_reports,
    make_reports,
    register_all,
    scratch_database,
)

UPLOAD_EVERY = 0.2
"""Seconds between the other client's uploads."""
UPLOAD_TARGET = 2.0
"""The slowest acceptable upload of the other client while the hostile requests run."""
VIEWER_TARGET = 1.0
"""The slowest acceptable p99 of another viewer's estimate while the scrape runs (issue 38)."""
COST_TOLERANCE = 0.10
"""How far over the honest estimates' peak memory the poisoned ones may go before the row
misses its target (the cgroup's peak moves by a few MiB from run to run)."""
TIME_TOLERANCE = 0.25
"""The same for their duration: the machine the benchmark runs on is shared, so a round's
seconds vary more than its memory."""


@dataclasses.dataclass
class Row:
    """One row of the table, and the targets it missed (none: within target)."""

    cells: list[str]
    missed: list[str] = dataclasses.field(default_factory=list)

    @property
    def name(self) -> str:
        return self.cells[0]

    @property
    def seconds(self) -> float:
        return float(self.cells[3])

    @property
    def peak_mib(self) -> float:
        return float(self.cells[4])

    def check(self, ok: bool, target: str) -> None:
        """Record ``target`` as missed unless ``ok``."""
        if not ok:
            self.missed.append(target)


class MemoryCgroup:
    """A cgroup (v1 or v2) that caps a process tree's memory and reports its high-water mark."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit = limit_bytes
        self.path = self._create()

    @staticmethod
    def _own(controller_root: Path, v2: bool) -> Path:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            number, controllers, path = line.split(":", 2)
            if (v2 and number == "0") or (not v2 and "memory" in controllers.split(",")):
                return controller_root / path.lstrip("/")
        return controller_root

    def _create(self) -> Path:
        v1 = Path("/sys/fs/cgroup/memory")
        v2 = not v1.is_dir()
        root = Path("/sys/fs/cgroup") if v2 else v1
        path = self._own(root, v2) / f"deniable-bench-{os.getpid()}"
        path.mkdir()
        self.v2 = v2
        limit_file = "memory.max" if v2 else "memory.limit_in_bytes"
        (path / limit_file).write_text(str(self.limit))
        swap = path / ("memory.swap.max" if v2 else "memory.memsw.limit_in_bytes")
        with contextlib.suppress(OSError):
            swap.write_text("0" if v2 else str(self.limit))
        return path

    def add(self, pid: int) -> None:
        """Move ``pid`` (and its future children) into the cgroup."""
        (self.path / "cgroup.procs").write_text(str(pid))

    def peak_and_reset(self) -> int:
        """The high-water mark since the last reset, in bytes; then reset it."""
        name = "memory.peak" if self.v2 else "memory.max_usage_in_bytes"
        peak = int((self.path / name).read_text())
        with contextlib.suppress(OSError):
            (self.path / name).write_text("0")
        return peak

    def remove(self) -> None:
        """Remove the (empty) cgroup."""
        with contextlib.suppress(OSError):
            self.path.rmdir()


class Uploads:
    """Another client uploading one small batch every :data:`UPLOAD_EVERY` seconds."""

    def __init__(self, url: str, spec: MetricSpec, period: str) -> None:
        self.url, self.spec, self.period = url, spec, period
        self.latencies: list[float] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        headers = {"Authorization": f"Bearer {INGEST_KEY}"}
        with httpx.Client(base_url=self.url, headers=headers, timeout=30.0) as client:
            seed = 0
            while not self._stop.is_set():
                seed += 1
                body = {"reports": make_reports(self.spec, [seed % 2] * 10, self.period, seed)}
                began = time.monotonic()
                try:
                    ok = client.post("/v1/reports", json=body).status_code == 202
                except httpx.HTTPError:
                    ok = False
                self.latencies.append(time.monotonic() - began)
                self.failures += not ok
                self._stop.wait(UPLOAD_EVERY)

    def __enter__(self) -> Uploads:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


Request = Callable[[httpx.Client], httpx.Response]


def hostile_requests(
    big: MetricSpec, numbers: MetricSpec, today: dt.date
) -> dict[str, tuple[str, Request]]:
    """Each request of issue 24 by name: (who sends it, how)."""

    def days_back(count: int) -> dict[str, str]:
        return {"start": str(today - dt.timedelta(days=count - 1)), "end": str(today)}

    empty_items = b'{"reports":[' + b",".join([b"{}"] * 349_000) + b"]}"
    return {
        "privacy lifetime 1e300": (
            "viewer",
            lambda c: c.get("/v1/privacy", params={"lifetime_epsilon": "1e300"}),
        ),
        "dashboard privacy 1e300": (
            "session",
            lambda c: c.get("/dashboard/privacy", params={"lifetime_epsilon": "1e300"}),
        ),
        "349,000 empty items": (
            "ingest",
            lambda c: c.post(
                "/v1/reports", content=empty_items, headers={"Content-Type": "application/json"}
            ),
        ),
        "series k=10,000 x 181": (
            "viewer",
            lambda c: c.get(f"/v1/metrics/{big.name}/series", params=days_back(181)),
        ),
        "series k=10,000 x 1,060": (
            "viewer",
            lambda c: c.get(f"/v1/metrics/{big.name}/series", params=days_back(1060)),
        ),
        "dashboard k=10,000 x 1,100": (
            "session",
            lambda c: c.get(f"/dashboard/metrics/{big.name}", params=days_back(1100)),
        ),
        "series k=10,000 x 5 (most allowed)": (
            "viewer",
            lambda c: c.get(f"/v1/metrics/{big.name}/series", params=days_back(5)),
        ),
        "dashboard k=10,000, default range": (
            "session",
            lambda c: c.get(f"/dashboard/metrics/{big.name}"),
        ),
        "dashboard overview": ("session", lambda c: c.get("/dashboard/")),
        "duchi pooling=independent": (
            "viewer",
            lambda c: c.get(
                f"/v1/metrics/{numbers.name}/estimate", params={"pooling": "independent"}
            ),
        ),
        "top=² on a metric page": (
            "session",
            lambda c: c.get(f"/dashboard/metrics/{big.name}", params={"top": "²"}),
        ),
    }


TEXT_WORDS = 200
"""Distinct strings the text metric's honest reports hold (Zipf-like shares)."""
TEXT_REPORTS = 10_000
"""Honest reports of the text metric (issue 38 measured 10,000 poisoned ones)."""
SCRAPE_SECONDS = 20.0
"""How long the scrape row scrapes every second."""
SCRAPE_METRICS = 25
"""Metrics registered with ``--only-text``, all scraped every second (issue 38's scrape)."""


def text_reports(spec: MetricSpec, period: str, count: int, seed: int) -> list[dict[str, object]]:
    """``count`` honest reports of the text metric by its real randomizer (seeded)."""
    sketch, rng = spec.text_randomizer, SeededRandomness(seed)
    words = [f"search term number {i:03d} of the benchmark" for i in range(TEXT_WORDS)]
    weights = [1 / (i + 1) for i in range(TEXT_WORDS)]
    picker = random_choices(seed)
    reports = []
    for i in range(count):
        word = picker(words, weights)
        level = 1 + i % sketch.levels
        payload = sketch.randomize(sketch.encode(word), level, rng)
        reports.append(
            {
                "id": str(uuid.uuid4()),
                "metric": spec.name,
                "fingerprint": spec.fingerprint,
                "period": period,
                "payload": payload,
            }
        )
    return reports


def random_choices(seed: int) -> Callable[[list[str], list[float]], str]:
    """A seeded weighted choice of one word (which word a device holds: not a privacy draw)."""
    import random

    rng = random.Random(seed)
    return lambda words, weights: rng.choices(words, weights)[0]


def poisoned_batch(spec: MetricSpec, period: str, count: int = 1000) -> bytes:
    """``count`` all-ones reports of the text metric (issue 38's poison), as a request body."""
    ones = base64.b64encode(b"\xff" * (spec.text_randomizer.cells // 8)).decode()
    reports = [
        {
            "id": str(uuid.uuid4()),
            "metric": spec.name,
            "fingerprint": spec.fingerprint,
            "period": period,
            "payload": {"b": ones, "l": spec.text_randomizer.levels, "r": i % 16},
        }
        for i in range(count)
    ]
    return httpx.Request("POST", "http://x", json={"reports": reports}).content


def bound_poison(spec: MetricSpec, period: str, count: int) -> list[dict[str, object]]:
    """``count`` reports of the text metric that set as many bits as the plausibility bound
    lets through (``plausible_set_bits``' high end), all the same cells 0..high-1, over
    every level and row: the heaviest poison an ingest key still gets stored."""
    sketch = spec.text_randomizer
    _, high = sketch.plausible_set_bits
    bits = ((1 << high) - 1).to_bytes(sketch.cells // 8, "little")
    ones = base64.b64encode(bits).decode()
    return [
        {
            "id": str(uuid.uuid4()),
            "metric": spec.name,
            "fingerprint": spec.fingerprint,
            "period": period,
            "payload": {"b": ones, "l": 1 + i % sketch.levels, "r": i % sketch.rows},
        }
        for i in range(count)
    ]


HONEST_UNCACHED = "text estimates, each at its own confidence (no cache)"
"""The row whose cost the poisoned estimates must not pass."""
POISONED_ESTIMATES = "poisoned text estimates (at the bound), own confidence"
POISONED_INGEST = "poisoned text ingest, 1,000 all-ones"


def text_requests(
    text: MetricSpec, poisoned: MetricSpec, today: dt.date
) -> dict[str, tuple[str, Request, int]]:
    """Issue 38's requests by name: (who sends it, how, the concurrent copies of its second row)."""
    body = poisoned_batch(text, str(today))
    levels = itertools.count(1)
    poisoned_levels = itertools.count(1)
    return {
        POISONED_INGEST: (
            "ingest",
            lambda c: c.post(
                "/v1/reports", content=body, headers={"Content-Type": "application/json"}
            ),
            4,
        ),
        "text estimate, 64 bytes, 10,000 reports": (
            "viewer",
            lambda c: c.get(f"/v1/metrics/{text.name}/estimate"),
            4,
        ),
        HONEST_UNCACHED: (
            "viewer",
            lambda c: c.get(
                f"/v1/metrics/{text.name}/estimate",
                params={"confidence": f"0.9{next(levels):04d}"},
            ),
            4,
        ),
        POISONED_ESTIMATES: (
            "viewer",
            lambda c: c.get(
                f"/v1/metrics/{poisoned.name}/estimate",
                params={"confidence": f"0.9{next(poisoned_levels):04d}"},
            ),
            4,
        ),
    }


def scrape_row(
    server: CollectorProcess,
    cgroup: MemoryCgroup,
    small: MetricSpec,
    today: dt.date,
    pages: list[int],
) -> Row:
    """Scrape ``pages`` every second for :data:`SCRAPE_SECONDS` (after one warming scrape) while
    a viewer asks for ``small``'s estimate again and again, each time at a confidence of its
    own so that no answer comes from the cache, and the other client uploads to ``small``."""
    scrape_all(server.url, pages)
    before = cache_counts(server.url)
    cgroup.peak_and_reset()
    stop = threading.Event()
    scrapes: list[tuple[int, float, int]] = []
    views: list[tuple[int, float]] = []
    levels = itertools.count(1)

    def scraper() -> None:
        with contextlib.closing(open_client(server.url, "viewer", 30.0)) as client:
            while not stop.is_set():
                tick = time.monotonic()
                for page in pages:
                    began = time.monotonic()
                    got = client.get("/v1/estimates/metrics", params={"page": page})
                    scrapes.append((got.status_code, time.monotonic() - began, metrics_in(got)))
                stop.wait(max(0.0, 1.0 - (time.monotonic() - tick)))

    def viewer() -> None:
        with contextlib.closing(open_client(server.url, "viewer", 30.0)) as client:
            while not stop.is_set():
                began = time.monotonic()
                got = client.get(
                    f"/v1/metrics/{small.name}/estimate",
                    params={"confidence": f"0.9{next(levels):04d}"},
                )
                views.append((got.status_code, time.monotonic() - began))
                stop.wait(0.05)

    began = time.monotonic()
    with Uploads(server.url, small, str(today)) as uploads:
        threads = [threading.Thread(target=scraper), threading.Thread(target=viewer)]
        for thread in threads:
            thread.start()
        time.sleep(SCRAPE_SECONDS)
        stop.set()
        for thread in threads:
            thread.join()
    took = time.monotonic() - began
    alive = server.process.poll() is None and healthy(server.url)
    after = cache_counts(server.url)
    statuses = collections.Counter(str(code) for code, *_ in scrapes + views)
    view_times = sorted(t for _, t in views)
    scrape_times = sorted(t for _, t, _ in scrapes)
    p99 = view_times[min(len(view_times) - 1, int(0.99 * len(view_times)))] if views else nan
    median = scrape_times[len(scrape_times) // 2] if scrapes else nan
    rounds = len(scrapes) // max(1, len(pages))
    metrics = sum(m for *_, m in scrapes[: len(pages)])
    # The viewer's requests never hit (each has its own confidence), so every hit is a
    # scrape's; a scrape looks up each metric of its page once.
    lookups = sum(m for *_, m in scrapes)
    hits = after[0] - before[0]
    row = Row(
        [
            f"scrape of {metrics} metrics (text among them) every 1 s, another viewer's estimates",
            f"{rounds}+{len(views)}",
            ", ".join(f"{k}×{v}" for k, v in sorted(statuses.items()))
            + f"; viewer p99 {p99:.3f} s; scrape median {median:.3f} s"
            + f"; scrape from cache {hits}/{lookups}",
            f"{took:.1f}",
            f"{cgroup.peak_and_reset() / 2**20:.0f}",
            f"{max(uploads.latencies, default=nan):.2f}",
            str(uploads.failures),
            "yes" if alive else "NO",
        ]
    )
    check_common(row, alive, uploads, statuses)
    row.check(set(statuses) == {"200"}, "every scrape and estimate answered 200")
    row.check(p99 < VIEWER_TARGET, f"viewer p99 under {VIEWER_TARGET:g} s")
    # Only other_app is written to (every 0.2 s): at most one miss per round, for it.
    row.check(lookups - hits <= rounds, "scrape answered from the cache (but the written metric)")
    return row


nan = float("nan")


def metrics_in(response: httpx.Response) -> int:
    """How many metrics a scrape's page held (each has an info or an unavailable sample)."""
    if response.status_code != 200:
        return 0
    return sum(
        line.startswith(("deniable_estimate_info{", "deniable_estimate_unavailable{"))
        for line in response.text.splitlines()
    )


def scrape_all(url: str, pages: list[int]) -> None:
    """Scrape ``pages`` once (fills the read cache, as a running Prometheus keeps it filled)."""
    with contextlib.closing(open_client(url, "viewer", 120.0)) as client:
        for page in pages:
            client.get("/v1/estimates/metrics", params={"page": page}).raise_for_status()


def cache_counts(url: str) -> tuple[int, int]:
    """The collector's read cache hits and misses so far, from ``/metrics``."""
    text = httpx.get(url + "/metrics", timeout=30.0).text
    found = {
        name: int(float(value))
        for name, _, value in (line.partition(" ") for line in text.splitlines())
        if name in ("deniable_read_cache_hits_total", "deniable_read_cache_misses_total")
    }
    return found["deniable_read_cache_hits_total"], found["deniable_read_cache_misses_total"]


def scrape_pages(url: str, names: set[str] | None) -> list[int]:
    """The scrape pages that hold the metrics ``names`` (the first page with each); None:
    every page."""
    found: list[int] = []
    with contextlib.closing(open_client(url, "viewer", 120.0)) as client:
        first = client.get("/v1/estimates/metrics").text
        total = next(
            int(float(line.split()[-1]))
            for line in first.splitlines()
            if line.startswith("deniable_estimate_pages")
        )
        if names is None:
            return list(range(1, total + 1))
        for page in range(1, total + 1):
            body = client.get("/v1/estimates/metrics", params={"page": page}).text
            hit = {name for name in names if f'metric="{name}"' in body}
            if hit:
                found.append(page)
                names = names - hit
            if not names:
                break
    return found


def check_common(
    row: Row, alive: bool, uploads: Uploads, answers: collections.Counter[str]
) -> None:
    """The targets every row has: alive, no 5xx, the other client's uploads fast and taken."""
    row.check(alive, "collector alive and healthy")
    server_errors = sorted(code for code in answers if code.startswith("5"))
    row.check(not server_errors, "no 5xx (got " + ", ".join(server_errors) + ")")
    slowest = max(uploads.latencies, default=nan)
    row.check(slowest < UPLOAD_TARGET, f"the other client's uploads under {UPLOAD_TARGET:g} s")
    row.check(uploads.failures == 0, "every upload of the other client taken")


def open_client(url: str, who: str, timeout: float) -> httpx.Client:
    """A client holding the viewer token, the ingest key or a dashboard session."""
    if who == "session":
        client = httpx.Client(base_url=url, timeout=timeout)
        client.post("/dashboard/sign-in", data={"token": VIEWER_TOKEN})
        return client
    token = VIEWER_TOKEN if who == "viewer" else INGEST_KEY
    return httpx.Client(base_url=url, timeout=timeout, headers={"Authorization": f"Bearer {token}"})


def fire(url: str, who: str, request: Request, copies: int, timeout: float) -> list[str]:
    """Send ``copies`` concurrent copies of ``request``; what each got (a status or an error)."""

    def one(_: int) -> str:
        try:
            with contextlib.closing(open_client(url, who, timeout)) as client:
                return str(request(client).status_code)
        except httpx.TimeoutException:
            return "gave up"
        except httpx.HTTPError as exc:
            return type(exc).__name__

    with concurrent.futures.ThreadPoolExecutor(copies) as pool:
        return list(pool.map(one, range(copies)))


def healthy(url: str) -> bool:
    """Whether the collector answers ``/healthz`` within 5 s."""
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(url + "/healthz", timeout=5.0).status_code == 200
    return False


@contextlib.contextmanager
def collector(
    database_url: str, directory: Path, cgroup: MemoryCgroup
) -> Iterator[CollectorProcess]:
    """A collector process in ``cgroup``, started with a viewer token."""
    settings = collector_settings(database_url, viewer_token=VIEWER_TOKEN)
    server = CollectorProcess(settings, directory).launch()
    cgroup.add(server.pid)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def measure(
    server: CollectorProcess,
    cgroup: MemoryCgroup,
    small: MetricSpec,
    today: dt.date,
    args: argparse.Namespace,
    case: tuple[str, str, Request],
    copies: int,
) -> Row:
    """One row: ``copies`` copies of the case's request while another client uploads."""
    name, who, request = case
    cgroup.peak_and_reset()
    began = time.monotonic()
    with Uploads(server.url, small, str(today)) as uploads:
        got = fire(server.url, who, request, copies, args.client_timeout)
        time.sleep(1.0)
    took = time.monotonic() - began
    alive = server.process.poll() is None and healthy(server.url)
    counts = collections.Counter(got)
    row = Row(
        [
            name,
            str(copies),
            ", ".join(f"{k}×{v}" for k, v in sorted(counts.items())),
            f"{took:.1f}",
            f"{cgroup.peak_and_reset() / 2**20:.0f}",
            f"{max(uploads.latencies, default=float('nan')):.2f}",
            str(uploads.failures),
            "yes" if alive else "NO",
        ]
    )
    check_common(row, alive, uploads, counts)
    return row


def text_answer(url: str, text: MetricSpec) -> str:
    """What the text metric's estimate says (after the round, not timed): how many strings it
    returns and whether the decoder's cap bound."""
    with contextlib.closing(open_client(url, "viewer", 120.0)) as client:
        document = client.get(f"/v1/metrics/{text.name}/estimate").json()
    bound = "yes" if document.get("cap_bound") else "no"
    return f"{len(document.get('strings', []))} strings, cap bound {bound}"


def check_text(row: Row, rows: list[Row]) -> None:
    """Issue 38's targets of a text row: poison refused (4xx), estimates answered (200), and
    the poisoned estimates no costlier than the honest uncached ones at as many copies."""
    answers = {part.split("×")[0] for part in row.cells[2].split("; ")[0].split(", ")}
    if row.name == POISONED_INGEST:
        row.check(all(a.startswith("4") for a in answers), "poisoned ingest refused (4xx)")
        return
    row.check(answers == {"200"}, "every estimate answered 200")
    if row.name != POISONED_ESTIMATES:
        return
    [honest] = [r for r in rows if r.name == HONEST_UNCACHED and r.cells[1] == row.cells[1]]
    row.check(
        row.peak_mib <= honest.peak_mib * (1 + COST_TOLERANCE),
        f"peak memory at most the honest estimates' ({honest.peak_mib:.0f} MiB"
        f" + {COST_TOLERANCE:.0%})",
    )
    row.check(
        row.seconds <= honest.seconds * (1 + TIME_TOLERANCE),
        f"time at most the honest estimates' ({honest.seconds:.1f} s + {TIME_TOLERANCE:.0%})",
    )


def run(args: argparse.Namespace) -> None:
    """Set up the metrics, run every request at 1 and ``--copies`` copies, print the table."""
    today = dt.datetime.now(dt.UTC).date()
    big = MetricSpec.categorical(
        "big_olh", [f"c{i}" for i in range(10_000)], epsilon=1.0, mechanism="olh"
    )
    numbers = MetricSpec.numeric("load_ms", lower=0, upper=1000, epsilon=1.0, mechanism="duchi")
    small = MetricSpec.boolean("other_app", epsilon=1.0)
    text = MetricSpec.text("search_text", max_length=64, epsilon=4.0)
    poisoned = MetricSpec.text("search_text_poisoned", max_length=64, epsilon=4.0)
    extras = args.overview_metrics
    if extras is None:
        extras = SCRAPE_METRICS - 5 if args.only_text else 1505
    extra = [MetricSpec.boolean(f"extra_{i:04d}", epsilon=1.0) for i in range(extras)]
    cgroup = MemoryCgroup(args.memory_mib * 2**20)
    rows: list[Row] = []
    with (
        tempfile.TemporaryDirectory() as scratch,
        scratch_database(args.backend, Path(scratch), "resources") as database_url,
    ):
        directory = Path(scratch)
        try:
            with collector(database_url, directory, cgroup) as server:
                register_all(server.url, [big, numbers, small, text, poisoned, *extra])
                with contextlib.closing(open_client(server.url, "ingest", 60.0)) as ingest:
                    reports = make_numeric_reports(numbers, [500.0] * 30, str(today), seed=1)
                    ingest.post("/v1/reports", json={"reports": reports}).raise_for_status()
                    words = text_reports(text, str(today), TEXT_REPORTS, seed=2)
                    poison = bound_poison(poisoned, str(today), TEXT_REPORTS)
                    for batch in (words, poison):
                        for start in range(0, len(batch), 1000):
                            body = {"reports": batch[start : start + 1000]}
                            ingest.post("/v1/reports", json=body).raise_for_status()
            for name, (who, request, copies) in text_requests(text, poisoned, today).items():
                with collector(database_url, directory, cgroup) as server:
                    for count in (1, copies):
                        case = (name, who, request)
                        rows.append(measure(server, cgroup, small, today, args, case, count))
                        if name in (HONEST_UNCACHED, POISONED_ESTIMATES):
                            metric = poisoned if name == POISONED_ESTIMATES else text
                            rows[-1].cells[2] += "; " + text_answer(server.url, metric)
                        check_text(rows[-1], rows)
                        print(" | ".join(rows[-1].cells), flush=True)
            with collector(database_url, directory, cgroup) as server:
                wanted = None if args.only_text else {text.name, poisoned.name, "extra_0000"}
                pages = scrape_pages(server.url, wanted)
                rows.append(scrape_row(server, cgroup, small, today, pages))
                print(" | ".join(rows[-1].cells), flush=True)
            if args.only_text:
                return finish(args, rows)
            for name, (who, request) in hostile_requests(big, numbers, today).items():
                with collector(database_url, directory, cgroup) as server:
                    for copies in (1, args.copies):
                        rows.append(
                            measure(
                                server, cgroup, small, today, args, (name, who, request), copies
                            )
                        )
                        print(" | ".join(rows[-1].cells), flush=True)
                        if server.process.poll() is not None:
                            break
        finally:
            cgroup.remove()
    finish(args, rows)


def finish(args: argparse.Namespace, rows: list[Row]) -> None:
    """Print the table and, for each row that missed a target, which."""
    header = [
        "request",
        "copies",
        "answers",
        "s",
        "peak MiB",
        "slowest upload s",
        "failed",
        "alive",
    ]
    table = [header, *(row.cells for row in rows)]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    print(f"\nbackend {args.backend}, collector limited to {args.memory_mib} MiB")
    for cells in [header, ["-" * w for w in widths], *table[1:]]:
        print("  ".join(cell.ljust(w) for cell, w in zip(cells, widths, strict=True)))
    missed = [f"{row.name} ×{row.cells[1]}: {'; '.join(row.missed)}" for row in rows if row.missed]
    print(
        "\n"
        + ("all rows within target" if not missed else "over target:\n  " + "\n  ".join(missed))
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--copies", type=int, default=50)
    parser.add_argument("--memory-mib", type=int, default=512)
    parser.add_argument("--client-timeout", type=float, default=30.0)
    parser.add_argument(
        "--overview-metrics",
        type=int,
        default=None,
        help="extra boolean metrics (default 1505; with --only-text, enough for 25 in all)",
    )
    parser.add_argument(
        "--only-text", action="store_true", help="only issue 38's rows (text and scrape)"
    )
    run(parser.parse_args())


if __name__ == "__main__":
    main()

"""``deniable estimate --from-archive``: reports archived and dropped, then re-analysed from
Parquet on DuckDB, give the estimates the collector gave online, to 1e-12."""

from __future__ import annotations

import datetime as dt
import json
import math
import uuid
from pathlib import Path
from typing import Any

import pytest

from deniable.client import MetricSpec, SeededRandomness
from deniable.collector import migrate
from deniable.collector.storage import count_reports, open_database
from deniable.collector.storage.archive import Archive
from deniable.collector.storage.prepare import prepare_batch
from deniable.collector.storage.queries import register_spec
from deniable.collector.storage.retention import retain
from deniable.collector.storage.transaction import store_batches
from deniable.collector.validation import ValidReport
from testkit import ADMIN_TOKEN, DatabaseFactory, RunningCollector, collector_settings
from testkit.cli import run_cli

PERIODS = ["2026-06-01", "2026-06-02", "2026-06-03"]
PER_PERIOD = 400
CATEGORIES = ["a", "b", "c", "d", "e"]
SPECS = [
    MetricSpec.boolean("arch_flag", epsilon=1.0),
    MetricSpec.categorical("arch_krr", CATEGORIES, epsilon=2.0, mechanism="krr"),
    MetricSpec.categorical("arch_oue", CATEGORIES, epsilon=1.0, mechanism="oue"),
    MetricSpec.categorical("arch_olh", CATEGORIES, epsilon=2.0, mechanism="olh"),
    MetricSpec.histogram("arch_hist", [0, 10, 20, 50, 100], epsilon=1.0, mechanism="oue"),
    MetricSpec.numeric("arch_mean", lower=0, upper=500, epsilon=1.0, mechanism="pm"),
    MetricSpec.text("arch_text", max_length=6, epsilon=4.0),
]
WORDS = ["dark", "font", "zoom", "help"]


def _payloads(spec: MetricSpec, n: int, seed: int) -> list[Any]:
    rng = SeededRandomness(seed)
    if spec.type == "numeric":
        return [spec.numeric_randomizer.randomize((i % 50) / 25 - 1, rng) for i in range(n)]
    if spec.type == "text":
        sketch = spec.text_randomizer
        return [
            sketch.randomize(sketch.encode(WORDS[i % 7 % 4]), 1 + i % sketch.levels, rng)
            for i in range(n)
        ]
    return [spec.randomizer.randomize((i * i) % spec.k, rng) for i in range(n)]


def build_archive(url: str, root: Path) -> tuple[dict[str, Any], Path]:
    """Reports of every SPECS metric stored at ``url``, their online estimates taken from a
    real collector, then archived to ``root`` and dropped: (online documents by query, root)."""
    migrate(url)
    database = open_database(url)
    try:
        for s, spec in enumerate(SPECS):
            register_spec(database, spec, dt.datetime.now(dt.UTC))
            periods = PERIODS[-1:] if spec.type == "text" else PERIODS
            for p, period in enumerate(periods):
                n = 3000 if spec.type == "text" else PER_PERIOD
                batch = [
                    ValidReport(str(uuid.uuid4()), spec.name, period, payload)
                    for payload in _payloads(spec, n, 100 * s + p)
                ]
                for start in range(0, len(batch), 1000):
                    prepared = prepare_batch(
                        batch[start : start + 1000], {spec.name: spec}, dt.date(2026, 6, 3)
                    )
                    store_batches(database, [prepared])
        online = _online(url)
        run = retain(database, SPECS, dt.date(2026, 7, 1), archive=Archive(str(root)))
        assert run.deleted == 6 * 3 * PER_PERIOD + 3000
        for spec in SPECS:
            assert count_reports(database, spec.name, start=None, end=None) == 0
    finally:
        database.dispose()
    return online, root


@pytest.fixture(scope="module")
def archived(
    databases: DatabaseFactory, backend: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, Any], Path]:
    """The archive built on ``backend`` and the online documents (:func:`build_archive`)."""
    return build_archive(databases.new(backend), tmp_path_factory.mktemp("archive"))


QUERIES: dict[str, dict[str, Any]] = {
    "arch_flag": {},
    "arch_krr": {"method": "mle"},
    "arch_oue": {"method": "consistent", "pooling": "independent"},
    "arch_olh": {"method": "unbiased", "simultaneous": "false"},
    "arch_hist": {"q": [0.5, 0.9]},
    "arch_mean": {"confidence": 0.9},
    "arch_text": {},
    "arch_text candidates": {"candidates": ["dark", "font", "nope"]},
}


def _online(url: str) -> dict[str, Any]:
    server = RunningCollector(collector_settings(url)).start()
    try:
        with server.client(ADMIN_TOKEN) as admin:
            documents = {}
            for key, params in QUERIES.items():
                name = key.split()[0]
                text = name == "arch_text"
                bounds = {"end": PERIODS[-1]} if text else {"start": PERIODS[0], "end": PERIODS[-1]}
                response = admin.get(f"/v1/metrics/{name}/estimate", params={**bounds, **params})
                assert response.status_code == 200, response.text
                documents[key] = response.json()
    finally:
        server.stop()
    return documents


def _cli_args(key: str) -> list[str]:
    params = QUERIES[key]
    args = ["estimate", key.split()[0]]
    for option, value in params.items():
        if option == "q":
            for q in value:
                args += ["--quantile", str(q)]
        elif option == "candidates":
            for candidate in value:
                args += ["--candidate", candidate]
        elif option == "simultaneous":
            args.append("--per-category")
        else:
            args += [f"--{option}", str(value)]
    return args


def assert_same(online: Any, offline: Any, path: str = "") -> None:
    """Equal documents, numbers to 1e-12 (the metric's unit, description and owner aside:
    an archive does not know them)."""
    if isinstance(online, dict):
        for key, value in online.items():
            if key in ("unit", "description", "owner"):
                continue
            assert key in offline, f"{path}.{key} missing"
            assert_same(value, offline[key], f"{path}.{key}")
    elif isinstance(online, list):
        assert len(online) == len(offline), path
        for i, (a, b) in enumerate(zip(online, offline, strict=True)):
            assert_same(a, b, f"{path}[{i}]")
    elif isinstance(online, float) and isinstance(offline, float | int):
        assert math.isclose(online, offline, rel_tol=1e-12, abs_tol=1e-12), (path, online, offline)
    else:
        assert online == offline, (path, online, offline)


@pytest.mark.parametrize("key", list(QUERIES))
def test_the_archive_gives_the_online_estimates(
    archived: tuple[dict[str, Any], Path], key: str
) -> None:
    online, root = archived
    result = run_cli(*_cli_args(key), "--from-archive", str(root), "--format", "json")
    assert result.exit_code == 0, result.output
    offline = json.loads(result.stdout)
    assert_same(online[key], offline)


CELLS = ["ios", "web", "other"]


@pytest.mark.parametrize("mechanism", ["olh", "krr"])
def test_a_breakdown_from_an_archive_with_cells_is_the_online_one(
    mechanism: str, databases: DatabaseFactory, tmp_path: Path
) -> None:
    """olh's files are checked on their counted columns, krr's on their (cell, payload)
    groups (``cell_groups_sha256``)."""
    sliced = MetricSpec.categorical(
        f"arch_sliced_{mechanism}",
        CATEGORIES,
        epsilon=2.0,
        mechanism=mechanism,
        dimensions={"platform": ["ios", "web"]},
    )
    url = databases.new("sqlite")
    migrate(url)
    database = open_database(url)
    try:
        register_spec(database, sliced, dt.datetime.now(dt.UTC))
        for p, period in enumerate(PERIODS):
            rng = SeededRandomness(7 + p)
            batch = [
                ValidReport(
                    str(uuid.uuid4()),
                    sliced.name,
                    period,
                    sliced.randomizer.randomize(i % 5 if i % 3 else 0, rng),
                    CELLS[i % 3],
                )
                for i in range(900)
            ]
            store_batches(
                database, [prepare_batch(batch, {sliced.name: sliced}, dt.date(2026, 6, 3))]
            )
        server = RunningCollector(collector_settings(url)).start()
        try:
            with server.client(ADMIN_TOKEN) as admin:
                response = admin.get(
                    f"/v1/metrics/{sliced.name}/estimate",
                    params={"start": PERIODS[0], "end": PERIODS[-1], "by": "platform"},
                )
        finally:
            server.stop()
        assert response.status_code == 200, response.text
        run = retain(database, [sliced], dt.date(2026, 7, 1), archive=Archive(str(tmp_path)))
        assert run.deleted == 900 * len(PERIODS)
    finally:
        database.dispose()
    result = run_cli(
        "estimate",
        sliced.name,
        "--by",
        "platform",
        "--from-archive",
        str(tmp_path),
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    offline = json.loads(result.stdout)
    assert [s["values"] for s in offline["slices"]] == [{"platform": c} for c in CELLS]
    assert_same(response.json(), offline)


SLICED_TEXT = MetricSpec.text(
    "arch_sliced_text", max_length=4, epsilon=4.0, dimensions={"platform": ["ios", "web"]}
)


def test_a_text_breakdown_from_an_archive_is_the_online_one(
    databases: DatabaseFactory, tmp_path: Path
) -> None:
    """Each slice's heavy hitters re-analysed from the archive's per-cell sketch counts equal
    the collector's (text_cell_counts), suppressed slice included."""
    url = databases.new("sqlite")
    migrate(url)
    database = open_database(url)
    sketch = SLICED_TEXT.text_randomizer
    rng = SeededRandomness(11)
    batch = [
        ValidReport(
            str(uuid.uuid4()),
            SLICED_TEXT.name,
            PERIODS[-1],
            sketch.randomize(
                sketch.encode(WORDS[i % 2] if i % 3 else f"u{i}"), 1 + (i // 3) % 4, rng
            ),
            "web" if i < 60 else ("ios" if i % 2 else "other"),
        )
        for i in range(1_250)
    ]
    try:
        register_spec(database, SLICED_TEXT, dt.datetime.now(dt.UTC))
        specs = {SLICED_TEXT.name: SLICED_TEXT}
        store_batches(database, [prepare_batch(batch, specs, dt.date(2026, 6, 3))])
        server = RunningCollector(collector_settings(url)).start()
        try:
            with server.client(ADMIN_TOKEN) as admin:
                response = admin.get(
                    f"/v1/metrics/{SLICED_TEXT.name}/estimate",
                    params={"end": PERIODS[-1], "by": "platform"},
                )
        finally:
            server.stop()
        assert response.status_code == 200, response.text
        run = retain(database, [SLICED_TEXT], dt.date(2026, 7, 1), archive=Archive(str(tmp_path)))
        assert run.deleted == len(batch)
    finally:
        database.dispose()
    online = response.json()
    assert [s["suppressed"] for s in online["slices"]] == [False, True, False]
    assert any(s["estimate"]["strings"] for s in online["slices"])
    cli = ("estimate", SLICED_TEXT.name, "--by", "platform", "--end", PERIODS[-1])
    result = run_cli(*cli, "--from-archive", str(tmp_path), "--format", "json")
    assert result.exit_code == 0, result.output
    assert_same(online, json.loads(result.stdout))


def test_a_metric_not_in_the_archive_is_one_line(archived: tuple[dict[str, Any], Path]) -> None:
    _, root = archived
    result = run_cli("estimate", "nowhere", "--from-archive", str(root))
    assert result.exit_code != 0
    assert "holds no reports of metric 'nowhere'" in result.stderr
    assert "Traceback" not in result.stderr

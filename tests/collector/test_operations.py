"""Operating the collector: retention, migrations (also concurrent), and the serve guard."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, func, select, text

from deniable.client import MetricSpec
from deniable.collector import RefusedToServe, Settings, migrate
from deniable.collector.serve import check_exposure
from deniable.collector.storage import open_database, read_sums
from deniable.collector.storage.engine import normalize_url
from deniable.collector.storage.migrator import alembic_config
from deniable.collector.storage.partitions import include_name
from deniable.collector.storage.retention import purge_before
from deniable.collector.storage.tables import id_bytes, metadata, reports
from deniable.service.listening import is_loopback
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    DatabaseFactory,
    RunningCollector,
    collector_settings,
    make_numeric_reports,
    make_reports,
    register,
    unique_name,
)


def raw_report_count(database_url: str, metric: str, period: str | None = None) -> int:
    engine = create_engine(normalize_url(database_url))
    try:
        query = select(func.count()).select_from(reports).where(reports.c.metric == metric)
        if period is not None:
            query = query.where(reports.c.period == period)
        with engine.connect() as conn:
            return int(conn.execute(query).scalar_one())
    finally:
        engine.dispose()


def _point_at_no_database(server: RunningCollector, backend: str) -> None:
    """Swap the running collector's database for one that cannot be reached."""
    state = server.app_state()
    state.database.dispose()
    broken = (
        "sqlite:////nonexistent-dir/x.db"
        if backend == "sqlite"
        else "postgresql://postgres@127.0.0.1:1/x"
    )
    state.database = open_database(broken)
    state.specs.database = state.database


def test_retention_deletes_old_raw_reports_and_keeps_their_counts(
    databases: DatabaseFactory, backend: str
) -> None:
    url = databases.new(backend)
    server = RunningCollector(collector_settings(url, retention_days=30)).start()
    try:
        with server.client(ADMIN_TOKEN) as admin:
            spec = register(admin, MetricSpec.boolean(unique_name("ret"), epsilon=1.0))
            old = make_reports(spec, [1] * 30 + [0] * 10, "2026-11-20", seed=1)
            new = make_reports(spec, [1] * 5, "2026-11-21", seed=2)
            assert admin.post("/v1/reports", json={"reports": old + new}).status_code == 202
            params = {"start": "2026-11-20", "end": "2026-11-20"}
            before = admin.get(f"/v1/metrics/{spec.name}/estimate", params=params).json()

            too_soon = admin.post("/v1/admin/retention", params={"before": "2026-11-21"})
            assert too_soon.status_code == 422
            assert "retention" in too_soon.json()["detail"]

            server.clock.advance(31)
            refused = admin.post("/v1/admin/retention", params={"before": "2026-12-23"})
            assert refused.status_code == 422
            done = admin.post("/v1/admin/retention", params={"before": "2026-11-21"})
            assert done.json() == {"before": "2026-11-21", "deleted": 40}
            assert raw_report_count(url, spec.name, "2026-11-20") == 0
            assert raw_report_count(url, spec.name, "2026-11-21") == 5
            after = admin.get(f"/v1/metrics/{spec.name}/estimate", params=params).json()
            assert after == before

            resend = admin.post("/v1/reports", json={"reports": old[:3]})
            assert resend.status_code == 422
            assert "retention" in resend.json()["detail"][0]["reason"]
            default = admin.post("/v1/admin/retention")
            assert default.json() == {"before": "2026-11-22", "deleted": 5}
            assert admin.get(f"/v1/metrics/{spec.name}/estimate", params=params).json() == before
    finally:
        server.stop()


def test_purge_works_in_small_batches_and_only_before_the_date(
    databases: DatabaseFactory, backend: str
) -> None:
    url = databases.new(backend)
    server = RunningCollector(collector_settings(url)).start()
    try:
        with server.client(INGEST_KEY) as client, server.client(ADMIN_TOKEN) as admin:
            daily = register(admin, MetricSpec.boolean(unique_name("d"), epsilon=1.0))
            monthly = register(
                admin, MetricSpec.boolean(unique_name("m"), epsilon=1.0, period="month")
            )
            batch = (
                make_reports(daily, [1] * 23, "2026-10-31", seed=3)
                + make_reports(daily, [1] * 4, "2026-11-01", seed=4)
                + make_reports(monthly, [0] * 17, "2026-10", seed=5)
                + make_reports(monthly, [0] * 2, "2026-11", seed=6)
            )
            assert client.post("/v1/reports", json={"reports": batch}).status_code == 202
    finally:
        server.stop()
    database = open_database(url)
    try:
        import datetime as dt

        specs = [daily, monthly]
        assert purge_before(database, specs, dt.date(2026, 11, 1), batch_size=5) == 40
        assert purge_before(database, specs, dt.date(2026, 11, 1), batch_size=5) == 0
    finally:
        database.dispose()
    assert raw_report_count(url, daily.name) == 4
    assert raw_report_count(url, monthly.name) == 2


def test_migrations_match_the_tables_and_are_idempotent(
    databases: DatabaseFactory, backend: str
) -> None:
    url = databases.new(backend)
    migrate(url)
    migrate(url)
    engine = create_engine(normalize_url(url))
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"include_name": include_name})
            assert compare_metadata(context, metadata) == []
            head = ScriptDirectory.from_config(alembic_config()).get_current_head()
            assert head is not None and int(head) >= 13  # one head, 0013 or a later one
            version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
            assert version == head
    finally:
        engine.dispose()


def test_concurrent_migrations_from_several_processes_do_not_race(
    databases: DatabaseFactory, backend: str
) -> None:
    """Replicas starting together: four processes migrate one fresh database at the same moment."""
    url = databases.new(backend)
    code = (
        "import sys, time; from deniable.collector import migrate\n"
        "start = float(sys.argv[2])\n"
        "time.sleep(max(0.0, start - time.time()))\n"
        "migrate(sys.argv[1])\n"
    )
    start = str(time.time() + 1.5)
    processes = [
        subprocess.Popen([sys.executable, "-c", code, url, start], stderr=subprocess.PIPE)
        for _ in range(4)
    ]
    errors = [p.communicate(timeout=120)[1].decode() for p in processes]
    assert [p.returncode for p in processes] == [0, 0, 0, 0], errors
    engine = create_engine(normalize_url(url))
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM alembic_version")).scalar_one() == 1
            assert compare_metadata(MigrationContext.configure(conn), metadata) == []
    finally:
        engine.dispose()


def test_sqlite_runs_in_wal_mode(databases: DatabaseFactory) -> None:
    url = databases.new("sqlite")
    migrate(url)
    database = open_database(url)
    try:
        with database.writer.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar_one() == "wal"
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar_one() == 2
    finally:
        database.dispose()


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.0.2.7", False),
        ("collector.example", False),
    ],
)
def test_loopback_detection(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_non_loopback_host_needs_an_admin_token() -> None:
    with pytest.raises(RefusedToServe, match="DENIABLE_ADMIN_TOKEN"):
        check_exposure(Settings(admin_token=None), "0.0.0.0")
    check_exposure(Settings(admin_token="a-long-enough-admin-token"), "0.0.0.0")
    check_exposure(Settings(admin_token=None), "127.0.0.1")


def test_module_entry_point_refuses_public_address_without_token(tmp_path: Any) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DENIABLE_")}
    env["DENIABLE_DATABASE_URL"] = f"sqlite:///{tmp_path / 'x.db'}"
    result = subprocess.run(
        [sys.executable, "-m", "deniable.collector", "--host", "0.0.0.0", "--port", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "admin token" in result.stderr
    assert not (tmp_path / "x.db").exists()


def test_unreachable_database_is_503_not_500(databases: DatabaseFactory, backend: str) -> None:
    url = databases.new(backend)
    server = RunningCollector(collector_settings(url)).start()
    try:
        with server.client(ADMIN_TOKEN) as admin:
            spec = register(admin, MetricSpec.boolean(unique_name("down"), epsilon=1.0))
            _point_at_no_database(server, backend)
            response: httpx.Response = admin.get(f"/v1/metrics/{unique_name('other')}")
            assert response.status_code == 503
            assert "database" in response.json()["detail"]
            upload = admin.post(
                "/v1/reports", json={"reports": make_reports(spec, [1], "2026-11-21", seed=7)}
            )
            assert upload.status_code == 503
    finally:
        server.stop()


def test_an_uncached_estimate_of_a_known_metric_is_503_while_the_database_is_unreachable(
    databases: DatabaseFactory, backend: str
) -> None:
    """Read cache off and the spec cached, an estimate's first database call is its counts
    read on the driver's own cursor: the driver's error is still answered 503, not 500."""
    url = databases.new(backend)
    server = RunningCollector(collector_settings(url, read_cache_bytes=0)).start()
    try:
        with server.client(ADMIN_TOKEN) as admin:
            spec = register(admin, MetricSpec.boolean(unique_name("down"), epsilon=1.0))
            assert admin.get(f"/v1/metrics/{spec.name}/estimate").status_code == 200
            _point_at_no_database(server, backend)
            for _ in range(2):
                response = admin.get(f"/v1/metrics/{spec.name}/estimate")
                assert response.status_code == 503, response.text
                assert "database" in response.json()["detail"]
    finally:
        server.stop()


def test_retention_deletes_old_numeric_reports_and_keeps_their_sums(
    databases: DatabaseFactory, backend: str
) -> None:
    """Like counts, the numeric sums of a period outlive its raw reports: a mean over old
    periods still reads them."""
    url = databases.new(backend)
    server = RunningCollector(collector_settings(url, retention_days=30)).start()
    try:
        with server.client(ADMIN_TOKEN) as admin:
            spec = register(
                admin, MetricSpec.numeric(unique_name("num"), lower=0, upper=1, epsilon=1.0)
            )
            old = make_numeric_reports(spec, [0.25] * 12, "2026-11-20", seed=1)
            new = make_numeric_reports(spec, [0.75] * 3, "2026-11-21", seed=2)
            assert admin.post("/v1/reports", json={"reports": old + new}).status_code == 202
            database = server.app_state().database
            periods = ["2026-11-20", "2026-11-21"]
            before = read_sums(database, spec, periods)
            assert [s.n for s in before] == [12, 3]
            server.clock.advance(31)
            done = admin.post("/v1/admin/retention", params={"before": "2026-11-21"})
            assert done.json() == {"before": "2026-11-21", "deleted": 12}
            assert raw_report_count(url, spec.name) == 3
            assert read_sums(database, spec, periods) == before
    finally:
        server.stop()


def test_retention_on_sqlite_leaves_no_dropped_report_in_the_files(
    databases: DatabaseFactory,
) -> None:
    """A thief of the SQLite file after retention finds none of the dropped reports: their ids
    are in neither the database file nor its WAL (the collector's connections zero what they
    delete, ``secure_delete``, whatever the SQLite build's default), while the kept ones are."""
    url = databases.new("sqlite")
    server = RunningCollector(collector_settings(url, retention_days=30)).start()
    try:
        with server.client(ADMIN_TOKEN) as admin:
            spec = register(
                admin, MetricSpec.categorical(unique_name("gone"), ["a", "b", "c"], epsilon=1.0)
            )
            old = make_reports(spec, [0, 1, 2] * 100, "2026-11-20", seed=7)
            kept = make_reports(spec, [1] * 10, "2026-11-21", seed=8)
            assert admin.post("/v1/reports", json={"reports": old + kept}).status_code == 202
            server.clock.advance(31)
            done = admin.post("/v1/admin/retention", params={"before": "2026-11-21"})
            assert done.json()["deleted"] == 300
    finally:
        server.stop()
    path = Path(normalize_url(url).split("///", 1)[1])
    wal = path.with_name(f"{path.name}-wal")
    files = b"".join(name.read_bytes() for name in (path, wal) if name.exists())
    assert all(id_bytes(r["id"]) in files for r in kept)
    found = [r["id"] for r in old if id_bytes(r["id"]) in files]
    assert not found, f"{len(found)} of 300 dropped reports still in the files"

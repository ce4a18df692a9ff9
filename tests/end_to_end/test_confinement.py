"""The test suite can be confined (issue 41): ``DENIABLE_TEST_PORTS`` keeps every port testkit
hands out, and the servers it starts, in one range (a firewall), and ``DENIABLE_TEST_DB_PREFIX``
starts the name of every PostgreSQL database it creates (a shared server); the README's testing
section documents both. Real servers on loopback, real PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest

from deniable.client import MetricSpec
from testkit import CollectorProcess, DatabaseFactory, RunningCollector, collector_settings
from testkit.key_server import KeyServer
from testkit.ports import PORTS_VARIABLE, port_range, spare_port
from testkit.postgres import PREFIX_VARIABLE, fresh_database, postgres_problem
from testkit.stub_collector import StubCollector

ROOT = Path(__file__).resolve().parents[2]
RANGE = "42100-42179"
ALLOWED = range(42100, 42180)


def port_of(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port


def test_every_port_and_server_stays_in_the_range(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(PORTS_VARIABLE, RANGE)
    assert port_range() == ALLOWED
    assert all(spare_port() in ALLOWED for _ in range(20))
    thread = RunningCollector(collector_settings(f"sqlite:///{tmp_path}/t.db")).start()
    process = CollectorProcess(collector_settings(f"sqlite:///{tmp_path}/p.db"), tmp_path)
    stub = StubCollector([MetricSpec.boolean("flag", epsilon=1.0)]).start()
    keys = KeyServer([]).start()
    try:
        process.start()
        for url in (thread.url, process.url, stub.url, keys.url):
            assert port_of(url) in ALLOWED, url
        with httpx.Client(trust_env=False, timeout=10) as http:
            assert http.get(thread.url + "/healthz").status_code == 200
            assert http.get(process.url + "/healthz").status_code == 200
    finally:
        process.stop()
        thread.stop()
        stub.stop()
        keys.stop()


@pytest.mark.parametrize("value", ["20000", "9-99999", "high-low", "30000-20000"])
def test_a_malformed_range_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(PORTS_VARIABLE, value)
    if value == "20000":  # one port is a range of one
        assert port_range() == range(20000, 20001)
        return
    with pytest.raises(ValueError, match=PORTS_VARIABLE):
        port_range()


def test_every_scratch_database_starts_with_the_prefix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    problem = postgres_problem()
    factory = DatabaseFactory(tmp_path, problem)
    factory.require("postgresql")
    monkeypatch.setenv(PREFIX_VARIABLE, "Confined_41")
    try:
        made = factory.new("postgresql")
        assert urlsplit(made).path.startswith("/confined_41deniable_test_"), made
        with fresh_database("a_bench_name_long_enough_to_be_cut_at_the_63_byte_limit") as url:
            name = urlsplit(url).path.lstrip("/")
            assert name.startswith("confined_41a_bench") and len(name) == 63, name
            with psycopg.connect(url) as connection:  # it exists under that very name
                assert connection.execute("SELECT current_database()").fetchone() == (name,)
    finally:
        factory.drop_all()
    monkeypatch.setenv(PREFIX_VARIABLE, "no-dashes")
    with pytest.raises(ValueError, match=PREFIX_VARIABLE):
        factory.new("postgresql")


def test_the_readme_documents_both_variables() -> None:
    text = (ROOT / "README.md").read_text()
    testing = text[: text.index("Only the SDK, for an app")]
    assert f"{PORTS_VARIABLE}=20000-20999" in testing
    assert f"{PREFIX_VARIABLE}=" in testing

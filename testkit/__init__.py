"""Test infrastructure shared by the tests and the benches: one home for each piece.

- ``ports``: free loopback ports and their URLs.
- ``postgres``: the test PostgreSQL (``DENIABLE_TEST_PG_URL``) and scratch databases on it.
- ``databases``: empty databases of each backend, skipped (or failed in CI) when unavailable.
- ``configuration``: the tokens (admin, ingest, viewer) and settings test collectors run with.
- ``clock``: the settable server clock of in-process collectors.
- ``collector_thread``: the collector in a thread of the test process (``RunningCollector``).
- ``service_process``: a ``deniable`` service in a child process (launch, wait, signal, log).
- ``collector_process``: the collector as a ``deniable serve`` child process.
- ``cluster``: several collector processes on one database.
- ``metrics``: metric names, registration and randomized reports through the API.
- ``http_clients``: httpx clients of test collectors.
- ``dashboard``: a collector with the viewer token, and a client signed in to its dashboard.
- ``cpu``: CPU time of processes (benches).
- ``randomness``: a fast seeded randomness source for mechanisms.
- ``transitions``: a randomizer's exact output distribution, read off its code.
- ``windows``: two windows of periods from the same devices (memoized or not), as exact counts.
- ``stub_collector``: a small collector-shaped HTTP server with fault injection (client tests).
- ``documents``: every number a JSON document holds (suppression checks).
- ``hostile_server``: a loopback server answering a byte a second, or without end (client tests).
- ``folders``: a folder's files as they are now, to hold it unchanged (client tests).
"""

from .clock import TEST_NOW, Clock
from .cluster import Cluster, cluster, run_migrations
from .collector_process import CollectorProcess, real_collector
from .collector_thread import RunningCollector
from .configuration import ADMIN_TOKEN, INGEST_KEY, VIEWER_TOKEN, collector_settings
from .cpu import cpu_seconds, process_tree_cpu, total_cpu
from .dashboard import signed_in, viewer_collector
from .databases import BACKENDS, DatabaseFactory, require_postgres, scratch_database
from .http_clients import authorized_client
from .metrics import (
    make_numeric_reports,
    make_reports,
    make_text_reports,
    overlapping_uploads,
    post_reports,
    quantile_holds,
    register,
    register_all,
    unique_name,
)
from .ports import LOOPBACK, loopback_url, spare_port
from .postgres import PG_ADMIN_URL, fresh_database, postgres_problem
from .randomness import FastRandomness

__all__ = [
    "ADMIN_TOKEN",
    "BACKENDS",
    "INGEST_KEY",
    "LOOPBACK",
    "PG_ADMIN_URL",
    "TEST_NOW",
    "VIEWER_TOKEN",
    "Clock",
    "Cluster",
    "CollectorProcess",
    "DatabaseFactory",
    "FastRandomness",
    "RunningCollector",
    "authorized_client",
    "cluster",
    "collector_settings",
    "cpu_seconds",
    "fresh_database",
    "loopback_url",
    "make_numeric_reports",
    "make_reports",
    "make_text_reports",
    "overlapping_uploads",
    "post_reports",
    "postgres_problem",
    "process_tree_cpu",
    "quantile_holds",
    "real_collector",
    "register",
    "register_all",
    "require_postgres",
    "run_migrations",
    "scratch_database",
    "signed_in",
    "spare_port",
    "total_cpu",
    "unique_name",
    "viewer_collector",
]

"""The collector's side of the shuffler: ``GET /v1/keys`` and ``POST /v1/shuffled`` (the
shuffler's token alone, idempotent by report id, batches below the minimum refused, sealed
reports that do not open or do not belong left out and counted, the batch accounted at the
distinct reports it delivered once however often a part is sent, never at its stated size,
incomplete until every part arrived, headers that disagree with the registered spec refused,
on SQLite and PostgreSQL), and key rotation."""

from __future__ import annotations

import base64
import datetime as dt
import json
import secrets
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from sqlalchemy import text

from deniable.cli.main import cli
from deniable.client import MetricSpec
from deniable.client.sealing import envelope, public_key_of
from deniable.client.wire import report_text
from deniable.collector.sealingkeys import rotate
from deniable.collector.storage import open_database, read_batches
from deniable.collector.storage.tables import id_text
from deniable.estimators.shuffling import central_guarantee
from deniable.estimators.shufflingaccount import DEFAULT_DELTA, ShuffledBatch
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    RunningCollector,
    collector_settings,
    signed_in,
    unique_name,
)
from testkit.metrics import register
from testkit.shuffler_process import SHUFFLER_TOKEN
from tests.shuffler.conftest import MIN_BATCH


@pytest.fixture
def server(tmp_path: Path, keys_file: Path) -> Iterator[RunningCollector]:
    settings = collector_settings(
        f"sqlite:///{tmp_path}/c.db",
        shuffler_token=SHUFFLER_TOKEN,
        sealing_keys_file=keys_file,
        shuffle_min_batch=MIN_BATCH,
    )
    running = RunningCollector(settings).start()
    yield running
    running.stop()


@pytest.fixture
def spec(server: RunningCollector) -> MetricSpec:
    with server.client(ADMIN_TOKEN) as admin:
        return register(
            admin, MetricSpec.categorical(unique_name("sh"), ["a", "b", "c"], epsilon=1.0)
        )


def current_key(server: RunningCollector) -> bytes:
    served = httpx.get(server.url + "/v1/keys", trust_env=False).json()["keys"]
    (entry,) = [k for k in served if k["current"]]
    return public_key_of(entry)[1]


def sealed_reports(
    server: RunningCollector, spec: MetricSpec, count: int, public: bytes | None = None
) -> tuple[list[str], list[dict[str, str]]]:
    """``count`` reports of ``spec`` for today, sealed; (report ids, forwarded envelopes)."""
    public = public or current_key(server)
    period = server.clock().date().isoformat()
    ids, envelopes = [], []
    for i in range(count):
        report_id = str(uuid.uuid4())
        sealed = envelope(
            report_text(report_id, spec.name, spec.fingerprint, period, i % 3), spec, public
        )
        ids.append(report_id)
        envelopes.append({"key": sealed["key"], "sealed": sealed["sealed"]})
    return ids, envelopes


def part(spec: MetricSpec, envelopes: list[Any], **changes: Any) -> dict[str, Any]:
    body = {
        "batch": secrets.token_hex(16),
        "part": 0,
        "parts": 1,
        "n": len(envelopes),
        "metric": spec.name,
        "mechanism": spec.mechanism,
        "epsilon": spec.epsilon,
        "fingerprint": spec.fingerprint,
        "envelopes": envelopes,
    }
    return {**body, **changes}


def forward(
    server: RunningCollector, body: Any, token: str | None = SHUFFLER_TOKEN
) -> httpx.Response:
    with server.client(token) as client:
        if isinstance(body, bytes):
            return client.post("/v1/shuffled", content=body)
        return client.post("/v1/shuffled", json=body)


def stored_rows(server: RunningCollector, metric: str) -> list[tuple[Any, ...]]:
    database = open_database(server.settings.database_url)
    try:
        with database.reader.connect() as connection:
            rows = connection.execute(
                text("SELECT id, received FROM reports WHERE metric = :m"), {"m": metric}
            )
            return [(id_text(r[0]) if isinstance(r[0], bytes) else str(r[0]), r[1]) for r in rows]
    finally:
        database.dispose()


def test_a_part_is_stored_once_and_its_batch_recorded(
    server: RunningCollector, spec: MetricSpec
) -> None:
    ids, envelopes = sealed_reports(server, spec, 5)
    body = part(spec, envelopes)
    first = forward(server, body)
    assert first.status_code == 202, first.text
    assert first.json() == {"accepted": 5, "duplicates": 0, "refused": 0}
    again = forward(server, body)
    assert again.json() == {"accepted": 0, "duplicates": 5, "refused": 0}
    rows = stored_rows(server, spec.name)
    assert sorted(str(row[0]) for row in rows) == sorted(ids)
    assert len({row[1] for row in rows}) == 1  # one day for the whole batch
    database = open_database(server.settings.database_url)
    (batch,) = read_batches(database, spec.name)
    with database.reader.connect() as connection:
        parts = connection.execute(text("SELECT count(*) FROM shuffled_parts")).scalar_one()
    database.dispose()
    assert (batch.batch, batch.n, batch.refused, batch.fingerprint, batch.mechanism) == (
        body["batch"],
        5,
        0,
        spec.fingerprint,
        spec.mechanism,
    )
    assert (batch.declared, batch.incomplete) == (5, False)
    assert parts == 1  # the part, recorded once


def test_only_the_shuffler_token_forwards(server: RunningCollector, spec: MetricSpec) -> None:
    _, envelopes = sealed_reports(server, spec, 3)
    for token in (None, ADMIN_TOKEN, INGEST_KEY, "x" * 20):
        answer = forward(server, part(spec, envelopes), token)
        assert answer.status_code == 401, (token, answer.text)
    assert stored_rows(server, spec.name) == []


def test_without_a_shuffler_token_the_route_refuses_everyone(
    tmp_path: Path, keys_file: Path
) -> None:
    running = RunningCollector(
        collector_settings(f"sqlite:///{tmp_path}/c2.db", sealing_keys_file=keys_file)
    ).start()
    try:
        answer = forward(running, {"batch": "x"}, ADMIN_TOKEN)
        assert answer.status_code == 403
        assert "DENIABLE_SHUFFLER_TOKEN" in answer.json()["detail"]
    finally:
        running.stop()


def test_a_batch_below_the_minimum_is_refused_whole(
    server: RunningCollector, spec: MetricSpec
) -> None:
    _, envelopes = sealed_reports(server, spec, 2)
    answer = forward(server, part(spec, envelopes))
    assert answer.status_code == 422
    assert "DENIABLE_SHUFFLE_MIN_BATCH" in answer.json()["detail"]
    assert stored_rows(server, spec.name) == []
    database = open_database(server.settings.database_url)
    assert read_batches(database, spec.name) == []
    database.dispose()


@pytest.mark.parametrize(
    ("body", "status", "named"),
    [
        (b"{not json", 400, "not valid JSON"),
        ({"batch": "nothex"}, 422, "batch"),
        ("wrong_fingerprint_type", 422, "fingerprint"),
        ("part_past_parts", 422, "part must be below parts"),
        ("too_many", 413, "DENIABLE_MAX_BATCH"),
        ("extra_field", 422, "device: Extra inputs"),
    ],
)
def test_a_malformed_part_is_refused_naming_the_problem(
    server: RunningCollector, spec: MetricSpec, body: Any, status: int, named: str
) -> None:
    _, envelopes = sealed_reports(server, spec, 3)
    good = part(spec, envelopes)
    bodies = {
        "wrong_fingerprint_type": {**good, "fingerprint": 12},
        "part_past_parts": {**good, "part": 1},
        "too_many": {**good, "n": 2000, "envelopes": envelopes * 400},
        "extra_field": {**good, "device": "d" * 32},
    }
    if isinstance(body, dict):
        body = {**good, **body}
    answer = forward(server, bodies.get(body, body) if isinstance(body, str) else body)
    assert answer.status_code == status, answer.text
    assert named in json.dumps(answer.json()["detail"])
    assert stored_rows(server, spec.name) == []


def test_sealed_reports_that_do_not_open_or_belong_are_left_out_and_counted(
    server: RunningCollector, spec: MetricSpec
) -> None:
    ids, envelopes = sealed_reports(server, spec, 4)
    public = current_key(server)
    period = server.clock().date().isoformat()
    with server.client(ADMIN_TOKEN) as admin:
        other = register(
            admin, MetricSpec.categorical(unique_name("sh"), ["a", "b", "c"], epsilon=1.0)
        )
    foreign = envelope(
        report_text(str(uuid.uuid4()), other.name, other.fingerprint, period, 0), other, public
    )
    out_of_range = envelope(
        report_text(str(uuid.uuid4()), spec.name, spec.fingerprint, period, 7), spec, public
    )
    garbage = base64.b64encode(secrets.token_bytes(240)).decode()
    bad = [
        {"key": foreign["key"], "sealed": foreign["sealed"]},  # another batch's report
        {"key": out_of_range["key"], "sealed": out_of_range["sealed"]},  # payload 7 of k = 3
        {"key": envelopes[0]["key"], "sealed": garbage},
        {"key": "0" * 16, "sealed": envelopes[1]["sealed"]},  # an unknown key id
    ]
    answer = forward(server, part(spec, envelopes + bad))
    assert answer.status_code == 202, answer.text
    assert answer.json() == {"accepted": 4, "duplicates": 0, "refused": 4}
    assert sorted(str(row[0]) for row in stored_rows(server, spec.name)) == sorted(ids)


def test_a_rotated_key_opens_reports_for_its_grace_period(
    server: RunningCollector, spec: MetricSpec, keys_file: Path
) -> None:
    old = current_key(server)
    _, before = sealed_reports(server, spec, 3, old)
    rotate(keys_file, dt.datetime.now(dt.UTC))
    served = httpx.get(server.url + "/v1/keys", trust_env=False).json()["keys"]
    assert [k["current"] for k in served] == [False, True]
    new = current_key(server)
    assert new != old
    _, after = sealed_reports(server, spec, 3, new)
    answer = forward(server, part(spec, before + after))
    assert answer.json() == {"accepted": 6, "duplicates": 0, "refused": 0}


def test_reports_that_waited_past_their_keys_grace_period_are_not_lost(
    server: RunningCollector, spec: MetricSpec, keys_file: Path
) -> None:
    """Reports the shuffler acknowledged, sealed to a key retired longer ago than the grace
    period (30 days), waiting for their batch all that time: the collector still opens them;
    the key is no longer served."""
    old = current_key(server)
    _, before = sealed_reports(server, spec, 3, old)
    rotate(keys_file, server.clock() - dt.timedelta(days=31))
    served = httpx.get(server.url + "/v1/keys", trust_env=False).json()["keys"]
    assert [k["current"] for k in served] == [True]
    _, after = sealed_reports(server, spec, 3, current_key(server))
    answer = forward(server, part(spec, after + before))
    assert answer.json() == {"accepted": 6, "duplicates": 0, "refused": 0}


def test_keys_are_served_public_halves_only_and_refused_without_a_file(
    server: RunningCollector, tmp_path: Path
) -> None:
    served = httpx.get(server.url + "/v1/keys", trust_env=False).json()
    assert set(served["keys"][0]) == {"id", "public", "current"}
    assert "private" not in json.dumps(served)
    running = RunningCollector(collector_settings(f"sqlite:///{tmp_path}/c3.db")).start()
    try:
        answer = httpx.get(running.url + "/v1/keys", trust_env=False)
        assert answer.status_code == 404
        assert "DENIABLE_SEALING_KEYS_FILE" in answer.json()["detail"]
    finally:
        running.stop()


def invalid_envelopes(server: RunningCollector, spec: MetricSpec, k: int) -> list[dict[str, str]]:
    """``k`` sealed reports of ``spec`` the collector must refuse: in turn, sealed to a key it
    does not hold, and a payload out of range (7 of k = 3) sealed to its own key."""
    stranger = (
        X25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    )
    period = server.clock().date().isoformat()
    out = []
    for i in range(k):
        public = stranger if i % 2 == 0 else current_key(server)
        payload = 0 if i % 2 == 0 else 7
        text_ = report_text(str(uuid.uuid4()), spec.name, spec.fingerprint, period, payload)
        sealed = envelope(text_, spec, public)
        out.append({"key": sealed["key"], "sealed": sealed["sealed"]})
    return out


def account(server: RunningCollector) -> dict[str, Any]:
    """The ``shuffled`` section of ``GET /v1/privacy``."""
    with server.client(ADMIN_TOKEN) as admin:
        answer = admin.get("/v1/privacy")
    assert answer.status_code == 200, answer.text
    return answer.json()["shuffled"]


def batches_of(server: RunningCollector, spec: MetricSpec) -> list[tuple[int, int]]:
    """(accounted n, refused) of each batch of ``spec`` recorded, oldest first."""
    return [(b.n, b.refused) for b in stored_batches(server, spec)]


def stored_batches(server: RunningCollector, spec: MetricSpec) -> list[ShuffledBatch]:
    """Each batch of ``spec`` recorded, oldest first, as the accountant reads it."""
    database = open_database(server.settings.database_url)
    try:
        return read_batches(database, spec.name)
    finally:
        database.dispose()


def test_refused_reports_lower_the_accounted_n_once_however_often_a_part_comes(
    any_server: RunningCollector,
) -> None:
    """Two parts of one batch of n = 12: part 0 with 4 valid and 3 invalid sealed reports, part
    1 with 3 and 2. The batch is accounted at the 4 reports of part 0 (incomplete), then at 7,
    each part sent again changing nothing, and the account shows 7 with its central eps at 7
    and the 5 refused."""
    with any_server.client(ADMIN_TOKEN) as admin:
        spec = register(
            admin, MetricSpec.categorical(unique_name("acn"), ["a", "b", "c"], epsilon=2.0)
        )
    _, good = sealed_reports(any_server, spec, 7)
    first = good[:4] + invalid_envelopes(any_server, spec, 3)
    second = good[4:] + invalid_envelopes(any_server, spec, 2)
    batch = secrets.token_hex(16)
    parts = [
        part(spec, envelopes, batch=batch, part=i, parts=2, n=12)
        for i, envelopes in enumerate((first, second))
    ]
    assert forward(any_server, parts[0]).json() == {"accepted": 4, "duplicates": 0, "refused": 3}
    assert batches_of(any_server, spec) == [(4, 3)]
    assert stored_batches(any_server, spec)[0].incomplete
    assert forward(any_server, parts[0]).json() == {"accepted": 0, "duplicates": 4, "refused": 3}
    assert batches_of(any_server, spec) == [(4, 3)]
    for _ in range(2):
        answer = forward(any_server, parts[1])
        assert answer.status_code == 202 and answer.json()["refused"] == 2, answer.text
        assert batches_of(any_server, spec) == [(7, 5)]
        assert not stored_batches(any_server, spec)[0].incomplete

    shuffled = account(any_server)
    (row,) = [r for r in shuffled["batches"] if r["metric"] == spec.name]
    assert (row["batch"], row["n"], row["refused"], row["below_minimum"]) == (batch, 7, 5, False)
    assert row["central_epsilon"] == central_guarantee(spec.randomizer, 7, DEFAULT_DELTA).epsilon
    (weakest,) = [m for m in shuffled["metrics"] if m["metric"] == spec.name]
    assert (weakest["smallest_batch"], weakest["below_minimum"]) == (7, 0)


def test_a_batch_left_below_the_minimum_is_stated_as_such(any_server: RunningCollector) -> None:
    """n = 4 stated (the minimum is 3), 2 refused: the batch holds 2 devices, which the account
    flags and states, its eps computed at 2."""
    with any_server.client(ADMIN_TOKEN) as admin:
        spec = register(
            admin, MetricSpec.categorical(unique_name("acm"), ["a", "b", "c"], epsilon=2.0)
        )
    _, good = sealed_reports(any_server, spec, 2)
    body = part(spec, good + invalid_envelopes(any_server, spec, 2))
    assert forward(any_server, body).json()["refused"] == 2
    assert batches_of(any_server, spec) == [(2, 2)]
    shuffled = account(any_server)
    (row,) = [r for r in shuffled["batches"] if r["metric"] == spec.name]
    assert (row["n"], row["refused"], row["below_minimum"]) == (2, 2, True)
    assert row["central_epsilon"] == central_guarantee(spec.randomizer, 2, DEFAULT_DELTA).epsilon
    (weakest,) = [m for m in shuffled["metrics"] if m["metric"] == spec.name]
    assert (weakest["smallest_batch"], weakest["below_minimum"]) == (2, 1)
    assert shuffled["min_batch"] == MIN_BATCH
    assert f"fewer than the minimum of {MIN_BATCH} devices" in shuffled["statement"]
    assert f"{spec.name} (1)" in shuffled["statement"]

    with signed_in(any_server) as browser:
        page = browser.get("/dashboard/privacy").text
    assert "<td>2 (2 refused, below minimum)</td>" in page.replace(' class="num"', "")
    assert "1 below the minimum" in page
    table = CliRunner().invoke(
        cli,
        ["--collector", any_server.url, "--token", ADMIN_TOKEN, "privacy"],
        env={"COLUMNS": "250"},
    )
    assert table.exit_code == 0, table.output
    assert "2 (2 refused, below minimum)" in table.output
    assert "1 below the minimum" in table.output


def test_a_batch_counts_the_distinct_reports_it_delivered_not_its_stated_size(
    any_server: RunningCollector,
) -> None:
    """A part of a batch stating n = 100,000,000 in 2 parts carries 2 sealed reports: it is
    accounted at 2 devices, incomplete and below the minimum, its central eps at 2 (the
    stated size is shown as stated, and no statement counts 100,000,000 devices). One sealed
    report repeated 5 times in a batch of n = 5 counts 1 device; a report uploaded directly
    before, then delivered in a batch, counts in none."""
    with any_server.client(ADMIN_TOKEN) as admin:
        spec = register(
            admin, MetricSpec.categorical(unique_name("dcl"), ["a", "b", "c"], epsilon=2.0)
        )
    _, two = sealed_reports(any_server, spec, 2)
    huge = part(spec, two, parts=2, n=100_000_000)
    assert forward(any_server, huge).json() == {"accepted": 2, "duplicates": 0, "refused": 0}
    (batch,) = stored_batches(any_server, spec)
    assert (batch.n, batch.declared, batch.incomplete) == (2, 100_000_000, True)
    shuffled = account(any_server)
    (row,) = [r for r in shuffled["batches"] if r["metric"] == spec.name]
    assert (row["n"], row["declared"], row["incomplete"], row["below_minimum"]) == (
        2,
        100_000_000,
        True,
        True,
    )
    assert row["central_epsilon"] == central_guarantee(spec.randomizer, 2, DEFAULT_DELTA).epsilon
    assert "100,000,000 devices" not in shuffled["statement"]
    assert f"not arrived whole ({spec.name} (1))" in shuffled["statement"]

    _, (one,) = sealed_reports(any_server, spec, 1)
    repeated = part(spec, [one] * 5)
    assert forward(any_server, repeated).json() == {"accepted": 1, "duplicates": 4, "refused": 0}
    assert sorted(b.n for b in stored_batches(any_server, spec)) == [1, 2]

    ids, envelopes = sealed_reports(any_server, spec, 3)
    direct = report_text(
        ids[0], spec.name, spec.fingerprint, any_server.clock().date().isoformat(), 0
    )
    with any_server.client(INGEST_KEY) as device:
        sent = device.post("/v1/reports", json={"reports": [json.loads(direct)]})
    assert sent.status_code == 202, sent.text
    assert forward(any_server, part(spec, envelopes)).json()["accepted"] == 2
    assert sorted(b.n for b in stored_batches(any_server, spec)) == [1, 2, 2]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"epsilon": 0.5}, "epsilon 0.5 (registered: 2.0)"),
        ({"mechanism": "oue"}, "mechanism 'oue' (registered: 'krr')"),
        ({"fingerprint": "0" * 16}, "fingerprint '0000000000000000'"),
        ({"metric": "never-registered"}, "metric never-registered is not registered"),
        ({"n": 3}, "a batch of one part carries its n = 3 sealed reports; this one carries 1"),
    ],
)
def test_a_part_that_disagrees_with_the_spec_or_its_size_is_refused(
    any_server: RunningCollector, change: dict[str, Any], named: str
) -> None:
    """A header whose eps, mechanism or fingerprint is not the registered spec's, of a metric
    not registered, or a one-part batch of n = the minimum carrying 1 report: 422 naming the
    problem, and nothing recorded or stored."""
    with any_server.client(ADMIN_TOKEN) as admin:
        spec = register(
            admin, MetricSpec.categorical(unique_name("hdr"), ["a", "b", "c"], epsilon=2.0)
        )
    _, envelopes = sealed_reports(any_server, spec, 1 if "n" in change else MIN_BATCH)
    answer = forward(any_server, part(spec, envelopes, **change))
    assert answer.status_code == 422, answer.text
    assert named in answer.json()["detail"]
    assert stored_batches(any_server, spec) == []
    assert stored_rows(any_server, spec.name) == []


def test_a_batch_id_reused_with_another_size_or_parts_is_refused(
    server: RunningCollector, spec: MetricSpec
) -> None:
    """Once a batch is recorded, a part stating another n or another number of parts under its
    id is refused (422), nothing of it stored: a batch's stated size cannot be changed later."""
    _, envelopes = sealed_reports(server, spec, 6)
    batch = secrets.token_hex(16)
    first = part(spec, envelopes[:3], batch=batch, parts=2, n=6)
    assert forward(server, first).status_code == 202
    for changes in ({"parts": 3}, {"n": 7}):
        body = part(spec, envelopes[3:], batch=batch, part=1, **{"parts": 2, "n": 6, **changes})
        answer = forward(server, body)
        assert answer.status_code == 422, answer.text
        assert "recorded with another header" in answer.json()["detail"]
    assert len(stored_rows(server, spec.name)) == 3
    assert [(b.n, b.incomplete) for b in stored_batches(server, spec)] == [(3, True)]

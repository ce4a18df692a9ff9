"""What the collector exposes and accepts at its edges: readiness, the cached registry, the
category cap, strict registration and start-up token checks (issue 12, items 8 and 9).

Every check runs against a real collector on loopback (both database backends where storage
is involved) or the real ``deniable serve`` command.
"""

from __future__ import annotations

import base64
import random
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from deniable.cli.main import cli
from deniable.client import MetricSpec
from deniable.client.mechanisms import MAX_CATEGORIES, MAX_KRR_CATEGORIES
from deniable.collector import Settings
from deniable.collector.settings import settings_problem
from deniable.service.tokens import MIN_TOKEN_LENGTH, token_problem
from testkit import (
    ADMIN_TOKEN,
    INGEST_KEY,
    TEST_NOW,
    DatabaseFactory,
    RunningCollector,
    collector_settings,
    make_reports,
    post_reports,
    register,
    spare_port,
    unique_name,
)

# ---------------------------------------------------------------- readiness


def test_readiness_follows_the_database_while_liveness_does_not(
    collector: RunningCollector,
) -> None:
    with collector.client() as anyone:
        assert anyone.get("/healthz").status_code == 200
        ready = anyone.get("/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json() == {"status": "ready"}


def test_readiness_is_503_while_the_database_is_unreachable(tmp_path: Path) -> None:
    settings = collector_settings(
        f"postgresql://postgres@127.0.0.1:{spare_port()}/nowhere", migrate_on_start=False
    )
    server = RunningCollector(settings).start()
    try:
        with server.client() as anyone:
            assert anyone.get("/healthz").status_code == 200
            ready = anyone.get("/readyz")
    finally:
        server.stop()
    assert ready.status_code == 503, ready.text
    assert "database" in ready.json()["detail"]


@pytest.mark.parametrize("replaced", [False, True], ids=["deleted", "replaced"])
def test_a_deleted_sqlite_file_makes_the_collector_unready_and_refuse_uploads(
    databases: DatabaseFactory, replaced: bool
) -> None:
    """Connections keep writing to a deleted file's inode, lost at exit: every upload would be
    acknowledged and gone after a restart. Readiness and uploads answer 503 instead."""
    url = databases.new("sqlite")
    path = Path(url.removeprefix("sqlite:///"))
    server = RunningCollector(collector_settings(url)).start()
    try:
        with server.client(ADMIN_TOKEN) as admin:
            spec = register(admin, MetricSpec.boolean(unique_name("gone"), epsilon=1.0))
        with server.client(INGEST_KEY) as uploader, server.client() as anyone:
            day = TEST_NOW.date().isoformat()
            assert post_reports(uploader, make_reports(spec, [0, 1], day, 1)).status_code == 202
            assert anyone.get("/readyz").status_code == 200
            path.unlink()
            if replaced:
                path.write_bytes(b"")
            ready = anyone.get("/readyz")
            refused = post_reports(uploader, make_reports(spec, [1, 0], day, 2))
            assert anyone.get("/healthz").status_code == 200
    finally:
        server.stop()
    for answer in (ready, refused):
        assert answer.status_code == 503, answer.text
        assert "deleted or replaced" in answer.json()["detail"]


# ---------------------------------------------------------------- the registry's ETag


def test_the_metric_list_answers_304_until_a_registration_changes_it(
    collector: RunningCollector, admin: httpx.Client
) -> None:
    register(admin, MetricSpec.boolean(unique_name("etag"), epsilon=1.0))
    with collector.client() as anyone:
        first = anyone.get("/v1/metrics")
        etag = first.headers["etag"]
        unchanged = anyone.get("/v1/metrics", headers={"If-None-Match": etag})
        assert unchanged.status_code == 304 and unchanged.content == b""
        assert unchanged.headers["etag"] == etag
        added = register(admin, MetricSpec.boolean(unique_name("etag"), epsilon=1.0))
        changed = anyone.get("/v1/metrics", headers={"If-None-Match": etag})
    assert changed.status_code == 200 and changed.headers["etag"] != etag
    assert added.to_dict() in changed.json()["metrics"]
    assert len(changed.json()["metrics"]) == len(first.json()["metrics"]) + 1


# ---------------------------------------------------------------- registration


@pytest.mark.parametrize(
    ("mechanism", "k"), [("oue", MAX_CATEGORIES + 1), ("krr", MAX_KRR_CATEGORIES + 1)]
)
def test_registration_refuses_more_categories_than_the_cap(
    admin: httpx.Client, mechanism: str, k: int
) -> None:
    name = unique_name("wide")
    body = {
        "name": name,
        "type": "categorical",
        "categories": [f"c{i}" for i in range(k)],
        "epsilon": 1.0,
        "mechanism": mechanism,
    }
    refused = admin.post("/v1/metrics", json=body)
    assert refused.status_code == 422, refused.text
    assert f"at most {k - 1:,} categories" in refused.json()["detail"]
    assert admin.get(f"/v1/metrics/{name}").status_code == 404


def test_auto_never_picks_krr_past_its_cap(admin: httpx.Client) -> None:
    categories = [f"c{i}" for i in range(MAX_KRR_CATEGORIES + 1)]
    spec = register(admin, MetricSpec.categorical(unique_name("wide"), categories, epsilon=8.0))
    assert spec.mechanism in ("oue", "olh")


@pytest.mark.parametrize("epsilon", [True, "1.0", None])
def test_registration_refuses_an_epsilon_that_is_not_a_number(
    admin: httpx.Client, epsilon: object
) -> None:
    name = unique_name("strict")
    body = {"name": name, "type": "boolean", "epsilon": epsilon}
    refused = admin.post("/v1/metrics", json=body)
    assert refused.status_code == 422, refused.text
    assert admin.get(f"/v1/metrics/{name}").status_code == 404


@pytest.mark.parametrize(
    "template",
    [
        '{{"name": "{name}", "type": "boolean", "epsilon": 1, "epsilon": 2}}',
        '{{"name": "{name}", "name": "{name}", "type": "boolean", "epsilon": 1}}',
    ],
)
def test_registration_refuses_a_key_given_twice(admin: httpx.Client, template: str) -> None:
    """Parsers disagree on which of two values counts (``{"epsilon":1,"epsilon":2}`` would
    register eps 2): the body is refused, naming the key, and nothing is registered."""
    name = unique_name("twice")
    body = template.format(name=name)
    refused = admin.post("/v1/metrics", content=body, headers={"Content-Type": "application/json"})
    assert refused.status_code == 422, refused.text
    repeated = "epsilon" if body.count("epsilon") == 2 else "name"
    assert f"repeats the key '{repeated}'" in refused.json()["detail"]
    assert admin.get(f"/v1/metrics/{name}").status_code == 404
    once = body.replace(', "epsilon": 2', "").replace(f', "name": "{name}"', "", 1)
    assert admin.post("/v1/metrics", content=once).status_code == 201


# ---------------------------------------------------------------- tokens at start-up


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        ("short-token"[: MIN_TOKEN_LENGTH - 1], "shorter than"),
        (" padded-but-long-enough-token", "whitespace"),
        ("long-enough-token-with-newline\n", "whitespace"),
        ("please-Change_Me-before-release", "placeholder"),
        ("z" * 40, "placeholder"),
        ("<your-admin-token-here>", "placeholder"),
        ("password1234567890", "placeholder"),
        ("${DENIABLE_ADMIN_TOKEN}", "placeholder"),
        ("abababababababababab", "placeholder"),
        ("1234567890123456789", "placeholder"),
        ("inner space in-a-long-token", "printable ASCII"),
        ("long-enough-token-with-zwsp\u200b", "printable ASCII"),
        ("long-enough-tab\tin-the-token", "printable ASCII"),
        ("tökenwith-non-ascii-letters", "printable ASCII"),
    ],
)
@pytest.mark.parametrize("field", ["admin_token", "ingest_key", "admin_token_previous"])
def test_weak_tokens_are_refused_without_echoing_them(field: str, token: str, reason: str) -> None:
    values = {field: token}
    if field == "admin_token_previous":
        values["admin_token"] = "a-strong-current-admin-token"
    with pytest.raises(ValidationError) as refused:
        Settings(**values)  # type: ignore[arg-type]
    assert reason in str(refused.value) and f"DENIABLE_{field.upper()}" in str(refused.value)
    assert token.strip() not in str(refused.value)


def test_generated_tokens_are_accepted() -> None:
    """What operators generate passes: 16 hex characters (the shortest accepted) have fewer
    than 5 distinct characters with probability 4e-7, so 2,000 seeded draws all pass unless
    the rules refuse random tokens."""
    rng = random.Random(20261126)
    for _ in range(2000):
        for token in (rng.randbytes(8).hex(), base64.urlsafe_b64encode(rng.randbytes(24))):
            text = token if isinstance(token, str) else token.decode().rstrip("=")
            assert token_problem(text) is None


ROLES = {
    "admin_token": "role-admin-token-7f3a9c",
    "admin_token_previous": "role-admin-old-token-2b8e",
    "viewer_token": "role-viewer-token-c41d0e",
    "ingest_key": "role-ingest-key-9e2f7a",
    "ingest_key_previous": "role-ingest-old-key-5d1c",
}
"""A distinct token for every role setting."""


@pytest.mark.parametrize(
    ("field", "copies"),
    [
        ("ingest_key", "admin_token"),
        ("ingest_key", "admin_token_previous"),
        ("ingest_key_previous", "admin_token"),
        ("viewer_token", "ingest_key"),
        ("viewer_token", "ingest_key_previous"),
        ("viewer_token", "admin_token_previous"),
    ],
)
def test_one_token_in_two_roles_is_refused_naming_both(field: str, copies: str) -> None:
    assert Settings(**ROLES).ingest_tokens()  # type: ignore[arg-type]
    values = {**ROLES, field: ROLES[copies]}
    with pytest.raises(ValidationError) as refused:
        Settings(**values)  # type: ignore[arg-type]
    message = settings_problem(refused.value)
    assert f"DENIABLE_{field.upper()}" in message and f"DENIABLE_{copies.upper()}" in message
    assert ROLES[copies] not in message and ROLES[copies] not in str(refused.value)


def test_a_token_file_fills_the_token_and_a_clash_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "admin-token"
    path.write_text("token-from-a-mounted-secret\n")
    settings = Settings(admin_token_file=path)  # type: ignore[arg-type]
    assert settings.admin_tokens() == ["token-from-a-mounted-secret"]
    with pytest.raises(ValidationError, match="both set"):
        Settings(admin_token_file=path, admin_token="another-long-admin-token")  # type: ignore[arg-type]


def _serve(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["serve", *args], catch_exceptions=False)
    return result.exit_code, result.stderr


def test_serve_refuses_a_weak_token_in_one_line(tmp_path: Path) -> None:
    code, stderr = _serve("--admin-token", "change-me", "--database", f"sqlite:///{tmp_path}/d.db")
    assert code != 0
    error_lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(error_lines) == 1 and "DENIABLE_ADMIN_TOKEN" in error_lines[0]
    assert "change-me" not in stderr and "Traceback" not in stderr


def test_serve_refuses_an_ingest_key_equal_to_the_admin_token(tmp_path: Path) -> None:
    token = "same-token-in-two-roles-8c1f"
    (tmp_path / "admin").write_text(token)
    code, stderr = _serve(
        "--admin-token-file",
        str(tmp_path / "admin"),
        "--ingest-key",
        token,
        "--database",
        f"sqlite:///{tmp_path}/d.db",
    )
    assert code != 0
    error_lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(error_lines) == 1, stderr
    assert "DENIABLE_INGEST_KEY" in error_lines[0] and "DENIABLE_ADMIN_TOKEN" in error_lines[0]
    assert token not in stderr and "Traceback" not in stderr


def test_serve_warns_when_a_token_is_on_the_command_line(tmp_path: Path) -> None:
    unreadable = tmp_path / "missing-token-file"
    code, stderr = _serve(
        "--ingest-key", "a-long-enough-ingest-key", "--admin-token-file", str(unreadable)
    )
    assert code != 0
    assert "warning: --ingest-key is visible" in stderr and "--ingest-key-file" in stderr
    assert "cannot read" in stderr and "a-long-enough-ingest-key" not in stderr

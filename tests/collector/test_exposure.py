"""What the collector exposes and accepts at its edges: readiness, the cached registry, the
category cap, strict registration and start-up token checks (issue 12, items 8 and 9).

Every check runs against a real collector on loopback (both database backends where storage
is involved) or the real ``deniable serve`` command.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from deniable.cli.main import cli
from deniable.client import MetricSpec
from deniable.client.mechanisms import MAX_CATEGORIES, MAX_KRR_CATEGORIES
from deniable.collector import Settings
from deniable.collector.settings import MIN_TOKEN_LENGTH
from pydantic import ValidationError

from tests.support import RunningCollector, collector_settings, free_port, register, unique_name

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
        f"postgresql://postgres@127.0.0.1:{free_port()}/nowhere", migrate_on_start=False
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


# ---------------------------------------------------------------- tokens at start-up


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        ("short-token"[: MIN_TOKEN_LENGTH - 1], "shorter than"),
        (" padded-but-long-enough-token", "whitespace"),
        ("long-enough-token-with-newline\n", "whitespace"),
        ("please-Change_Me-before-release", "placeholder"),
        ("z" * 40, "placeholder"),
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


def test_serve_warns_when_a_token_is_on_the_command_line(tmp_path: Path) -> None:
    unreadable = tmp_path / "missing-token-file"
    code, stderr = _serve(
        "--ingest-key", "a-long-enough-ingest-key", "--admin-token-file", str(unreadable)
    )
    assert code != 0
    assert "warning: --ingest-key is visible" in stderr and "--ingest-key-file" in stderr
    assert "cannot read" in stderr and "a-long-enough-ingest-key" not in stderr

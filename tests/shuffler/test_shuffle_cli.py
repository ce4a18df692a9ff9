"""``deniable shuffle`` refuses to start without its token or upload key, or with a bad setting,
in one line."""

from __future__ import annotations

import pytest

from testkit.cli import run_cli


def test_the_shuffler_needs_its_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DENIABLE_SHUFFLER_TOKEN", raising=False)
    result = run_cli("shuffle", "--port", "0")
    assert result.exit_code != 0
    assert "DENIABLE_SHUFFLER_TOKEN" in result.stderr and result.stderr.count("\n") == 1


def test_the_shuffler_needs_its_upload_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DENIABLE_SHUFFLER_TOKEN", "shuffler-token-for-tests-7c1d")
    monkeypatch.delenv("DENIABLE_SHUFFLER_UPLOAD_KEY", raising=False)
    result = run_cli("shuffle", "--port", "0")
    assert result.exit_code != 0
    assert "needs DENIABLE_SHUFFLER_UPLOAD_KEY" in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [
        ("DENIABLE_SHUFFLER_TOKEN", "short", "DENIABLE_SHUFFLER_TOKEN is shorter"),
        ("DENIABLE_SHUFFLER_MAX_BATCH", "10", "MAX_BATCH must be at least"),
        ("DENIABLE_SHUFFLER_COLLECTOR_URL", "ftp://x", "must start with http"),
        ("DENIABLE_SHUFFLER_MAX_DELAY", "-1", "DENIABLE_SHUFFLER_MAX_DELAY"),
        ("DENIABLE_SHUFFLER_UPLOAD_KEY", "short", "DENIABLE_SHUFFLER_UPLOAD_KEY is shorter"),
        (
            "DENIABLE_SHUFFLER_UPLOAD_KEY",
            "shuffler-token-for-tests-7c1d",
            "UPLOAD_KEY equals DENIABLE_SHUFFLER_TOKEN",
        ),
        ("DENIABLE_SHUFFLER_CORS_ORIGINS", "*", "CORS_ORIGINS: '*' is not an origin"),
        (
            "DENIABLE_SHUFFLER_CORS_ORIGINS",
            "https://app.example/page",
            "'https://app.example/page' is not an origin",
        ),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, named: str
) -> None:
    monkeypatch.setenv("DENIABLE_SHUFFLER_TOKEN", "shuffler-token-for-tests-7c1d")
    monkeypatch.setenv(variable, value)
    result = run_cli("shuffle", "--port", "0")
    assert result.exit_code != 0
    assert named in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert "short" not in result.stderr.replace("shorter", "")

"""A PostgreSQL URL naming a database the server does not have (issue 41): ``deniable serve``
and ``deniable migrate`` stop with one line saying to create it (``createdb ...``), not an
internal error, and docs/operations.md says so. Real PostgreSQL, the CLI in a subprocess."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from testkit import DatabaseFactory
from testkit.postgres import database_url
from testkit.service_process import DENIABLE, inherited_environment

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("command", [["serve", "--port", "0"], ["migrate"]])
def test_a_missing_postgresql_database_says_to_create_it(
    databases: DatabaseFactory, command: list[str]
) -> None:
    databases.require("postgresql")
    name = f"deniable_test_absent_{uuid.uuid4().hex[:12]}"
    url = database_url(name)
    parsed = make_url(url)
    out = subprocess.run(
        [*DENIABLE, *command],
        capture_output=True,
        text=True,
        timeout=60,
        env={**inherited_environment(), "DENIABLE_DATABASE_URL": url},
    )
    assert out.returncode == 1, out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
    assert "internal error" not in out.stderr
    assert f'error: database "{name}" does not exist on the PostgreSQL server' in out.stderr
    assert f"createdb -h {parsed.host}" in out.stderr and out.stderr.rstrip().count(name) == 2
    assert f"-U {parsed.username} {name})" in out.stderr


def test_the_operations_guide_says_to_create_the_database() -> None:
    text = " ".join((ROOT / "docs" / "operations.md").read_text().split())
    assert "must exist: neither `deniable serve` nor `deniable migrate` creates it" in text
    assert "does not exist on the PostgreSQL server: create it (createdb" in text

"""A state that cannot be read is set aside, byte for byte, reported by ``problems()`` and
never raised: the client starts afresh and keeps recording (as the JS SDK does with its JSON
state, sdk/js/test/state.test.mjs)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from deniable.client.outbox import DB_NAME
from deniable.client.specsource import SPECS_FILE

from .test_state_dir import make_client

CORRUPTIONS = {
    "ledger count as text": ("UPDATE ledger SET count = 'oops'", "malformed ledger"),
    "negative ledger count": ("UPDATE ledger SET count = -3", "malformed ledger"),
    "secret as text": ("UPDATE meta SET value = 'x' WHERE key = 'secret'", "malformed secret"),
    "memo payload not JSON": (
        "INSERT INTO memo VALUES ('k', 'dark_mode', '{')",
        "malformed memo",
    ),
    "pin not a number": (
        "INSERT INTO memo VALUES ('pin:1', 'dark_mode', '\"x\"')",
        "malformed memo",
    ),
    "outbox reports as bytes": (
        "INSERT INTO outbox (count, reports) VALUES (1, X'07')",
        "malformed outbox",
    ),
    "ledger of another shape": (
        "DROP TABLE ledger; CREATE TABLE ledger (x)",
        "not the client's SQLite database (OperationalError)",
    ),
}


def _used_state(state_dir: Path) -> Path:
    """A state_dir whose client recorded, committed and closed: its database file."""
    client = make_client(state_dir)
    assert client.record("dark_mode", True)
    client.flush(timeout=0.05)
    client.close(timeout=0.05)
    return state_dir / DB_NAME


def _reopened_without_raising(state_dir: Path, original: bytes, why: str) -> None:
    client = make_client(state_dir)
    try:
        aside = sorted(state_dir.glob(f"{DB_NAME}.bad-*"))
        assert [p.name.endswith(("-wal", "-shm")) for p in aside] == [False]
        assert aside[0].read_bytes() == original
        assert (
            f"the saved state was unreadable ({why}); kept as {aside[0]};"
            " the client started afresh" in client.problems()
        )
        assert client.record("dark_mode", False)
        client.flush(timeout=0.05)
        assert client.stats.queued == 1
    finally:
        client.close(timeout=0.05)
    again = make_client(state_dir)
    try:
        assert not [p for p in again.problems() if "saved state" in p]
    finally:
        again.close(timeout=0.05)


@pytest.mark.parametrize("what", list(CORRUPTIONS))
def test_a_malformed_state_is_set_aside_and_reported(what: str, tmp_path: Path) -> None:
    statement, why = CORRUPTIONS[what]
    path = _used_state(tmp_path)
    with sqlite3.connect(path) as db:
        db.executescript(statement)
    db.close()
    assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0
    _reopened_without_raising(tmp_path, path.read_bytes(), why)


def test_a_file_that_is_not_a_database_is_set_aside(tmp_path: Path) -> None:
    path = _used_state(tmp_path)
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.write_bytes(b"not a database, just bytes " * 100)
    why = "not the client's SQLite database (DatabaseError)"
    _reopened_without_raising(tmp_path, path.read_bytes(), why)


def test_unreadable_cached_specs_are_set_aside_and_reported(tmp_path: Path) -> None:
    """The specs an earlier run cached (served ones), unreadable: kept aside, reported."""
    cached = tmp_path / SPECS_FILE
    cached.write_text('{"metrics": [{"name": "x", "type": "boolean"')
    original = cached.read_bytes()
    client = make_client(tmp_path, metrics=None)
    try:
        aside = sorted(tmp_path.glob(f"{SPECS_FILE}.bad-*"))
        assert len(aside) == 1
        assert aside[0].read_bytes() == original
        assert (
            f"the saved metric specs were unreadable (JSONDecodeError); kept as {aside[0]};"
            " the client fetches them afresh" in client.problems()
        )
    finally:
        client.close(timeout=0.05)


@pytest.mark.parametrize("answer", ["7", "-1"])
def test_a_remembered_answer_out_of_range_is_drawn_afresh_and_reported(
    answer: str, tmp_path: Path
) -> None:
    """A memoized answer the metric's layers cannot take (as a crafted state holds): record()
    never raises, the problem names the metric, and the redrawn answer is the one kept (a
    second run finds it and draws nothing; sdk/js/test/state.test.mjs does the same)."""
    path = _used_state(tmp_path)
    with sqlite3.connect(path) as db:
        db.execute(f"UPDATE memo SET payload = '{answer}' WHERE key NOT LIKE 'pin:%'")
        db.execute("DELETE FROM ledger")
    db.close()
    client = make_client(tmp_path)
    try:
        assert client.record("dark_mode", True)
        assert (
            "the saved state had a malformed memo entry of dark_mode (an answer out of its"
            " metric's range); the entry was drawn afresh" in client.problems()
        )
        client.flush(timeout=0.05)
    finally:
        client.close(timeout=0.05)
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT payload FROM memo WHERE key NOT LIKE 'pin:%'").fetchall()
    db.close()
    assert len(rows) == 1 and rows[0][0] in ("0", "1"), rows
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM ledger")
    db.close()
    again = make_client(tmp_path)
    try:
        assert again.record("dark_mode", True)
        assert not [p for p in again.problems() if "memo" in p]
    finally:
        again.close(timeout=0.05)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT payload FROM memo WHERE key NOT LIKE 'pin:%'").fetchall() == rows
    db.close()

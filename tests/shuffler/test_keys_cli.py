"""``deniable keys``: a keys file of mode 0600, rotation keeping the old key for its grace
period, the public document, and one-line errors."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from deniable.client.sealing import public_key_of
from testkit.cli import run_cli


def test_generate_rotate_list_and_publish(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    made = run_cli("keys", "generate", "--file", str(path))
    assert made.exit_code == 0, made.output
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = run_cli("keys", "generate", "--file", str(path))
    assert again.exit_code != 0
    assert again.stderr.count("\n") == 1 and "rotate" in again.stderr
    assert run_cli("keys", "rotate", "--file", str(path)).exit_code == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    listed = run_cli("keys", "list", "--file", str(path)).stdout.splitlines()
    assert [line.split()[-1] for line in listed] == ["retiring", "current"]
    expired = run_cli("keys", "list", "--file", str(path), "--grace-days", "0").stdout
    assert [line.split()[-1] for line in expired.splitlines()] == ["retired", "current"]
    published = json.loads(run_cli("keys", "publish", "--file", str(path)).stdout)
    assert [k["current"] for k in published["keys"]] == [False, True]
    for entry in published["keys"]:
        public_key_of(entry)  # each id is its key's
    assert "private" not in json.dumps(published)
    gone = json.loads(run_cli("keys", "publish", "--file", str(path), "--grace-days", "0").stdout)
    assert len(gone["keys"]) == 1


def test_a_keys_file_others_can_read_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    assert run_cli("keys", "generate", "--file", str(path)).exit_code == 0
    path.chmod(0o644)
    result = run_cli("keys", "list", "--file", str(path))
    assert result.exit_code != 0
    assert "chmod 600" in result.stderr and result.stderr.count("\n") == 1
    missing = run_cli("keys", "rotate", "--file", str(tmp_path / "none.json"))
    assert missing.exit_code != 0 and "cannot read" in missing.stderr

"""A folder's files as they are now, to hold it unchanged (a client's ``state_dir`` that a
refused or closed client must not touch)."""

from __future__ import annotations

from pathlib import Path


def files_in(folder: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under ``folder``, by its path relative to it: its modification time (ns)
    and its bytes."""
    return {
        str(path.relative_to(folder)): (path.stat().st_mtime_ns, path.read_bytes())
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }

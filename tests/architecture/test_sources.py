"""The estimate engine's sources (issue 39, step 3): the archive's and the export file's I/O
live in ``deniable.sources``, between the estimators and the collector, so that
``deniable.estimators`` keeps the statistics and the documents."""

from __future__ import annotations

import ast
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2] / "src" / "deniable"
FILE_ENGINES = ("duckdb", "dask", "distributed", "pyarrow", "fsspec")
"""The packages that read files or run an engine over them."""


def _imported(path: Path) -> set[str]:
    """The absolute modules ``path`` imports (relative imports left out)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module)
    return found


def test_the_estimators_run_no_file_engine() -> None:
    """No module of estimators/ imports DuckDB, Dask, pyarrow or fsspec."""
    offenders = [
        f"{path.name} imports {module}"
        for path in sorted((SOURCE / "estimators").rglob("*.py"))
        for module in _imported(path)
        if module.split(".")[0] in FILE_ENGINES
    ]
    assert offenders == []


def test_sources_import_only_the_client_and_the_estimators() -> None:
    """deniable.sources sits below the collector and the CLI: of deniable, it imports the
    client and the estimators only (and the estimators never import it)."""
    offenders = [
        f"sources/{path.name} imports {module}"
        for path in sorted((SOURCE / "sources").rglob("*.py"))
        for module in _imported(path)
        if module.startswith("deniable.")
        and module.split(".")[1] not in ("client", "estimators", "sources")
    ]
    offenders += [
        f"estimators/{path.name} imports {module}"
        for path in sorted((SOURCE / "estimators").rglob("*.py"))
        for module in _imported(path)
        if module.startswith("deniable.sources")
    ]
    assert offenders == []

"""The distribution's shape: subpackages import, and the SDK stays light."""

import subprocess
import sys
import tomllib
from pathlib import Path

from .imports import ROOT, SOURCE, imported_modules, package_of


def test_client_import_pulls_in_no_heavy_module() -> None:
    code = (
        "import sys, deniable.client\n"
        "heavy = [m for m in ('numpy', 'polars', 'fastapi', 'click', 'pydantic', 'cryptography')"
        " if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


SEALING_MODULE = "sealing.py"
"""The one client module that may import ``cryptography`` (sealed reports for a shuffler)."""


def test_every_client_module_imports_only_the_standard_library_and_httpx() -> None:
    """DESIGN.md: ``deniable.client`` depends on the standard library and httpx only, plus
    ``cryptography`` in its sealing module alone. Every module of ``client/`` (the numeric
    mechanisms and specs included) is scanned, so a new import of scipy or numpy anywhere in
    the SDK fails here even if nothing imports it yet."""
    modules = sorted((SOURCE / "client").rglob("*.py"))
    assert {"mechanisms.py", "spec.py", "recorder.py", "wire.py"} <= {p.name for p in modules}
    offenders = []
    for path in modules:
        for module in imported_modules(path, package_of(path)):
            top = module.split(".")[0]
            allowed = top in sys.stdlib_module_names or top in ("httpx", "__future__")
            allowed |= top == "cryptography" and path.name == SEALING_MODULE
            if not allowed and not module.startswith("deniable.client"):
                offenders.append(f"{path.relative_to(ROOT)} imports {module}")
    assert not offenders, offenders


def test_folders_are_import_names() -> None:
    """The src layout: setuptools finds ``deniable`` under ``src/``, with no folder remapped,
    and every folder holding modules is a package (so none is left out of the wheel)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "package-dir" not in config
    assert config["packages"]["find"] == {"where": ["src"], "include": ["deniable*"]}
    folders = {path.parent for path in SOURCE.rglob("*.py")}
    assert [str(f) for f in sorted(folders) if not (f / "__init__.py").is_file()] == []


PRIVATE_STORAGE_MODULES = (
    "engine",
    "prepare",
    "kindrows",
    "increments",
    "sqliteupserts",
    "pgupserts",
    "transaction",
    "writer",
    "tables",
    "migrations",
    "migrator",
    "schema",
)
"""Modules of ``deniable.collector.storage`` that only the collector may import; the CLI goes
through what the storage package root exports."""


def _is_private_storage(module: str) -> bool:
    """Whether ``module`` is (inside) one of :data:`PRIVATE_STORAGE_MODULES`."""
    parts = module.split(".")
    return parts[:3] == ["deniable", "collector", "storage"] and (
        len(parts) > 3 and parts[3] in PRIVATE_STORAGE_MODULES
    )


def test_the_cli_imports_no_private_storage_module() -> None:
    """The CLI reads the collector's database through ``deniable.collector.storage``'s public
    queries only, never its tables, engine, ingestion, writer or migrations."""
    offenders = []
    for path in sorted((SOURCE / "cli").rglob("*.py")):
        parts = path.relative_to(SOURCE / "cli").with_suffix("").parts
        package = ".".join(("deniable.cli", *parts[:-1]))
        offenders += [
            f"{path.relative_to(ROOT)} imports {module}"
            for module in sorted(imported_modules(path, package))
            if _is_private_storage(module)
        ]
    assert not offenders, offenders


def test_the_import_scan_sees_private_modules_however_imported(tmp_path: Path) -> None:
    """The scan above resolves relative imports and ``from package import module``."""
    module = tmp_path / "m.py"
    module.write_text(
        "from ...collector.storage.tables import reports\n"
        "from ...collector.storage import engine\n"
        "import deniable.collector.storage.transaction\n"
        "from deniable.collector.storage import open_database\n"
    )
    found = {m for m in imported_modules(module, "deniable.cli.commands") if _is_private_storage(m)}
    assert found == {
        "deniable.collector.storage.tables",
        "deniable.collector.storage.tables.reports",
        "deniable.collector.storage.engine",
        "deniable.collector.storage.transaction",
    }

"""The package order, enforced: client <- estimators <- sources <- service <- collector | shuffler
<- cli.

An arrow points from the imported package to its importer. Each package imports only those
before it: the client nothing of deniable, the estimators the client, the sources (archive and
export-file reading) both, the service kit those three, the collector and the shuffler those
four and never each other, and the CLI anything. The scan
reads every module's imports from its AST (relative ones resolved, lazy ones inside functions
included), so an import added anywhere in a module fails here even if nothing runs it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .imports import ROOT, SOURCE, imported_modules, package_of

BASE = ("client", "estimators", "sources", "service")
"""The packages both servers build on, in their order."""

MAY_IMPORT: dict[str, frozenset[str] | None] = {
    "client": frozenset(),
    "estimators": frozenset(BASE[:1]),
    "sources": frozenset(BASE[:2]),
    "service": frozenset(BASE[:3]),
    "collector": frozenset(BASE),
    "shuffler": frozenset(BASE),
    "cli": None,
}
"""Each package of ``deniable`` and the other packages it may import (None: any)."""

KNOWN_EXCEPTIONS: dict[tuple[str, str], str] = {}
"""Imports against the order that are tolerated for now, as (module path under
``src/deniable``, imported package) with the reason each is; none today, and each entry
added needs its reason and a plan to remove it."""


def forbidden_imports(path: Path, package: str) -> set[str]:
    """The deniable packages that the module at ``path`` (a module of ``package``) imports
    but its package may not."""
    layer = package.split(".")[1]
    allowed = MAY_IMPORT[layer]
    if allowed is None:
        return set()
    found = set()
    for module in imported_modules(path, package):
        parts = module.split(".")
        if parts[0] == "deniable" and len(parts) > 1 and parts[1] in MAY_IMPORT:
            found.add(parts[1])
    return found - allowed - {layer}


def test_every_package_has_its_place_in_the_order() -> None:
    """A new package of ``deniable`` must be placed in the order before it can pass."""
    packages = {init.parent.name for init in SOURCE.glob("*/__init__.py")}
    assert packages == set(MAY_IMPORT)


def test_each_package_imports_only_the_packages_before_it() -> None:
    """No module imports a package after its own, and the two servers never import each
    other (the shuffler nothing of the collector, the collector nothing of the shuffler)."""
    offenders, tolerated = [], set()
    for path in sorted(SOURCE.glob("*/**/*.py")):
        where = path.relative_to(SOURCE).as_posix()
        for imported in sorted(forbidden_imports(path, package_of(path))):
            if (where, imported) in KNOWN_EXCEPTIONS:
                tolerated.add((where, imported))
            else:
                offenders.append(f"src/deniable/{where} imports deniable.{imported}")
    assert not offenders, offenders
    assert tolerated == set(KNOWN_EXCEPTIONS), "a known exception is gone: drop it from the list"


def test_the_known_exceptions_each_give_a_reason() -> None:
    """An exception without its reason is an import nobody decided on."""
    assert all(reason.strip() for reason in KNOWN_EXCEPTIONS.values())


@pytest.mark.parametrize(
    ("package", "source", "expected"),
    [
        ("deniable.shuffler", "from ..collector.routes import body\n", {"collector"}),
        ("deniable.shuffler", "from .. import collector\n", {"collector"}),
        ("deniable.shuffler", "import deniable.collector.auth\n", {"collector"}),
        ("deniable.shuffler", "from deniable.collector import settings\n", {"collector"}),
        ("deniable.collector.routes", "from ...shuffler.app import create_app\n", {"shuffler"}),
        ("deniable.collector", "def f():\n    from deniable.cli import main\n", {"cli"}),
        ("deniable.service", "from deniable.collector.settings import Settings\n", {"collector"}),
        ("deniable.estimators", "from ..service import body\n", {"service"}),
        ("deniable.client", "from deniable.estimators import frequency\n", {"estimators"}),
        ("deniable.shuffler", "from deniable.service.body import read_body\n", set()),
        ("deniable.shuffler", "from .store import Store\nfrom ..client import wire\n", set()),
        (
            "deniable.cli",
            "from deniable.collector import Settings\nimport deniable.shuffler\n",
            set(),
        ),
    ],
)
def test_the_scan_catches_a_forbidden_import_relative_or_absolute(
    tmp_path: Path, package: str, source: str, expected: set[str]
) -> None:
    """The scan above resolves relative imports, ``from package import module`` and imports
    inside functions, and lets allowed ones pass."""
    module = tmp_path / "m.py"
    module.write_text(source)
    assert forbidden_imports(module, package) == expected


def test_the_package_of_a_module_is_where_its_relative_imports_start() -> None:
    """A module's package is its folder's; an ``__init__``'s is its own folder's too."""
    assert package_of(SOURCE / "collector" / "routes" / "body.py") == "deniable.collector.routes"
    assert package_of(SOURCE / "shuffler" / "__init__.py") == "deniable.shuffler"
    assert ROOT in SOURCE.parents

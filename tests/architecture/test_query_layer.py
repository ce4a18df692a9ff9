"""The query layer's boundary (issue 39, step 2): the estimate use cases live in
``deniable.collector.queries``, and only the routes are HTTP.

No module outside ``collector/routes/`` imports a route module (the app, which mounts the
routers, excepted), so the dashboard, the Prometheus exposition and the CLI reach the
estimates through the query functions, and a change to a page cannot alter an API answer.
The dashboard and the exposition never import fastapi's ``HTTPException``: they read and
raise :class:`~deniable.collector.queries.refusal.QueryRefused`.
"""

from __future__ import annotations

from pathlib import Path

from .imports import SOURCE, imported_modules, package_of

ROUTES = "deniable.collector.routes"
APP = "deniable.collector.app"
NO_HTTP_ERRORS = ("deniable.collector.dashboard", "deniable.collector.exposition")
"""Modules that know refusals as the query layer's, never as HTTP errors."""
HTTP_ERRORS = {
    f"{web}.{name}" for web in ("fastapi", "starlette.exceptions") for name in ("HTTPException",)
}
"""The HTTP error as the dashboard could import it."""


def _module_name(path: Path) -> str:
    """The import name of the source file ``path``."""
    name = package_of(path)
    return name if path.name == "__init__.py" else f"{name}.{path.stem}"


def _imports(path: Path) -> set[str]:
    """What ``path`` imports, its relative imports resolved against its package."""
    return imported_modules(path, package_of(path))


def test_only_the_routes_and_the_app_import_route_modules() -> None:
    """The dashboard, the exposition and the CLI call the query functions, never a route (the
    app's table of thin paths names its routes; :mod:`deniable.collector.fastpaths` is generic)."""
    offenders = [
        f"{_module_name(path)} imports {module}"
        for path in sorted(SOURCE.rglob("*.py"))
        if not _module_name(path).startswith(ROUTES) and _module_name(path) != APP
        for module in sorted(_imports(path))
        if module.startswith(ROUTES + ".")
    ]
    assert offenders == []


def test_dashboard_and_exposition_know_no_http_error() -> None:
    """A refusal reaches a page or a scrape as a :class:`QueryRefused`, not an HTTP error."""
    offenders = [
        f"{_module_name(path)} imports {module}"
        for path in sorted(SOURCE.rglob("*.py"))
        if _module_name(path).startswith(NO_HTTP_ERRORS)
        for module in sorted(_imports(path) & HTTP_ERRORS)
    ]
    assert offenders == []


def test_the_scan_sees_the_imports_it_forbids() -> None:
    """The scan resolves relative imports: the app's routers are found as route modules."""
    assert any(
        module.startswith(ROUTES + ".") for module in _imports(SOURCE / "collector" / "app.py")
    )

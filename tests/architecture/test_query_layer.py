"""The query layer's boundary (issue 39, step 2): the estimate use cases live in
``deniable.collector.queries``, and only the routes are HTTP.

No module outside ``collector/routes/`` imports a route module (the app, which mounts the
routers, excepted), so the dashboard, the Prometheus exposition and the CLI reach the
estimates through the query functions, and a change to a page cannot alter an API answer.
The dashboard and the exposition never import fastapi's ``HTTPException``: they read and
raise :class:`~deniable.collector.queries.refusal.QueryRefused`.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "src" / "deniable"
ROUTES = "deniable.collector.routes"
APP = "deniable.collector.app"
MOVING = {"deniable.collector.routes.body"}
"""Route modules another step moves out of routes/ (the bounded body read goes to the shared
service kit, step 5); until it lands, the dashboard's sign-in form and the shuffler read it."""
NO_HTTP_ERRORS = ("deniable.collector.dashboard", "deniable.collector.exposition")
"""Modules that know refusals as the query layer's, never as HTTP errors."""


def _module_name(path: Path) -> str:
    """The import name of the source file ``path``."""
    parts = list(path.relative_to(SOURCE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """Each import of ``path`` as (absolute module, names taken from it)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [alias.name for alias in node.names]
            found.append((base, names))
            found.extend((f"{base}.{alias}", []) for alias in names)
    return found


def _modules() -> list[Path]:
    """Every source file of the distribution."""
    return sorted(SOURCE.rglob("*.py"))


def _route_modules(module: str) -> bool:
    """Whether ``module`` (or a name taken from it) is a route module's, other than
    :data:`MOVING`; ``from ..routes import admin`` is seen as ``...routes.admin``."""
    if not module.startswith(ROUTES + "."):
        return False
    return not any(module == moving or module.startswith(moving + ".") for moving in MOVING)


def test_only_the_routes_and_the_app_import_route_modules() -> None:
    """The dashboard, the exposition and the CLI call the query functions, never a route."""
    offenders = []
    for path in _modules():
        name = _module_name(path)
        if name.startswith(ROUTES) or name == APP:
            continue
        for module, _ in _imports(path):
            if _route_modules(module):
                offenders.append(f"{name} imports {module}")
    assert offenders == []


def test_dashboard_and_exposition_know_no_http_error() -> None:
    """A refusal reaches a page or a scrape as a :class:`QueryRefused`, not an HTTP error."""
    offenders = []
    for path in _modules():
        name = _module_name(path)
        if not name.startswith(NO_HTTP_ERRORS):
            continue
        for module, names in _imports(path):
            if module.split(".")[0] in ("fastapi", "starlette") and "HTTPException" in names:
                offenders.append(f"{name} imports HTTPException from {module}")
    assert offenders == []


def test_the_scan_sees_the_imports_it_forbids() -> None:
    """The scan resolves relative imports: the app's routers are found as route modules."""
    app = SOURCE / "collector" / "app.py"
    assert any(_route_modules(module) for module, _ in _imports(app))

"""deniable's collector: a FastAPI service that stores randomized reports and answers estimates.

Names are imported lazily, so ``deniable.collector.storage`` (migrations) loads without
FastAPI or the estimators.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import create_app
    from .serve import RefusedToServe, serve
    from .settings import Settings
    from .storage import migrate

DEFAULT_PORT = 8000
"""The TCP port a collector listens on unless told otherwise (CLI, image and manifests agree)."""

_EXPORTS = {
    "create_app": ".app",
    "RefusedToServe": ".serve",
    "serve": ".serve",
    "Settings": ".settings",
    "migrate": ".storage",
}
__all__ = ["DEFAULT_PORT", "RefusedToServe", "Settings", "create_app", "migrate", "serve"]


def __getattr__(name: str) -> Any:
    """Import an exported name on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name], __name__), name)

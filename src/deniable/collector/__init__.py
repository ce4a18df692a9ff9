"""deniable's collector: a FastAPI service that stores randomized reports and answers estimates.

The public API is what this root exports (``__all__``): the app factory, where a collector
listens by default, the ``Settings`` that own its configuration, ``migrate``, and the error
``RefusedToServe``. Other layers (the CLI) import from here and from three public modules:
:mod:`.serve` (``serve`` runs the server; the name is the module's here, so it is not
re-exported), :mod:`.settings` (the configuration and its limits) and :mod:`.storage`'s root
(its public queries). Every other module is the collector's own.

Only the listening defaults load at once (standard library only); every other name is imported
on first use, so ``deniable --help`` does not load the server, and ``deniable.collector.storage``
(migrations) loads without FastAPI or the estimators.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deniable.client.lazy import lazy_exports
from deniable.service.listening import DEFAULT_HOST, DEFAULT_LOG_LEVEL, LOG_LEVELS

from .listening import DEFAULT_LISTENING, DEFAULT_PORT, DEFAULT_WORKERS, Listening

if TYPE_CHECKING:
    from .app import create_app
    from .serve import RefusedToServe
    from .settings import Settings
    from .storage import migrate

__getattr__ = lazy_exports(
    __name__,
    {
        ".app": ("create_app",),
        ".serve": ("RefusedToServe",),
        ".settings": ("Settings",),
        ".storage": ("migrate",),
    },
)

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_LISTENING",
    "DEFAULT_LOG_LEVEL",
    "DEFAULT_PORT",
    "DEFAULT_WORKERS",
    "LOG_LEVELS",
    "Listening",
    "RefusedToServe",
    "Settings",
    "create_app",
    "migrate",
]

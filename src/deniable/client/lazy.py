"""Package roots that export names of slow modules without importing those modules up front.

The estimators' and the collector's roots re-export names whose modules load numpy, FastAPI or
SQLAlchemy. :func:`lazy_exports` gives such a root a module ``__getattr__`` (PEP 562) that
imports each of those names on first use, so importing the package, as the CLI does to build
its options and help, stays fast. It lives in the client, the one package every other imports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_exports(package: str, modules: Mapping[str, tuple[str, ...]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports the names of each module of
    ``modules`` (a module relative to ``package``, such as ``".app"``, and its names) on first
    use; any other name is an :class:`AttributeError`, as usual."""
    module_of = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        """Import the exported ``name`` from its module."""
        if name not in module_of:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(module_of[name], package), name)

    return __getattr__

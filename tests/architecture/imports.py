"""The import scan the architecture tests share: what a module imports, read from its AST."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "src" / "deniable"
"""The import package's folder."""


def imported_modules(path: Path, package: str) -> set[str]:
    """Every module ``path`` (a module of ``package``) imports, relative imports resolved,
    with ``from X import name`` counted as importing both ``X`` and ``X.name``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                origin = ".".join([*base, *([node.module] if node.module else [])])
            else:
                origin = node.module or ""
            names.add(origin)
            names |= {f"{origin}.{alias.name}" for alias in node.names}
    return names


def package_of(path: Path) -> str:
    """The package a module file of ``src/deniable`` belongs to (an ``__init__`` is its own
    package's), against which its relative imports resolve."""
    parts = path.relative_to(SOURCE).with_suffix("").parts
    return ".".join(("deniable", *parts[:-1]))

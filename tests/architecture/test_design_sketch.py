"""docs/DESIGN.md's layout and module sketch match the code, in both directions.

The sketch is a fenced block in the "Layout" section: each row starts at the left margin with a
package folder (``collector/routes/``), then names its modules, each optionally followed by a
few words in parentheses; continuation lines are indented; a name ending in ``/`` is a
subpackage with a row of its own. Every module the sketch names must exist, and every module
of the four packages must be named, so the sketch cannot go stale either way. The Alembic
environment (``collector/storage/migrations``, laid out by Alembic, its versions named by
revision) is named as one entry and not looked into.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "src" / "deniable"
"""The import package's folder: the sketch's rows are folders relative to it."""
DESIGN = ROOT / "docs" / "DESIGN.md"
ALEMBIC_ENVIRONMENT = "collector/storage/migrations/"
"""A package named in the sketch as one entry: Alembic's layout, not deniable's modules."""
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*/?")
"""A module (``spec``, ``__init__``) or a subpackage (``routes/``) as the sketch names it."""
LAYOUT_LINE = re.compile(r"^src/deniable/(\w+)/\s+->\s+(deniable\.\w+)", re.MULTILINE)
"""A line of the layout block: a source folder and the package it installs as."""


@dataclass(frozen=True)
class SketchRow:
    """One row of the sketch: a package folder and the names it lists."""

    folder: str
    names: tuple[str, ...]


def package_dirs() -> dict[str, str]:
    """Each top-level folder of ``src/deniable`` and the package it installs as; pyproject.toml
    finds packages under ``src``, so folders are import names."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["packages"]["find"]["where"] == ["src"]
    return {
        init.parent.name: f"deniable.{init.parent.name}"
        for init in sorted(SOURCE.glob("*/__init__.py"))
    }


def layout_blocks(design: str) -> tuple[str, str]:
    """The layout block (folders and their packages) and the module sketch, from DESIGN.md."""
    section = re.search(r"^## Layout\b.*?(?=^## )", design, re.MULTILINE | re.DOTALL)
    assert section, "DESIGN.md has a '## Layout' section"
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", section.group(0), re.MULTILINE | re.DOTALL)
    layouts = [block for block in blocks if LAYOUT_LINE.search(block)]
    sketches = [block for block in blocks if not LAYOUT_LINE.search(block)]
    assert len(layouts) == 1, "one layout block (folder -> package) in the Layout section"
    assert len(sketches) == 1, "one module sketch in the Layout section"
    return layouts[0], sketches[0]


def names_outside_parentheses(text: str) -> list[str]:
    """The words of ``text`` that are not inside (possibly nested) parentheses."""
    depth, kept = 0, []
    for char in text:
        if char == "(":
            depth += 1
            kept.append(" ")
        elif char == ")":
            depth -= 1
            assert depth >= 0, f"unbalanced ')' in sketch row: {text.strip()!r}"
        elif depth == 0:
            kept.append(char)
    assert depth == 0, f"unbalanced '(' in sketch row: {text.strip()!r}"
    return "".join(kept).split()


def parse_sketch(block: str) -> list[SketchRow]:
    """The rows of a module sketch. Fails on a word outside parentheses that cannot be a
    module name; a plain word that names no module fails the existence check instead."""
    raw: list[list[str]] = []
    for line in block.splitlines():
        if not line.strip():
            continue
        if line[0].isspace():
            assert raw, f"a continuation line before any row: {line.strip()!r}"
            raw[-1][1] += " " + line
        else:
            folder, _, rest = line.partition(" ")
            raw.append([folder, rest])
    rows = []
    for folder, text in raw:
        assert folder.endswith("/"), f"a sketch row starts with a package folder, not {folder!r}"
        names = names_outside_parentheses(text)
        strays = [name for name in names if not NAME.fullmatch(name)]
        assert not strays, f"{folder}: words outside parentheses that name no module: {strays}"
        rows.append(SketchRow(folder, tuple(names)))
    return rows


def sketch() -> dict[str, SketchRow]:
    """The module sketch of DESIGN.md by folder; a folder given two rows fails."""
    rows = parse_sketch(layout_blocks(DESIGN.read_text())[1])
    by_folder = {row.folder: row for row in rows}
    assert len(by_folder) == len(rows), "each package folder has one row"
    return by_folder


def code_packages() -> dict[str, set[str]]:
    """Every package folder of the distribution and the names in it, as the sketch writes them:
    its modules (``__init__`` aside) and its subpackages with a trailing ``/``."""
    packages: dict[str, set[str]] = {}
    for root in package_dirs():
        for init in sorted((SOURCE / root).rglob("__init__.py")):
            folder = init.parent
            key = folder.relative_to(SOURCE).as_posix() + "/"
            if key.startswith(ALEMBIC_ENVIRONMENT):
                continue
            modules = {path.stem for path in folder.glob("*.py") if path.stem != "__init__"}
            subpackages = {
                f"{sub.name}/" for sub in folder.iterdir() if (sub / "__init__.py").is_file()
            }
            packages[key] = modules | subpackages
    return packages


def names_a_module(folder: str, name: str) -> bool:
    """Whether ``name`` in the row of ``folder`` is a module file or a package there."""
    if name.endswith("/"):
        return (SOURCE / folder / name / "__init__.py").is_file()
    return (SOURCE / folder / f"{name}.py").is_file()


def test_the_sketch_has_one_row_per_package_and_one_per_subpackage_it_names() -> None:
    """Rows and packages agree, and each subpackage a row names has its own row."""
    rows = sketch()
    expected = set(code_packages())
    assert set(rows) == expected, (
        f"rows without a package: {sorted(set(rows) - expected)}; "
        f"packages without a row: {sorted(expected - set(rows))}"
    )
    for row in rows.values():
        for name in row.names:
            if name.endswith("/") and row.folder + name != ALEMBIC_ENVIRONMENT:
                assert row.folder + name in rows, f"{row.folder}{name} is named but has no row"


def test_every_module_the_sketch_names_exists() -> None:
    """Nothing the sketch names is gone or misspelt."""
    missing = [
        row.folder + name
        for row in sketch().values()
        for name in row.names
        if not names_a_module(row.folder, name)
    ]
    assert not missing, f"DESIGN.md's sketch names modules that do not exist: {missing}"


def test_every_module_of_the_packages_is_in_the_sketch() -> None:
    """No module of client, estimators, collector or cli is left out of the sketch."""
    rows = sketch()
    unnamed = [
        folder + name
        for folder, names in code_packages().items()
        for name in sorted(names - set(rows[folder].names if folder in rows else ()))
    ]
    assert not unnamed, f"modules missing from DESIGN.md's sketch: {unnamed}"


def test_the_layout_maps_each_folder_to_its_package() -> None:
    """The layout block's ``folder/ -> deniable.x`` lines are pyproject.toml's package-dir,
    and every top-level entry it lists exists."""
    layout = layout_blocks(DESIGN.read_text())[0]
    mapped = dict(LAYOUT_LINE.findall(layout))
    assert mapped == package_dirs()
    entries = [line.split()[0] for line in layout.splitlines() if line[:1].strip()]
    assert [entry for entry in entries if not (ROOT / entry).exists()] == []


def test_the_sketch_parser_reads_nested_notes_and_continuation_lines() -> None:
    """The parser behind these checks: notes may nest parentheses and span lines; a name may
    be a subpackage; a row continues on indented lines."""
    rows = parse_sketch(
        "pkg/       __init__ (re-exports (some) names)  alpha (a, b\n"
        "           (c) d)  beta  sub/\n"
        "pkg/sub/   gamma (one job)\n"
    )
    assert rows == [
        SketchRow("pkg/", ("__init__", "alpha", "beta", "sub/")),
        SketchRow("pkg/sub/", ("gamma",)),
    ]


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ("pkg/  alpha (note), beta\n", "name no module"),
        ("pkg/  alpha (note\n", "unbalanced '\\('"),
        ("pkg   alpha\n", "package folder"),
        ("   alpha\n", "continuation line"),
    ],
)
def test_the_sketch_parser_refuses_what_would_hide_a_name(block: str, message: str) -> None:
    """Punctuated prose, unbalanced notes and rows without a folder are refused."""
    with pytest.raises(AssertionError, match=message):
        parse_sketch(block)

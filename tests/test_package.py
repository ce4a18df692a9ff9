"""The distribution's shape: subpackages import, and the SDK stays light."""

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_client_import_pulls_in_no_heavy_module() -> None:
    code = (
        "import sys, deniable.client\n"
        "heavy = [m for m in ('numpy', 'polars', 'fastapi', 'click', 'pydantic') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_every_source_folder_is_a_packaged_subpackage() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    roots = {path: name for name, path in config["package-dir"].items()}
    found = set()
    for root, package in roots.items():
        for init in (ROOT / root).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / root).parts
            found.add(".".join((package, *rel)))
    assert found == listed

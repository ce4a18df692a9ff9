"""The ``deniable`` console script: the CLI, or one line saying how to install it.

``pip install deniable`` installs the SDK only (standard library and httpx), yet the package
still carries this script; the CLI needs the ``server`` extra (click, rich, the estimators and
the collector). Without it the script says so on stderr and exits 1 instead of raising
``ModuleNotFoundError``. This module imports nothing outside the standard library until the
CLI is known to be importable.
"""

from __future__ import annotations

import sys

INSTALL_HINT = "pip install 'deniable[server]'"
"""What to run to get the CLI."""


def missing_dependency() -> str | None:
    """The top-level module the CLI needs but cannot import, or None when it imports."""
    try:
        import deniable.cli.main  # noqa: F401
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").partition(".")[0]
        if missing and missing != "deniable":
            return missing
        raise
    return None


def main() -> None:
    """Run the CLI, or print why it cannot run and exit 1."""
    missing = missing_dependency()
    if missing is not None:
        sys.stderr.write(
            f"deniable: the command needs the server extra ({missing} is not installed):"
            f" {INSTALL_HINT}\n"
        )
        sys.exit(1)
    from deniable.cli.main import cli

    cli()


if __name__ == "__main__":
    main()

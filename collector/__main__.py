"""``python -m deniable.collector``: serve the collector with settings from the environment."""

from __future__ import annotations

import argparse
import sys

from pydantic import ValidationError

from . import DEFAULT_PORT
from .serve import RefusedToServe, serve
from .settings import Settings, settings_problem


def main(argv: list[str] | None = None) -> int:
    """Parse ``--host``, ``--port`` and ``--workers`` and serve until stopped."""
    parser = argparse.ArgumentParser(prog="python -m deniable.collector")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    try:
        serve(Settings(), args.host, args.port, args.workers)
    except RefusedToServe as exc:
        print(exc, file=sys.stderr)
        return 2
    except ValidationError as exc:
        print(settings_problem(exc), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m deniable.collector``: serve the collector with settings from the environment."""

from __future__ import annotations

import argparse
import sys

from pydantic import ValidationError

from .listening import DEFAULT_HOST, DEFAULT_PORT, DEFAULT_WORKERS, Listening
from .serve import RefusedToServe, serve
from .settings import Settings, settings_problem


def main(argv: list[str] | None = None) -> int:
    """Parse ``--host``, ``--port`` and ``--workers`` and serve until stopped."""
    parser = argparse.ArgumentParser(prog="python -m deniable.collector")
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--workers", type=int, default=DEFAULT_WORKERS)
    args = parser.parse_args(argv)
    try:
        serve(Settings(), Listening(args.host, args.port, args.workers))
    except RefusedToServe as exc:
        print(exc, file=sys.stderr)
        return 2
    except ValidationError as exc:
        print(settings_problem(exc), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

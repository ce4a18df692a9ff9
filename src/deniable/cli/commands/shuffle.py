"""``deniable shuffle``: run the shuffler, its own service between devices and the collector."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from deniable.service.listening import (
    DEFAULT_HOST,
    DEFAULT_LOG_LEVEL,
    DEFAULT_SHUTDOWN_TIMEOUT,
    LOG_LEVELS,
)

from ..errors import CliError


def _problem(error: ValidationError) -> str:
    """One line naming each invalid shuffler setting, never its value."""
    parts = []
    for item in error.errors(include_url=False, include_input=False):
        message = str(item["msg"]).removeprefix("Value error, ")
        field = ".".join(str(part) for part in item["loc"])
        parts.append(message if not field else f"DENIABLE_SHUFFLER_{field.upper()}: {message}")
    return "invalid shuffler setting: " + "; ".join(parts)


@click.command(short_help="Run the shuffler.")
@click.option("--host", default=DEFAULT_HOST, show_default=True, help="Address to listen on.")
@click.option("--port", default=8100, show_default=True, type=click.IntRange(0, 65535))
@click.option("--store", type=click.Path(dir_okay=False, path_type=Path), help="Its SQLite file.")
@click.option("--collector", "collector_url", help="The collector's URL (forwarding).")
@click.option("--min-batch", type=click.IntRange(1), help="Distinct devices a batch needs.")
@click.option("--max-delay", type=click.FloatRange(0), help="Longest random delay, seconds.")
@click.option(
    "--log-level",
    default=DEFAULT_LOG_LEVEL,
    show_default=True,
    type=click.Choice(LOG_LEVELS),
)
def shuffle(
    host: str,
    port: int,
    store: Path | None,
    collector_url: str | None,
    min_batch: int | None,
    max_delay: float | None,
    log_level: str,
) -> None:
    """Run the shuffler: devices post sealed reports to it (Client(shuffler=URL)); it keeps
    no address, header or time, and forwards them to the collector only in whole batches of at
    least --min-batch distinct devices, each in a uniformly random order, after a random delay.

    Every setting is also DENIABLE_SHUFFLER_<NAME> (docs/operations.md, "The shuffler"); its
    token for the collector is DENIABLE_SHUFFLER_TOKEN (or _FILE), the collector's
    DENIABLE_SHUFFLER_TOKEN; the key devices upload with is DENIABLE_SHUFFLER_UPLOAD_KEY (or
    _FILE). Devices fetch the collector's public keys from the shuffler's GET /v1/keys.

    \b
    Examples:
      DENIABLE_SHUFFLER_TOKEN_FILE=/run/secrets/shuffler \\
      DENIABLE_SHUFFLER_UPLOAD_KEY_FILE=/run/secrets/shuffler-upload deniable shuffle \\
          --collector https://collector.internal --min-batch 1000
    """
    import logging
    import sys

    from deniable.service.launch import run_server, server_config
    from deniable.shuffler import ShufflerSettings, create_app
    from deniable.shuffler.settings import summary

    overrides: dict[str, Any] = {
        name: value
        for name, value in (
            ("store", store),
            ("collector_url", collector_url),
            ("min_batch", min_batch),
            ("max_delay", max_delay),
        )
        if value is not None
    }
    try:
        settings = ShufflerSettings(**overrides)
    except ValidationError as exc:
        raise CliError(_problem(exc)) from None
    if settings.token_secret() is None:
        raise CliError(
            "the shuffler needs DENIABLE_SHUFFLER_TOKEN (or _FILE): the collector's"
            " DENIABLE_SHUFFLER_TOKEN, which alone may forward batches"
        )
    if not settings.upload_keys():
        raise CliError(
            "the shuffler needs DENIABLE_SHUFFLER_UPLOAD_KEY (or _FILE): the key devices send"
            " with their sealed reports (Client(shuffler_key=...)); without one anyone could"
            " fill its disk"
        )
    print(summary(settings, host, port), file=sys.stderr, flush=True)
    logging.basicConfig(level=log_level.upper(), format="%(levelname)s:     %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    config = server_config(
        create_app(settings),
        host=host,
        port=port,
        log_level=log_level,
        header_timeout=settings.header_timeout,
        max_connections=settings.max_connections,
        shutdown_timeout=DEFAULT_SHUTDOWN_TIMEOUT,
        date_header=False,
    )
    run_server(config)

"""``deniable keys``: the collector's sealing keys (generate, rotate, list, publish)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import click

KEYS_FILE = click.option(
    "--file",
    "path",
    required=True,
    envvar="DENIABLE_SEALING_KEYS_FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The keys file (DENIABLE_SEALING_KEYS_FILE): JSON, mode 0600.",
)
GRACE = click.option(
    "--grace-days",
    default=30,
    show_default=True,
    envvar="DENIABLE_SEALING_KEY_GRACE_DAYS",
    type=click.IntRange(0, 3650),
    help="Days a retired key is still served (as the collector's setting).",
)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@click.group(short_help="Manage the collector's sealing keys.")
def keys() -> None:
    """The X25519 keys devices seal reports to when they send through a shuffler. The
    collector serves the public half of the current key at GET /v1/keys (and of retired
    keys within their grace period) and opens reports with every key in the file.

    \b
    Examples:
      deniable keys generate --file /etc/deniable/keys.json
      deniable keys rotate --file /etc/deniable/keys.json
    """


@keys.command(short_help="Create the keys file with a first key.")
@KEYS_FILE
def generate(path: Path) -> None:
    """Create the keys file (mode 0600) with one new key; refuses to replace a file.

    \b
    Example:
      deniable keys generate --file /etc/deniable/keys.json
    """
    from deniable.collector.sealingkeys import generate as make

    key = make(path, _now())
    click.echo(f"created {path} with key {key.id}")


@keys.command(short_help="Retire the current key and add a new one.")
@KEYS_FILE
def rotate(path: Path) -> None:
    """Retire the current key (still served for the grace period, opening what was sealed to
    it while it is in the file) and make a new current one; a running collector picks it up
    at its next request.

    \b
    Example:
      deniable keys rotate --file /etc/deniable/keys.json
    """
    from deniable.collector.sealingkeys import rotate as turn

    key = turn(path, _now())
    click.echo(f"new current key {key.id} in {path}")


@keys.command(name="list", short_help="List the keys and their state.")
@KEYS_FILE
@GRACE
def list_keys(path: Path, grace_days: int) -> None:
    """Each key's id, creation and retirement times and state (current, retiring, retired).

    \b
    Example:
      deniable keys list --file /etc/deniable/keys.json --grace-days 30
    """
    from deniable.collector.sealingkeys import read_keys

    now, grace = _now(), dt.timedelta(days=grace_days)
    for key in read_keys(path):
        retired = key.retired_at.isoformat() if key.retired_at else "-"
        click.echo(
            f"{key.id}  created {key.created_at.isoformat()}  retired {retired}"
            f"  {key.status(now, grace)}"
        )


@keys.command(short_help="Print the public keys as GET /v1/keys serves them.")
@KEYS_FILE
@GRACE
def publish(path: Path, grace_days: int) -> None:
    """Print the public keys document (JSON) devices fetch: to pin it in an app, or to check
    what the collector serves.

    \b
    Example:
      deniable keys publish --file /etc/deniable/keys.json > public-keys.json
    """
    from deniable.collector.sealingkeys import public_document, read_keys

    document = public_document(read_keys(path), _now(), dt.timedelta(days=grace_days))
    click.echo(json.dumps(document, indent=2))

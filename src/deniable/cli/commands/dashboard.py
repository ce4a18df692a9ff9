"""``deniable dashboard``: open a running collector's dashboard in the browser.

It prints the dashboard's URL and opens it (``--no-open`` only prints it). The token never
goes in the URL: the dashboard's sign-in page asks for the viewer token and keeps a signed
session cookie instead.
"""

from __future__ import annotations

import webbrowser

import click

from deniable.client.errors import CollectorUnavailable

from ..options import GlobalOptions

HEALTH_TIMEOUT = 5.0
"""Seconds the collector gets to answer ``/healthz`` before the command gives up."""


def dashboard_url(collector_url: str) -> str:
    """The dashboard's URL on the collector at ``collector_url``."""
    return collector_url.rstrip("/") + "/dashboard/"


def check_reachable(collector_url: str) -> None:
    """Raise :class:`CollectorUnavailable` unless the collector answers ``/healthz``."""
    import httpx

    try:
        with httpx.Client(timeout=HEALTH_TIMEOUT, trust_env=False) as http:
            answer = http.get(collector_url.rstrip("/") + "/healthz")
    except httpx.HTTPError as exc:
        raise CollectorUnavailable(
            f"no collector answers at {collector_url} ({type(exc).__name__}): start one with"
            " `deniable serve`, or try `deniable demo --dashboard`"
        ) from None
    if answer.status_code != 200:
        raise CollectorUnavailable(
            f"{collector_url} answered /healthz with {answer.status_code}: is it a collector?"
        )


@click.command(short_help="Open a running collector's dashboard in the browser.")
@click.option(
    "--collector",
    "collector_url",
    metavar="URL",
    help="The collector (default: the global --collector, env DENIABLE_COLLECTOR_URL).",
)
@click.option("--no-open", is_flag=True, help="Print the URL only; do not open a browser.")
@click.pass_context
def dashboard(context: click.Context, collector_url: str | None, no_open: bool) -> None:
    """Print the dashboard's URL and open it in the default browser.

    Sign in there with the collector's viewer token (DENIABLE_VIEWER_TOKEN); the admin token
    is refused, so that it is never kept in a browser. The token is never put in the URL.

    \b
    Examples:
      deniable dashboard
      deniable dashboard --collector http://127.0.0.1:8000 --no-open
    """
    options = context.find_object(GlobalOptions)
    base = collector_url or (options.collector_url if options is not None else "")
    if not base:
        raise click.UsageError("give --collector URL")
    check_reachable(base)
    url = dashboard_url(base)
    click.echo(url)
    if not no_open and not webbrowser.open(url):
        click.echo("no browser could be opened here: open the URL above yourself", err=True)

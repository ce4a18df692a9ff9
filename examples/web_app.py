"""A tiny web app that embeds the deniable SDK: each page view records which page was seen.

Run a collector and register the metric, then the app (every command, step by step:
examples/README.md)::

    deniable serve --database /tmp/deniable-example.db
    deniable metrics create page --categories home,about,other --epsilon 1
    python examples/web_app.py --collector http://127.0.0.1:8000 --state-dir /tmp/web-app-state

and open http://127.0.0.1:8080/, /about or /pricing. ``GET /telemetry`` shows the client's
counters and :meth:`~deniable.client.Client.problems` as JSON: the place to look when reports
do not arrive (a mismatched spec, a wrong ingest key, a collector that is down).

Without ``--metrics`` the app records with the specs the collector serves (fetched, then
cached in the state directory); with ``--metrics FILE`` (a JSON list of specs in the form
``GET /v1/metrics`` serves) it records with those and fetches nothing. Each page view is one
user's answer, randomized here before it is queued; the app is one device for the budget, so
it allows as many reports per day as ``--reports-per-day``.
"""

from __future__ import annotations

import argparse
import json
import logging
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from deniable.client import Client

PAGE_METRIC = {"name": "page", "type": "categorical", "categories": ["home", "about", "other"]}
"""The metric this app records (epsilon and mechanism as the collector registered them)."""
PAGES = {"/": "home", "/about": "about"}
"""The pages the metric names; any other path counts as ``other``."""


def make_handler(client: Client) -> type[BaseHTTPRequestHandler]:
    """A request handler that records a page view with ``client`` and serves a small page."""

    class Handler(BaseHTTPRequestHandler):
        """Serves every path; ``/telemetry`` answers the SDK's counters and problems."""

        def do_GET(self) -> None:
            """Record the page (never ``/telemetry``) and answer."""
            if self.path == "/telemetry":
                self._send("application/json", telemetry(client))
                return
            client.record("page", PAGES.get(self.path, "other"))
            self._send("text/html", f"<h1>{self.path}</h1><p>Thanks for visiting.</p>")

        def _send(self, content_type: str, text: str) -> None:
            """A 200 answer with ``text``."""
            body = text.encode()
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: access logs are not this example's subject."""

    return Handler


def telemetry(client: Client) -> str:
    """The client's counters and current problems, as JSON."""
    return json.dumps({"stats": client.stats.as_dict(), "problems": client.problems()})


def main(argv: list[str] | None = None) -> None:
    """Serve until interrupted, then close the client (which flushes what it can)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--collector", required=True, help="the collector's base URL")
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("--ingest-key", default=None)
    parser.add_argument("--metrics", type=Path, help="a JSON file of specs to record with")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--reports-per-day", type=int, default=10_000)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
    metrics = json.loads(args.metrics.read_text()) if args.metrics else None
    with Client(
        args.collector,
        state_dir=args.state_dir,
        ingest_key=args.ingest_key,
        metrics=metrics,
        max_reports_per_period=args.reports_per_day,
    ) as client:
        server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(client))
        print(f"serving on http://127.0.0.1:{server.server_address[1]}", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()


if __name__ == "__main__":
    main()

"""Where ``deniable export`` reads raw reports: the collector's admin API or its database.

Both sources page through one metric's reports in (period, id) order, so an export of
millions of reports never holds more than a page of rows in Python at a time. The database
is read through the storage package's public queries only, never its tables.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from deniable.client.errors import CollectorRefused, InvalidInput
from deniable.client.spec import MetricSpec
from deniable.sources.reportfile import StoredReport

from .errors import storage_errors
from .options import GlobalOptions


class ReportSource(Protocol):
    """A metric's spec and its raw reports, page by page."""

    spec: MetricSpec

    def count(self, start: str | None, end: str | None) -> int | None:
        """How many reports the range holds (None if unknown)."""
        ...

    def pages(self, start: str | None, end: str | None, size: int) -> Iterator[list[StoredReport]]:
        """The reports of the range in (period, id) order, ``size`` at a time."""
        ...

    def close(self) -> None:
        """Release the connections."""
        ...


class DatabaseSource:
    """Reads the collector's database directly (read-only), through its storage queries."""

    def __init__(self, database_url: str, name: str) -> None:
        """Open the database read-only and load the metric's spec; :class:`InvalidInput` if unknown."""
        from deniable.collector.storage import load_spec, open_database

        self.failure = f"cannot read the database {database_url}"
        with storage_errors(self.failure):
            self.database = open_database(database_url, pool_size=1)
            try:
                spec = load_spec(self.database, name)
            except BaseException:
                self.database.dispose()
                raise
        if spec is None:
            self.database.dispose()
            raise InvalidInput(f"unknown metric {name!r} in {database_url}")
        self.spec = spec

    def count(self, start: str | None, end: str | None) -> int | None:
        """How many reports of the metric the range holds."""
        from deniable.collector.storage import count_reports

        with storage_errors(self.failure):
            return count_reports(self.database, self.spec.name, start=start, end=end)

    def pages(self, start: str | None, end: str | None, size: int) -> Iterator[list[StoredReport]]:
        """The metric's reports in (period, id) order, ``size`` at a time, payloads decoded."""
        from deniable.collector.storage import report_pages

        with storage_errors(self.failure):
            for rows in report_pages(
                self.database, self.spec.name, start=start, end=end, size=size
            ):
                yield [
                    (report_id, period, json.loads(payload), self.spec.dims_of(cell))
                    for report_id, period, payload, cell in rows
                ]

    def close(self) -> None:
        """Release the database connections."""
        self.database.dispose()


class HttpSource:
    """Pages through the collector's admin export endpoint.

    ``GET /v1/admin/metrics/{name}/reports?start&end&limit&after`` answers
    ``{"reports": [{"id", "period", "payload", "dims"}, ...], "next": cursor-or-null}`` in (period, id)
    order; ``after`` is the previous page's ``next``.
    """

    PATH = "/v1/admin/metrics/{name}/reports"

    def __init__(self, options: GlobalOptions, name: str) -> None:
        """Ask the collector for the metric's spec."""
        from .specs import spec_from_served

        self.api = options.api()
        self.name = name
        self.spec = spec_from_served(self.api.get_metric(name))

    def count(self, start: str | None, end: str | None) -> int | None:
        """Unknown: the API does not count reports."""
        return None

    def pages(self, start: str | None, end: str | None, size: int) -> Iterator[list[StoredReport]]:
        """The metric's reports in (period, id) order, a page per request."""
        from .api import MissingEndpoint

        cursor: str | None = None
        while True:
            try:
                body = self.api.get_json(
                    self.PATH.format(name=self.name),
                    params={"start": start, "end": end, "limit": size, "after": cursor},
                    metric=self.name,
                )
            except MissingEndpoint as missing:
                raise CollectorRefused(
                    f"the collector at {self.api.base_url} offers no report export"
                    f" (GET {self.PATH.format(name=self.name)}); export with --database URL,"
                    " reading its database directly",
                    missing.status,
                ) from None
            rows = [
                (r["id"], r["period"], r["payload"], r.get("dims")) for r in body.get("reports", [])
            ]
            if rows:
                yield rows
            cursor = body.get("next")
            if not cursor or not rows:
                return

    def close(self) -> None:
        """Release the HTTP connections."""
        self.api.close()


@contextmanager
def open_source(options: GlobalOptions, name: str, database: str | None) -> Iterator[ReportSource]:
    """The database source when ``database`` is given, else the collector's API."""
    source: DatabaseSource | HttpSource = (
        DatabaseSource(database, name) if database else HttpSource(options, name)
    )
    try:
        yield source
    finally:
        source.close()

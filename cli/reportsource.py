"""Where ``deniable export`` reads raw reports: the collector's admin API or its database.

Both sources page through one metric's reports in (period, id) order, so an export of
millions of reports never holds more than a page of rows in Python at a time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from .errors import CliError
from .options import Settings
from .reportframe import Row


class ReportSource(Protocol):
    """A metric's spec and its raw reports, page by page."""

    spec: Any

    def count(self, start: str | None, end: str | None) -> int | None:
        """How many reports the range holds (None if unknown)."""
        ...

    def pages(self, start: str | None, end: str | None, size: int) -> Iterator[list[Row]]:
        """The reports of the range in (period, id) order, ``size`` at a time."""
        ...


class DatabaseSource:
    """Reads the collector's tables directly (read-only), through its storage module."""

    def __init__(self, database_url: str, name: str) -> None:
        from deniable.collector.storage import open_database
        from deniable.collector.storage.queries import load_spec

        try:
            self.database = open_database(database_url, pool_size=1)
            spec = load_spec(self.database, name)
        except Exception as exc:
            raise CliError(
                f"cannot read the database {database_url}: {type(exc).__name__}: {exc}"
            ) from None
        if spec is None:
            self.database.dispose()
            raise CliError(f"unknown metric {name!r} in {database_url}")
        self.spec = spec

    def _where(self, start: str | None, end: str | None) -> list[Any]:
        from deniable.collector.storage.tables import reports

        clauses = [reports.c.metric == self.spec.name]
        if start is not None:
            clauses.append(reports.c.period >= start)
        if end is not None:
            clauses.append(reports.c.period <= end)
        return clauses

    def count(self, start: str | None, end: str | None) -> int | None:
        from deniable.collector.storage.tables import reports
        from sqlalchemy import func, select

        with self.database.reader.connect() as connection:
            return int(
                connection.execute(
                    select(func.count()).select_from(reports).where(*self._where(start, end))
                ).scalar_one()
            )

    def pages(self, start: str | None, end: str | None, size: int) -> Iterator[list[Row]]:
        from deniable.collector.storage.queries import read_reports

        after: tuple[str, str] | None = None
        while True:
            rows = read_reports(
                self.database, self.spec.name, start=start, end=end, after=after, limit=size
            )
            if not rows:
                return
            yield [(report_id, period, json.loads(payload)) for report_id, period, payload in rows]
            after = (rows[-1][1], rows[-1][0])

    def close(self) -> None:
        """Release the database connections."""
        self.database.dispose()


class HttpSource:
    """Pages through the collector's admin export endpoint.

    ``GET /v1/admin/metrics/{name}/reports?start&end&limit&after`` answers
    ``{"reports": [{"id", "period", "payload"}, ...], "next": cursor-or-null}`` in (period, id)
    order; ``after`` is the previous page's ``next``.
    """

    PATH = "/v1/admin/metrics/{name}/reports"

    def __init__(self, settings: Settings, name: str) -> None:
        from .specs import spec_from_served

        self.api = settings.api()
        self.name = name
        self.spec = spec_from_served(self.api.get_metric(name))

    def count(self, start: str | None, end: str | None) -> int | None:
        return None

    def pages(self, start: str | None, end: str | None, size: int) -> Iterator[list[Row]]:
        from .api import MissingEndpoint

        cursor: str | None = None
        while True:
            try:
                body = self.api.get_json(
                    self.PATH.format(name=self.name),
                    params={"start": start, "end": end, "limit": size, "after": cursor},
                    metric=self.name,
                )
            except MissingEndpoint:
                raise CliError(
                    f"the collector at {self.api.base_url} offers no report export"
                    f" (GET {self.PATH.format(name=self.name)}); export with --database URL,"
                    " reading its database directly"
                ) from None
            rows = [(r["id"], r["period"], r["payload"]) for r in body.get("reports", [])]
            if rows:
                yield rows
            cursor = body.get("next")
            if not cursor or not rows:
                return

    def close(self) -> None:
        """Release the HTTP connections."""
        self.api.close()


@contextmanager
def open_source(settings: Settings, name: str, database: str | None) -> Iterator[ReportSource]:
    """The database source when ``database`` is given, else the collector's API."""
    source: DatabaseSource | HttpSource = (
        DatabaseSource(database, name) if database else HttpSource(settings, name)
    )
    try:
        yield source
    finally:
        source.close()

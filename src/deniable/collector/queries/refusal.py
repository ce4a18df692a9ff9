"""The typed refusal of a query: the status and detail its HTTP answer carries.

The query functions raise it instead of an HTTP error, so the API maps it to the very answer
it gave before (``{"detail": ...}`` with the status), and the dashboard and the exposition read
it without knowing HTTP.
"""

from __future__ import annotations

from deniable.client.errors import DeniableError


class QueryRefused(DeniableError):
    """A query the collector will not answer as asked: ``status`` is its HTTP status (422: a
    bad or too large question; 404: an unknown metric) and ``detail`` names the problem."""

    def __init__(self, detail: str, status: int = 422) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status


class UnknownMetric(QueryRefused):
    """The query names a metric that is not registered (404)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"metric {name!r} is not registered", 404)


def refuse(detail: str) -> QueryRefused:
    """The 422 refusal naming ``detail``."""
    return QueryRefused(detail)

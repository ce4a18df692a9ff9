"""The one family of errors deniable raises on purpose, classified by class, never by message.

Every layer (client, estimators, collector, cli) raises these for the failures it means to
report; anything else that escapes is a bug. The CLI shows a :class:`DeniableError` as one
line and anything else as an internal error. Subclasses of :class:`ValueError` stay
``ValueError`` so code that caught the built-in before keeps working.
"""

from __future__ import annotations


class DeniableError(Exception):
    """Base of every error deniable raises on purpose; its message is fit for the user and
    never quotes a recorded value."""


class SpecError(DeniableError, ValueError):
    """A metric spec is invalid (name, type, categories, eps, mechanism or period)."""


class InvalidInput(DeniableError, ValueError):
    """A value, option, count, period label or file content does not fit what it is for."""


class BudgetExceeded(DeniableError):
    """The privacy budget (per period, or over the device's life) refuses another report."""


class CollectorRefused(DeniableError):
    """The collector answered with an error that names the problem (4xx with a detail)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class CollectorUnavailable(DeniableError):
    """The collector could not be reached, or answered that it cannot serve now (5xx)."""


class StorageUnavailable(DeniableError):
    """The database is unreachable or its schema is missing or out of date."""

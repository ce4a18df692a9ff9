"""A settable server clock, so in-process test collectors agree on what "now" is."""

from __future__ import annotations

import datetime as dt

TEST_NOW = dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.UTC)
"""The server clock of the shared test collectors (reports of 2026-11-21 are current)."""


class Clock:
    """A settable server clock for collectors under test."""

    def __init__(self, now: dt.datetime = TEST_NOW) -> None:
        self.now = now

    def __call__(self) -> dt.datetime:
        """The current test time."""
        return self.now

    def advance(self, days: int) -> None:
        """Move the clock ``days`` days forward."""
        self.now += dt.timedelta(days=days)

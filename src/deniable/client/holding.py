"""Values recorded before any spec arrived, held in memory until the specs do.

A client that fetches its specs from the collector has none on its first start if the
collector is down (or its URL is wrong): it cannot randomize yet, since the spec says how. So
that a new app does not lose its first day of data, :class:`Holding` keeps such values, with
the moment each was recorded, in memory only (never on disk, in a log or in an exception:
they are true values), up to :data:`MAX_HELD` values in all. When specs arrive, the recorder
randomizes each in the period it was recorded in and applies the normal budget. A value over
the bound, one whose metric the specs that arrive do not have, or one still held when the
client closes is dropped and counted (``ClientStats.dropped_held``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

MAX_HELD = 1000
"""The most values held, over all metrics, while a client waits for its first specs."""


class HeldValue:
    """One value waiting for its metric's spec, and when it was recorded; its ``repr`` never
    shows the value."""

    __slots__ = ("metric", "moment", "value")

    def __init__(self, metric: str, value: Any, moment: dt.datetime) -> None:
        self.metric = metric
        self.value = value
        self.moment = moment

    def __repr__(self) -> str:
        return f"HeldValue(metric={self.metric!r}, moment={self.moment.isoformat()})"


class Holding:
    """A bounded list of held values (the caller serializes access: the recorder's lock)."""

    def __init__(self, limit: int = MAX_HELD) -> None:
        self._limit = limit
        self._values: list[HeldValue] = []

    def hold(self, metric: str, value: Any, moment: dt.datetime) -> bool:
        """Keep ``value``; ``False`` (not kept) when :data:`MAX_HELD` values are held already."""
        if len(self._values) >= self._limit:
            return False
        self._values.append(HeldValue(metric, value, moment))
        return True

    def take(self) -> list[HeldValue]:
        """Every held value, oldest first; the holding is empty afterwards."""
        values, self._values = self._values, []
        return values

    def __len__(self) -> int:
        return len(self._values)

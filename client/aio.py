"""The SDK for asyncio applications: :class:`AsyncClient` is :class:`Client` with awaitable I/O.

``record()`` stays synchronous (it never blocks: no I/O), while ``flush`` and ``aclose``
run the blocking parts in a worker thread so the event loop keeps running.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any

from .ledger import PrivacySpent
from .sdk import Client, ClientStats
from .spec import MetricSpec


class AsyncClient:
    """Same constructor arguments and counters as :class:`Client`; use ``async with``.

    Like a :class:`Client`, it holds its ``state_dir`` exclusively until closed, and refuses
    served specs that change an accepted one or exceed ``max_epsilon``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._client = Client(*args, **kwargs)

    @classmethod
    async def create(cls, *args: Any, **kwargs: Any) -> AsyncClient:
        """Construct in a worker thread: with ``metrics=None`` the constructor fetches specs
        over the network, which must not block the event loop."""
        client = cls.__new__(cls)
        client._client = await asyncio.to_thread(Client, *args, **kwargs)
        return client

    def record(self, metric: str, value: Any) -> bool:
        """Randomize and queue one value (no I/O); see :meth:`Client.record`."""
        return self._client.record(metric, value)

    async def flush(self, timeout: float | None = None) -> bool:
        """Upload everything queued, without blocking the event loop; see :meth:`Client.flush`."""
        return await asyncio.to_thread(self._client.flush, timeout)

    async def aclose(self, timeout: float = 5.0) -> None:
        """Flush for at most ``timeout`` seconds, keep the rest on disk, and stop."""
        await asyncio.to_thread(self._client.close, timeout)

    async def close(self, timeout: float = 5.0) -> None:
        """The same as :meth:`aclose`."""
        await self.aclose(timeout)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    @property
    def stats(self) -> ClientStats:
        """A snapshot of the counters; see :attr:`Client.stats`."""
        return self._client.stats

    @property
    def metrics(self) -> dict[str, MetricSpec]:
        """The metric specs this client records, by name."""
        return self._client.metrics

    def privacy_spent(self) -> dict[str, PrivacySpent]:
        """Per metric: eps spent this period and the lifetime bound; see :meth:`Client.privacy_spent`."""
        return self._client.privacy_spent()

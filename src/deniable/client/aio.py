"""The SDK for asyncio applications: :class:`AsyncClient` is :class:`Client` with awaitable I/O.

``record()`` stays synchronous (it never blocks: no I/O), while ``flush`` and ``aclose``
run the blocking parts in a worker thread so the event loop keeps running.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

from .account import DeviceSettings, PrivacyAccount
from .ledger import PrivacySpent
from .sdk import Client
from .spec import MetricSpec
from .stats import ClientStats

_P = ParamSpec("_P")
_S = TypeVar("_S")
_R = TypeVar("_R")


def _takes_arguments_of(
    original: Callable[Concatenate[Any, _P], Any],
) -> Callable[[Callable[..., _R]], Callable[Concatenate[_S, _P], _R]]:
    """Give a method that forwards ``*args, **kwargs`` to ``original`` the same parameters, for
    type checkers and ``help()``; the method itself is returned unchanged."""

    def apply(method: Callable[..., _R]) -> Callable[Concatenate[_S, _P], _R]:
        """Copy ``original``'s parameters (keeping ``method``'s return type) onto ``method``."""
        returns = inspect.signature(method).return_annotation
        # A function's attributes live in its __dict__, where inspect.signature finds this one.
        method.__dict__["__signature__"] = inspect.signature(original).replace(
            return_annotation=returns
        )
        return method

    return apply


def _documented_like(original: type) -> Callable[[type[_S]], type[_S]]:
    """Append ``original``'s docstring (its arguments and rules) to a class's own, so
    ``help()`` shows one class's documentation on the other too."""

    def apply(cls: type[_S]) -> type[_S]:
        """Extend ``cls.__doc__`` with ``original``'s."""
        own, theirs = inspect.cleandoc(cls.__doc__ or ""), inspect.cleandoc(original.__doc__ or "")
        cls.__doc__ = f"{own}\n\nFrom :class:`{original.__name__}`:\n\n{theirs}"
        return cls

    return apply


@_documented_like(Client)
class AsyncClient:
    """Same constructor arguments and counters as :class:`Client`; use ``async with``.

    Like a :class:`Client`, it holds its ``state_dir`` exclusively until closed, and refuses
    served specs that change an accepted one or exceed ``max_epsilon``.
    """

    @_takes_arguments_of(Client.__init__)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._client = Client(*args, **kwargs)

    @classmethod
    @_takes_arguments_of(Client.__init__)
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
        """The client itself; ``async with`` closes it on the way out."""
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Close (flushing for at most five seconds) when the ``async with`` block ends."""
        await self.aclose()

    @property
    def stats(self) -> ClientStats:
        """A snapshot of the counters; see :attr:`Client.stats`."""
        return self._client.stats

    @property
    def metrics(self) -> dict[str, MetricSpec]:
        """The metric specs this client records, by name."""
        return self._client.metrics

    def problems(self) -> list[str]:
        """What keeps reports from arriving now, in words; see :meth:`Client.problems`."""
        return self._client.problems()

    def privacy_spent(self) -> dict[str, PrivacySpent]:
        """Per metric: eps spent this period and the lifetime bound; see :meth:`Client.privacy_spent`."""
        return self._client.privacy_spent()

    @property
    def settings(self) -> DeviceSettings:
        """The settings that bound what this device spends; see :attr:`Client.settings`."""
        return self._client.settings

    def privacy_account(self) -> PrivacyAccount:
        """The most eps this device can spend; see :meth:`Client.privacy_account`."""
        return self._client.privacy_account()

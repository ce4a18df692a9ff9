"""At most a few heavy reads at once per process, so their bounded memory adds up to a bound,
and no one metric's reads take every turn.

Each estimate, series, privacy account, estimates scrape or dashboard page is bounded on its own (the cells
limits), but fifty at once are fifty times that: past the pod's memory. :class:`ReadGate` lets
``max_concurrent_reads`` of them run at a time, and at most ``max_reads_per_metric`` of one
metric (or of one path that reads no single metric, such as the scrape or the overview); the
others wait their turn, and one that waits longer than ``read_queue_timeout`` seconds is
answered 503 with ``Retry-After``. The reads of no single metric (the scrape, the overview,
the privacy account) together take at most :func:`unscoped_limit` slots, so one metric at its
limit and they at theirs still leave a slot to another metric's read. A read waits for its metric's turn before it takes one of
the process's, so reads queued behind one metric's expensive ones hold none: another metric's
read is admitted as soon as a slot is free. Uploads, registration, health checks and the
SDK's spec list never wait here.
"""

from __future__ import annotations

import asyncio
import json

from starlette.types import ASGIApp, Receive, Scope, Send

HEAVY_API_ENDS = ("/estimate", "/series")
"""Ends of the API paths (``/v1/metrics/{name}/...``) that read stored counts and estimate."""
LIGHT_DASHBOARD_PATHS = frozenset(
    {"/dashboard/sign-in", "/dashboard/sign-out", "/dashboard/static/dashboard.css"}
)
"""Dashboard paths that read nothing stored."""


def is_heavy_read(method: str, path: str) -> bool:
    """Whether a request reads and estimates stored data (and so waits at the gate)."""
    if method not in ("GET", "HEAD"):
        return False
    if path.startswith("/v1/metrics/") and path.endswith(HEAVY_API_ENDS):
        return True
    if path in ("/v1/privacy", "/v1/estimates/metrics"):
        return True
    return path.startswith("/dashboard") and path not in LIGHT_DASHBOARD_PATHS


def read_group(path: str) -> str:
    """What a heavy read is counted under: ``metric:NAME`` for a read of one metric (the API's
    and the dashboard's), else its path."""
    for prefix in ("/v1/metrics/", "/dashboard/metrics/"):
        if path.startswith(prefix):
            return "metric:" + path[len(prefix) :].split("/", 1)[0]
    return path


def unscoped_limit(limit: int, per_group: int) -> int:
    """How many reads of no single metric may run at once: fewer than ``limit`` by one
    metric's share and one more (at least one), so that neither they nor one metric with
    them can fill every slot."""
    return max(1, limit - per_group - 1)


class ReadGate:
    """Admit ``limit`` heavy reads at once, at most ``per_group`` of one :func:`read_group`;
    answer 503 to one kept waiting over ``wait`` s. Its semaphores are made with it, so a
    shallow copy around another app (a thin path, :mod:`.fastpaths`) shares its turns."""

    def __init__(
        self, app: ASGIApp, *, limit: int, wait: float, per_group: int | None = None
    ) -> None:
        self.app = app
        self.limit = limit
        self.per_group = min(limit, per_group or limit)
        self.wait = wait
        self.unscoped = unscoped_limit(limit, self.per_group)
        self._slots = asyncio.Semaphore(self.limit)
        self._unscoped = asyncio.Semaphore(self.unscoped)
        self._groups: dict[str, tuple[asyncio.Semaphore, list[int]]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_heavy_read(scope["method"], scope["path"]):
            await self.app(scope, receive, send)
            return
        group = read_group(scope["path"])
        turn, users = self._groups.setdefault(group, (asyncio.Semaphore(self.per_group), [0]))
        gates: list[tuple[asyncio.Semaphore, str | None]] = [(turn, group)]
        if not group.startswith("metric:"):
            gates.append((self._unscoped, ""))
        gates.append((self._slots, None))
        users[0] += 1
        held: list[asyncio.Semaphore] = []
        try:
            deadline = asyncio.get_running_loop().time() + self.wait
            for gate, name in gates:
                if not gate.locked():  # free, nobody waiting: taken at once, no timer
                    await gate.acquire()
                    held.append(gate)
                    continue
                left = max(0.05, deadline - asyncio.get_running_loop().time())
                try:
                    await asyncio.wait_for(gate.acquire(), left)
                except TimeoutError:
                    await self._busy(send, name)
                    return
                held.append(gate)
            await self.app(scope, receive, send)
        finally:
            for gate in reversed(held):
                gate.release()
            users[0] -= 1
            if not users[0]:
                del self._groups[group]

    async def _busy(self, send: Send, group: str | None) -> None:
        """503: the reads now running are at a limit; the message names it and its setting
        (``group`` None: the process's; "": the unscoped reads'; else that group's)."""
        if group == "":
            detail = (
                f"the collector is answering its limit of {self.unscoped} reads of no single"
                " metric at once (the estimates scrape, the overview, the privacy account:"
                " DENIABLE_MAX_CONCURRENT_READS less DENIABLE_MAX_READS_PER_METRIC less one,"
                " so another metric's read always finds a slot); try again shortly"
            )
        elif group is None or self.per_group >= self.limit:
            detail = (
                f"the collector is answering its limit of {self.limit} reads at once"
                " (DENIABLE_MAX_CONCURRENT_READS); try again shortly"
            )
        else:
            what = group.removeprefix("metric:")
            detail = (
                f"the collector is answering its limit of {self.per_group} reads of {what} at"
                " once (DENIABLE_MAX_READS_PER_METRIC); try again shortly"
            )
        body = json.dumps({"detail": detail}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"retry-after", b"1"),
        ]
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": body})

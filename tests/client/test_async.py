"""AsyncClient: the same surface for asyncio apps, over real HTTP on loopback."""

from __future__ import annotations

import asyncio
from pathlib import Path

from deniable.client import AsyncClient, MetricSpec
from testkit import spare_port
from testkit.stub_collector import running

SPECS = [
    MetricSpec.boolean("dark_mode", epsilon=0.5),
    MetricSpec.categorical("browser", ["chrome", "firefox", "safari", "other"], epsilon=1.0),
]


def test_async_client_records_flushes_and_closes(tmp_path: Path) -> None:
    async def main(url: str) -> tuple[bool, bool, int]:
        async with AsyncClient(
            url, state_dir=tmp_path, metrics=SPECS, max_reports_per_period=5, backoff_base=0.02
        ) as client:
            sent = [client.record("browser", "firefox") for _ in range(6)]
            ticks = 0

            async def ticker() -> None:
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0.005)

            task = asyncio.create_task(ticker())
            flushed = await client.flush(timeout=10)
            task.cancel()
            assert client.stats.delivered == 5
            assert client.privacy_spent()["browser"].period_epsilon == 5.0
        return sent == [True] * 5 + [False], flushed, ticks

    with running(SPECS) as stub:
        stub.fail_503 = 2
        ok, flushed, ticks = asyncio.run(main(stub.url))
    assert ok and flushed
    assert ticks >= 1, "flush blocked the event loop"
    assert len(stub.stored) == 5


def test_async_close_with_the_collector_down_keeps_reports_on_disk(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{spare_port()}"

    async def main() -> int:
        client = AsyncClient(url, state_dir=tmp_path, metrics=SPECS)
        assert client.record("dark_mode", True)
        assert await client.flush(timeout=0.2) is False
        await client.aclose(timeout=0.2)
        return client.stats.queued

    assert asyncio.run(main()) == 1
    with running(SPECS, port=int(url.rsplit(":", 1)[1])) as stub:

        async def deliver() -> bool:
            client = await AsyncClient.create(stub.url, state_dir=tmp_path)
            async with client:
                assert set(client.metrics) == {s.name for s in SPECS}
                return await client.flush(timeout=10)

        assert asyncio.run(deliver())
    assert len(stub.stored) == 1

"""The shuffler as ``deniable shuffle`` in a child process, for tests that kill it.

Configured as a deployment configures it: ``DENIABLE_SHUFFLER_*`` variables (the runner's own
``DENIABLE_*`` variables are not passed on); its output goes to a log file (``log_tail``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

import httpx
from deniable.client import MetricSpec

from .collector_process import DENIABLE, START_TIMEOUT
from .ports import LOOPBACK, free_port, loopback_url

SHUFFLER_TOKEN = "shuffler-token-for-tests-7c1d"
"""The token test shufflers forward with (the test collectors' DENIABLE_SHUFFLER_TOKEN)."""


class ShufflerProcess:
    """One ``deniable shuffle`` process on a loopback port; start it again after a kill (on
    the same port and store)."""

    def __init__(
        self,
        store: Path,
        collector_url: str,
        log_dir: Path,
        *,
        min_batch: int,
        max_delay: float = 0.0,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        self.store = store
        self.collector_url = collector_url
        self.log_dir = log_dir
        self.min_batch = min_batch
        self.max_delay = max_delay
        self.settings = dict(settings or {})
        self.port = 0
        self.log_path = log_dir / "shuffler.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The shuffler's base URL."""
        return loopback_url(self.port)

    @property
    def process(self) -> subprocess.Popen[bytes]:
        assert self._process is not None, "the shuffler was never launched"
        return self._process

    def environment(self) -> dict[str, str]:
        """The child's environment: this one without ``DENIABLE_*``, plus its settings."""
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("DENIABLE_")}
        return {
            **inherited,
            "DENIABLE_SHUFFLER_TOKEN": SHUFFLER_TOKEN,
            "DENIABLE_SHUFFLER_CHECK_INTERVAL": "0.2",
            "DENIABLE_SHUFFLER_RETRY_CAP": "1",
            **self.settings,
        }

    def start(self, port: int | None = None) -> ShufflerProcess:
        """Launch on ``port`` (the last one, else a free one) and wait for ``/healthz``."""
        self.port = port or self.port or free_port()
        self.log_path = self.log_dir / f"shuffler-{self.port}.log"
        options = [
            "--host", LOOPBACK, "--port", str(self.port), "--store", str(self.store),
            "--collector", self.collector_url, "--min-batch", str(self.min_batch),
            "--max-delay", str(self.max_delay), "--log-level", "info",
        ]  # fmt: skip
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                [*DENIABLE, "shuffle", *options],
                env=self.environment(),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + START_TIMEOUT
        with httpx.Client(timeout=1.0, trust_env=False) as client:
            while time.monotonic() < deadline and self.process.poll() is None:
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(self.url + "/healthz").status_code == 200:
                        return self
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"shuffler on port {self.port} did not start:\n{self.log_tail()}")

    def counts(self) -> dict[str, int]:
        """Reports received, batched and forwarded, and batches formed (``/healthz``)."""
        answer = httpx.get(self.url + "/healthz", timeout=10.0, trust_env=False)
        answer.raise_for_status()
        return {k: v for k, v in answer.json().items() if k != "status"}

    def kill(self) -> None:
        """SIGKILL it, as a crash would, and wait for it to be gone."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, then SIGKILL if it has not exited within ``timeout``."""
        if self._process is None:
            return None
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
        try:
            return self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            return self._process.wait()

    def log_tail(self, lines: int = 30) -> str:
        """The last lines it wrote."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> ShufflerProcess:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class Pipeline:
    """A collector process (with sealing keys and the shuffler's token) and a shuffler process
    forwarding to it, both on loopback; ``metrics`` registered."""

    def __init__(
        self,
        database_url: str,
        directory: Path,
        *,
        min_batch: int,
        max_delay: float = 0.0,
        shuffler_settings: Mapping[str, str] | None = None,
    ) -> None:
        from deniable.collector.sealingkeys import generate

        from .collector_process import CollectorProcess
        from .configuration import collector_settings

        self.keys_file = directory / "sealing-keys.json"
        if not self.keys_file.exists():
            generate(self.keys_file, datetime.now(UTC))
        self.collector = CollectorProcess(
            collector_settings(
                database_url,
                shuffler_token=SHUFFLER_TOKEN,
                sealing_keys_file=self.keys_file,
                shuffle_min_batch=min_batch,
            ),
            directory,
        )
        self.directory = directory
        self.min_batch = min_batch
        self.max_delay = max_delay
        self.shuffler_settings = shuffler_settings
        self.shuffler: ShufflerProcess | None = None

    def start(self, metrics: Sequence[MetricSpec]) -> Pipeline:
        """Start the collector, register ``metrics``, start the shuffler."""
        from .metrics import register_all

        self.collector.start()
        register_all(self.collector.url, metrics)
        self.shuffler = ShufflerProcess(
            self.directory / "shuffler.db",
            self.collector.url,
            self.directory,
            min_batch=self.min_batch,
            max_delay=self.max_delay,
            settings=self.shuffler_settings,
        ).start()
        return self

    def stop(self) -> None:
        """Stop both."""
        if self.shuffler is not None:
            self.shuffler.stop()
        self.collector.stop()

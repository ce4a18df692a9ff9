"""The shuffler as ``deniable shuffle`` in a child process, for tests that kill it.

Configured as a deployment configures it: ``DENIABLE_SHUFFLER_*`` variables (the runner's own
``DENIABLE_*`` variables are not passed on); its output goes to a log file (``log_tail``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from deniable.client import MetricSpec

from .ports import LOOPBACK
from .service_process import ServiceProcess, inherited_environment

SHUFFLER_TOKEN = "shuffler-token-for-tests-7c1d"
"""The token test shufflers forward with (the test collectors' DENIABLE_SHUFFLER_TOKEN)."""
SHUFFLER_UPLOAD_KEY = "shuffler-upload-key-for-tests-4e9a"
"""The key test devices upload to test shufflers with (DENIABLE_SHUFFLER_UPLOAD_KEY)."""


class ShufflerProcess(ServiceProcess):
    """One ``deniable shuffle`` process on a loopback port; start it again after a kill (on
    the same port and store, appending to the same log)."""

    name = "shuffler"
    append_log = True
    keep_port = True

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
        super().__init__(log_dir)
        self.store = store
        self.collector_url = collector_url
        self.min_batch = min_batch
        self.max_delay = max_delay
        self.settings = dict(settings or {})

    def arguments(self) -> list[str]:
        """``shuffle`` on this port and store, forwarding to the collector."""
        return [
            "shuffle", "--host", LOOPBACK, "--port", str(self.port), "--store", str(self.store),
            "--collector", self.collector_url, "--min-batch", str(self.min_batch),
            "--max-delay", str(self.max_delay), "--log-level", "info",
        ]  # fmt: skip

    def environment(self) -> dict[str, str]:
        """The child's environment: this one without ``DENIABLE_*``, plus its settings."""
        return {
            **inherited_environment(),
            "DENIABLE_SHUFFLER_TOKEN": SHUFFLER_TOKEN,
            "DENIABLE_SHUFFLER_UPLOAD_KEY": SHUFFLER_UPLOAD_KEY,
            "DENIABLE_SHUFFLER_CHECK_INTERVAL": "0.2",
            "DENIABLE_SHUFFLER_KEYS_REFRESH": "0.2",
            "DENIABLE_SHUFFLER_RETRY_CAP": "1",
            **self.settings,
        }

    def counts(self) -> dict[str, int]:
        """Reports received, batched and forwarded, batches formed, and batch keys ``ready``
        (enough devices waiting), read from the store's file as its operator reads them
        (``/healthz`` tells nobody)."""
        from deniable.shuffler.store import counts_of, waiting_keys_of

        connection = sqlite3.connect(f"file:{self.store}?mode=ro", uri=True, timeout=30)
        try:
            ready = len(waiting_keys_of(connection, self.min_batch))
            return {**counts_of(connection), "ready": ready}
        finally:
            connection.close()


class Pipeline:
    """A collector process (with sealing keys and the shuffler's token, and ``collector_env``'s
    ``DENIABLE_*`` variables) and a shuffler process forwarding to it, both on loopback;
    ``metrics`` registered."""

    def __init__(
        self,
        database_url: str,
        directory: Path,
        *,
        min_batch: int,
        max_delay: float = 0.0,
        shuffler_settings: Mapping[str, str] | None = None,
        collector_env: Mapping[str, str] | None = None,
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
            env=collector_env,
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

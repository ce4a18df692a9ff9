"""A key-partitioning collector and a real shuffler for sdk/js/test/partition.test.mjs.

``python sdk/js/test/partition.py FOLDER MIN_BATCH SPEC_JSON`` starts
:class:`testkit.key_server.KeyServer` in partitioning mode (a fresh key per ``GET /v1/keys``) and
a ``deniable shuffle`` process forwarding to it, prints ``{"collector", "shuffler",
"shuffler_key"}``, then answers one JSON line per command read from stdin: ``restart`` restarts
the shuffler (which fetches a new key); ``opened N`` waits until N reports are forwarded and
answers what the collector learns: every report's id, batch, key id and which handed-out key
(by number) opens it, and how many times ``GET /v1/keys`` was asked. Its stdin closing stops both.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from deniable.client import MetricSpec
from testkit.key_server import KeyServer
from testkit.shuffler_process import SHUFFLER_UPLOAD_KEY, ShufflerProcess
from testkit.stub_collector import eventually


def main() -> None:
    folder, min_batch = Path(sys.argv[1]), int(sys.argv[2])
    spec = MetricSpec.from_dict(json.loads(sys.argv[3]))
    with KeyServer([spec], partition=True) as collector:
        shuffler = ShufflerProcess(
            folder / "shuffler.db",
            collector.url,
            folder,
            min_batch=min_batch,
            settings={"DENIABLE_SHUFFLER_KEYS_REFRESH": "3600"},
        )
        try:
            shuffler.start()
            urls = {"collector": collector.url, "shuffler": shuffler.url}
            print(json.dumps({**urls, "shuffler_key": SHUFFLER_UPLOAD_KEY}), flush=True)
            for line in sys.stdin:
                command = line.split()
                if command == ["restart"]:
                    shuffler.stop()
                    shuffler.start()
                    print(json.dumps({"shuffler": shuffler.url}), flush=True)
                elif command[:1] == ["opened"]:
                    total = int(command[1])
                    eventually(lambda n=total: shuffler.counts()["forwarded"] >= n, timeout=60)
                    reports = []
                    for part in list(collector.parts):
                        for envelope in part["envelopes"]:
                            found = collector.open(envelope, part)
                            index, report = found if found is not None else (None, None)
                            reports.append(
                                {
                                    "id": report,
                                    "batch": part["batch"],
                                    "key": envelope["key"],
                                    "opened_by": index,
                                }
                            )
                    answer = {"fetches": collector.fetches, "reports": reports}
                    print(json.dumps(answer), flush=True)
        finally:
            shuffler.stop()


if __name__ == "__main__":
    main()

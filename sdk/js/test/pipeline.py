"""A collector and a shuffler for the node tests (testkit's ``Pipeline``, SQLite in a folder).

Run by sdk/js/test/shuffle.test.mjs: ``python sdk/js/test/pipeline.py FOLDER MIN_BATCH SPECS_JSON``
prints one JSON line ``{"collector", "shuffler", "admin_token", "ingest_key", "shuffler_key"}``
once both answer,
then serves until its stdin closes, and stops both.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from deniable.client import MetricSpec
from testkit.configuration import ADMIN_TOKEN, INGEST_KEY
from testkit.shuffler_process import SHUFFLER_UPLOAD_KEY, Pipeline


def main() -> None:
    folder, min_batch, specs = Path(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
    pipeline = Pipeline(f"sqlite:///{folder / 'reports.db'}", folder, min_batch=min_batch)
    try:
        pipeline.start([MetricSpec.from_dict(data) for data in specs])
        assert pipeline.shuffler is not None
        urls = {"collector": pipeline.collector.url, "shuffler": pipeline.shuffler.url}
        tokens = {
            "admin_token": ADMIN_TOKEN,
            "ingest_key": INGEST_KEY,
            "shuffler_key": SHUFFLER_UPLOAD_KEY,
        }
        print(json.dumps({**urls, **tokens}), flush=True)
        sys.stdin.read()
    finally:
        pipeline.stop()


if __name__ == "__main__":
    main()

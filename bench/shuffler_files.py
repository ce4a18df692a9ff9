"""What the shuffler's files give away when read as raw bytes, the first layout beside this one.

300 devices upload one report for each of 3 metrics (seeded); the store forms the 3 batches and
the collector acknowledges them. For each layout and moment: which files hold a pseudonym,
Kendall's tau between the order the envelope ids lie in the files and their arrival order
(beside the 4.9-sd limit of its exact null distribution), same-device neighbours in that order
(beside chance's mean and its 4.9-sd limit), and the files' sizes. The first layout is a rowid
table whose batching clears the pseudonym with a plain UPDATE (then, settled: checkpointed,
``secure_delete``, ``VACUUM``).
Run: ``.venv/bin/python -m bench.shuffler_files``.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

from deniable.shuffler.store import Store
from testkit.row_order import neighbour_moments
from testkit.shuffler_files import (
    DEVICES,
    KEYS,
    FileStatistics,
    device_uploads,
    file_statistics,
    first_layout,
    kendall_null_limit,
    neighbour_limit,
    settle_first_layout,
    store_files,
)


def row(label: str, path: Path, found: FileStatistics) -> None:
    sizes = ", ".join(f"{name} {len(raw):,} B" for name, raw in store_files(path).items())
    holding = ", ".join(sorted(found.pseudonyms_in)) or "none"
    print(f"{label:<34} {holding:<22} {found.tau:>7.4f} {found.neighbours:>10}   {sizes}")


def main() -> None:
    arrived = device_uploads(11, DEVICES, KEYS)
    mean, _ = neighbour_moments(DEVICES, len(KEYS))
    print(
        f"{DEVICES} devices x {len(KEYS)} reports; |tau| limit"
        f" {kendall_null_limit(DEVICES * len(KEYS)):.4f}; same-device neighbours: chance mean"
        f" {mean:.2f}, limit {neighbour_limit(DEVICES, len(KEYS)):.1f}"
    )
    print(f"{'layout, moment':<34} {'pseudonyms in':<22} {'tau':>7} {'neighbours':>10}   files")
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "shuffler.db"
        store = Store(path, rng=random.Random(3))
        for device, envelopes in arrived:
            store.receive(device, envelopes)
        row("this one, waiting", path, file_statistics(path, arrived))
        batches = [store.form_batch(key, DEVICES, DEVICES, 64, 900_000) for key in KEYS]
        row("this one, batched", path, file_statistics(path, arrived))
        for batch in batches:
            assert batch is not None
            for part in range(batch.parts):
                store.acknowledged(batch, part)
        row("this one, forwarded", path, file_statistics(path, arrived))
        store.close()
        first = Path(directory) / "first.db"
        connection = first_layout(first, arrived)
        row("first layout, batched", first, file_statistics(first, arrived))
        settle_first_layout(connection)
        row("first layout, batched and settled", first, file_statistics(first, arrived))
        connection.close()


if __name__ == "__main__":
    main()

"""The collector opens a large shuffled part on its worker pool (issue 42): the same reports, in
the same order, and the same refusals as opening it in this process."""

from __future__ import annotations

import base64
import datetime as dt
import json
import uuid
from pathlib import Path

from deniable.client import MetricSpec
from deniable.client.sealing import envelope, padded_size
from deniable.client.wire import report_text
from deniable.collector import unsealing
from deniable.collector.schemas import ShuffledPart
from deniable.collector.sealingkeys import KeyRing, generate

SPEC = MetricSpec.categorical("parallel_open", ["a", "b", "c", "d"], epsilon=2.0)
OTHER = MetricSpec.categorical("parallel_other", ["a", "b", "c", "d"], epsilon=2.0)


def _part(public: bytes, count: int) -> tuple[ShuffledPart, set[int]]:
    """A part of ``count`` envelopes of SPEC and the indexes that must be refused: a tampered
    one, one sealed to an unknown key id, and one whose inside is another metric's report."""
    period = "2026-12-05"
    envelopes = []
    bad = {5, 17, count - 1}
    for i in range(count):
        spec = OTHER if i == count - 1 else SPEC
        text = report_text(str(uuid.uuid4()), spec.name, spec.fingerprint, period, i % 4)
        sealed = envelope(text, spec, public)
        if i == count - 1:  # sealed under OTHER's header: does not open under SPEC's
            sealed["metric"] = SPEC.name
        item = {"key": sealed["key"], "sealed": sealed["sealed"]}
        if i == 5:
            raw = bytearray(base64.b64decode(item["sealed"]))
            raw[40] ^= 1
            item["sealed"] = base64.b64encode(bytes(raw)).decode()
        if i == 17:
            item["key"] = "0" * 16
        envelopes.append(item)
    first = envelope(
        report_text(str(uuid.uuid4()), SPEC.name, SPEC.fingerprint, period, 0), SPEC, public
    )
    part = ShuffledPart.model_validate(
        {
            "batch": uuid.uuid4().hex,
            "part": 0,
            "parts": 1,
            "n": count,
            "metric": SPEC.name,
            "mechanism": first["mechanism"],
            "epsilon": first["epsilon"],
            "fingerprint": SPEC.fingerprint,
            "envelopes": envelopes,
        }
    )
    return part, bad


def test_the_pool_opens_the_same_reports_in_the_same_order(tmp_path: Path) -> None:
    key = generate(tmp_path / "keys.json", dt.datetime.now(dt.UTC))
    ring = KeyRing(tmp_path / "keys.json", dt.timedelta(days=7))
    count = 3 * unsealing.PARALLEL_FROM
    part, bad = _part(key.public, count)
    assert unsealing.open_workers() >= 2, "this machine gives the collector one CPU: no pool"
    pooled = unsealing.open_part(part, SPEC, ring)
    assert unsealing._POOL, "a part this large goes to the pool"
    private = {kid: k.private_bytes_raw() for kid, k in ring.opener().items()}
    header = (part.metric, part.mechanism, float(part.epsilon), part.fingerprint)
    alone = unsealing.open_slice(
        header, padded_size(SPEC), private, [(e.key, e.sealed) for e in part.envelopes]
    )
    assert [i for i, text in enumerate(alone) if text is None] == sorted(bad)
    assert pooled.texts == [text for text in alone if text is not None]
    assert pooled.refused == len(bad)
    assert all(json.loads(text)["metric"] == SPEC.name for text in pooled.texts)


def test_a_small_part_is_opened_in_this_process(tmp_path: Path) -> None:
    key = generate(tmp_path / "keys.json", dt.datetime.now(dt.UTC))
    ring = KeyRing(tmp_path / "keys.json", dt.timedelta(days=7))
    part, bad = _part(key.public, unsealing.PARALLEL_FROM - 1)
    opened = unsealing.open_part(part, SPEC, ring)
    assert opened.refused == len(bad)
    assert len(opened.texts) == unsealing.PARALLEL_FROM - 1 - len(bad)

"""Privacy invariant 1: a true value never leaves ``record()`` — not in a request body, a file
in ``state_dir``, a log line (at DEBUG, every logger) or an exception message (which may list
a metric's categories, as they are public, but never the value tried)."""

from __future__ import annotations

import datetime as dt
import logging
import math
import uuid
from pathlib import Path

import pytest

from deniable.client import Client, MetricSpec
from testkit import spare_port
from testkit.stub_collector import running

MARK = f"zqx{uuid.uuid4().hex[:12]}"
NAMES = [f"{MARK}-{word}" for word in ("alpha", "beta", "gamma", "delta", "epsilon")]
SPECS = [
    MetricSpec.categorical("secret_krr", NAMES, epsilon=1.0, mechanism="krr"),
    MetricSpec.categorical("secret_olh", NAMES, epsilon=1.0, mechanism="olh"),
    MetricSpec.categorical("secret_oue", NAMES, epsilon=1.0, mechanism="oue"),
    MetricSpec.boolean("flag_a", epsilon=0.5),
    MetricSpec.boolean("flag_b", epsilon=0.5, mechanism="krr"),
]
NEEDLES = [MARK, "alpha", "gamma", "epsilon-", "true", "True", "false", "False"]


def _leaks(data: bytes) -> list[str]:
    return [n for n in NEEDLES if n.encode() in data]


def _without_listed_categories(message: str) -> str:
    """An error message without the list of valid categories it may show (they are public,
    and name no value): what remains must hold no true value."""
    listing = ", ".join(NAMES)
    assert message.count(listing) <= 1
    return message.replace(listing, "")


def test_true_values_appear_in_no_body_file_log_or_exception(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    moment = [dt.datetime(2026, 9, 1, tzinfo=dt.UTC)]
    errors: list[str] = []
    with caplog.at_level(logging.DEBUG), running(SPECS) as stub:
        stub.fail_503 = 1
        stub.drop_ack = 1
        client = Client(
            stub.url,
            state_dir=tmp_path,
            metrics=SPECS,
            memoize={"secret_olh", "flag_b"},
            max_reports_per_period=2,
            clock=lambda: moment[0],
            batch_size=4,
            backoff_base=0.02,
        )
        for day in range(6):
            for spec in SPECS[:3]:
                client.record(spec.name, NAMES[day % 3 * 2])
                client.record(spec.name, NAMES[2])
            client.record("flag_a", True)
            client.record("flag_b", day % 2 == 0)
            moment[0] += dt.timedelta(days=1)
        bad_values: list[object] = [f"{MARK}-unknown", {"k": MARK}, 7, None]
        for metric in ("secret_krr", "secret_oue", "flag_a"):
            for bad in [*bad_values, NAMES[0] if metric == "flag_a" else "True"]:
                with pytest.raises(ValueError) as info:
                    client.record(metric, bad)
                errors.append(_without_listed_categories(str(info.value)))
                assert metric in str(info.value)
                if isinstance(bad, str):
                    assert bad not in str(info.value), "an error quotes the value tried"
        assert client.flush(timeout=10)
        client.close()
    assert len(stub.stored) == 6 * (3 * 2 + 2)
    for body in stub.bodies:
        assert _leaks(body) == [], "a request body holds a true value"
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert files
    for path in files:
        assert _leaks(path.read_bytes()) == [], f"{path.name} holds a true value"
    assert caplog.records, "DEBUG logging captured nothing: the search would be vacuous"
    assert _leaks(caplog.text.encode()) == []
    assert len(errors) == 15
    for message in errors:
        assert _leaks(message.encode()) == []


TRUE_NUMBER = 4817.263
NUMBER_SPECS = [
    MetricSpec.numeric("secret_pm", lower=0, upper=5000, epsilon=1.0, mechanism="pm"),
    MetricSpec.numeric("secret_duchi", lower=0, upper=5000, epsilon=0.5, mechanism="duchi"),
    MetricSpec.numeric("secret_hybrid", lower=0, upper=5000, epsilon=2.0, mechanism="hybrid"),
    MetricSpec.histogram("secret_hist", [0, 100, 1000, 4000, 9000], epsilon=1.0, mechanism="oue"),
]
_T = NUMBER_SPECS[0].scale(TRUE_NUMBER)
NUMBER_NEEDLES = ["4817.26", "4817,26", repr(_T), repr(_T)[:8], _T.hex(), TRUE_NUMBER.hex()]
"""The true value as any program would write it, and its point on the metric's axis (the
memo keys on it, so it must not be written either)."""


def test_true_numbers_appear_in_no_body_file_log_or_exception(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    moment = [dt.datetime(2026, 9, 1, tzinfo=dt.UTC)]
    errors: list[str] = []
    port = spare_port()
    with caplog.at_level(logging.DEBUG):
        # Served specs, first recorded while the collector is down: the values are held.
        served = Client(
            f"http://127.0.0.1:{port}",
            state_dir=tmp_path / "served",
            memoize={"secret_pm", "secret_hist"},
            clock=lambda: moment[0],
            backoff_base=0.02,
        )
        for spec in NUMBER_SPECS:
            assert served.record(spec.name, TRUE_NUMBER)
        assert served.stats.held == len(NUMBER_SPECS)
        with running(NUMBER_SPECS, port=port) as stub:
            stub.fail_503 = 1
            stub.drop_ack = 1
            client = Client(
                stub.url,
                state_dir=tmp_path / "coded",
                metrics=NUMBER_SPECS,
                memoize={"secret_pm", "secret_hist"},
                max_reports_per_period=2,
                clock=lambda: moment[0],
                batch_size=3,
                backoff_base=0.02,
            )
            for day in range(4):
                for spec in NUMBER_SPECS:
                    assert client.record(spec.name, TRUE_NUMBER)
                    if day:
                        served.record(spec.name, TRUE_NUMBER)
                moment[0] += dt.timedelta(days=1)
            for bad in (str(TRUE_NUMBER), [TRUE_NUMBER], {"v": TRUE_NUMBER}, math.nan, True):
                for spec in NUMBER_SPECS:
                    with pytest.raises(ValueError) as info:
                        client.record(spec.name, bad)
                    assert spec.name in str(info.value)
                    errors.append(str(info.value))
            assert client.flush(timeout=10)
            assert served.flush(timeout=10)
            client.close()
            served.close()
    assert served.stats.dropped_held == 0
    assert len(stub.stored) == 2 * 4 * len(NUMBER_SPECS)
    for report in stub.stored.values():
        assert report["payload"] != TRUE_NUMBER and report["payload"] != _T
    for body in stub.bodies:
        assert [n for n in NUMBER_NEEDLES if n.encode() in body] == []
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) >= 4
    for path in files:
        data = path.read_bytes()
        assert [n for n in NUMBER_NEEDLES if n.encode() in data] == [], path.name
    assert caplog.records, "DEBUG logging captured nothing: the search would be vacuous"
    assert [n for n in NUMBER_NEEDLES if n in caplog.text] == []
    assert len(errors) == 5 * len(NUMBER_SPECS)
    for message in errors:
        assert [n for n in NUMBER_NEEDLES if n in message] == []

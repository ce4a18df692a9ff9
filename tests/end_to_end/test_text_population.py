"""End to end for text metrics: a Zipf population of strings recorded through the SDK
(``Client.record``), delivered over HTTP to a real collector (SQLite and PostgreSQL), decoded by
the estimate endpoint.

As in ``deniable simulate``, one Client stands for a batch of devices (its budget raised to
the batch, memoization off); each Client draws its own pinned prefix level from its (seeded)
randomness, so the batch's devices share it. Values are shuffled before they are split into
batches, so each level's reports are a random sample of the population. Seeds are fixed: the
test is deterministic.

What must hold: every string whose share is at least the run's stated floor T95 is returned,
no returned string is absent from the population, the returned intervals cover the true
shares, candidate mode scores a listed string, and resending reports (three devices' state
copied before delivery) changes nothing.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from deniable.client import Client, MetricSpec, SeededRandomness
from testkit import (
    INGEST_KEY,
    RunningCollector,
    loopback_url,
    register,
    spare_port,
    unique_name,
)

DEVICES = 3_000
PER_CLIENT = 250
MAX_LENGTH = 6
WORDS = ["dark", "mode", "søk", "wifi", "émoji", "font", "zoom", "print", "help", "undo"]


def zipf_population(seed: int) -> list[str]:
    """DEVICES strings: ten common ones by Zipf (s = 1.3) over 65% of devices, the rest unique
    (two common ones above the run's floor, collision variance included)."""
    rng = random.Random(seed)
    weights = [1 / (i + 1) ** 1.3 for i in range(len(WORDS))]
    common = round(DEVICES * 0.65)
    values = rng.choices(WORDS, weights=weights, k=common)
    values += [f"u{i:05d}" for i in range(DEVICES - common)]
    rng.shuffle(values)
    return values


def record_offline(spec: MetricSpec, values: list[str], root: Path, now: object) -> list[Path]:
    """Record ``values`` on offline Clients of PER_CLIENT devices each; their state dirs."""
    folders = []
    for start in range(0, len(values), PER_CLIENT):
        folder = root / f"batch{start // PER_CLIENT:03d}"
        client = Client(
            loopback_url(spare_port()),
            state_dir=folder,
            metrics=[spec],
            max_reports_per_period=PER_CLIENT,
            clock=lambda: now,
            randomness=SeededRandomness(1000 + start),
        )
        for value in values[start : start + PER_CLIENT]:
            assert client.record(spec.name, value)
        client.close(timeout=0.0)
        folders.append(folder)
    return folders


def deliver(collector: RunningCollector, spec: MetricSpec, folders: list[Path]) -> int:
    """Deliver every state dir; the duplicates the collector reported."""
    duplicates = 0
    for folder in folders:
        device = Client(collector.url, state_dir=folder, metrics=[spec], ingest_key=INGEST_KEY)
        assert device.flush(timeout=60)
        device.close()
        duplicates += device.stats.duplicates
    return duplicates


def scraped_shares(client: httpx.Client, metric: str) -> dict[str, tuple[float, float, float]]:
    """``metric``'s strings in the Prometheus estimates scrape (every page read): share, low, high."""
    found: dict[str, dict[str, float]] = {}
    page, pages = 1, 1
    while page <= pages:
        answer = client.get("/v1/estimates/metrics", params={"page": str(page)})
        assert answer.status_code == 200, answer.text
        for family in text_string_to_metric_families(answer.text):
            for sample in family.samples:
                if sample.name == "deniable_estimate_pages":
                    pages = int(sample.value)
                elif sample.labels.get("metric") == metric and "category" in sample.labels:
                    found.setdefault(sample.labels["category"], {})[sample.name] = sample.value
        page += 1
    return {
        value: (
            row["deniable_estimate_share"],
            row["deniable_estimate_share_low"],
            row["deniable_estimate_share_high"],
        )
        for value, row in found.items()
    }


def test_the_common_strings_come_back_with_covering_intervals_and_nothing_invented(
    collector: RunningCollector, admin: httpx.Client, tmp_path: Path
) -> None:
    spec = register(admin, MetricSpec.text(unique_name("search"), max_length=MAX_LENGTH, epsilon=4))
    values = zipf_population(seed=26)
    now = collector.clock()
    folders = record_offline(spec, values, tmp_path / "devices", now)
    copies = [folder.with_name(folder.name + "-copy") for folder in folders[:3]]
    for folder, copy in zip(folders, copies, strict=False):
        shutil.copytree(folder, copy)
    assert deliver(collector, spec, folders) == 0
    today = now.date().isoformat()
    first = admin.get(f"/v1/metrics/{spec.name}/estimate", params={"end": today})
    assert first.status_code == 200, first.text
    result = first.json()
    assert deliver(collector, spec, copies) == 3 * PER_CLIENT  # every one a resend
    again = admin.get(f"/v1/metrics/{spec.name}/estimate", params={"end": today})
    assert again.json() == result
    series = admin.get(f"/v1/metrics/{spec.name}/series", params={"end": today}).json()
    assert series["series"][-1] == result  # the period's own discovery, nothing pooled

    assert (result["n"], result["mode"], result["max_length"]) == (DEVICES, "discovery", MAX_LENGTH)
    assert not result["cap_bound"]
    t95 = result["floor"]["t95"]
    truth = {value: values.count(value) / DEVICES for value in set(values)}
    returned = {row["value"]: row for row in result["strings"]}
    assert set(returned) <= set(truth), "a returned string no device holds"
    above = {value for value, share in truth.items() if share >= t95}
    assert len(above) >= 2, (t95, sorted(truth.values())[-3:])
    assert above <= set(returned), (above, set(returned), t95)
    for value, row in returned.items():
        assert row["ci_low"] <= truth[value] <= row["ci_high"], (value, truth[value], row)
        assert row["ci_low"] <= row["share"] <= row["ci_high"]

    assert scraped_shares(admin, spec.name) == {
        row["value"]: (row["share"], row["ci_low"], row["ci_high"]) for row in result["strings"]
    }

    top = max(truth, key=truth.get)  # type: ignore[arg-type]
    scored = admin.get(
        f"/v1/metrics/{spec.name}/estimate",
        params={"end": today, "candidates": [top, "nope"]},
    )
    assert scored.status_code == 200, scored.text
    rows = {row["value"]: row for row in scored.json()["strings"]}
    assert scored.json()["mode"] == "candidates"
    assert rows[top]["detected"] and rows[top]["ci_low"] <= truth[top] <= rows[top]["ci_high"]
    assert not rows["nope"]["detected"]


def test_a_text_estimate_refuses_a_range_and_candidates_elsewhere_and_series_per_period(
    collector: RunningCollector, admin: httpx.Client
) -> None:
    spec = register(admin, MetricSpec.text(unique_name("search"), max_length=8, epsilon=2))
    other = register(admin, MetricSpec.boolean(unique_name("flag"), epsilon=1))
    today = collector.clock().date()
    week_ago = today.replace(day=1).isoformat()
    answer = admin.get(
        f"/v1/metrics/{spec.name}/estimate",
        params={"start": week_ago, "end": (today.replace(day=3)).isoformat()},
    )
    assert answer.status_code == 422 and "one period" in answer.json()["detail"]
    answer = admin.get(f"/v1/metrics/{spec.name}/estimate", params={"q": "0.5"})
    assert answer.status_code == 422 and "histogram" in answer.json()["detail"]
    answer = admin.get(f"/v1/metrics/{other.name}/estimate", params={"candidates": ["x"]})
    assert answer.status_code == 422 and "text" in answer.json()["detail"]
    series = admin.get(f"/v1/metrics/{spec.name}/series")
    assert series.status_code == 200, series.text
    entries = series.json()["series"]
    assert len(entries) == 7 and all(e["n"] == 0 and e["strings"] == [] for e in entries)
    empty = admin.get(f"/v1/metrics/{spec.name}/estimate")
    assert empty.status_code == 200, empty.text
    assert (empty.json()["n"], empty.json()["strings"], empty.json()["floor"]["t95"]) == (
        0,
        [],
        1.0,
    )


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ({"b": "AA==", "l": 1, "r": 0}, "exactly 128 bytes"),
        ({"b": "A" * 172, "l": 0, "r": 0}, "prefix level"),
        ({"b": "A" * 172, "l": 1, "r": 99}, "sketch row"),
        ({"b": "A" * 172, "l": 1}, "exactly the keys"),
        ({"b": "*" * 172, "l": 1, "r": 0}, "base64"),
        (3, "exactly the keys"),
    ],
)
def test_a_malformed_text_payload_is_refused_naming_the_problem(
    collector: RunningCollector,
    admin: httpx.Client,
    uploader: httpx.Client,
    payload: object,
    reason: str,
) -> None:
    spec = register(admin, MetricSpec.text(unique_name("search"), max_length=4, epsilon=2))
    report = {
        "id": "6f1c2a4e-8b9d-4c3e-a1f2-3b4c5d6e7f80",
        "metric": spec.name,
        "fingerprint": spec.fingerprint,
        "period": collector.clock().date().isoformat(),
        "payload": payload,
    }
    answer = uploader.post("/v1/reports", json={"reports": [report]})
    assert answer.status_code == 422, answer.text
    assert reason in answer.json()["detail"][0]["reason"]

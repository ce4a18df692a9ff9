"""The auditor on set metrics (docs/audit.md; docs/STATS.md section 16), seeded: the real
padding-and-sampling passes through oue and olh, is ``loose`` through krr at L > 1 (its true
ratio is 1 + (e^eps - 1)/L, below the claim), and a randomizer that spends twice the eps it
claims fails; `deniable audit --spec` takes a set spec."""

from __future__ import annotations

import json
from typing import Any

import pytest

from deniable.client import MetricSpec
from deniable.client.mechanisms import PaddingSampling, Payload, make_mechanism
from deniable.client.randomness import Randomness, system_randomness
from deniable.estimators.audit import audit_spec
from testkit.cli import run_cli

CATEGORIES = ["a", "b", "c", "d"]
SAMPLES = 20_000


def spec_of(mechanism: str, size: int = 2) -> MetricSpec:
    """A set metric of four categories at eps 1."""
    return MetricSpec.set_of("f", CATEGORIES, max_items=size, epsilon=1.0, mechanism=mechanism)


@pytest.mark.parametrize("mechanism", ["oue", "olh"])
def test_the_real_randomizer_passes(mechanism: str) -> None:
    result = audit_spec(spec_of(mechanism), samples=SAMPLES, seed=39)
    assert result.verdict == "pass", result.message
    assert result.type == "set" and result.mechanism == mechanism
    assert "{a, b}" in result.inputs and "{}" in result.inputs


def test_krr_above_one_item_is_loose_and_at_one_item_passes() -> None:
    loose = audit_spec(spec_of("krr", 3), samples=SAMPLES, seed=39)
    assert loose.verdict == "loose", loose.message
    assert loose.upper_bound < 1.0
    assert audit_spec(spec_of("krr", 1), samples=SAMPLES, seed=39).verdict == "pass"


def test_a_randomizer_spending_twice_its_eps_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def leaky(self: PaddingSampling, items: Any, rng: Randomness = system_randomness) -> Payload:
        oracle = make_mechanism(self.oracle.name, self.width, 2 * self.epsilon)
        return oracle.randomize(self.sample(self.check_value(items), rng), rng)

    monkeypatch.setattr(PaddingSampling, "randomize", leaky)
    result = audit_spec(spec_of("oue", 1), samples=SAMPLES, seed=39)
    assert result.verdict == "fail", result.message


def test_deniable_audit_takes_a_set_spec() -> None:
    spec = json.dumps(spec_of("oue").to_dict())
    result = run_cli(
        "audit", "--spec", spec, "--samples", "5000", "--seed", "1", "--format", "json"
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["results"][0]["type"] == "set"
    assert document["results"][0]["verdict"] in ("pass", "loose")


def test_the_js_sdks_set_randomizer_passes_through_its_record_path() -> None:
    """The JS SDK's Client records the audit's sets (lists of names) and passes; unseeded (the
    JS SDK draws only from its CSPRNG), so the bound holds at 1 - 1e-6: a false fail that rare."""
    from deniable.cli.jsreports import js_problem, js_reports

    problem = js_problem()
    if problem is not None:
        pytest.skip(problem)
    result = audit_spec(spec_of("oue"), samples=3000, source=js_reports, confidence=1 - 1e-6)
    assert result.verdict != "fail", result.message
    assert result.type == "set"

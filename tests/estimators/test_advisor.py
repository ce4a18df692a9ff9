"""The advisor's ranking by the worst-case margin and its report sizes (issue 14)."""

from __future__ import annotations

import pytest

from deniable.client.mechanisms import OLH, OUE, make_mechanism
from deniable.client.wire import payload_text
from deniable.estimators import fewest_reports, report_bytes, reports_needed


@pytest.mark.parametrize("k", [3, 5, 10, 11, 20, 100])
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0, 4.0])
def test_fewest_reports_needs_no_more_reports_than_any_other(k: int, epsilon: float) -> None:
    names = ("krr", "oue", "olh")
    pick = fewest_reports(k, epsilon, names)
    needed = {name: reports_needed(k, epsilon, 0.01, mechanism=name) for name in names}
    assert needed[pick] == min(needed.values()), needed


def test_fewest_reports_skips_what_cannot_carry_k() -> None:
    assert fewest_reports(5_000, 9.0, ("krr", "olh")) == "olh"


@pytest.mark.parametrize("name", ["brr", "krr", "oue", "olh"])
@pytest.mark.parametrize("k", [2, 9, 200])
def test_report_bytes_bounds_every_payload(name: str, k: int) -> None:
    """No randomized payload is longer on the wire than the size the plan shows."""
    if name == "brr" and k != 2:
        return
    mechanism = make_mechanism(name, k, 1.0)
    longest = max(len(payload_text(mechanism.randomize(v % k))) for v in range(300))
    assert longest <= report_bytes(mechanism)
    if isinstance(mechanism, OUE | OLH):
        assert report_bytes(mechanism) - longest <= 4

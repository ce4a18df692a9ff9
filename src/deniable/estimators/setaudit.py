"""The auditor's inputs and output events for a set metric (docs/audit.md, docs/STATS.md
section 16).

Inputs are sets of category names: the empty set, one category, the first min(k, L) (a full
padded set with no dummy when k >= L, disjoint from the empty set's padding), the last
category, and when k > L a set of L + 1 (sampled down). Each report is one item of the padded
set through the oracle over k + L items, so the events are the oracle's, read over items:

* krr: {report = item o} for every item some input's padded set holds, across every pair;
* oue: for each ordered pair (a, b), {every bit of pad(a) - pad(b) = 1 and every bit of
  pad(b) - pad(a) = 0}, compared across that pair (for the empty and the full set at k >= L
  its ratio is e^eps: the bound is attained), and each item's bit alone across every pair;
* olh: for each ordered pair (a, b), {y = H(i) for every i in pad(a) - pad(b) and y != H(j)
  for every j in pad(b) - pad(a)}, H from the payload's own a and b, across that pair.

krr's true ratio is 1 + (e^eps - 1)/L (section 16), so at L > 1 an honest set metric through
krr gets the verdict ``loose``: the code spends less privacy than the metric is charged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deniable.client.kinds import SetSpec
from deniable.client.mechanisms import OLH, OLH_PRIME

from .audit import (
    AuditError,
    EventFamily,
    audit_inputs,
    event_family,
    olh_payload_columns,
    ordered_pairs,
    oue_payload_bits,
    payload_ints,
)

if TYPE_CHECKING:
    import numpy as np


@audit_inputs.register
def set_inputs(spec: SetSpec) -> list[tuple[Any, str]]:
    """The sets a set metric's audit draws reports of, each with its text."""
    ps = spec.set_randomizer
    names = list(spec.categories)
    full = names[: min(ps.k, ps.max_items)]
    chosen: list[tuple[str, ...]] = [(), (names[0],), tuple(full), (names[-1],)]
    if ps.k > ps.max_items:
        chosen.append(tuple(names[: ps.max_items + 1]))
    return [(s, set_text(spec, s)) for s in dict.fromkeys(chosen)]


def set_text(spec: SetSpec, value: Any) -> str:
    """A set of category names as the audit writes it, in the metric's order: {a, b}."""
    return "{" + ", ".join(c for c in spec.categories if c in value) + "}"


@event_family.register
def set_events(spec: SetSpec) -> EventFamily:
    """A set metric's events over its inputs (:func:`set_family`)."""
    return set_family(spec, [value for value, _ in set_inputs(spec)])


def set_family(spec: SetSpec, values: list[Any]) -> EventFamily:
    """The output events of a set metric's audit over ``values`` (see the module docstring)."""
    import numpy as np

    ps = spec.set_randomizer
    padded = [set(ps.sample_law(spec.items_of(v))) for v in values]
    every = sorted(set().union(*padded))
    texts = [f"item {spec.categories[i]}" if i < ps.k else f"dummy {i - ps.k}" for i in every]
    if spec.mechanism == "krr":

        def count_krr(payloads: list[Any]) -> np.ndarray:
            items = payload_ints(payloads, 0, ps.width - 1, "krr")
            return np.bincount(items, minlength=ps.width)[every]

        support = (tuple(range(len(values))),) * len(every)
        return EventFamily(tuple(f"report = {t}" for t in texts), count_krr, support)
    pairs = [(a, b) for a, b in ordered_pairs(len(values)) if padded[a] - padded[b]]
    ones = [sorted(padded[a] - padded[b]) for a, b in pairs]
    zeros = [sorted(padded[b] - padded[a]) for a, b in pairs]
    shown = [set_text(spec, v) for v in values]
    names = tuple(
        f"every item padded {shown[a]} holds and padded {shown[b]} lacks supported, none the"
        " other way"
        for a, b in pairs
    )
    if spec.mechanism == "oue":
        n_bytes = (ps.width + 7) // 8

        def count_oue(payloads: list[Any]) -> np.ndarray:
            bits = oue_payload_bits(payloads, n_bytes).astype(bool)
            joint = [
                (bits[:, one].all(axis=1) & ~bits[:, zero].any(axis=1)).sum()
                for one, zero in zip(ones, zeros, strict=True)
            ]
            return np.concatenate([np.array(joint, dtype=np.int64), bits[:, every].sum(axis=0)])

        alone = tuple(f"bit of {t} = 1" for t in texts)
        support = tuple(pairs) + (tuple(range(len(values))),) * len(every)
        return EventFamily(names + alone, count_oue, support)
    oracle = spec.randomizer
    if not isinstance(oracle, OLH):
        raise AuditError(f"a set metric's oracle is krr, oue or olh, not {oracle.name}")
    g = oracle.g

    def count_olh(payloads: list[Any]) -> np.ndarray:
        a, b, y = olh_payload_columns(payloads)
        items = np.arange(ps.width, dtype=np.int64)
        hit = ((a[:, None] * items + b[:, None]) % OLH_PRIME) % g == y[:, None]
        return np.array(
            [
                (hit[:, one].all(axis=1) & ~hit[:, zero].any(axis=1)).sum()
                for one, zero in zip(ones, zeros, strict=True)
            ]
        )

    return EventFamily(names, count_olh, tuple(pairs))

"""The memoized privacy account checked by exact enumeration of the real client path.

Run: ``.venv/bin/python -m bench.memo_enumeration``. For krr/brr metrics with k = 2 and 3, every
history of true values of length T (all k^T of them) is recorded by a real Recorder and Ledger
with the SDK's memoization and its fresh layer, walking every path of the randomness exactly
(testkit/transitions.py). The table gives, per (k, eps, ratio, T), the largest log
likelihood ratio between the reports of any two histories against the account's figure for T
reports (``per_period`` with T reports per period), and the largest between two constant
histories against the permanent eps per value. tests/client/test_memo_layers.py runs the
smaller rows as a test.

A second table puts a lifetime cap on one report a day over T days: the whole output (which
days send, how many, what) of every history, with the reports sent (the same for every
history), the largest log-LR between any two histories, and the account's lifetime and 7-day
figures (tests/client/test_memo_lifetime_exact.py runs these cases as a test); it alone:
``.venv/bin/python -m bench.memo_enumeration lifetime``.
"""

from __future__ import annotations

import itertools
import logging
import math
import sys

from deniable.client import MetricSpec
from deniable.client.account import DeviceSettings, privacy_account
from testkit.transitions import max_log_ratio, outputs_over_days, reports_of_history


def spec_for(k: int, epsilon: float) -> MetricSpec:
    """A boolean (k = 2) or a krr categorical metric."""
    if k == 2:
        return MetricSpec.boolean("m", epsilon=epsilon)
    return MetricSpec.categorical(
        "m", [f"c{i}" for i in range(k)], epsilon=epsilon, mechanism="krr"
    )


def row(k: int, epsilon: float, ratio: float | None, memoize: bool, length: int) -> dict:
    """One table row: the exact largest log-LRs and the account's figures."""
    spec = spec_for(k, epsilon)
    values = [False, True] if k == 2 else list(spec.categories)
    settings = DeviceSettings(length, memoize, None, ratio)
    account = privacy_account([spec], settings).metrics[0]
    histories = list(itertools.product(values, repeat=length))
    reports = {h: reports_of_history(spec, settings, h) for h in histories}
    any_pair = max(max_log_ratio(reports[a], reports[b]) for a in histories for b in histories)
    constant = [tuple([v] * length) for v in values]
    same_values = max(max_log_ratio(reports[a], reports[b]) for a in constant for b in constant)
    return {
        "k": k,
        "eps": epsilon,
        "memo": "off"
        if not memoize
        else ("permanent only" if ratio is None else f"ratio {ratio:g}"),
        "eps_perm": account.permanent_epsilon,
        "eps_inst": account.instantaneous_epsilon,
        "T": length,
        "max_lr": any_pair,
        "account": math.inf if account.per_period is None else account.per_period,
        "max_lr_constant": same_values,
        "per_value": account.permanent_epsilon if memoize else None,
    }


def text(x: float | None) -> str:
    """A figure for the table."""
    return "-" if x is None else "inf" if math.isinf(x) else f"{x:.4f}"


def main() -> None:
    """Print the table."""
    configs = [(2, 1.0, 2.0, True), (2, 0.5, 2.0, True), (2, 1.0, 3.0, True), (3, 1.0, 2.0, True)]
    configs += [(2, 1.0, None, True), (2, 1.0, None, False), (3, 1.0, None, True)]
    header = "k  eps  memo            eps_perm eps_inst T  max log-LR  account    max constant  per value"
    print(header)
    for k, epsilon, ratio, memoize in configs:
        for length in range(1, (5 if k == 2 else 4)):
            r = row(k, epsilon, ratio, memoize, length)
            print(
                f"{r['k']:<2} {r['eps']:<4g} {r['memo']:<15} {text(r['eps_perm']):>8} "
                f"{text(r['eps_inst']):>8} {r['T']:<2} {text(r['max_lr']):>10}  "
                f"{text(r['account']):>8}  {text(r['max_lr_constant']):>12}  {text(r['per_value']):>9}"
            )

    lifetime_table()


def lifetime_row(k: int, ratio: float | None, cap: float, days: int) -> dict:
    """One lifetime-cap row: reports sent, the exact largest log-LR of the whole output, and
    the account's lifetime and 7-day figures."""
    spec = spec_for(k, 1.0)
    values = [False, True] if k == 2 else list(spec.categories)
    settings = DeviceSettings(1, True, cap, ratio)
    account = privacy_account([spec], settings).metrics[0]
    outputs = [
        outputs_over_days(spec, settings, [(v,) for v in history])
        for history in itertools.product(values, repeat=days)
    ]
    sent = {sum(len(day) for day in output) for o in outputs for output in o}
    largest = max(max_log_ratio(a, b) for a in outputs for b in outputs)
    return {
        "sent": sent,
        "max_lr": largest,
        "lifetime": account.lifetime,
        "week": account.per_7_days,
    }


def lifetime_table() -> None:
    """Print the lifetime-cap table."""
    logging.getLogger("deniable.client").setLevel(logging.ERROR)
    print()
    print("k  memo       cap  T  reports sent  max log-LR  lifetime  per_7_days")
    for k, ratio, cap, days in [
        (2, 2.0, 1.0, 4),
        (2, 2.0, 4.0, 4),
        (2, 2.0, 6.0, 4),
        (3, 2.0, 2.99, 4),
        (3, 2.0, 4.0, 3),
        (3, 2.0, 6.0, 3),
        (3, None, 2.0, 3),
    ]:
        r = lifetime_row(k, ratio, cap, days)
        memo = "permanent" if ratio is None else f"ratio {ratio:g}"
        print(
            f"{k:<2} {memo:<10} {cap:<4g} {days:<2} {sorted(r['sent'])!s:>12}  "
            f"{text(r['max_lr']):>10}  {text(r['lifetime']):>8}  {text(r['week']):>10}"
        )


if __name__ == "__main__":
    if sys.argv[1:] == ["lifetime"]:
        lifetime_table()
    else:
        main()

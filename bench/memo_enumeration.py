"""The memoized privacy account checked by exact enumeration of the real client path.

Run: ``.venv/bin/python -m bench.memo_enumeration``. For krr/brr metrics with k = 2 and 3, every
history of true values of length T (all k^T of them) is recorded by a real Recorder and Ledger
with the SDK's memoization and its fresh layer, walking every path of the randomness exactly
(testkit/transitions.py). The table gives, per (k, eps, ratio, T), the largest log
likelihood ratio between the reports of any two histories against the account's figure for T
reports (``per_period`` with T reports per period), and the largest between two constant
histories against the permanent eps per value. tests/client/test_memo_layers.py runs the
smaller rows as a test.
"""

from __future__ import annotations

import itertools
import math

from deniable.client import MetricSpec
from deniable.client.account import DeviceSettings, privacy_account

from testkit.transitions import max_log_ratio, reports_of_history


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


if __name__ == "__main__":
    main()

"""The shuffle accountant's limits, bound names and result type, without numpy.

What the accountant (:mod:`.shuffling`) answers for (batch sizes, the range of delta), the
names of its bounds, and its result, :class:`CentralGuarantee`: the local guarantee of each
report beside the central (eps, delta) of their shuffled batch, typed
(:class:`~deniable.client.guarantees.PureDP` and
:class:`~deniable.client.guarantees.ApproxDP`). Both :mod:`.shuffling` and
:mod:`.shufflingaccount` import it, so neither imports the other for these, and the CLI and the
API can check their input before numpy loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from deniable.client.errors import InvalidInput
from deniable.client.guarantees import ApproxDP, PureDP

DEFAULT_DELTA = 1e-6
"""The delta of a central guarantee unless one is given: below 1/n for every batch size the
shuffler releases in practice, the usual choice in the literature and in §12's table."""

MAX_BATCH = 1_000_000
"""The largest batch the accountant computes for (its work grows as sqrt(n): about 0.25 s of
CPU at this size, krr 0.45 s), and the largest ``shuffle_batch`` asked. A released batch above it is counted
at this size: eps never grows with n, so the figure stays a valid bound (slightly loose)."""

MIN_DELTA = 1e-12
"""The smallest delta asked for: below it the binomial tails sum near float resolution."""

MAX_DELTA = 0.1
"""The largest delta asked for: a guarantee failing with probability above 10% says little."""

Bound = Literal["strong-clone", "krr-pair-clone", "fmt21-numerical", "none"]

BOUND_NAMES: dict[str, str] = {
    "strong-clone": "strong clone (FMT 2023, randomized response)",
    "krr-pair-clone": "k-RR pair-clone bound (the report in the pair or not, then strong clone)",
    "fmt21-numerical": "FMT21 numerical (hiding among the clones, any eps0-LDP randomizer)",
    "none": "no amplification at this batch size: the local eps",
}
"""Each bound's name in words, for tables and statements."""


@dataclass(frozen=True)
class CentralGuarantee:
    """What shuffling ``n`` reports of local eps ``local_epsilon`` guarantees against an
    analyst who sees the released batch: (``epsilon``, ``delta``)-DP, by ``bound``
    (``none``: the bound is no better than the local eps, which then holds)."""

    n: int
    local_epsilon: float
    delta: float
    epsilon: float
    bound: Bound

    @property
    def local(self) -> PureDP:
        """What each report guarantees on its own, against the shuffler: eps0-LDP."""
        return PureDP(self.local_epsilon)

    @property
    def central(self) -> ApproxDP:
        """What the batch guarantees against an analyst who sees it: (eps, delta)-DP."""
        return ApproxDP(self.epsilon, self.delta)

    @property
    def amplified(self) -> bool:
        """Whether the shuffler lowers eps below the local one."""
        return self.bound != "none"


def check_batch(n: int, delta: float) -> None:
    """Refuse a batch size or delta the accountant does not answer for (InvalidInput naming
    the bound)."""
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_BATCH:
        raise InvalidInput(f"batch size n must be a whole number in 1..{MAX_BATCH:,}")
    if not MIN_DELTA <= delta <= MAX_DELTA:
        raise InvalidInput(f"delta must be in [{MIN_DELTA:g}, {MAX_DELTA:g}]")

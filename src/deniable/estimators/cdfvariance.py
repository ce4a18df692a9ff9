"""One report's variance of its support count over the first j buckets, for the CDF band.

STATS.md section 10. A report's z_j is its number of supported buckets among the first j
(the set S = {0..j-1}); the CDF estimate at inner edge j is the debiased mean of z_j. Given the
true bucket x, Var(z_j | x) is the ``within`` variance below; over the population (each
report an iid draw with CDF value F at the edge)

    Var(z_j) = E[Var(z_j | x)] + (p* - q*)^2 F (1 - F)
             <= F V_in(j) + (1 - F) V_out(j) + (p* - q*)^2 F (1 - F),

with V_in(j) and V_out(j) the largest Var(z_j | x) over x in S and over x outside S. That
bound holds whatever the shares inside and outside S, so the band needs only F.

* ``oue``: given x the bits are independent, so Var(z_j | x) = j q(1 - q) + [x in S]
  (p(1 - p) - q(1 - q)), the same for every x on each side: the bound is exact.
* ``olh``: the wire hash H(v) = ((a v + b) mod P) mod g on the bucket indices behaves, up to
  O(k g / P), as H(v) = floor(g frac(U + phi v)) with U, phi independent uniforms (a rotation):
  pairwise independent but not 3-wise. Two buckets x + d1, x + d2 other than the true x
  share x's hash value with probability t(d1, d2) = 1/g^2 + ex(d1, d2), where, with
  (a1, a2) = (d1, d2)/gcd(d1, d2) and X = (a1 - a2, a2, -a1) (a Fourier sum over the
  lattice of the rotation, closed by the Bernoulli polynomial B3),

      ex(d1, d2) = -g / (3 X1 X2 X3) * sum_X B3((X mod g) / g),

  and Var(z_j | x) = [the oue-shaped value with olh's p, q] + (p - q_o) sum ex(d1, d2) over
  ordered pairs d1 != d2 of offsets v - x, v in S, v != x (q_o = (1 - p)/(g - 1)). The
  formula matches a simulation of the wire hash (tests/estimators/test_cdf_variance.py).
  For k above :data:`OLH_EXACT_MAX_K` the pairwise table would cost too much, and the
  Minkowski bound SD(z | x) <= sqrt(p(1 - p)) + j sqrt(q(1 - q)), valid under any
  correlation, is used instead (wider, never narrower).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from deniable.client.errors import InvalidInput
from deniable.client.mechanisms import OLH, OUE, Mechanism

OLH_EXACT_MAX_K = 512
"""The most buckets for which olh's within variance is computed exactly (a (2k - 1)^2 table);
above it, the Minkowski bound."""


def within_variances(mechanism: Mechanism) -> tuple[np.ndarray, np.ndarray]:
    """(V_in, V_out) at the k - 1 inner edges: the largest Var(z_j | x) over x in the first j
    buckets and over x outside them (read-only arrays, cached per mechanism's parameters)."""
    if isinstance(mechanism, OUE):
        return _oue_within(mechanism.k, mechanism.p, mechanism.q)
    if isinstance(mechanism, OLH):
        if mechanism.k > OLH_EXACT_MAX_K:
            return _minkowski_within(mechanism.k, mechanism.p, mechanism.q)
        return _olh_within(mechanism.k, mechanism.g, mechanism.p)
    raise InvalidInput(f"no CDF variance for mechanism {mechanism.name!r}")


def variance_coefficients(mechanism: Mechanism) -> tuple[np.ndarray, np.ndarray, float]:
    """(a, b, c) with Var(z_j) <= a_j + b_j F - c F^2 at CDF value F (the bound above)."""
    inside, outside = within_variances(mechanism)
    c = (mechanism.p_star - mechanism.q_star) ** 2
    return outside, inside - outside + c, c


@lru_cache(maxsize=32)
def _oue_within(k: int, p: float, q: float) -> tuple[np.ndarray, np.ndarray]:
    j = np.arange(1, k, dtype=np.float64)
    outside = j * q * (1 - q)
    return _frozen(outside + p * (1 - p) - q * (1 - q)), _frozen(outside)


@lru_cache(maxsize=32)
def _minkowski_within(k: int, p: float, q: float) -> tuple[np.ndarray, np.ndarray]:
    j = np.arange(1, k, dtype=np.float64)
    inside = (np.sqrt(p * (1 - p)) + (j - 1) * np.sqrt(q * (1 - q))) ** 2
    return _frozen(inside), _frozen(j**2 * q * (1 - q))


def _bernoulli3(u: np.ndarray) -> np.ndarray:
    return u * (u - 0.5) * (u - 1.0)


def triple_excess(g: int, k: int) -> np.ndarray:
    """ex(d1, d2) for offsets d1, d2 in -(k - 1)..k - 1 (index d + k - 1), 0 where d1 = d2 or
    either is 0: the excess over 1/g^2 of P(H(x + d1) = H(x + d2) = H(x)) under the rotation."""
    d = np.arange(-(k - 1), k, dtype=np.int64)
    d1, d2 = d[:, None], d[None, :]
    valid = (d1 != 0) & (d2 != 0) & (d1 != d2)
    common = np.gcd(d1, d2)
    common[~valid] = 1
    a1, a2 = d1 // common, d2 // common
    parts = (a1 - a2, a2, -a1)
    total = sum(_bernoulli3(np.mod(x, g) / g) for x in parts)
    product = parts[0] * parts[1] * parts[2]
    product[~valid] = 1
    return np.where(valid, -g * total / (3.0 * product), 0.0)


def olh_within_matrix(k: int, g: int, p: float) -> np.ndarray:
    """Var(z_j | x) for olh, shape (k, k - 1): row x (the true bucket), column j - 1."""
    q, q_other = 1.0 / g, (1.0 - p) / (g - 1)
    table = np.zeros((2 * k, 2 * k))
    table[1:, 1:] = np.cumsum(np.cumsum(triple_excess(g, k), axis=0), axis=1)
    x = np.arange(k)[:, None]
    j = np.arange(1, k)[None, :]
    low, high = k - 1 - x, k - 1 + j - x  # the window of offsets -x..j-1-x, half-open
    pairs = table[high, high] - table[low, high] - table[high, low] + table[low, low]
    inside = x < j
    return j * q * (1 - q) + inside * (p * (1 - p) - q * (1 - q)) + (p - q_other) * pairs


@lru_cache(maxsize=32)
def _olh_within(k: int, g: int, p: float) -> tuple[np.ndarray, np.ndarray]:
    within = olh_within_matrix(k, g, p)
    inside = np.arange(k)[:, None] < np.arange(1, k)[None, :]
    v_in = np.where(inside, within, -np.inf).max(axis=0)
    v_out = np.where(inside, -np.inf, within).max(axis=0)
    return _frozen(v_in), _frozen(v_out)


def _frozen(array: np.ndarray) -> np.ndarray:
    array = np.asarray(array, dtype=np.float64)
    array.setflags(write=False)
    return array

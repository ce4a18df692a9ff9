"""The choices every estimate offers, and their check: the method and the pooling of periods.

They live apart from the numerical code (standard library only) because the CLI lists them in
its options and the API in its parameters: one definition, importable without numpy.
"""

from __future__ import annotations

from typing import Literal, get_args

from deniable.client.errors import InvalidInput

Method = Literal["unbiased", "consistent", "mle"]
"""How the point estimate is made: unbiased, Norm-Sub projected, or maximum likelihood."""
METHODS: tuple[str, ...] = get_args(Method)
"""Every :data:`Method`, in the order the CLI and the API list them."""

Pooling = Literal["overlap-safe", "independent"]
"""How periods combine: an interval valid whatever the overlap of clients, or independent periods."""
POOLINGS: tuple[str, ...] = get_args(Pooling)
"""Every :data:`Pooling`, the default first."""


def check_options(confidence: float, method: str, pooling: str) -> float:
    """Validate the options shared by every estimate; return the confidence as a float."""
    if isinstance(confidence, bool) or not isinstance(confidence, int | float):
        raise InvalidInput("confidence must be a number in (0, 1)")
    if not 0.0 < float(confidence) < 1.0:
        raise InvalidInput("confidence must be strictly between 0 and 1")
    if method not in METHODS:
        raise InvalidInput(f"unknown method {method!r}: choose one of {', '.join(METHODS)}")
    if pooling not in POOLINGS:
        raise InvalidInput(f"unknown pooling {pooling!r}: choose one of {', '.join(POOLINGS)}")
    return float(confidence)

"""A fast, seeded randomness source for mechanisms, for tests and benches that need many
payloads quickly (``random.Random``: never for a device, whose source must be a CSPRNG)."""

from __future__ import annotations

import random


class FastRandomness:
    """What a mechanism's ``randomize`` draws from, backed by ``random.Random(seed)``."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)
        self.random = self._rng.random
        self.randbelow = self._rng.randrange

    def token_bytes(self, n: int) -> bytes:
        """``n`` pseudo-random bytes."""
        return self._rng.randbytes(n)

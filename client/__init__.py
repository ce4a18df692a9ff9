"""deniable's client SDK: randomize values on the device, then deliver only the randomized reports.

Depends on the standard library and httpx only, so apps can embed it.
"""

from .aio import AsyncClient
from .ledger import PrivacySpent
from .mechanisms import BRR, KRR, MECHANISMS, OLH, OUE, Mechanism, least_variance, make_mechanism
from .outbox import StateDirInUseError
from .randomness import Randomness, SeededRandomness, SystemRandomness
from .sdk import Client, ClientStats
from .spec import MetricSpec, period_label, period_range

__all__ = [
    "BRR",
    "KRR",
    "MECHANISMS",
    "OLH",
    "OUE",
    "AsyncClient",
    "Client",
    "ClientStats",
    "Mechanism",
    "MetricSpec",
    "PrivacySpent",
    "Randomness",
    "SeededRandomness",
    "StateDirInUseError",
    "SystemRandomness",
    "least_variance",
    "make_mechanism",
    "period_label",
    "period_range",
]

"""deniable's client SDK: randomize values on the device, then deliver only the randomized reports.

Depends on the standard library and httpx only, so apps can embed it.
"""

from .aio import AsyncClient
from .errors import (
    BudgetExceeded,
    CollectorRefused,
    CollectorUnavailable,
    DeniableError,
    InvalidInput,
    SpecError,
    StorageUnavailable,
)
from .ledger import PrivacySpent
from .mechanisms import BRR, KRR, MECHANISMS, OLH, OUE, Mechanism, least_variance, make_mechanism
from .outbox import StateDirInUseError
from .randomness import Randomness, SeededRandomness, SystemRandomness
from .sdk import Client
from .spec import MetricSpec, period_label, period_range
from .stats import ClientStats

__all__ = [
    "BRR",
    "KRR",
    "MECHANISMS",
    "OLH",
    "OUE",
    "AsyncClient",
    "BudgetExceeded",
    "Client",
    "ClientStats",
    "CollectorRefused",
    "CollectorUnavailable",
    "DeniableError",
    "InvalidInput",
    "Mechanism",
    "MetricSpec",
    "PrivacySpent",
    "Randomness",
    "SeededRandomness",
    "SpecError",
    "StateDirInUseError",
    "StorageUnavailable",
    "SystemRandomness",
    "least_variance",
    "make_mechanism",
    "period_label",
    "period_range",
]

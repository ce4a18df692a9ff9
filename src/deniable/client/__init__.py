"""deniable's client SDK: randomize values on the device, then deliver only the randomized reports.

Depends on the standard library and httpx only, so apps can embed it.

Apps use what this root exports (``__all__``). The server side (estimators, collector, CLI)
also uses seven public modules: :mod:`.errors` (the ``DeniableError`` family), :mod:`.spec`
(specs, fingerprints, period labels), :mod:`.mechanisms` (the randomizers), :mod:`.wire` (the
wire format both sides share), :mod:`.account` (the privacy account), :mod:`.sampling` (many
reports through the record() path, for the auditor) and :mod:`.lazy` (package roots that import
slow modules on first use). Every other module is the client's own.
"""

from .account import (
    SDK_DEFAULTS,
    WARNING_LEVEL_30_DAYS,
    AccountTotals,
    DeviceSettings,
    EventMetricAccount,
    MetricAccount,
    PrivacyAccount,
    max_periods_touched,
    privacy_account,
)
from .aio import AsyncClient
from .calendar import period_label, period_range, resolve_period
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
from .mechanisms import (
    BRR,
    KRR,
    MECHANISMS,
    NUMERIC_MECHANISMS,
    OLH,
    OUE,
    Duchi,
    Hybrid,
    Mechanism,
    NumericMechanism,
    Payload,
    Piecewise,
    least_variance,
    least_worst_case_variance,
    make_mechanism,
    make_numeric_mechanism,
)
from .outbox import StateDirInUseError
from .randomness import Randomness, SeededRandomness, SystemRandomness, system_randomness
from .sdk import Client
from .spec import MetricSpec
from .stats import ClientStats

__all__ = [
    "BRR",
    "KRR",
    "MECHANISMS",
    "NUMERIC_MECHANISMS",
    "OLH",
    "OUE",
    "SDK_DEFAULTS",
    "WARNING_LEVEL_30_DAYS",
    "AccountTotals",
    "AsyncClient",
    "BudgetExceeded",
    "Client",
    "ClientStats",
    "CollectorRefused",
    "CollectorUnavailable",
    "DeniableError",
    "DeviceSettings",
    "Duchi",
    "EventMetricAccount",
    "Hybrid",
    "InvalidInput",
    "Mechanism",
    "MetricAccount",
    "MetricSpec",
    "NumericMechanism",
    "Payload",
    "Piecewise",
    "PrivacyAccount",
    "PrivacySpent",
    "Randomness",
    "SeededRandomness",
    "SpecError",
    "StateDirInUseError",
    "StorageUnavailable",
    "SystemRandomness",
    "least_variance",
    "least_worst_case_variance",
    "make_mechanism",
    "make_numeric_mechanism",
    "max_periods_touched",
    "period_label",
    "period_range",
    "privacy_account",
    "resolve_period",
    "system_randomness",
]

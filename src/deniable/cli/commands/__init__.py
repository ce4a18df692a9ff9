"""The ``deniable`` subcommands, one module each; the helpers they share live in ``deniable.cli``."""

from .audit import audit
from .dashboard import dashboard
from .demo import demo
from .estimate import estimate, series
from .export import export
from .keys import keys
from .metrics import metrics
from .migrate import migrate
from .plan import plan
from .privacy import privacy
from .retention import retention
from .serve import serve
from .shuffle import shuffle
from .simulate import simulate

COMMANDS = (
    serve,
    migrate,
    metrics,
    estimate,
    series,
    plan,
    privacy,
    simulate,
    demo,
    dashboard,
    export,
    retention,
    audit,
    keys,
    shuffle,
)
"""Every subcommand of the ``deniable`` group."""

__all__ = [
    "COMMANDS",
    "audit",
    "dashboard",
    "demo",
    "estimate",
    "export",
    "keys",
    "metrics",
    "migrate",
    "plan",
    "privacy",
    "retention",
    "series",
    "serve",
    "shuffle",
    "simulate",
]

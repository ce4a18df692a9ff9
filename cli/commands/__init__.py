"""The ``deniable`` subcommands, one module each; the helpers they share live in ``deniable.cli``."""

from .audit import audit
from .dashboard import dashboard
from .demo import demo
from .estimate import estimate, series
from .export import export
from .metrics import metrics
from .migrate import migrate
from .plan import plan
from .privacy import privacy
from .retention import retention
from .serve import serve
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
)
"""Every subcommand of the ``deniable`` group."""

__all__ = [
    "COMMANDS",
    "audit",
    "dashboard",
    "demo",
    "estimate",
    "export",
    "metrics",
    "migrate",
    "plan",
    "privacy",
    "retention",
    "series",
    "serve",
    "simulate",
]

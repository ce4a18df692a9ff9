"""The ``deniable`` subcommands, one module each; the helpers they share live in ``deniable.cli``."""

from .audit import audit
from .dashboard import dashboard
from .demo import demo
from .estimate import estimate, series
from .export import export
from .metrics import metrics
from .migrate import migrate
from .plan import plan
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
    "retention",
    "series",
    "serve",
    "simulate",
]

"""The shuffler (``deniable shuffle``): takes sealed reports from devices, forgets who sent them
and when, and releases them to the collector only in whole batches of at least ``min_batch``
devices, each in a uniformly random order (docs/DESIGN.md, "Shuffler")."""

from .app import create_app
from .settings import ShufflerSettings

__all__ = ["ShufflerSettings", "create_app"]

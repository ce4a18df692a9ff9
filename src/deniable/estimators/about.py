"""What a metric's registration says of it beside its spec, carried by every document of it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class MetricAbout:
    """What a metric's registration says of it beside its spec: the ``unit`` of its values
    (numeric and histogram metrics: ms, KB, °C), a ``description`` of what it measures and its
    ``owner``; each null if not given.

    Never part of the spec or its fingerprint (DESIGN.md, "Metric descriptions"): it changes
    nothing of what devices send, so describing a metric again leaves its pinned specs valid.
    Every document of one metric carries it (null offline, where no registration is known).
    """

    unit: str | None = field(default=None, kw_only=True)
    description: str | None = field(default=None, kw_only=True)
    owner: str | None = field(default=None, kw_only=True)

    def as_dict(self) -> dict[str, str | None]:
        """The three fields by name, for a document or an answer."""
        return {"unit": self.unit, "description": self.description, "owner": self.owner}

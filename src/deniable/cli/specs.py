"""The SDK's MetricSpec from a spec as the collector serves it, checked against its fingerprint."""

from __future__ import annotations

from typing import Any

from deniable.client.errors import SpecError
from deniable.client.spec import MetricSpec, registered_specs


def spec_from_served(raw: Any) -> MetricSpec:
    """A :class:`~deniable.client.spec.MetricSpec` from served JSON (null fields count as
    absent); raises :class:`SpecError` for an invalid spec or one that does not match the
    fingerprint served with it."""
    try:
        with registered_specs():  # a registered spec, as the collector reads it
            spec = MetricSpec.from_dict(raw)
    except (ValueError, TypeError) as exc:
        raise SpecError(f"the metric spec is not valid: {exc}") from None
    served = raw.get("fingerprint")
    if served is not None and served != spec.fingerprint:
        raise SpecError(
            f"metric {spec.name}: fingerprint {served} does not match its spec"
            f" ({spec.fingerprint}); refusing to use it"
        )
    return spec

"""The SDK's MetricSpec from a spec as the collector serves it, checked against its fingerprint.

The collector serves ``"categories": null`` for boolean metrics; ``MetricSpec.from_dict``
expects the key to be absent, so null fields are dropped first.
"""

from __future__ import annotations

from typing import Any

from .errors import CliError


def spec_from_served(raw: Any) -> Any:
    """A :class:`~deniable.client.spec.MetricSpec` from served JSON; refuses a fingerprint mismatch."""
    from deniable.client.spec import MetricSpec

    if not isinstance(raw, dict):
        raise CliError("a metric spec must be a JSON object")
    try:
        spec = MetricSpec.from_dict({k: v for k, v in raw.items() if v is not None})
    except (ValueError, TypeError) as exc:
        raise CliError(f"the metric spec is not valid: {exc}") from None
    served = raw.get("fingerprint")
    if served is not None and served != spec.fingerprint:
        raise CliError(
            f"metric {spec.name}: fingerprint {served} does not match its spec"
            f" ({spec.fingerprint}); refusing to use it"
        )
    return spec

"""``POST /v1/sealed``: a device's sealed reports, validated whole, stored durably, then 202.

The body is ``{"device": pseudonym, "envelopes": [...]}``; each envelope's header is checked
(structure only: the shuffler knows no spec and opens nothing). A refusal names each bad
envelope as the collector names bad reports (``{"detail": [{"index", "reason"}]}``), so the
SDK drops exactly those and resends the rest. Nothing of a refused upload is stored.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from deniable.client.mechanisms import MAX_EPSILON, MIN_EPSILON
from deniable.client.spec import METRIC_NAME

from .store import BatchKey, Incoming

HEX32 = re.compile(r"[0-9a-f]{32}")
HEX16 = re.compile(r"[0-9a-f]{16}")
BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
MECHANISM = re.compile(r"[a-z]{2,16}")
MAX_SEALED_CHARS = 8192
"""The longest ``sealed`` field (base64), as the collector reads it."""
ENVELOPE_FIELDS = {"id", "metric", "mechanism", "epsilon", "fingerprint", "key", "sealed"}
BODY_SHAPE = 'body must be an object {"device": "<32 hex>", "envelopes": [...]}'


class UploadRefused(Exception):
    """An upload refused as a whole or in part: HTTP status and detail."""

    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(str(detail))
        self.status = status
        self.detail = detail


def _problem(item: Any) -> str | None:
    """Why one envelope is not acceptable, or None."""
    if type(item) is not dict:
        return "each envelope must be a JSON object"
    if item.keys() != ENVELOPE_FIELDS:
        missing = sorted(ENVELOPE_FIELDS - item.keys())
        extra = sorted(item.keys() - ENVELOPE_FIELDS)
        return f"envelope fields: missing {missing}, unexpected {extra}"[:200]
    checks = (
        ("id", HEX32, "32 lowercase hex digits"),
        ("metric", METRIC_NAME, "a metric name"),
        ("mechanism", MECHANISM, "a mechanism name"),
        ("fingerprint", HEX16, "16 lowercase hex digits"),
        ("key", HEX16, "16 lowercase hex digits"),
    )
    for name, pattern, what in checks:
        if not (type(item[name]) is str and pattern.fullmatch(item[name])):
            return f"{name} must be {what}"
    epsilon = item["epsilon"]
    if type(epsilon) not in (int, float) or not MIN_EPSILON <= epsilon <= MAX_EPSILON:
        return f"epsilon must be a number in [{MIN_EPSILON:g}, {MAX_EPSILON:g}]"
    sealed = item["sealed"]
    if not (type(sealed) is str and len(sealed) <= MAX_SEALED_CHARS and BASE64.fullmatch(sealed)):
        return f"sealed must be standard base64 of at most {MAX_SEALED_CHARS} characters"
    return None


def parse_upload(body: bytes, max_upload: int) -> tuple[str, list[Incoming]]:
    """The device pseudonym and the envelopes of an upload; :class:`UploadRefused` 400 for bad
    JSON, 413 past ``max_upload`` envelopes, 422 naming the bad ones."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:  # what orjson refuses and json takes (NaN, huge ints)
        try:
            document = json.loads(body)
        except (ValueError, RecursionError):
            raise UploadRefused(400, "request body is not valid JSON") from None
    if not (
        type(document) is dict
        and document.keys() == {"device", "envelopes"}
        and type(document["envelopes"]) is list
    ):
        raise UploadRefused(422, [{"index": None, "reason": BODY_SHAPE}])
    device, items = document["device"], document["envelopes"]
    if not (type(device) is str and HEX32.fullmatch(device)):
        raise UploadRefused(
            422, [{"index": None, "reason": "device must be 32 lowercase hex digits"}]
        )
    if len(items) > max_upload:
        raise UploadRefused(
            413, f"an upload holds at most {max_upload} envelopes (DENIABLE_SHUFFLER_MAX_UPLOAD)"
        )
    problems = [
        {"index": index, "reason": reason}
        for index, item in enumerate(items)
        if (reason := _problem(item)) is not None
    ]
    if problems:
        raise UploadRefused(422, problems)
    return device, [
        Incoming(
            item["id"],
            BatchKey(
                item["metric"],
                item["mechanism"],
                float(item["epsilon"]),
                item["fingerprint"],
                item["key"],
            ),
            item["key"],
            item["sealed"],
        )
        for item in items
    ]

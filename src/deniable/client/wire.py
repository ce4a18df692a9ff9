"""The wire format, in one place for both sides: a payload's text, a report's JSON, a batch's body.

A report travels as the JSON object ``{"id": ..., "metric": ..., "fingerprint": ...,
"period": ..., "payload": ...}`` (keys in that order, no spaces), followed by
``"dims": {"platform": "ios", ...}`` for a metric with dimensions: each of its dimensions'
value, **in the clear** (not randomized; a listed value or ``other``). A batch travels as
``{"reports": [report, ...]}`` posted to :data:`REPORTS_PATH`. A payload has one text
everywhere: the canonical JSON (sorted keys, no spaces) the device sends, keeps in its memo
and the collector stores, so a payload written by either side reads back the same.

The device encodes each report once, when it commits it to its outbox, and keeps reports as
these texts joined by commas; uploading then only wraps stored text in a batch body. The
collector parses bodies with its own schema (its validation fast paths stay there) and encodes
the payloads it stores with :func:`payload_text`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable

from .mechanisms import Payload

REPORTS_PATH = "/v1/reports"
"""Where a device posts batches of reports."""
METRICS_PATH = "/v1/metrics"
"""Where a device fetches the metric specs a collector serves."""

_REPORT_START = '{"id":'
_encode_string = json.encoder.encode_basestring_ascii
"""A string's JSON text, exactly as ``json.dumps`` writes it (its C encoder, called directly)."""


def payload_text(payload: Payload) -> str:
    """The canonical JSON text of a payload (an index, a base64 string, an OLH object, or a
    numeric metric's number): sorted keys, no spaces.

    A number is written as Python's ``repr``, the shortest text that reads back as the same
    float, so a payload kept in the outbox or the memo is restored bit for bit; NaN and the
    infinities have no JSON text and raise ``ValueError``. An OLH object of three integers and
    a text object (a string ``"b"``, integers ``"l"`` and ``"r"``) are written directly, keys
    in sorted order whatever their order in the object, as the device writes each once per
    report and the collector once per stored report; anything else goes through ``json``.
    """
    kind = type(payload)  # exact types: a bool is not a number here
    if kind is int:
        return str(payload)
    if kind is str:
        return _encode_string(payload)
    # Past ``kind is X`` each isinstance is true; it narrows the payload for the type checker.
    if kind is float and isinstance(payload, float):
        if not math.isfinite(payload):
            raise ValueError("a payload must be a finite number")
        return repr(payload)
    if kind is dict and isinstance(payload, dict) and len(payload) == 3:
        a, b, y = payload.get("a"), payload.get("b"), payload.get("y")
        if type(a) is int and type(b) is int and type(y) is int:
            return f'{{"a":{a},"b":{b},"y":{y}}}'
        level, row = payload.get("l"), payload.get("r")
        if type(b) is str and type(level) is int and type(row) is int:
            return f'{{"b":{_encode_string(b)},"l":{level},"r":{row}}}'
    return json.dumps(payload, separators=(",", ":"), sort_keys=True)


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def parse_payload_text(text: str) -> Payload:
    """The payload a :func:`payload_text` holds (NaN and the infinities are refused)."""
    payload: Payload = json.loads(text, parse_constant=_no_constant)
    return payload


def dims_text(dims: dict[str, str]) -> str:
    """The ``"dims"`` member of a report of a metric with dimensions (``""`` without any):
    the dimension values as canonical JSON, keys sorted, made once per context change."""
    if not dims:
        return ""
    return ',"dims":' + json.dumps(dims, separators=(",", ":"), sort_keys=True)


def report_text(
    report_id: str,
    metric: str,
    fingerprint: str,
    period: str,
    payload: Payload,
    dims: str = "",
) -> str:
    """A report as its wire JSON object; ``dims`` is its :func:`dims_text` (``""``: none).

    The id (a UUID), the metric name, the fingerprint (hex) and the period label are checked
    ASCII with nothing JSON escapes, so they go in as they are: this runs once per report.
    """
    return (
        f'{{"id":"{report_id}","metric":"{metric}","fingerprint":"{fingerprint}",'
        f'"period":"{period}","payload":{payload_text(payload)}{dims}}}'
    )


def join_reports(texts: Iterable[str]) -> str:
    """Report texts as one run (how the device stores a chunk of reports)."""
    return ",".join(texts)


def split_reports(joined: str) -> list[str]:
    """The report texts of a run made by :func:`join_reports`, in order."""
    head, *rest = joined.split("," + _REPORT_START)
    return [head, *(_REPORT_START + text for text in rest)]


def batch_body(runs: Iterable[str]) -> bytes:
    """The ``POST /v1/reports`` body holding runs of report texts (see :func:`join_reports`)."""
    return f'{{"reports":[{join_reports(runs)}]}}'.encode()

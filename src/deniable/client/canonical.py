"""RFC 8785 canonical JSON, the text a spec's fingerprint is computed over.

Both SDKs hash the same bytes, so numbers are written as ECMAScript writes them (``100``,
not ``100.0``; ``1e-7``, not ``1e-07``) and object keys are sorted by their UTF-16 code units.
"""

from __future__ import annotations

import json
import math
from typing import Any


def es_number(x: float) -> str:
    """Serialize a finite float as ECMAScript's Number.prototype.toString (RFC 8785 numbers)."""
    if x == 0:
        return "0"
    if x < 0:
        return "-" + es_number(-x)
    digits, exponent = repr(x).lower().split("e") if "e" in repr(x) else (repr(x), "0")
    mantissa_digits = digits.replace(".", "")
    point = digits.index(".") if "." in digits else len(digits)
    stripped = mantissa_digits.lstrip("0")
    point -= len(mantissa_digits) - len(stripped)
    s = stripped.rstrip("0") or "0"
    n = point + int(exponent)
    k = len(s)
    if k <= n <= 21:
        return s + "0" * (n - k)
    if 0 < n <= 21:
        return s[:n] + "." + s[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + s
    sign = "+" if n - 1 >= 0 else "-"
    mantissa = s[0] + ("." + s[1:] if k > 1 else "")
    return f"{mantissa}e{sign}{abs(n - 1)}"


def canonical_json(value: Any) -> str:
    """RFC 8785 canonical JSON for the values a spec holds (strings, numbers, lists, objects)."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("canonical JSON has no NaN or infinity")
        return es_number(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ",".join(canonical_json(v) for v in value) + "]"
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: kv[0].encode("utf-16-be"))
        return "{" + ",".join(f"{canonical_json(k)}:{canonical_json(v)}" for k, v in items) + "}"
    raise TypeError(f"cannot canonicalize {type(value).__name__}")


def number_text(x: float) -> str:
    """A bound or edge as people write it: 100, not 100.0."""
    return es_number(x)

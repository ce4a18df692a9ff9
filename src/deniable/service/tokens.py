"""Bearer tokens as settings: read from a mounted secret file, and refused when unfit.

Both servers read their tokens through :func:`read_token_file` and check them with
:func:`token_problem`, so a secret file or a weak token is handled alike by each. Standard
library only: settings load without the server.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

MIN_TOKEN_LENGTH = 16
"""The shortest admin token or ingest key accepted: 16 random characters resist guessing."""

MIN_DISTINCT_CHARACTERS = 5
"""Fewer distinct characters means a repeated pattern (``abababab...``), never a generated
token: 16 random hex characters have fewer than 5 distinct with probability 4e-7."""

PLACEHOLDER_TOKENS = (
    "changeme",
    "replaceme",
    "placeholder",
    "example",
    "yourtoken",
    "tokenhere",
    "keyhere",
    "password",
    "passwd",
    "letmein",
    "qwerty",
)
"""Words that mark a token copied from documentation rather than generated (compared with
the token's letters and digits only, lowercased, so ``Change_Me`` counts too)."""

TEMPLATE_MARKS = (("<", ">"), ("{", "}"), ("${", "}"), ("%", "%"), ("[", "]"))
"""Openings and closings of a template placeholder left unfilled (``<your-admin-token>``)."""

_WORDS = re.compile(r"[A-Za-z0-9_.-]+")
"""What a template placeholder holds between its marks: words joined by ``-``, ``_`` or ``.``."""


def read_token_file(path: str | Path) -> str:
    """The token held in the file at ``path``: its text without the line ending editors and
    ``echo`` leave (a trailing ``\\n``, then a trailing ``\\r``, so ``\\r\\n`` too). Raises
    ``OSError`` or ``UnicodeDecodeError`` when the file is not readable UTF-8 text."""
    text = Path(path).read_text(encoding="utf-8")
    return text.removesuffix("\n").removesuffix("\r")


def token_problem(token: str) -> str | None:
    """Why ``token`` is unfit as a bearer secret, or None; the answer never quotes the token."""
    generate = "generate one, e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`"
    if token != token.strip():
        return "has leading or trailing whitespace (a copy-paste slip?): remove it"
    if not all("!" <= c <= "~" for c in token):
        return (
            "holds whitespace, a control or a non-ASCII character (a copy-paste slip?):"
            " a token is printable ASCII only"
        )
    if len(token) < MIN_TOKEN_LENGTH:
        return f"is shorter than {MIN_TOKEN_LENGTH} characters: {generate}"
    letters = "".join(c for c in token.lower() if c.isalnum())
    unfilled = any(
        token.startswith(a) and token.endswith(b) and _WORDS.fullmatch(token[len(a) : -len(b)])
        for a, b in TEMPLATE_MARKS
    )
    if unfilled or any(mark in letters for mark in PLACEHOLDER_TOKENS):
        return "is a placeholder from an example: generate a random one"
    if len(set(token)) < MIN_DISTINCT_CHARACTERS or _sequence(token):
        return (
            f"repeats a few characters or runs through a sequence, like a placeholder: {generate}"
        )
    return None


def _sequence(token: str) -> bool:
    """Whether at least 3 in 4 neighbouring characters are consecutive (``abcdef...``,
    ``987654...``): 16 random hex characters are with probability about 1e-8."""
    steps = [abs(ord(b) - ord(a)) == 1 for a, b in itertools.pairwise(token)]
    return sum(steps) * 4 >= 3 * len(steps)

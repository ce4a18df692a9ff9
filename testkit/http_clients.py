"""httpx clients of the collectors the tests start."""

from __future__ import annotations

import httpx


def authorized_client(
    url: str, token: str | None = None, headers: dict[str, str] | None = None
) -> httpx.Client:
    """An httpx client of the server at ``url``, with a bearer token if given (no proxies)."""
    headers = dict(headers or {})
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.Client(base_url=url, headers=headers, timeout=30, trust_env=False)

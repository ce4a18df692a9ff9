"""A small client for the collector's HTTP API, turning every failure into one clear sentence.

The CLI talks to a collector only through this module, so an unreachable host, a refused
token, an unknown metric or a rejected parameter each read the same way in every command.
"""

from __future__ import annotations

from typing import Any

import httpx

from deniable.client.errors import CollectorRefused, CollectorUnavailable, InvalidInput
from deniable.collector import DEFAULT_HOST, DEFAULT_PORT

DEFAULT_COLLECTOR_URL = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"
"""Where the CLI looks for a collector when neither --collector nor DENIABLE_COLLECTOR_URL is set."""


def _detail(response: httpx.Response) -> str:
    """The collector's explanation of a refusal, flattened to one line."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:300] or response.reason_phrase
    detail = body.get("detail", body) if isinstance(body, dict) else body
    if isinstance(detail, list):
        parts = []
        for item in detail:
            if isinstance(item, dict):
                loc = ".".join(str(x) for x in item.get("loc", ()) if x not in ("query", "body"))
                msg = item.get("msg", "")
                parts.append(f"{loc}: {msg}" if loc else str(msg))
            else:
                parts.append(str(item))
        return "; ".join(parts)
    if isinstance(detail, dict):
        return str(detail.get("message") or detail)
    return str(detail)


class MissingEndpoint(CollectorRefused):
    """The collector answered 404 for the route itself: it does not offer this call."""


class CollectorAPI:
    """The collector's HTTP API at ``base_url``, with an optional admin token."""

    def __init__(self, base_url: str, token: str | None = None, *, timeout: float = 30.0) -> None:
        """Open a connection pool to ``base_url``; :class:`InvalidInput` for a malformed URL."""
        self.base_url = base_url.rstrip("/")
        self.token = token or None
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)
        except (httpx.InvalidURL, ValueError) as exc:
            raise InvalidInput(f"invalid collector URL {base_url!r}: {exc}") from None

    def close(self) -> None:
        """Release the connection pool."""
        self._http.close()

    def __enter__(self) -> CollectorAPI:
        """The API, closed when the block ends."""
        return self

    def __exit__(self, *_: object) -> None:
        """Close the connection pool."""
        self.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
        metric: str | None = None,
    ) -> httpx.Response:
        """Send one request; on any failure raise :class:`CollectorUnavailable` (unreachable,
        5xx) or :class:`CollectorRefused` (4xx) with a clear sentence."""
        clean = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            response = self._http.request(method, path, params=clean, json=json)
        except httpx.TimeoutException:
            raise CollectorUnavailable(
                f"the collector at {self.base_url} did not answer in time"
            ) from None
        except (httpx.TransportError, httpx.InvalidURL) as exc:
            reason = str(exc) or type(exc).__name__
            raise CollectorUnavailable(
                f"cannot reach the collector at {self.base_url} ({reason}); start one with"
                " `deniable serve` or point --collector / DENIABLE_COLLECTOR_URL at it"
            ) from None
        if response.is_success:
            return response
        raise self._refusal(response, metric)

    def _refusal(
        self, response: httpx.Response, metric: str | None
    ) -> CollectorRefused | CollectorUnavailable:
        """The error naming why the collector did not answer ``response``'s request."""
        status, detail = response.status_code, _detail(response)
        if status >= 500:
            return CollectorUnavailable(f"the collector failed ({status}): {detail}")
        if status in (401, 403):
            if not self.token:
                return CollectorRefused(
                    f"the collector requires a token ({status}); pass --token or set"
                    " DENIABLE_ADMIN_TOKEN (the admin token, or the viewer token for reading)",
                    status,
                )
            return CollectorRefused(f"the collector refused the token ({status}: {detail})", status)
        if status == 404 and detail == "Not Found":
            return MissingEndpoint(self._missing_endpoint(response.request.url.path), status)
        if status == 404 and metric is not None:
            return CollectorRefused(f"unknown metric {metric!r} at {self.base_url}", status)
        if status == 404:
            return CollectorRefused(f"not found at {self.base_url}: {detail}", status)
        return CollectorRefused(f"the collector refused the request ({status}): {detail}", status)

    def _missing_endpoint(self, path: str) -> str:
        """Why the collector does not offer ``path``: a URL given with ``/v1`` (the CLI adds
        it to every call itself), else an older collector."""
        if self.base_url.endswith("/v1") and path.startswith("/v1/v1/"):
            return (
                f"the collector URL {self.base_url} ends in /v1, which every call adds itself:"
                f" drop /v1 (--collector {self.base_url.removesuffix('/v1')})"
            )
        return f"the collector at {self.base_url} does not offer {path}; is it an older version?"

    def get_json(
        self, path: str, *, params: dict[str, Any] | None = None, metric: str | None = None
    ) -> Any:
        """GET ``path`` and decode its JSON body."""
        return self._json(self.request("GET", path, params=params, metric=metric))

    def post_json(
        self,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
        metric: str | None = None,
    ) -> Any:
        """POST to ``path`` and decode its JSON body."""
        return self._json(self.request("POST", path, params=params, json=json, metric=metric))

    def _json(self, response: httpx.Response) -> Any:
        """The response's JSON body; :class:`CollectorUnavailable` if it is not JSON."""
        try:
            return response.json()
        except ValueError:
            raise CollectorUnavailable(
                f"{self.base_url} answered {response.request.url.path} with something other"
                " than JSON; is it a deniable collector?"
            ) from None

    def list_metrics(self) -> list[dict[str, Any]]:
        """Every registered metric spec, with fingerprints, units, descriptions and owners."""
        body = self.get_json("/v1/metrics", params={"describe": "true"})
        return body.get("metrics", []) if isinstance(body, dict) else list(body)

    def get_metric(self, name: str) -> dict[str, Any]:
        """One registered metric spec."""
        return self.get_json(f"/v1/metrics/{name}", metric=name)

    def create_metric(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Register a metric; returns the stored (resolved) spec."""
        return self.register_metric(spec)[0]

    def register_metric(self, spec: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """Register a metric: the stored (resolved) spec, and whether it is new (201) rather
        than the identical spec registered before (200)."""
        response = self.request("POST", "/v1/metrics", json=spec)
        return self._json(response), response.status_code == 201

    def archive_metric(self, name: str) -> dict[str, Any]:
        """Archive a metric (it takes no more reports); the collector's answer."""
        return self.post_json(f"/v1/metrics/{name}/archive", metric=name)

    def estimate(self, name: str, **params: Any) -> dict[str, Any]:
        """The estimate document for ``name`` over a period range."""
        return self.get_json(f"/v1/metrics/{name}/estimate", params=params, metric=name)

    def series(self, name: str, **params: Any) -> dict[str, Any]:
        """The per-period series document for ``name``."""
        return self.get_json(f"/v1/metrics/{name}/series", params=params, metric=name)

    def retention(self, before: str | None) -> dict[str, Any]:
        """Delete raw reports of periods before ``before`` (default: the collector's cutoff)."""
        return self.post_json("/v1/admin/retention", params={"before": before})

    def privacy(
        self,
        *,
        max_reports_per_period: int | None = None,
        memoize: str | None = None,
        lifetime_epsilon: float | None = None,
        instantaneous_ratio: str | None = None,
        shuffle_batch: int | None = None,
        shuffle_delta: float | None = None,
    ) -> dict[str, Any]:
        """The privacy account for the SDK settings given (the collector's defaults: the SDK's),
        with the central guarantee at ``shuffle_batch`` if given."""
        params = {
            "max_reports_per_period": max_reports_per_period,
            "memoize": memoize,
            "lifetime_epsilon": lifetime_epsilon,
            "instantaneous_ratio": instantaneous_ratio,
            "shuffle_batch": shuffle_batch,
            "shuffle_delta": shuffle_delta,
        }
        return self.get_json("/v1/privacy", params=params)

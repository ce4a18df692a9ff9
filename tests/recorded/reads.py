"""The reads the recording asks of the scenario's collector: every public read (estimate,
series, breakdown, compare, privacy, the metric list and documents, the estimates scrape)
and some refused ones, each with the role it is asked as."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Role = Literal["viewer", "admin", "none"]


@dataclass(frozen=True)
class Read:
    """One recorded request: the method, the path with its query, and who asks."""

    path: str
    role: Role = "viewer"
    method: str = "GET"


E = "/v1/metrics/{}/estimate"
S = "/v1/metrics/{}/series"
ALL = (
    "gold_dark",
    "gold_browser",
    "gold_screen",
    "gold_lang",
    "gold_latency",
    "gold_load",
    "gold_temp",
    "gold_size",
    "gold_search",
    "gold_weekly",
    "gold_quiet",
)
WEEK = "start=2026-11-15&end=2026-11-21"

READS: tuple[Read, ...] = (
    Read("/v1/metrics"),
    Read("/v1/metrics?describe=true"),
    Read("/v1/metrics/gold_screen"),
    Read("/v1/metrics/gold_search"),
    Read("/v1/metrics/gold_latency"),
    Read("/v1/metrics/gold_weekly", role="none"),
    *(Read(E.format(name)) for name in ALL),
    Read(E.format("gold_browser") + "?confidence=0.9&method=unbiased&simultaneous=false"),
    Read(E.format("gold_browser") + f"?{WEEK}&method=mle&pooling=independent"),
    Read(E.format("gold_lang") + "?method=mle&start=2026-11-19&end=2026-11-20"),
    Read(E.format("gold_screen") + "?method=unbiased&confidence=0.99"),
    Read(E.format("gold_latency") + "?q=0.25&q=0.75&q=0.95"),
    Read(E.format("gold_latency") + "?method=mle&pooling=independent&start=2026-11-20"),
    Read(E.format("gold_load") + "?confidence=0.8&pooling=independent"),
    Read(E.format("gold_temp") + "?start=2026-11-17&end=2026-11-19"),
    Read(E.format("gold_search") + "?start=2026-11-18&end=2026-11-18"),
    Read(E.format("gold_search") + "?candidates=cat&candidates=owl&candidates=zzz"),
    Read(E.format("gold_search") + "?by=platform"),
    Read(E.format("gold_search") + "?where=platform:ios&candidates=cat&candidates=dog"),
    Read(E.format("gold_latency") + "?by=platform&start=2026-11-19"),
    Read(E.format("gold_size") + "?confidence=0.99&start=2026-11-16"),
    Read(E.format("gold_weekly") + "?start=2026-11-01&end=2026-W47"),
    Read(E.format("gold_dark") + "?by=platform"),
    Read(E.format("gold_dark") + "?where=platform:ios"),
    Read(E.format("gold_screen") + "?by=platform&where=platform:android&method=unbiased"),
    Read(E.format("gold_load") + "?by=platform&confidence=0.9"),
    Read(E.format("gold_dark") + "?by=platform&compare=ios,android"),
    Read(E.format("gold_load") + "?by=platform&compare=ios,web"),
    Read(E.format("gold_screen") + "?by=platform&compare=android,web"),
    Read(E.format("gold_browser") + "?start=2026-11-19&end=2026-11-21&compare_to=previous"),
    Read(
        E.format("gold_load") + "?start=2026-11-19&end=2026-11-21&compare_to=2026-11-15..2026-11-17"
    ),
    Read(
        E.format("gold_dark") + "?by=platform&start=2026-11-20&end=2026-11-21&compare_to=previous"
    ),
    Read(E.format("gold_latency") + "?start=2026-11-21&compare_to=previous"),
    *(Read(S.format(name)) for name in ALL if name != "gold_quiet"),
    Read(S.format("gold_browser") + f"?{WEEK}&method=unbiased&confidence=0.8"),
    Read(S.format("gold_latency") + "?q=0.5&q=0.9"),
    Read(S.format("gold_dark") + "?by=platform&start=2026-11-19"),
    Read(S.format("gold_load") + "?where=platform:web"),
    Read(S.format("gold_search") + "?start=2026-11-20"),
    Read(S.format("gold_search") + "?where=platform:android&start=2026-11-20"),
    Read(S.format("gold_latency") + "?by=platform&start=2026-11-20"),
    Read("/v1/privacy"),
    Read("/v1/privacy?memoize=true"),
    Read("/v1/privacy?memoize=gold_dark,gold_browser&max_reports_per_period=3"),
    Read("/v1/privacy?lifetime_epsilon=50&instantaneous_ratio=none"),
    Read("/v1/privacy?shuffle_batch=1000&shuffle_delta=1e-8"),
    Read("/v1/privacy?shuffle_batch=5000"),
    Read("/v1/estimates/metrics"),
    Read("/v1/admin/metrics/gold_browser/reports?limit=3", role="admin"),
    # Refused reads: their status and problem bodies are part of the contract too.
    Read(E.format("gold_nope")),
    Read(S.format("gold_nope")),
    Read("/v1/metrics/gold_nope"),
    Read(E.format("gold_browser"), role="none"),
    Read("/v1/privacy", role="none"),
    Read("/v1/admin/metrics/gold_browser/reports?limit=3"),
    Read(E.format("gold_browser") + "?start=2026-11-21&end=2026-11-15"),
    Read(E.format("gold_browser") + "?start=yesterday"),
    Read(E.format("gold_browser") + "?start=2020-01-01"),
    Read(S.format("gold_browser") + "?start=2020-01-01"),
    Read(E.format("gold_browser") + "?confidence=1.5"),
    Read(E.format("gold_browser") + "?method=bogus"),
    Read(E.format("gold_browser") + "?q=0.5"),
    Read(E.format("gold_latency") + "?q=1.5"),
    Read(E.format("gold_lang") + "?start=2026-01-01"),
    Read(S.format("gold_lang") + "?start=2026-09-01"),
    Read(E.format("gold_dark") + "?by=colour"),
    Read(E.format("gold_dark") + "?where=platform:amiga"),
    Read(E.format("gold_dark") + "?compare=ios,android"),
    Read(E.format("gold_browser") + "?compare_to=sometime"),
    Read(E.format("gold_browser") + "?candidates=cat"),
    Read(E.format("gold_load") + "?method=mle"),
    Read("/v1/privacy?memoize=gold_nope"),
    Read("/v1/privacy?instantaneous_ratio=0.5"),
    Read("/v1/privacy?shuffle_batch=1"),
    Read("/v1/estimates/metrics?page=2"),
    Read("/v1/estimates/metrics?page=0"),
    Read("/v1/estimates/metrics?page=4"),
)
"""Every recorded request, in the order it is asked (the read cache sees the same order)."""

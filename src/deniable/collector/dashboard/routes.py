"""The dashboard's routes: sign-in and sign-out, the overview, a metric's page, its CSVs, the
planner and the stylesheet.

Pages read through the API's own query functions (:mod:`.data`), so they show exactly the API's
numbers; a page answers HTML, a refused query (404, 422) becomes a page with the same status.
Every page but sign-in needs a session (:mod:`.session`) unless the collector runs without
tokens (loopback development), when the dashboard is as open as the API.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from deniable.client.account import SDK_DEFAULTS
from deniable.client.errors import InvalidInput
from deniable.client.kinds import TextSpec
from deniable.estimators import DEFAULT_METHOD, DEFAULT_PERIODS
from deniable.estimators.advisor import plan_document
from deniable.estimators.csvtext import estimate_csv_text, series_csv_text
from deniable.estimators.slicecsv import breakdown_csv_text
from deniable.service.bearer import tokens_match
from deniable.service.body import read_body

from ..context import collector
from ..numbers import InvalidNumber, NumberRule
from ..queries.privacy import DEFAULT_MEMOIZE, DEFAULT_RATIO
from ..queries.ranges import registered_spec
from ..queries.refusal import QueryRefused, refuse
from . import (
    breakdownpage,
    data,
    emptystate,
    glossary,
    numericplan,
    pages,
    quantileseries,
    session,
    textpage,
)
from .kindviews import MAX_TOP, view_of
from .style import CSS, ETAG

router = APIRouter(prefix="/dashboard", include_in_schema=False)

SIGN_IN_BODY_BYTES = 4096
"""The largest sign-in form body read (a token is far shorter)."""

SIGN_IN = "/dashboard/sign-in"

TOP_RULE = NumberRule("top", 1, MAX_TOP, whole=True)
"""How the metric page's ``top`` (categories its time series draws) is read."""


def accepted(request: Request) -> list[str]:
    """The tokens that may read (the viewer token and the admin tokens); empty: open."""
    return collector(request).settings.viewer_tokens()


def signing_tokens(request: Request) -> list[str]:
    """The tokens that sign in: the viewer token only. The admin token is never typed into a
    browser or kept in its cookie: a stolen dashboard session can then only read."""
    viewer = collector(request).settings.viewer_secret()
    return [viewer] if viewer is not None else []


def signed_in(request: Request) -> bool:
    """Whether the request carries a valid session, or the dashboard is open."""
    if not accepted(request):
        return True
    tokens = signing_tokens(request)
    return bool(tokens) and session.valid(request.cookies.get(session.COOKIE_NAME), tokens)


def secure(request: Request) -> bool:
    """Whether the browser reached us over https (directly, or as an ingress says)."""
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return request.url.scheme == "https" or forwarded == "https"


SAME_SITE_FETCHES = ("same-origin", "none")
"""``Sec-Fetch-Site`` values of a request the dashboard's own page (or the user) made."""

DEFAULT_PORTS = {"http": ":80", "https": ":443"}

FOREIGN_ORIGIN = "This form may only be sent from the dashboard's own pages."
"""The 403 page's message for a POST from another origin."""


def same_origin(request: Request) -> bool:
    """Whether a state-changing request (sign-in, sign-out) comes from the dashboard's own
    pages, not from a form on another site (login CSRF, forced sign-out).

    A browser's ``Sec-Fetch-Site`` (which no page can forge) must say same-origin; a browser
    without it must send an ``Origin`` naming this host (the ``Host`` header, which a foreign
    page cannot change in its victim's browser); ``Origin: null`` is refused. A request with
    neither header is no browser's, and passes: tokens, not origins, guard the API.
    """
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None:
        return fetch_site.strip().lower() in SAME_SITE_FETCHES
    origin = request.headers.get("origin")
    if origin is None:
        return True
    parts = urlsplit(origin.strip().lower())
    default = DEFAULT_PORTS.get(parts.scheme)
    host = request.headers.get("host", "").strip().lower()
    if default is None or not parts.netloc:
        return False
    return parts.netloc.removesuffix(default) == host.removesuffix(default)


def foreign_origin_page() -> HTMLResponse:
    """The 403 answer to a dashboard POST from another origin."""
    return html(pages.error_page(403, FOREIGN_ORIGIN), 403)


def refused_page(refused: QueryRefused) -> HTMLResponse:
    """The page of a refused query (404, 422), answered with the query's status."""
    return html(pages.error_page(refused.status, refused.detail), refused.status)


def html(body: str, status: int = 200) -> HTMLResponse:
    """An HTML page that no cache keeps."""
    return HTMLResponse(body, status_code=status, headers={"Cache-Control": "no-store"})


def to_sign_in() -> RedirectResponse:
    """The redirect of a request without a session."""
    return RedirectResponse(SIGN_IN, status_code=303)


@router.get("/static/dashboard.css")
def stylesheet(request: Request) -> Response:
    """The stylesheet (no session needed: the sign-in page uses it)."""
    headers = {"ETag": ETAG, "Cache-Control": "public, max-age=3600"}
    if request.headers.get("if-none-match") == ETAG:
        return Response(status_code=304, headers=headers)
    return Response(CSS, media_type="text/css", headers=headers)


@router.get("/sign-in")
def sign_in_form(request: Request) -> Response:
    """The sign-in form, or the overview for a request already signed in."""
    if accepted(request) and signed_in(request):
        return RedirectResponse("/dashboard/", status_code=303)
    return html(pages.sign_in_page())


@router.post("/sign-in")
async def sign_in(request: Request) -> Response:
    """Check the form's token; set the session cookie and go to the overview, or 401 the form
    (403 from another origin)."""
    if not same_origin(request):
        return foreign_origin_page()
    tokens = accepted(request)
    if not tokens:
        return RedirectResponse("/dashboard/", status_code=303)
    body = await read_body(request, SIGN_IN_BODY_BYTES, collector(request).settings.body_timeout)
    try:
        given = parse_qs(body.decode("utf-8"), max_num_fields=4).get("token", [""])[0].strip()
    except (UnicodeDecodeError, ValueError):
        given = ""
    matched = None
    for token in signing_tokens(request):
        if tokens_match(given, token):
            matched = token
    if matched is None:
        if any(tokens_match(given, token) for token in tokens):
            message = (
                "The admin token does not sign in to the dashboard: use the viewer token"
                " (DENIABLE_VIEWER_TOKEN), which can only read."
            )
            return html(pages.sign_in_page(message), 403)
        return html(pages.sign_in_page("That token is not accepted here."), 401)
    response = RedirectResponse("/dashboard/", status_code=303)
    response.headers["Set-Cookie"] = session.cookie_header(
        session.issue(matched), secure=secure(request)
    )
    return response


@router.post("/sign-out")
def sign_out(request: Request) -> Response:
    """End the session on the server (a replayed copy of the cookie no longer signs in),
    clear the cookie and show the sign-in form; 403 from another origin."""
    if not same_origin(request):
        return foreign_origin_page()
    session.revoke(request.cookies.get(session.COOKIE_NAME), signing_tokens(request))
    response = RedirectResponse(SIGN_IN, status_code=303)
    response.headers["Set-Cookie"] = session.cookie_header("", secure=secure(request), max_age=0)
    return response


@router.get("", include_in_schema=False)
def bare() -> RedirectResponse:
    """``/dashboard`` without its slash."""
    return RedirectResponse("/dashboard/", status_code=308)


@router.get("/")
def overview(request: Request) -> Response:
    """Every metric: type, eps, mechanism, recent reports, trend and today's margin."""
    if not signed_in(request):
        return to_sign_in()
    try:
        page = data.overview(request)
    except InvalidInput as exc:
        return html(pages.error_page(422, str(exc)), 422)
    arrived = data.arrivals(request, [row.spec.name for row in page.rows])
    return html(pages.overview_page(page, data.OVERVIEW_PERIODS, arrived))


def page_query(request: Request, spec: Any) -> dict[str, Any]:
    """The metric page's choices from its query, with the defaults; 422 for a bad one."""
    params = request.query_params
    start, end = params.get("start") or None, params.get("end") or None
    if start is None and end is None:
        count = data.periods_within(spec, request, DEFAULT_PERIODS)
        labels = data.last_periods(spec, request, count)
        start, end = labels[0], labels[-1]
    method = params.get("method") or (DEFAULT_METHOD if view_of(spec).shares else "unbiased")
    pooling = params.get("pooling") or "overlap-safe"
    if method not in pages.METHODS:
        raise refuse(f"method must be one of {', '.join(pages.METHODS)}")
    if pooling not in pages.POOLINGS:
        raise refuse(f"pooling must be one of {', '.join(pages.POOLINGS)}")
    try:
        top = int(TOP_RULE.parse(params.get("top") or str(data.DEFAULT_TOP)))
    except InvalidNumber as exc:
        raise refuse(str(exc)) from None
    for name, value in (("start", start), ("end", end)):
        if value is not None and len(value) > 32:
            raise refuse(f"{name} is not a period label")
    compare = params.get("compare") or ""
    if compare not in ("", COMPARE_PREVIOUS):
        raise refuse(f"compare must be {COMPARE_PREVIOUS} or empty")
    return {
        "start": start or "",
        "end": end or "",
        "method": method,
        "pooling": pooling,
        "top": top,
        "compare": compare,
    }


COMPARE_PREVIOUS = "previous"
"""The metric page's ``compare`` choice: the range against as many periods just before it."""


def page_comparison(request: Request, spec: Any, query: dict[str, Any]) -> dict[str, Any] | str:
    """The period comparison the page's ``compare`` asks for, or why the API refused it."""
    try:
        return data.estimate(
            request,
            spec,
            query["start"] or None,
            query["end"] or None,
            method=query["method"],
            pooling=query["pooling"],
            compare_to=COMPARE_PREVIOUS,
        )
    except QueryRefused as exc:
        return exc.detail


def documents(
    request: Request, name: str
) -> tuple[Any, dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The metric, the page's choices, and the API's estimate and series documents for them."""
    spec = registered_spec(collector(request), name)
    query = page_query(request, spec)
    start, end = query["start"] or None, query["end"] or None
    series = data.series(request, spec, start, end, method=query["method"])
    estimate = data.estimate(
        request, spec, start, end, method=query["method"], pooling=query["pooling"]
    )
    return spec, query, estimate, series


@router.get("/metrics/{name}")
def metric(name: str, request: Request) -> Response:
    """A metric's estimate with simultaneous whiskers, its series, and (numeric) its mean."""
    if not signed_in(request):
        return to_sign_in()
    try:
        spec = registered_spec(collector(request), name)
        view = view_of(spec)
        if view.pages is not None:
            return html(view.pages.metric(request, spec, lambda: page_query(request, spec)))
        spec, query, estimate, series = documents(request, name)
        if not emptystate.has_reports(series):
            empty = emptystate.card(spec, estimate["start"], estimate["end"])
            entry = breakdownpage.entry_card(spec, query)
            return html(
                pages.metric_page(
                    spec,
                    estimate,
                    series,
                    [],
                    query,
                    "",
                    entry,
                    empty=empty,
                    presets=data.preset_ranges(spec, request),
                    arrival=data.arrivals(request, [spec.name])[spec.name],
                )
            )
        over_time = ""
        if view.quantiles:
            over_time = quantileseries.section(request, spec, query)
    except QueryRefused as exc:
        return refused_page(exc)
    shown = data.shown_categories(spec, estimate, query["top"]) if view.shares else []
    entry = breakdownpage.entry_card(spec, query)
    compared = page_comparison(request, spec, query) if query["compare"] else None
    presets = data.preset_ranges(spec, request)
    arrival = data.arrivals(request, [spec.name])[spec.name]
    return html(
        pages.metric_page(
            spec,
            estimate,
            series,
            shown,
            query,
            over_time,
            entry,
            comparison=compared,
            presets=presets,
            arrival=arrival,
        )
    )


def breakdown_read(request: Request, name: str) -> tuple[Any, dict[str, Any]]:
    """The metric and the page's choices for its breakdown."""
    spec = registered_spec(collector(request), name)
    return spec, page_query(request, spec)


@router.get("/metrics/{name}/breakdown")
def breakdown(name: str, request: Request) -> Response:
    """A metric's estimate per slice of its dimensions, as small multiples (:mod:`.breakdownpage`)."""
    if not signed_in(request):
        return to_sign_in()
    try:
        spec, query = breakdown_read(request, name)
        own = view_of(spec).pages
        if own is not None:
            return html(own.breakdown(request, spec, query))
        return html(breakdownpage.page(spec, request, query))
    except QueryRefused as exc:
        return refused_page(exc)


@router.get("/metrics/{name}/breakdown.csv")
def breakdown_csv(name: str, request: Request) -> Response:
    """The breakdown the page shows, as CSV (every category of every slice)."""
    if not signed_in(request):
        return to_sign_in()
    try:
        spec, query = breakdown_read(request, name)
        by, where = breakdownpage.chosen(request, spec)
        own = view_of(spec).pages
        if own is not None:
            found = own.breakdown_document(request, spec, by, where)
        else:
            found = breakdownpage.document(request, spec, query, by, where)
    except QueryRefused as exc:
        return refused_page(exc)
    return csv_response(breakdown_csv_text(found), f"{spec.name}-breakdown.csv")


def csv_response(text: str, filename: str) -> Response:
    """A CSV download named ``filename``."""
    return Response(
        text,
        media_type="text/csv; charset=utf-8",
        headers={
            "Content-Disposition": f'attachment; filename="{filename}"',
            "Cache-Control": "no-store",
        },
    )


def document_csv(request: Request, name: str, which: str) -> Response:
    """The estimate or the series document the metric page shows, as CSV."""
    if not signed_in(request):
        return to_sign_in()
    try:
        spec, _, estimate, series = documents(request, name)
    except QueryRefused as exc:
        return refused_page(exc)
    text = estimate_csv_text(estimate) if which == "estimate" else series_csv_text(series)
    return csv_response(text, f"{spec.name}-{which}.csv")


@router.get("/metrics/{name}/strings.csv")
def strings_csv(name: str, request: Request) -> Response:
    """A text metric's strings found in the page's period, as CSV (404 for another kind)."""
    if not signed_in(request):
        return to_sign_in()
    try:
        spec = registered_spec(collector(request), name)
        if not isinstance(spec, TextSpec):
            raise refuse(f"{spec.name} is a {spec.type} metric: its CSVs are estimate and series")
        document = textpage.text_document(request, spec, request.query_params.get("end") or None)
    except QueryRefused as exc:
        return refused_page(exc)
    return csv_response(textpage.text_csv(document), f"{spec.name}-{document['end']}.csv")


@router.get("/metrics/{name}/estimate.csv")
def estimate_csv(name: str, request: Request) -> Response:
    """The estimate document the page shows, as CSV."""
    return document_csv(request, name, "estimate")


@router.get("/metrics/{name}/series.csv")
def series_csv(name: str, request: Request) -> Response:
    """The series document the page shows, as CSV."""
    return document_csv(request, name, "series")


PLAN_DEFAULTS = {
    "k": "5",
    "epsilon": "1",
    "margin": "2",
    "confidence": "0.95",
    "intervals": "simultaneous",
}
"""The planner's inputs when the form has not been sent yet: intervals for all categories at
once, as the estimates show them (``deniable plan``'s default too)."""

PLAN_INTERVALS = ("simultaneous", "per-category")
"""The planner's interval kinds: all categories at once, or each alone."""


PLAN_RULES = (
    NumberRule("k", 2, 100_000, whole=True),
    NumberRule("epsilon", 0, 20, open_low=True),
    NumberRule("margin", 0, 100, open_low=True, open_high=True),
    NumberRule("confidence", 0, 1, open_low=True, open_high=True),
)
"""How the planner's form numbers are read: categories, eps, the margin (percentage points, or a share below 1: :func:`.glossary.margin_share`) and the
confidence level."""


def plan_inputs(values: dict[str, str]) -> tuple[int, float, float, float]:
    """k, eps, margin and confidence from the form; InvalidInput naming a bad one."""
    k, epsilon, margin, confidence = (rule.parse(values[rule.name]) for rule in PLAN_RULES)
    return int(k), float(epsilon), glossary.margin_share(float(margin)), float(confidence)


@router.get("/help/pooling")
def pooling_help(request: Request) -> Response:
    """Why an interval pooled over several periods is about as wide as one period's."""
    if not signed_in(request):
        return to_sign_in()
    return html(pages.pooling_help_page())


@router.get("/plan")
def plan(request: Request) -> Response:
    """The planner: reports needed per mechanism for a margin, the fewest recommended; with
    ``kind=numeric``, a number's (:mod:`.numericplan`)."""
    if not signed_in(request):
        return to_sign_in()
    if request.query_params.get("kind") == numericplan.KIND:
        return html(*numericplan.numeric_plan(request.query_params, data.planner_metrics(request)))
    values = {
        key: (request.query_params.get(key) or default).strip()[:32]
        for key, default in PLAN_DEFAULTS.items()
    }
    try:
        k, epsilon, margin, confidence = plan_inputs(values)
        if values["intervals"] not in PLAN_INTERVALS:
            raise InvalidInput("intervals must be simultaneous or per-category")
        document = plan_document(
            k,
            epsilon,
            margin=margin,
            reports=None,
            confidence=confidence,
            simultaneous=values["intervals"] == "simultaneous",
        )
    except (InvalidInput, ValueError) as exc:
        return html(pages.plan_page(values, None, str(exc), data.planner_metrics(request)), 422)
    return html(pages.plan_page(values, document, None, data.planner_metrics(request)))


PRIVACY_DEFAULTS = {
    "max_reports_per_period": str(SDK_DEFAULTS.max_reports_per_period),
    "memoize": DEFAULT_MEMOIZE,
    "lifetime_epsilon": ""
    if SDK_DEFAULTS.lifetime_epsilon is None
    else f"{SDK_DEFAULTS.lifetime_epsilon:g}",
    "instantaneous_ratio": DEFAULT_RATIO,
    "shuffle_batch": "",
}
"""The privacy page's SDK settings when the form has not been sent: the SDK's defaults (and
no shuffler batch size assumed)."""


@router.get("/privacy")
def privacy(request: Request) -> Response:
    """The privacy account for the SDK settings in the form, with its statement."""
    if not signed_in(request):
        return to_sign_in()
    values = {
        key: (request.query_params.get(key) or default).strip()[:32]
        for key, default in PRIVACY_DEFAULTS.items()
    }
    try:
        document = data.privacy(request, values)
    except InvalidInput as exc:
        return html(pages.privacy_page(values, None, str(exc)), 422)
    return html(pages.privacy_page(values, document, None))

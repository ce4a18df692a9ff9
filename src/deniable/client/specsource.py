"""Where a client's metric specs come from, and the device's rules for accepting them.

Three sources, in order: the specs the app passes in code (the only ones used then; none is
fetched), the specs an earlier run cached in ``state_dir`` (so an app that starts offline
still records), and ``GET /v1/metrics`` (fetched at start when nothing is cached, and again
when the app records a metric no spec covers, at most every :data:`SPEC_REFRESH_SECONDS`).

The device, not the collector, guards its users' privacy: a served spec whose fingerprint
does not match is ignored; a spec once accepted from a collector is never replaced by a
different one with the same name; a served spec above ``max_epsilon`` is refused, and one
passed in code above it raises :class:`~.errors.SpecError`. Each refused served spec is logged
at ERROR once and counted in ``specs_refused``.

Specs passed in code are still compared, once, with the ones the collector serves (fetched in
the background on first contact, never adopted): a metric the collector serves with another
fingerprint, or not at all, would have every report refused, so it is logged at ERROR once,
counted in ``spec_mismatches`` and listed by :meth:`.Client.problems`.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .errors import InvalidInput, SpecError
from .holding import MAX_HELD
from .problems import Problems
from .spec import MetricSpec
from .stats import Counters
from .transport import Transport

log = logging.getLogger("deniable.client")

SPECS_FILE = "metrics.json"
"""The specs accepted from collectors, cached in ``state_dir``."""
SPEC_REFRESH_SECONDS = 60.0
"""How often, at most, collector-served specs are fetched again (after an unknown metric)."""
SPEC_RETRY_SECONDS = 5.0
"""How often a client with no specs at all tries to fetch them (the collector is down, or
serves none yet, or only ones this client refuses)."""
DEFAULT_MAX_EPSILON = 4.0
"""The highest eps a client adopts from a collector unless the app sets ``max_epsilon``.

At eps 4 binary randomized response still lies 1.8% of the time; much above it a report is
all but the true value, so a collector serving such a spec could nearly read its users'
answers. An app that means a higher eps says so with ``max_epsilon`` (up to 20)."""


def verified_specs(raw: Sequence[Any]) -> list[MetricSpec]:
    """Specs from a collector's JSON, keeping only those whose fingerprint matches ours (and
    the first of two with one name)."""
    specs: list[MetricSpec] = []
    for item in raw:
        try:
            spec = MetricSpec.from_dict(item)
        except (ValueError, TypeError, AttributeError) as exc:
            log.warning("ignoring a metric spec the collector served: %s", exc)
            continue
        if item.get("fingerprint") != spec.fingerprint:
            log.warning(
                "metric %s: the served fingerprint does not match the spec; refusing it", spec.name
            )
            continue
        if any(s.name == spec.name for s in specs):
            log.warning("metric %s is served twice; keeping the first spec", spec.name)
            continue
        specs.append(spec)
    return specs


def as_spec(item: MetricSpec | Mapping[str, Any]) -> MetricSpec:
    """A spec the app passed in ``metrics``: a :class:`MetricSpec`, or its JSON form as a
    mapping (``{"name": ..., "type": ..., "epsilon": ...}``, as ``GET /v1/metrics`` serves it)."""
    if isinstance(item, MetricSpec):
        return item
    if isinstance(item, Mapping):
        return MetricSpec.from_dict(dict(item))
    raise TypeError(
        "metrics= takes MetricSpec objects (MetricSpec.boolean(...), MetricSpec.categorical(...))"
        f" or dicts in the JSON form GET /v1/metrics serves, not {type(item).__name__}"
    )


class SpecSource:
    """Chooses the specs a client records: :meth:`start` returns the first set, and
    :meth:`refresh_if_due` (from the upload thread) a new one when it changes.

    ``transport`` fetches served specs; ``state_dir`` holds the cache; ``problems`` hears of
    refused and mismatched specs, and of specs that cannot be fetched.
    """

    def __init__(
        self,
        state_dir: Path,
        transport: Transport,
        counters: Counters,
        problems: Problems,
        *,
        max_epsilon: float,
    ) -> None:
        self._path = state_dir / SPECS_FILE
        self._transport = transport
        self._counters = counters
        self._problems = problems
        self._max_epsilon = max_epsilon
        self._accepted: dict[str, MetricSpec] = {}
        self._refused: set[tuple[str, str]] = set()
        self._chosen_count = 0
        self._in_code: list[MetricSpec] | None = None
        self._refresh = False
        self._next_fetch = 0.0
        self._closed = False
        self._writing = threading.Lock()
        """Held while the cache is written, and by :meth:`close`."""

    def start(
        self,
        in_code: Sequence[MetricSpec | Mapping[str, Any]] | None,
        deadline: float | None = None,
    ) -> list[MetricSpec]:
        """The specs to record first: the app's (``in_code``, specs or their JSON form), else
        the cached ones, else the ones fetched now, by ``deadline`` (none if the collector
        cannot be reached by then)."""
        if in_code is not None:
            self._in_code = self._within_app_ceiling([as_spec(item) for item in in_code])
            return self._chosen(self._in_code)
        cached = self._load_cached()
        if cached is not None:
            self._refresh = True
            return cached
        return self._fetch(deadline) or []

    def close(self) -> None:
        """Write nothing more to ``state_dir``: a fetch still under way (in the upload thread)
        is dropped when it ends. Returns once no cache write is under way."""
        with self._writing:
            self._closed = True

    def note_unknown(self, metric: str) -> None:
        """A ``record()`` for a metric without a spec: the app's mistake if it passed its specs
        in code (:class:`~.errors.InvalidInput`), else a reason to fetch specs again."""
        if self._in_code is not None:
            raise InvalidInput(
                f"unknown metric {metric!r}; the metrics passed in code are"
                f" {', '.join(s.name for s in self._in_code) or 'none'}"
            )
        self._refresh = True

    def refresh_if_due(
        self, force: bool = False, deadline: float | None = None
    ) -> list[MetricSpec] | None:
        """The specs to record from now on if none are known or a refresh was asked for, and a
        fetch is due (or ``force``) and succeeds by ``deadline`` (monotonic; default the
        transport's timeout from now); else ``None`` (keep the current ones).

        With specs passed in code, compares them once with the served ones instead."""
        if not force and time.monotonic() < self._next_fetch:
            return None
        if self._in_code is not None:
            self._compare_in_code(deadline)
            return None
        if self._refresh or not self._chosen_count:
            return self._fetch(deadline)
        return None

    def _compare_in_code(self, deadline: float | None) -> None:
        """First contact in strict mode: fetch the served specs once and report each metric
        passed in code that the collector does not serve as it is (never adopting any)."""
        fetched = self._fetched(deadline, fail_over=False)
        if fetched is None or self._in_code is None:
            return
        served = {s.name: s for s in verified_specs(fetched)}
        for spec in self._in_code:
            known = served.get(spec.name)
            if known is None:
                why = "the collector serves no spec for it (is it registered?)"
            elif known.fingerprint != spec.fingerprint:
                why = (
                    f"the collector serves another spec (fingerprint {known.fingerprint},"
                    f" {_describe(known)}) than the one passed in code (fingerprint"
                    f" {spec.fingerprint}, {_describe(spec)})"
                )
            else:
                continue
            message = f"metric {spec.name}: {why}; the collector will refuse its reports"
            with self._counters.lock:
                self._counters.spec_mismatches += 1
            self._problems.note(f"mismatch:{spec.name}", message)
            log.error("%s", message)
        self._next_fetch = float("inf")

    def _chosen(self, specs: list[MetricSpec]) -> list[MetricSpec]:
        """Note ``specs`` as the ones recorded now, and return them."""
        self._chosen_count = len(specs)
        return specs

    def _within_app_ceiling(self, specs: Sequence[MetricSpec]) -> list[MetricSpec]:
        """The specs the app passed; one above ``max_epsilon`` is the app's own mistake,
        raised at once rather than sent."""
        for spec in specs:
            if spec.epsilon > self._max_epsilon:
                raise SpecError(
                    f"metric {spec.name}: epsilon {spec.epsilon:g} is above max_epsilon"
                    f" {self._max_epsilon:g}; pass a higher max_epsilon to record it"
                )
        return list(specs)

    def _within_ceiling(self, spec: MetricSpec, stored: bool = False) -> bool:
        """Whether a spec that came from a collector (``stored``: cached in ``state_dir`` by
        an earlier run) is within ``max_epsilon``; refuses it if not."""
        if spec.epsilon <= self._max_epsilon:
            return True
        self._refuse(spec, f"its epsilon is above max_epsilon {self._max_epsilon:g}", stored)
        return False

    def _refuse(self, spec: MetricSpec, why: str, stored: bool = False) -> None:
        """Refuse a served (or ``stored``) spec: count it and log at ERROR, once per name and
        fingerprint."""
        with self._counters.lock:
            key = (spec.name, spec.fingerprint)
            if key in self._refused:
                return
            self._refused.add(key)
            self._counters.specs_refused += 1
        message = (
            f"metric {spec.name}: refusing the spec"
            f" {'stored in state_dir' if stored else 'the collector served'} (fingerprint"
            f" {spec.fingerprint}, epsilon {spec.epsilon:g}): {why}"
        )
        self._problems.note(f"refused:{spec.name}:{spec.fingerprint}", message)
        log.error("%s", message)

    def _fetched(
        self, deadline: float | None, fail_over: bool = True
    ) -> list[dict[str, Any]] | None:
        """``GET /v1/metrics`` now, over by ``deadline``, pacing the next attempt; ``None``
        (noted as a problem while this client has no specs) if no collector answered."""
        fetched = self._transport.fetch_metrics(deadline, fail_over=fail_over)
        self._next_fetch = time.monotonic() + (
            SPEC_REFRESH_SECONDS
            if fetched is not None or (self._chosen_count and self._in_code is None)
            else SPEC_RETRY_SECONDS
        )
        if fetched is not None:
            self._problems.clear("fetch")
        elif not self._chosen_count and not self._closed:
            self._problems.note(
                "fetch",
                f"no metric specs yet: {self._transport.fetch_failure}; values recorded"
                f" meanwhile are held in memory (at most {MAX_HELD:,}) until specs arrive",
            )
        return fetched

    def _accepted_within_ceiling(self, stored: bool = False) -> list[MetricSpec]:
        """The accepted specs that are within ``max_epsilon`` (the app may have lowered it
        since a spec was cached). One above it stays accepted, so no other spec can take its
        name, but is not recorded (``stored``: they were read from the cache)."""
        return self._chosen([s for s in self._accepted.values() if self._within_ceiling(s, stored)])

    def _load_cached(self) -> list[MetricSpec] | None:
        """Accept the specs cached by an earlier run (so an app that starts offline still
        records, and a collector cannot change them later); ``None`` if there are none."""
        if not self._path.exists():
            return None
        try:
            specs = verified_specs(json.loads(self._path.read_text()))
        except (ValueError, TypeError, AttributeError) as exc:
            aside = self._path.with_name(f"{self._path.name}.bad-{int(time.time() * 1000)}")
            os.replace(self._path, aside)
            message = (
                f"the saved metric specs were unreadable ({type(exc).__name__}); kept as"
                f" {aside}; the client fetches them afresh"
            )
            log.warning("%s", message)
            self._problems.note("specs-cache", message)
            return None
        self._accepted = {s.name: s for s in specs}
        return self._accepted_within_ceiling(stored=True)

    def _fetch(self, deadline: float | None) -> list[MetricSpec] | None:
        """Fetch the specs from the collector by ``deadline``, adopt new ones, cache them in
        ``state_dir``; the specs to record now, or ``None`` if no collector answered (in time,
        within :data:`~.transport.MAX_SPECS_BYTES`): the ones accepted before stay.

        A served spec that differs from the one accepted for its name is refused (the
        accepted one stays), as is a new one above ``max_epsilon``.
        """
        fetched = self._fetched(deadline)
        if fetched is None or self._closed:
            return None
        accepted = dict(self._accepted)
        for spec in verified_specs(fetched):
            known = accepted.get(spec.name)
            if known is None:
                if self._within_ceiling(spec):
                    accepted[spec.name] = spec
            elif known.fingerprint != spec.fingerprint:
                self._refuse(
                    spec,
                    f"this device accepted another spec for it before (fingerprint"
                    f" {known.fingerprint}, epsilon {known.epsilon:g}) and keeps that one",
                )
        with self._writing:
            if self._closed:
                return None
            tmp = self._path.with_suffix(".tmp")
            tmp.write_text(json.dumps([s.to_dict() for s in accepted.values()]))
            os.replace(tmp, self._path)
        self._accepted = accepted
        self._refresh = False
        chosen = self._accepted_within_ceiling()
        if not chosen:
            self._next_fetch = time.monotonic() + SPEC_RETRY_SECONDS
        if not accepted:
            self._problems.note(
                "fetch",
                f"no metric specs yet: the collector at {self._transport.url} serves none"
                " (register them with `deniable metrics create`); values recorded meanwhile"
                f" are held in memory (at most {MAX_HELD:,}) and specs are asked for every"
                f" {SPEC_RETRY_SECONDS:g} s",
            )
        return chosen


def _describe(spec: MetricSpec) -> str:
    """A spec's parameters in a few words, for messages (its domain is public)."""
    return f"epsilon {spec.epsilon:g}, {spec.mechanism}, {spec.domain}, per {spec.period}"

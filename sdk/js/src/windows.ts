/** The device's windows of events, as deniable.client.windows keeps them: which days it was
 * active, each event metric's day aggregates, and which windows are due to be reported.
 *
 * Days are UTC day numbers (days since 1970-01-01). A window is due once the device's newest day
 * is past its last day; it is reported iff the device was active on one of its days (a client
 * was open: a public fact, never the events) and it has a value. Every window is considered once:
 * its metric's mark moves past it whether or not it was sent, and the mark is saved in the same
 * state text as the report it queued, so a window is reported at most once. Time only moves
 * forward: an event counts on the newest day seen, so a clock set back never adds to a window
 * already reported. */

import { DayAggregate, type EventRule, MAX_BACKFILL_DAYS, medianBin, windowValue } from "./events.js";
import { type MetricSpec, periodLabel } from "./spec.js";

/** How many days back the device remembers being active: the longest window of the oldest
 * window still reported. */
export const ACTIVE_DAYS_KEPT = 28 + MAX_BACKFILL_DAYS + 31;
const DAY_MS = 86400000;

/** The UTC day number of `moment`. */
export const dayNumber = (moment: Date): number => Math.floor(moment.getTime() / DAY_MS);
const dayDate = (day: number): Date => new Date(day * DAY_MS);

/** One window of a metric: its first and last day numbers and the period label its report carries. */
export interface Window {
  readonly first: number;
  readonly last: number;
  readonly label: string;
}

/** The window of `spec` whose last day is `day`, or null if none ends that day. */
export function windowEnding(spec: MetricSpec, rule: EventRule, day: number): Window | null {
  if (rule.rolling) return { first: day - rule.window + 1, last: day, label: periodLabel("day", dayDate(day)) };
  const label = periodLabel(spec.period, dayDate(day));
  if (periodLabel(spec.period, dayDate(day + 1)) === label) return null;
  let first = day;
  while (periodLabel(spec.period, dayDate(first - 1)) === label) first--;
  return { first, last: day, label };
}

/** The last day of the first window that starts on or after `knownFrom`, the day the device
 * first had the spec: a window that began before holds no counted events, so it is never reported. */
export function firstWindowEnd(spec: MetricSpec, rule: EventRule, knownFrom: number): number {
  for (let day = knownFrom; ; day++) {
    const window = windowEnding(spec, rule, day);
    if (window !== null && window.first >= knownFrom) return day;
  }
}

/** One event metric's state: its fingerprint, the last day of the last window considered, and
 * its day aggregates. */
interface MetricDays {
  fingerprint: string;
  through: number;
  days: Map<number, DayAggregate>;
}

/** A window due: the metric, the window and the value its report carries. */
export interface DueWindow {
  spec: MetricSpec;
  window: Window;
  value: boolean | number | string;
}

/** The saved form (inside the client's state): days active, per metric [fingerprint, the
 * last day considered], per metric and day the aggregate (DayAggregate's JSON form). */
export interface BookData {
  active: number[];
  marks: Record<string, [string, number]>;
  days: Record<string, Record<string, unknown>>;
}

/** The event state of a device; `newest` is the newest day it has seen. */
export class WindowBook {
  active = new Set<number>();
  readonly metrics = new Map<string, MetricDays>();
  newest = 0;

  /** The state saved by toJSON; a malformed aggregate is skipped (its events lost, never guessed),
   * and the count of those skipped is returned. */
  load(data: BookData): number {
    let skipped = 0;
    this.active = new Set(data.active);
    this.metrics.clear();
    for (const [metric, [fingerprint, through]] of Object.entries(data.marks)) {
      const days = new Map<number, DayAggregate>();
      for (const [day, raw] of Object.entries(data.days[metric] ?? {})) {
        const aggregate = DayAggregate.fromJSON(raw);
        if (aggregate === null || !Number.isSafeInteger(Number(day))) skipped++;
        else days.set(Number(day), aggregate);
      }
      this.metrics.set(metric, { fingerprint, through, days });
    }
    const counted = [...this.metrics.values()].flatMap((m) => [...m.days.keys()]);
    this.newest = Math.max(0, ...this.active, ...counted);
    return skipped;
  }

  toJSON(): BookData {
    const marks: BookData["marks"] = {};
    const days: BookData["days"] = {};
    for (const [metric, state] of this.metrics) {
      marks[metric] = [state.fingerprint, state.through];
      days[metric] = Object.fromEntries([...state.days].map(([day, aggregate]) => [String(day), aggregate.toJSON()]));
    }
    return { active: [...this.active].sort((a, b) => a - b), marks, days };
  }

  /** Start the state of each event metric not yet known (or known under another fingerprint:
   * its old days are dropped) from the day after `today`: the events of the day a spec arrived
   * were not all counted under it, so its windows start the next day and none is partial. */
  install(specs: Iterable<MetricSpec>, today: number): void {
    this.see(today);
    for (const spec of specs) {
      const rule = spec.events;
      if (rule === undefined) continue;
      if (this.metrics.get(spec.name)?.fingerprint === spec.fingerprint) continue;
      this.metrics.set(spec.name, { fingerprint: spec.fingerprint, through: firstWindowEnd(spec, rule, this.newest + 1) - 1, days: new Map() });
    }
  }

  /** Move the newest day forward to `day` (never back) and return it. */
  see(day: number): number {
    if (day > this.newest) this.newest = day;
    return this.newest;
  }

  /** `metric`'s aggregate of `day`, made on first use. */
  dayOf(metric: string, day: number): DayAggregate {
    const state = this.metrics.get(metric) as MetricDays;
    let aggregate = state.days.get(day);
    if (aggregate === undefined) state.days.set(day, (aggregate = new DayAggregate()));
    return aggregate;
  }

  /** The device was active (a client open) on `day`. */
  markActive(day: number): void {
    this.active.add(day);
  }

  /** Each window of an installed event metric that closed before the newest day and was not
   * yet considered, oldest first per metric, with its value when it is reported (active on one
   * of its days, a value, at most MAX_BACKFILL_DAYS old); considering a window moves its
   * metric's mark past it, and days no later window reads are dropped. */
  due(specs: ReadonlyMap<string, MetricSpec>): DueWindow[] {
    const out: DueWindow[] = [];
    for (const [name, state] of this.metrics) {
      const spec = specs.get(name);
      const rule = spec?.events;
      if (spec === undefined || rule === undefined || spec.fingerprint !== state.fingerprint) continue;
      for (let day = state.through + 1; day < this.newest; day++) {
        const window = windowEnding(spec, rule, day);
        state.through = day;
        if (window === null || day < this.newest - MAX_BACKFILL_DAYS) continue;
        let active = false;
        for (let d = window.first; d <= window.last && !active; d++) active = this.active.has(d);
        if (!active) continue;
        const days: DayAggregate[] = [];
        for (let d = window.first; d <= window.last; d++) {
          const aggregate = state.days.get(d);
          if (aggregate !== undefined) days.push(aggregate);
        }
        const value = windowValue(rule, days, spec);
        if (value !== null) out.push({ spec, window, value });
      }
      const keepFrom = state.through + 1 - (rule.rolling ? rule.window - 1 : 0);
      for (const day of [...state.days.keys()]) if (day < keepFrom) state.days.delete(day);
    }
    const cutoff = this.newest - ACTIVE_DAYS_KEPT;
    for (const day of [...this.active]) if (day < cutoff) this.active.delete(day);
    return out;
  }
}

/** Add one observed `value` to `day`, `spec`'s aggregate of a day, by its rule (a value that does
 * not fit throws InvalidInput naming the metric, never the value, and adds nothing). */
export function addObservation(spec: MetricSpec, day: DayAggregate, value: unknown): void {
  const aggregate = spec.events?.aggregate;
  if (aggregate === "sum" || aggregate === "mean") day.total += spec.number(value);
  else if (aggregate === "min") day.low = Math.min(day.low, spec.number(value));
  else if (aggregate === "max") day.high = Math.max(day.high, spec.number(value));
  else if (aggregate === "last") day.last = spec.number(value);
  else if (aggregate === "median" || aggregate === "mode") {
    const index = spec.type === "numeric" ? medianBin(spec.number(value), spec.lower as number, spec.upper as number) : spec.indexOf(value);
    day.bins.set(index, (day.bins.get(index) ?? 0) + 1);
  }
  day.n++;
}

/** Events aggregated on the device, as deniable.client.events defines them: a metric's event
 * rule, a day's running aggregate, and the value one window of days reports (docs/STATS.md
 * section 14). One report per metric and window is sent, whatever the number of events. */

import { SpecError } from "./mechanisms.js";

export type Aggregate = "any" | "count" | "sum" | "min" | "max" | "mean" | "median" | "last" | "mode";
/** Every aggregation a spec may declare, in Python's order (error messages list them so). */
export const AGGREGATES: readonly Aggregate[] = ["any", "count", "sum", "min", "max", "mean", "median", "last", "mode"];
/** Aggregations of bare occurrences (`event()`); the others take observed values (`observe()`). */
const COUNTED = new Set<string>(["any", "count"]);
/** Aggregations whose empty window is data (false, zero): every active device reports it. */
const MUST_REPORT_EMPTY = COUNTED;
/** Aggregations with a value for an empty window (a sum of nothing is 0). */
const MAY_REPORT_EMPTY = new Set<string>(["any", "count", "sum"]);
const NUMBER_AGGREGATES = new Set<string>(["count", "sum", "min", "max", "mean", "median", "last"]);
/** The aggregations each metric type can report (a text or set metric has none). */
const EVENT_AGGREGATES: Record<string, ReadonlySet<string>> = {
  boolean: new Set(["any"]), categorical: new Set(["mode"]), numeric: NUMBER_AGGREGATES, histogram: NUMBER_AGGREGATES,
};
/** The rolling windows a spec may declare, in days. */
export const WINDOW_DAYS: readonly number[] = [1, 7, 28];
/** How long after it closed a window is still reported (a device offline longer drops it). */
export const MAX_BACKFILL_DAYS = 31;
/** A numeric metric's median is found over this many equal bins of [lower, upper]. */
export const MEDIAN_BINS = 1024;

/** How a metric aggregates its events: `window` days rolling (reported daily) when `rolling`,
 * else the metric's period; `reportEmpty`: whether a window without events is reported. */
export interface EventRule {
  readonly aggregate: Aggregate;
  readonly window: number;
  readonly rolling: boolean;
  readonly reportEmpty: boolean;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** The rule from its JSON form `{"aggregate": "count", "window": 7}`, with Python's messages. */
export function parseEventRule(metric: string, data: unknown): EventRule {
  if (!isRecord(data)) throw new SpecError(`metric ${metric}: events must be an object like {"aggregate": "count", "window": 7}`);
  const unknown = Object.keys(data).filter((k) => !["aggregate", "window", "report_empty"].includes(k)).sort();
  if (unknown.length) throw new SpecError(`metric ${metric}: events has no field ${unknown[0]}`);
  const aggregate = data.aggregate;
  if (typeof aggregate !== "string" || !(AGGREGATES as readonly string[]).includes(aggregate)) {
    throw new SpecError(`metric ${metric}: events.aggregate must be one of ${AGGREGATES.join(", ")}`);
  }
  const window = data.window ?? "period";
  let days = 1, rolling = false;
  if (window !== "period") {
    if (typeof window !== "number" || !WINDOW_DAYS.includes(window)) {
      throw new SpecError(`metric ${metric}: events.window must be "period" or one of ${WINDOW_DAYS.join(", ")} (days, rolling)`);
    }
    days = window;
    rolling = true;
  }
  const reportEmpty = data.report_empty === undefined ? MUST_REPORT_EMPTY.has(aggregate) : data.report_empty;
  if (typeof reportEmpty !== "boolean") throw new SpecError(`metric ${metric}: events.report_empty must be true or false`);
  return Object.freeze({ aggregate: aggregate as Aggregate, window: days, rolling, reportEmpty });
}

/** Refuse a rule its metric cannot carry (Python's EventRule.check, the same messages). */
export function checkEventRule(rule: EventRule, metric: string, type: string, period: string): void {
  const allowed = EVENT_AGGREGATES[type] ?? new Set<string>();
  if (!allowed.has(rule.aggregate)) {
    const can = AGGREGATES.filter((a) => allowed.has(a)).join(", ") || "no aggregation";
    throw new SpecError(`metric ${metric}: a ${type} metric cannot aggregate events by ${rule.aggregate} (it can: ${can})`);
  }
  if (rule.rolling && period !== "day") {
    throw new SpecError(`metric ${metric}: a rolling window of ${rule.window} days is reported daily, so its period must be day`);
  }
  if (MUST_REPORT_EMPTY.has(rule.aggregate) && !rule.reportEmpty) {
    throw new SpecError(`metric ${metric}: events.report_empty must be true for ${rule.aggregate}: a window without events is data (false, zero), and without it the estimate would be a share of devices that saw an event`);
  }
  if (rule.reportEmpty && !MAY_REPORT_EMPTY.has(rule.aggregate)) {
    throw new SpecError(`metric ${metric}: events.report_empty cannot be true for ${rule.aggregate}: a window without an observation has no value`);
  }
}

/** The rule's JSON form (in the fingerprint): `window` in days when rolling, else "period". */
export function eventRuleDict(rule: EventRule): Record<string, unknown> {
  return { aggregate: rule.aggregate, window: rule.rolling ? rule.window : "period", report_empty: rule.reportEmpty };
}

/** Whether the rule counts bare occurrences (`event()`), not observed values (`observe()`). */
export const isCounted = (rule: EventRule): boolean => COUNTED.has(rule.aggregate);

/** One metric's running aggregate of one day: events (or observations) `n`, their sum, extremes,
 * latest value and counts per bin (a median's bins, a histogram's buckets, a mode's categories). */
export class DayAggregate {
  n = 0;
  total = 0;
  low = Infinity;
  high = -Infinity;
  last: number | null = null;
  bins = new Map<number, number>();

  /** Python's compact JSON form `[n, total, low, high, last, [[bin, count], ...]]`. */
  toJSON(): unknown[] {
    const finiteOrNull = (x: number): number | null => (Number.isFinite(x) ? x : null);
    return [this.n, this.total, finiteOrNull(this.low), finiteOrNull(this.high), this.last, [...this.bins].sort(([a], [b]) => a - b)];
  }

  /** The aggregate back from its JSON form; null if it is not one (a damaged state). */
  static fromJSON(raw: unknown): DayAggregate | null {
    if (!Array.isArray(raw) || raw.length !== 6) return null;
    const [n, total, low, high, last, bins] = raw as unknown[];
    const num = (x: unknown): boolean => typeof x === "number" && Number.isFinite(x);
    if (!Number.isSafeInteger(n) || (n as number) < 0 || !num(total) || !(low === null || num(low)) || !(high === null || num(high))
      || !(last === null || num(last)) || !Array.isArray(bins) || bins.length > MEDIAN_BINS
      || !bins.every((b) => Array.isArray(b) && b.length === 2 && Number.isSafeInteger(b[0]) && Number.isSafeInteger(b[1]) && b[1] >= 0)) {
      return null;
    }
    const day = new DayAggregate();
    day.n = n as number;
    day.total = total as number;
    day.low = low === null ? Infinity : (low as number);
    day.high = high === null ? -Infinity : (high as number);
    day.last = last as number | null;
    day.bins = new Map(bins as Array<[number, number]>);
    return day;
  }
}

/** The bin of MEDIAN_BINS equal bins of [lower, upper] that `value` (clamped) falls in. */
export function medianBin(value: number, lower: number, upper: number): number {
  const share = (Math.min(Math.max(value, lower), upper) - lower) / (upper - lower);
  return Math.min(Math.floor(share * MEDIAN_BINS), MEDIAN_BINS - 1);
}

/** The correctly rounded sum of `values` (Python's math.fsum: Shewchuk's exact partials), so a
 * window's sum and mean are Python's to the last bit. */
export function fsum(values: Iterable<number>): number {
  const partials: number[] = [];
  for (let x of values) {
    let i = 0;
    for (let y of partials) {
      if (Math.abs(x) < Math.abs(y)) [x, y] = [y, x];
      const hi = x + y;
      const lo = y - (hi - x);
      if (lo !== 0) partials[i++] = lo;
      x = hi;
    }
    partials.length = i;
    partials.push(x);
  }
  let n = partials.length;
  if (n === 0) return 0;
  let hi = partials[--n];
  let lo = 0;
  while (n > 0) {
    const x = hi;
    const y = partials[--n];
    hi = x + y;
    lo = y - (hi - x);
    if (lo !== 0) break;
  }
  if (n > 0 && ((lo < 0 && partials[n - 1] < 0) || (lo > 0 && partials[n - 1] > 0))) {
    const y = lo * 2;
    const x = hi + y;
    if (y === x - hi) hi = x;
  }
  return hi;
}

/** What a metric's window value needs besides its days: a numeric metric's bounds, a histogram's
 * edges, a categorical metric's categories. */
export interface ValueDomain {
  lower?: number;
  upper?: number;
  edges?: readonly number[];
  categories: readonly string[];
}

/** The value a window of `days` (oldest first) reports, or null when it reports nothing (no
 * event, and an empty window is not reported): Python's window_value. */
export function windowValue(rule: EventRule, days: readonly DayAggregate[], domain: ValueDomain): boolean | number | string | null {
  const n = days.reduce((sum, d) => sum + d.n, 0);
  if (n === 0) {
    if (!rule.reportEmpty) return null;
    return rule.aggregate === "any" ? false : 0;
  }
  const seen = days.filter((d) => d.n > 0);
  switch (rule.aggregate) {
    case "any": return true;
    case "count": return n;
    case "sum": return fsum(days.map((d) => d.total));
    case "mean": return fsum(days.map((d) => d.total)) / n;
    case "min": return Math.min(...seen.map((d) => d.low));
    case "max": return Math.max(...seen.map((d) => d.high));
    case "last": return seen[seen.length - 1].last;
    default: break;
  }
  const counts = new Map<number, number>();
  for (const day of days) for (const [index, c] of day.bins) counts.set(index, (counts.get(index) ?? 0) + c);
  if (rule.aggregate === "mode") {
    const most = Math.max(...counts.values());
    return domain.categories[Math.min(...[...counts].filter(([, c]) => c === most).map(([i]) => i))];
  }
  const total = [...counts.values()].reduce((a, b) => a + b, 0);
  const middle = Math.floor((total + 1) / 2);
  let running = 0;
  let index = -1;
  for (const i of [...counts.keys()].sort((a, b) => a - b)) {
    running += counts.get(i) as number;
    if (running >= middle) {
      index = i;
      break;
    }
  }
  if (domain.edges !== undefined) return domain.edges[index];
  const lower = domain.lower as number, upper = domain.upper as number;
  return lower + ((index + 0.5) * (upper - lower)) / MEDIAN_BINS;
}

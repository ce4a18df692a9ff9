/** Metric specs, their fingerprints and period labels, as deniable.client.spec defines them. */

import {
  type Mechanism, MAX_CATEGORIES, type NumericMechanism, SpecError, isCategoricalMechanism, isNumericMechanism,
  makeMechanism, makeNumericMechanism,
} from "./mechanisms.js";
import { sha256Hex } from "./sha256.js";

export type MetricType = "boolean" | "categorical" | "numeric" | "histogram";
export type PeriodKind = "day" | "week" | "month";

/** A spec in the JSON form a collector serves (`fingerprint` ignored, null fields absent). */
export interface SpecData {
  name: string;
  type: MetricType;
  epsilon: number;
  mechanism?: string;
  period?: PeriodKind;
  categories?: string[];
  lower?: number;
  upper?: number;
  edges?: number[];
  fingerprint?: string;
  [other: string]: unknown;
}

/** A value does not fit its metric; the message names the metric, never the value. */
export class InvalidInput extends Error {
  override name = "InvalidInput";
}

const METRIC_NAME = /^[a-z][a-z0-9_.-]{0,63}$/;
const BOOLEAN_CATEGORIES = ["false", "true"];

/** RFC 8785 canonical JSON of the values a spec holds. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value === "boolean") return JSON.stringify(value);
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new Error("canonical JSON has no NaN or infinity");
    return Object.is(value, -0) ? "0" : String(value);
  }
  if (typeof value === "string") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (typeof value === "object") {
    const keys = Object.keys(value as object).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(",")}}`;
  }
  throw new TypeError(`cannot canonicalize ${typeof value}`);
}

const finite = (x: unknown, what: string): number => {
  if (typeof x !== "number" || !Number.isFinite(x)) throw new SpecError(`${what} must be a finite number`);
  return x;
};

/** A resolved, immutable metric spec. */
export class MetricSpec {
  readonly name: string;
  readonly type: MetricType;
  readonly epsilon: number;
  readonly mechanism: string;
  readonly period: PeriodKind;
  readonly categories: readonly string[];
  readonly lower?: number;
  readonly upper?: number;
  readonly edges?: readonly number[];
  readonly randomizer?: Mechanism;
  readonly numericRandomizer?: NumericMechanism;
  readonly fingerprint: string;

  private constructor(data: SpecData) {
    const { name, type } = data;
    if (typeof name !== "string" || !METRIC_NAME.test(name)) {
      throw new SpecError("metric name must match [a-z][a-z0-9_.-]{0,63}");
    }
    this.name = name;
    if (!["boolean", "categorical", "numeric", "histogram"].includes(type)) {
      throw new SpecError(`metric ${name}: type must be one of boolean, categorical, numeric, histogram`);
    }
    this.type = type;
    const period = data.period ?? "day";
    if (!["day", "week", "month"].includes(period)) throw new SpecError(`metric ${name}: period must be one of day, week, month`);
    this.period = period;
    const mechanism = data.mechanism ?? "auto";
    if (typeof mechanism !== "string") throw new SpecError(`metric ${name}: mechanism must be a name (a string)`);
    if (type === "numeric") {
      if (data.categories !== undefined || data.edges !== undefined) throw new SpecError(`metric ${name}: a numeric metric has no categories or edges`);
      const lower = finite(data.lower, `metric ${name}: lower`);
      const upper = finite(data.upper, `metric ${name}: upper`);
      if (!(lower < upper)) throw new SpecError(`metric ${name}: lower must be less than upper`);
      if (Math.max(Math.abs(lower), Math.abs(upper)) > 1e300) throw new SpecError(`metric ${name}: lower and upper must lie within +-1e300`);
      if (!(upper - lower >= Math.max(1e-300, 1e-12 * Math.max(Math.abs(lower), Math.abs(upper))))) {
        throw new SpecError(`metric ${name}: upper - lower is too narrow for float arithmetic`);
      }
      if (mechanism !== "auto" && !isNumericMechanism(mechanism)) throw new SpecError(`metric ${name}: unknown mechanism; choose auto, duchi, pm or hybrid`);
      const randomizer = wrap(name, () => makeNumericMechanism(mechanism, data.epsilon));
      this.lower = lower;
      this.upper = upper;
      this.categories = [];
      this.epsilon = randomizer.epsilon;
      this.mechanism = randomizer.name;
      this.numericRandomizer = randomizer;
    } else {
      let categories: string[];
      if (type === "histogram") {
        if (!Array.isArray(data.edges)) throw new SpecError(`metric ${name}: edges must be a list of numbers`);
        const edges = data.edges.map((e) => finite(e, `metric ${name}: each edge`));
        if (edges.length < 3) throw new SpecError(`metric ${name}: a histogram needs at least 3 edges (2 buckets)`);
        if (edges.length - 1 > MAX_CATEGORIES) throw new SpecError(`metric ${name}: at most ${MAX_CATEGORIES} buckets`);
        if (edges.some((e, i) => i > 0 && e <= edges[i - 1])) throw new SpecError(`metric ${name}: edges must be strictly increasing`);
        this.edges = Object.freeze(edges);
        categories = bucketLabels(edges);
        if (data.categories !== undefined && data.categories.join("\u0000") !== categories.join("\u0000")) {
          throw new SpecError(`metric ${name}: its categories are not the bucket labels of its edges`);
        }
      } else {
        if (data.lower !== undefined || data.upper !== undefined || data.edges !== undefined) throw new SpecError(`metric ${name}: lower, upper and edges are for numbers only`);
        categories = data.categories ?? (type === "boolean" ? BOOLEAN_CATEGORIES : []);
        if (!Array.isArray(categories)) throw new SpecError("a metric spec's categories must be a list");
        if (type === "boolean" && categories.join() !== "false,true") throw new SpecError(`metric ${name}: boolean categories are always false, true`);
        if (!categories.every((c) => typeof c === "string" && c.length > 0)) throw new SpecError(`metric ${name}: categories must be non-empty strings`);
        if (new Set(categories).size !== categories.length) throw new SpecError(`metric ${name}: categories must be distinct`);
        if (categories.length < 2) throw new SpecError(`metric ${name}: needs at least 2 categories`);
      }
      if (mechanism !== "auto" && !isCategoricalMechanism(mechanism)) throw new SpecError(`metric ${name}: unknown mechanism; choose auto, brr, krr, oue or olh`);
      if (mechanism === "brr" && type !== "boolean") throw new SpecError(`metric ${name}: brr is for boolean metrics only`);
      const resolved = mechanism === "auto" && type !== "boolean" && categories.length === 2 ? "krr" : mechanism;
      const randomizer = wrap(name, () => makeMechanism(resolved, categories.length, data.epsilon));
      this.categories = Object.freeze([...categories]);
      this.epsilon = randomizer.epsilon;
      this.mechanism = randomizer.name;
      this.randomizer = randomizer;
    }
    this.fingerprint = sha256Hex(new TextEncoder().encode(canonicalJson(this.fingerprintFields()))).slice(0, 16);
    Object.freeze(this);
  }

  /** Build (and resolve) a spec from its JSON form. */
  static fromDict(data: SpecData): MetricSpec {
    if (typeof data !== "object" || data === null || Array.isArray(data)) throw new SpecError("a metric spec must be a JSON object");
    const cleaned = Object.fromEntries(Object.entries(data).filter(([, v]) => v !== null && v !== undefined)) as SpecData;
    return new MetricSpec(cleaned);
  }

  /** The number of categories (a histogram's buckets; 0 for a numeric metric). */
  get k(): number { return this.categories.length; }

  /** The fields the fingerprint covers. */
  fingerprintFields(): Record<string, unknown> {
    const fields: Record<string, unknown> = {
      name: this.name, type: this.type, epsilon: this.epsilon, mechanism: this.mechanism, period: this.period,
    };
    if (this.type === "categorical") fields.categories = [...this.categories];
    else if (this.type === "numeric") { fields.lower = this.lower; fields.upper = this.upper; }
    else if (this.type === "histogram") fields.edges = [...(this.edges as number[])];
    return fields;
  }

  /** The JSON form, with the fingerprint. */
  toDict(): SpecData {
    return { ...this.fingerprintFields(), fingerprint: this.fingerprint } as SpecData;
  }

  /** The category index of a recorded value (InvalidInput names the metric, never the value). */
  indexOf(value: unknown): number {
    if (this.type === "boolean") {
      if (typeof value === "boolean") return value ? 1 : 0;
      throw new InvalidInput(`metric ${this.name}: expects a boolean`);
    }
    if (this.type === "histogram") {
      const x = this.finiteValue(value);
      const edges = this.edges as number[];
      let i = 0;
      while (i < edges.length && edges[i] <= x) i++;
      return Math.max(0, Math.min(this.k - 1, i - 1));
    }
    if (this.type === "numeric") throw new InvalidInput(`metric ${this.name} is numeric: it has no categories`);
    if (typeof value !== "string") throw new InvalidInput(`metric ${this.name}: expects a category name (string)`);
    const index = this.categories.indexOf(value);
    if (index < 0) {
      const shown = this.categories.slice(0, 20).join(", ") + (this.k > 20 ? `, ... (${this.k} in all)` : "");
      throw new InvalidInput(`metric ${this.name}: value is not one of its categories (case-sensitive): ${shown}`);
    }
    return index;
  }

  /** A numeric metric's value clamped to [lower, upper] and mapped to t in [-1, 1]. */
  scale(value: unknown): number {
    const x = this.finiteValue(value);
    const lower = this.lower as number, upper = this.upper as number;
    const clamped = Math.min(Math.max(x, lower), upper);
    return Math.max(-1, Math.min(1, ((clamped - lower) / (upper - lower)) * 2 - 1));
  }

  private finiteValue(value: unknown): number {
    if (typeof value !== "number") throw new InvalidInput(`metric ${this.name}: expects a number`);
    if (!Number.isFinite(value)) throw new InvalidInput(`metric ${this.name}: expects a finite number (not NaN or infinite)`);
    return value;
  }

  /** The period label containing `moment` (UTC). */
  periodOf(moment: Date): string { return periodLabel(this.period, moment); }
}

function wrap<T>(name: string, make: () => T): T {
  try {
    return make();
  } catch (exc) {
    throw new SpecError(`metric ${name}: ${(exc as Error).message}`);
  }
}

/** Bucket labels `[0, 100)`, the last one closed. */
function bucketLabels(edges: number[]): string[] {
  const texts = edges.map((e) => canonicalJson(e));
  const labels = texts.slice(1).map((b, i) => `[${texts[i]}, ${b})`);
  labels[labels.length - 1] = `${labels[labels.length - 1].slice(0, -1)}]`;
  return labels;
}

const pad = (n: number, width = 2): string => String(n).padStart(width, "0");

/** A period label: a UTC date, an ISO week (`2026-W47`) or a month. */
export function periodLabel(kind: PeriodKind, moment: Date): string {
  const year = moment.getUTCFullYear(), month = moment.getUTCMonth(), day = moment.getUTCDate();
  if (kind === "day") return `${pad(year, 4)}-${pad(month + 1)}-${pad(day)}`;
  if (kind === "month") return `${pad(year, 4)}-${pad(month + 1)}`;
  const date = new Date(Date.UTC(year, month, day));
  const weekday = (date.getUTCDay() + 6) % 7;
  date.setUTCDate(date.getUTCDate() - weekday + 3);
  const isoYear = date.getUTCFullYear(); // the year of the week's Thursday
  const week = 1 + Math.floor((date.getTime() - Date.UTC(isoYear, 0, 1)) / 604800000);
  return `${pad(isoYear, 4)}-W${pad(week)}`;
}

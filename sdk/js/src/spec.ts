/** Metric specs, their fingerprints and period labels, as deniable.client.spec defines them. */

import type { Randomness } from "./random.js";
import {
  type Mechanism, type NumericMechanism, SpecError, type TextPayload,
  makeMechanism, makeNumericMechanism,
} from "./mechanisms.js";
import { checkEventRule, type EventRule, eventRuleDict, parseEventRule } from "./events.js";
import { PaddingSampling } from "./sets.js";
import { sha256Hex } from "./sha256.js";

export type MetricType = "boolean" | "categorical" | "numeric" | "histogram" | "text" | "set";
export type PeriodKind = "day" | "week" | "month";
/** How a metric's reports may reach the collector: `direct` (straight to it, or through a
 * shuffler if the client has one) or `shuffled` (only through a shuffler). */
export type Delivery = "direct" | "shuffled";

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
  max_length?: number;
  max_items?: number;
  dimensions?: Record<string, string[]>;
  delivery?: Delivery;
  /** How the device aggregates the metric's events before one report per window. */
  events?: { aggregate: string; window?: number | "period"; report_empty?: boolean };
  fingerprint?: string;
  [other: string]: unknown;
}

/** A value does not fit its metric; the message names the metric, never the value. */
export class InvalidInput extends Error {
  override name = "InvalidInput";
}

const METRIC_NAME = /^[a-z][a-z0-9_.-]{0,63}$/;
const BOOLEAN_CATEGORIES = ["false", "true"];
const DIMENSION_NAME = /^[a-z][a-z0-9_]{0,31}$/;
const DIMENSION_VALUE = /^[A-Za-z0-9][A-Za-z0-9_.+-]{0,31}$/;
/** The value every dimension has besides its listed ones: what an unlisted value is sent as. */
export const OTHER = "other";
/** The most values one dimension may list (`other` besides): dimensions travel in the clear,
 * so each must be a coarse attribute many devices share (as the Python MAX_DIMENSION_VALUES;
 * docs/privacy.md says why). */
export const MAX_DIMENSION_VALUES = 64;
/** The most cells a metric's dimensions may make: the product of (listed values + 1). */
export const MAX_CELLS = 1000;
/** The most cells a spec's dimensions may make together (the product of (listed values + 1)):
 * as many as one dimension at MAX_DIMENSION_VALUES makes, so an identifier split over two
 * dimensions is refused too (as the Python MAX_DIMENSION_CELLS; docs/privacy.md says why). */
export const MAX_DIMENSION_CELLS = MAX_DIMENSION_VALUES + 1;

/** A text metric's randomizer (deniable/text's PrefixSketch). */
export interface TextRandomizer {
  readonly name: string;
  readonly maxLength: number;
  readonly epsilon: number;
  readonly levels: number;
  /** The padded bytes of a string; an Error (never naming the value) if it has none. */
  encode(value: unknown): Uint8Array;
  randomize(padded: Uint8Array, level: number, rng?: Randomness): TextPayload;
}

/** What makes a text spec's randomizer: deniable/text's `pem`. */
export type TextFactory = (data: SpecData) => TextRandomizer;

/** RFC 8785 canonical JSON of the values a spec holds. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value === "boolean") return JSON.stringify(value);
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new TypeError("not canonical JSON");
    return Object.is(value, -0) ? "0" : String(value);
  }
  if (typeof value === "string") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (typeof value === "object") {
    const keys = Object.keys(value as object).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(",")}}`;
  }
  throw new TypeError("not canonical JSON");
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
  /** A text metric's longest string, in UTF-8 bytes. */
  readonly maxLength?: number;
  /** (name, listed values) pairs, sorted by name. */
  readonly dimensions: ReadonlyArray<readonly [string, readonly string[]]>;
  /** The delivery rule: `shuffled` metrics are sent only through a shuffler. */
  readonly delivery: Delivery;
  /** How the device aggregates the metric's events (undefined: a metric of recorded values). */
  readonly events?: EventRule;
  readonly randomizer?: Mechanism;
  readonly numericRandomizer?: NumericMechanism;
  /** A set metric's padding-and-sampling randomizer (its oracle over k + L items inside). */
  readonly setRandomizer?: PaddingSampling;
  readonly text?: TextRandomizer;
  readonly fingerprint: string;

  private constructor(data: SpecData, text?: TextFactory) {
    const { name, type } = data;
    const bad: (why: string) => never = (why) => { throw new SpecError(`metric ${name}: ${why}`); };
    if (typeof name !== "string" || !METRIC_NAME.test(name)) {
      throw new SpecError(`metric name must match ${METRIC_NAME.source}`);
    }
    this.name = name;
    if (!["boolean", "categorical", "numeric", "histogram", "text", "set"].includes(type)) {
      bad("unknown type");
    }
    this.type = type;
    const dimensions = data.dimensions ?? {};
    if (typeof dimensions !== "object" || Array.isArray(dimensions)) bad("dimensions must be an object of name: [values]");
    this.dimensions = checkDimensions(name, dimensions);
    if (data.max_length !== undefined && type !== "text") bad("max_length is for text metrics only");
    if (data.max_items !== undefined && type !== "set") bad("max_items is for set metrics only");
    const period = data.period ?? "day";
    if (!["day", "week", "month"].includes(period)) bad("period must be one of day, week, month");
    this.period = period;
    const delivery = data.delivery ?? "direct";
    if (!["direct", "shuffled"].includes(delivery)) bad("delivery must be one of direct, shuffled");
    this.delivery = delivery;
    const mechanism = data.mechanism ?? "auto";
    if (typeof mechanism !== "string") bad("mechanism must be a name (a string)");
    const events = data.events === undefined ? undefined : parseEventRule(name, data.events);
    if (type === "text") {
      if (text === undefined) throw new SpecError(`metric ${name} is text: pass text: pem (deniable/text)`);
      const randomizer = wrap(name, () => text(data));
      this.maxLength = randomizer.maxLength;
      this.categories = [];
      this.epsilon = randomizer.epsilon;
      this.mechanism = randomizer.name;
      this.text = randomizer;
    } else if (type === "numeric") {
      if (data.categories !== undefined || data.edges !== undefined) bad("a numeric metric has no categories or edges");
      const lower = finite(data.lower, `metric ${name}: lower`);
      const upper = finite(data.upper, `metric ${name}: upper`);
      if (!(lower < upper)) bad("lower must be less than upper");
      if (Math.max(Math.abs(lower), Math.abs(upper)) > 1e300) bad("lower and upper must lie within +-1e300");
      if (!(upper - lower >= Math.max(1e-300, 1e-12 * Math.max(Math.abs(lower), Math.abs(upper))))) {
        bad("upper - lower is too narrow");
      }
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
        if (!Array.isArray(data.edges)) bad("edges must be a list of numbers");
        const edges = data.edges.map((e) => finite(e, `metric ${name}: each edge`));
        if (edges.length < 3) bad("a histogram needs at least 3 edges");
        if (edges.some((e, i) => i > 0 && e <= edges[i - 1])) bad("edges must be strictly increasing");
        this.edges = Object.freeze(edges);
        categories = bucketLabels(edges);
        if (data.categories !== undefined && data.categories.join("\u0000") !== categories.join("\u0000")) {
          bad("categories are not its buckets");
        }
      } else {
        if (data.lower !== undefined || data.upper !== undefined || data.edges !== undefined) bad("lower, upper and edges are for numbers only");
        categories = data.categories ?? (type === "boolean" ? BOOLEAN_CATEGORIES : []);
        if (!Array.isArray(categories)) throw new SpecError("a metric spec's categories must be a list");
        if (type === "boolean" && categories.join() !== "false,true") bad("boolean categories are always false, true");
        if (!categories.every((c) => typeof c === "string" && c.length > 0)) bad("categories must be non-empty strings");
        if (new Set(categories).size !== categories.length) bad("categories must be distinct");
        if (categories.length < 2) bad("needs at least 2 categories");
      }
      if (mechanism === "brr" && type !== "boolean") bad("brr is for boolean metrics only");
      if (type === "set") {
        if (data.max_items === undefined) bad("a set metric needs max_items, the most categories a device is expected to hold at once");
        if (!["auto", "krr", "oue", "olh"].includes(mechanism)) bad("a set metric's oracle is auto, krr, oue or olh");
        const sets = wrap(name, () => new PaddingSampling(categories.length, data.max_items as number, data.epsilon, mechanism));
        this.categories = Object.freeze([...categories]);
        this.epsilon = sets.epsilon;
        this.mechanism = sets.oracle.name;
        this.setRandomizer = sets;
        if (events !== undefined) checkEventRule(events, name, type, period);
        this.events = events;
        this.fingerprint = sha256Hex(new TextEncoder().encode(canonicalJson(this.#fields()))).slice(0, 16);
        Object.freeze(this);
        return;
      }
      const resolved = mechanism === "auto" && type !== "boolean" && categories.length === 2 ? "krr" : mechanism;
      const randomizer = wrap(name, () => makeMechanism(resolved, categories.length, data.epsilon));
      this.categories = Object.freeze([...categories]);
      this.epsilon = randomizer.epsilon;
      this.mechanism = randomizer.name;
      this.randomizer = randomizer;
    }
    if (events !== undefined) checkEventRule(events, name, type, period);
    this.events = events;
    this.fingerprint = sha256Hex(new TextEncoder().encode(canonicalJson(this.#fields()))).slice(0, 16);
    Object.freeze(this);
  }

  /** Build (and resolve) a spec from its JSON form; a text spec needs `text` (deniable/text's pem). */
  static fromDict(data: SpecData, text?: TextFactory): MetricSpec {
    if (typeof data !== "object" || data === null || Array.isArray(data)) throw new SpecError("a metric spec must be a JSON object");
    const cleaned = Object.fromEntries(Object.entries(data).filter(([, v]) => v !== null && v !== undefined)) as SpecData;
    return new MetricSpec(cleaned, text);
  }

  /** The number of categories (a histogram's buckets; 0 for a numeric or text metric). */
  get k(): number { return this.categories.length; }

  /** The fields the fingerprint covers. */
  #fields(): Record<string, unknown> {
    const fields: Record<string, unknown> = {
      name: this.name, type: this.type, epsilon: this.epsilon, mechanism: this.mechanism, period: this.period,
    };
    if (this.type === "categorical") fields.categories = [...this.categories];
    else if (this.type === "set") { fields.categories = [...this.categories]; fields.max_items = this.setRandomizer?.maxItems; }
    else if (this.type === "numeric") { fields.lower = this.lower; fields.upper = this.upper; }
    else if (this.type === "histogram") fields.edges = [...(this.edges as number[])];
    else if (this.type === "text") fields.max_length = this.maxLength;
    if (this.dimensions.length > 0) fields.dimensions = Object.fromEntries(this.dimensions);
    if (this.delivery !== "direct") fields.delivery = this.delivery; // absent when direct: older fingerprints hold
    if (this.events !== undefined) fields.events = eventRuleDict(this.events); // absent for recorded values
    return fields;
  }

  /** The JSON form, with the fingerprint. */
  toDict(): SpecData {
    return { ...this.#fields(), fingerprint: this.fingerprint } as SpecData;
  }

  /** The category index of a recorded value (InvalidInput names the metric, never the value). */
  indexOf(value: unknown): number {
    if (this.type === "boolean") {
      if (typeof value === "boolean") return value ? 1 : 0;
      throw new InvalidInput(`metric ${this.name}: expects a boolean`);
    }
    if (this.type === "histogram") {
      const x = this.#finite(value);
      const edges = this.edges as number[];
      let i = 0;
      while (i < edges.length && edges[i] <= x) i++;
      return Math.max(0, Math.min(this.k - 1, i - 1));
    }
    if (this.type === "numeric" || this.type === "text") throw new InvalidInput(`metric ${this.name} is ${this.type}: it has no categories`);
    if (typeof value !== "string") throw new InvalidInput(`metric ${this.name}: expects a category name (string)`);
    const index = this.categories.indexOf(value);
    if (index < 0) {
      const shown = this.categories.slice(0, 20).join(", ") + (this.k > 20 ? `, ... (${this.k} in all)` : "");
      throw new InvalidInput(`metric ${this.name}: value is not one of its categories (case-sensitive): ${shown}`);
    }
    return index;
  }

  /** A set metric's value (an array or Set of category names) as sorted distinct category
   * indices (InvalidInput names the metric, never the value). */
  itemsOf(value: unknown): number[] {
    if (!(Array.isArray(value) || value instanceof Set) || ![...value].every((v) => typeof v === "string")) {
      throw new InvalidInput(`metric ${this.name}: expects a set (or array) of category names (strings)`);
    }
    const indices = [...value].map((v) => this.categories.indexOf(v as string));
    if (indices.some((i) => i < 0)) {
      const shown = this.categories.slice(0, 20).join(", ") + (this.k > 20 ? `, ... (${this.k} in all)` : "");
      throw new InvalidInput(`metric ${this.name}: a value is not one of its categories (case-sensitive): ${shown}`);
    }
    return [...new Set(indices)].sort((a, b) => a - b);
  }

  /** A numeric metric's value clamped to [lower, upper] and mapped to t in [-1, 1]. */
  scale(value: unknown): number {
    const x = this.#finite(value);
    const lower = this.lower as number, upper = this.upper as number;
    const clamped = Math.min(Math.max(x, lower), upper);
    return Math.max(-1, Math.min(1, ((clamped - lower) / (upper - lower)) * 2 - 1));
  }

  /** A recorded number, checked finite (InvalidInput names the metric, never the value). */
  number(value: unknown): number { return this.#finite(value); }

  #finite(value: unknown): number {
    if (typeof value !== "number") throw new InvalidInput(`metric ${this.name}: expects a number`);
    if (!Number.isFinite(value)) throw new InvalidInput(`metric ${this.name}: expects a finite number`);
    return value;
  }

  /** The `"dims"` member of this metric's reports from a device with `context` (`""` without
   * dimensions): each dimension's context value if listed, else `other`, in name order (as
   * deniable.client.wire.dims_text writes them; names and values need no JSON escapes). */
  dimsText(context: Record<string, unknown>): string {
    const dims = this.dimensions.map(([n, values]) => {
      const v = context[n]; // a name is [a-z][a-z0-9_]*: an inherited member is a function, never listed
      return `"${n}":"${typeof v === "string" && values.includes(v) ? v : OTHER}"`;
    });
    return dims.length ? `,"dims":{${dims}}` : "";
  }

  /** The period label containing `moment` (UTC). */
  periodOf(moment: Date): string { return periodLabel(this.period, moment); }
}

/** A spec's dimensions checked (names, listed values, the cell cap) and sorted by name. */
function checkDimensions(metric: string, raw: object): Array<[string, string[]]> {
  let cells = 1;
  const out = Object.entries(raw).map(([name, values]): [string, string[]] => {
    if (!DIMENSION_NAME.test(name) || !Array.isArray(values) || !values.length || new Set(values).size < values.length
      || !values.every((v) => typeof v === "string" && DIMENSION_VALUE.test(v) && v !== OTHER)) {
      throw new SpecError(`metric ${metric}: dimension ${name}: its name must match ${DIMENSION_NAME.source} and its values (distinct, not ${OTHER}) ${DIMENSION_VALUE.source}`);
    }
    if (values.length > MAX_DIMENSION_VALUES) {
      throw new SpecError(`metric ${metric}: dimension ${name} lists ${values.length} values; at most ${MAX_DIMENSION_VALUES}`);
    }
    cells *= values.length + 1;
    return [name, Object.freeze([...values]) as string[]];
  });
  if (cells > MAX_CELLS) throw new SpecError(`metric ${metric}: its dimensions make ${cells} cells; at most ${MAX_CELLS}`);
  if (cells > MAX_DIMENSION_CELLS) {
    throw new SpecError(`metric ${metric}: its dimensions make ${cells} cells; at most ${MAX_DIMENSION_CELLS}: they travel in the clear and must be coarse groups, never an identifier split over dimensions`);
  }
  return out.sort(([a], [b]) => (a < b ? -1 : 1));
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

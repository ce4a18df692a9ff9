/** The Client: specs (fetched with ETag, pinned, capped by maxEpsilon), the budget ledger, the
 * offline queue with backoff and resend under the same ids, problems() and stats(), as the
 * Python client (docs/sdk.md). Only randomized reports are ever stored or sent. */

import { DEFAULT_INSTANTANEOUS_RATIO, isIndex, MAX_EPSILON, type Payload, SpecError, type TwoLayers, twoLayers } from "./mechanisms.js";
import { hmacSha256Hex } from "./sha256.js";
import { hex, systemRandomness, uuid4 } from "./random.js";
import { InvalidInput, MetricSpec, type SpecData, type TextFactory } from "./spec.js";
import type { PaddingSampling } from "./sets.js";
import { defaultStorage, type StateStorage, stateProblem } from "./storage.js";
import { isCounted } from "./events.js";
import { addObservation, type BookData, dayNumber, WindowBook } from "./windows.js";
import { batchBody, METRICS_PATH, payloadText, REPORTS_PATH, reportText } from "./wire.js";

export interface ClientOptions {
  /** The collector's base URL (`https://telemetry.example.com`, not `.../v1`). */
  url: string;
  /** The ingest key, if the collector wants one. */
  ingestKey?: string;
  /** Specs in code: then the only ones used (the served list is only compared). */
  metrics?: SpecData[];
  /** A served spec above this eps is refused (default 4). */
  maxEpsilon?: number;
  /** The most eps one metric may spend on this device over its life, over any two histories
   * of its values (default: no cap). It counts reports sent, never values: n reports cost
   * n eps, or memoized eps for one and n eps_inst from the second (without the fresh layer,
   * one report at most), so whether a report is sent never depends on a value. */
  lifetimeEpsilon?: number;
  /** Reports per metric per period (default 1). */
  maxReportsPerPeriod?: number;
  /** RAPPOR's memoization: true, or the metric names (default false). */
  memoize?: boolean | string[];
  /** The fresh layer's eps over the metric's (default 2); null sends the permanent answer as is. */
  instantaneousRatio?: number | null;
  /** Text metrics' randomizer: `pem` from "deniable/text" (without it, text metrics are not recorded). */
  text?: TextFactory;
  /** Where the state is kept (default: localStorage in a browser, memory elsewhere). */
  storage?: StateStorage;
  /** Reports per upload (default 500, at most 1000). */
  batchSize?: number;
  /** The most reports kept; past it the oldest not in flight are dropped (default 10,000). */
  maxQueue?: number;
  /** Milliseconds between background uploads (default 30 s); 0 uploads only on flush(). */
  flushInterval?: number;
  /** Milliseconds between spec refreshes (default 1 hour). */
  refreshInterval?: number;
  /** The longest backoff in milliseconds (default 10 minutes). */
  maxBackoff?: number;
  /** Milliseconds one request may take, answer included (default 30 s). */
  timeout?: number;
  /** This device's public attributes (`{platform: "web"}`): each report of a metric that
   * declares dimensions carries their values in the clear, an unlisted (or missing) one as
   * `other`. Never put a secret here; change it with setContext. */
  context?: Record<string, string>;
  /** A shuffler's base URL: reports go there sealed, with `sealing` (docs/sdk-js.md). */
  shuffler?: string;
  /** Sealing for `shuffler`: `sealing` from "deniable/shuffle". */
  sealing?: Sealing;
  /** The shuffler's upload key (its DENIABLE_SHUFFLER_UPLOAD_KEY), sent to the shuffler only. */
  shufflerKey?: string;
  /** The clock (tests). */
  now?: () => Date;
}

/** A finite positive number as the decimal it is written as (its shortest round-trip text), an
 * exact fraction [numerator, denominator]: Python's rounding rule for guarantees
 * (deniable.client.guarantees), so 0.1 is 1/10 and ten reports at 0.1 fit a cap of 1 exactly. */
function decimal(x: number): [bigint, bigint] {
  const [mantissa, exponent = "0"] = String(x).toLowerCase().split("e");
  const [whole, fraction = ""] = mantissa.split(".");
  const power = Number(exponent) - fraction.length;
  const digits = BigInt(whole + fraction);
  return power >= 0 ? [digits * 10n ** BigInt(power), 1n] : [digits, 10n ** BigInt(-power)];
}

/** Whether n reports of a metric fit a lifetime cap over any two histories of its values
 * (ReportCost.within in Python), exactly, with no slack: n eps afresh; memoized, eps for one
 * report and n eps_inst (ratio x eps, at most MAX_EPSILON) from the second, or without the fresh layer no finite
 * bound from the second (whether the value changed shows). */
function fitsLifetime(plan: { memoized: boolean; layers: TwoLayers | null }, epsilon: number, ratio: number | null, n: number, lifetime: number): boolean {
  let [cost, costScale] = decimal(epsilon);
  if (n > 1 && plan.memoized) {
    if (plan.layers === null || ratio === null) return false;
    if (plan.layers.instantaneous.epsilon === MAX_EPSILON) {
      [cost, costScale] = decimal(MAX_EPSILON);
    } else {
      const [r, rScale] = decimal(ratio);
      cost *= r;
      costScale *= rScale;
    }
  }
  const [cap, capScale] = decimal(lifetime);
  return BigInt(n) * cost * capScale <= cap * costScale;
}

/** Posts one batch (its body in `init`, its report texts in `batch`) as fetch does: the
 * collector's answers, or answers like them. */
export type Post = (url: string, init: RequestInit, batch: string[]) => Promise<Response>;
/** What "deniable/shuffle" gives a Client: the Post that seals to a shuffler. */
export type Sealing = (options: ClientOptions, secret: string, specs: ReadonlyMap<string, MetricSpec>) => Post;

/** The client's counters, named as Python's ClientStats. */
export interface ClientStats {
  recorded: number; admitted: number; over_budget: number; unknown_metric: number; queued: number;
  delivered: number; duplicates: number; dropped_queue_full: number; dropped_rejected: number;
  retries: number; refused: number; specs_refused: number; spec_mismatches: number; held: number; dropped_held: number;
}

type Counter = Exclude<keyof ClientStats, "queued" | "held">;

interface State {
  version: 1;
  specs: Record<string, SpecData>;
  etag: string | null;
  ledger: Record<string, number>;
  queue: string[];
  /** 32 random bytes (hex), the key of the memo's HMACs. */
  secret: string;
  /** HMAC of a value -> its permanent randomized answer (never the value). */
  memo: Record<string, Payload>;
  /** Reports ever admitted per metric (for lifetimeEpsilon). */
  totals: Record<string, number>;
  /** Event metrics' days: active days, marks and day aggregates (absent without event metrics). */
  events?: BookData;
}

interface MemoPlan {
  memoized: boolean;
  layers: TwoLayers | null;
  keys: Map<number, string>;
}

const MAX_HELD = 1000;
/** The largest spec list read (as the Python client's 4 MiB cap on that answer). */
const MAX_SPECS_BYTES = 4 * 1024 * 1024;
/** The largest answer to an upload read (an acknowledgement or a refusal is small). */
const MAX_ANSWER_BYTES = 1024 * 1024;
const KEEPALIVE_BYTES = 60000;
const FINAL = new Set([400, 422]);

/** A report delivery's outcome. */
type Sent = { kind: "ok"; duplicates: number } | { kind: "drop"; indices: number[] | null; reason: string }
  | { kind: "split" } | { kind: "retry"; status: number | null; reason: string; retryAfter: number | null };

export class Client {
  readonly url: string;
  readonly #options: Required<Omit<ClientOptions, "ingestKey" | "metrics" | "storage" | "memoize" | "instantaneousRatio" | "lifetimeEpsilon" | "context" | "text" | "shuffler" | "sealing" | "shufflerKey" | "url">> & Pick<ClientOptions, "ingestKey">;
  readonly #memoize: boolean | string[];
  readonly #ratio: number | null;
  readonly #lifetime: number | null;
  readonly #plans = new Map<string, MemoPlan>();
  readonly #text?: TextFactory;
  #seal?: Post;
  /** Where uploads go and the key they carry, as a refused upload's problem names them. */
  #uploadsTo = "";
  #context: Record<string, string> = {};
  readonly #storage: StateStorage;
  readonly #state: State;
  /** Event metrics' day aggregates and windows, saved in the state text with the ledger. */
  readonly #book = new WindowBook();
  readonly #specs = new Map<string, MetricSpec>();
  /** Specs accepted from a collector (stored or adopted), pinned by name; those above
   * maxEpsilon are kept here but not in #specs (not recorded). */
  readonly #accepted = new Map<string, MetricSpec>();
  readonly #inCode: boolean;
  readonly #counters: Record<Counter, number> = {
    recorded: 0, admitted: 0, over_budget: 0, unknown_metric: 0, delivered: 0, duplicates: 0, dropped_queue_full: 0,
    dropped_rejected: 0, retries: 0, refused: 0, specs_refused: 0, spec_mismatches: 0, dropped_held: 0,
  };
  readonly #problemMessages = new Map<string, string>();
  #held: Array<[string, unknown]> = [];
  /** Whether any spec list is known (in code, cached, or fetched, even an empty one). */
  #specsKnown: boolean;
  #periodDay = Number.NaN;
  readonly #periodLabels = new Map<string, string>();
  #inFlight = 0;
  #uploading: Promise<boolean> | null = null;
  #failures = 0;
  #notBefore = 0;
  #saveScheduled = false;
  #timers: Array<ReturnType<typeof setInterval>> = [];
  #closed = false;
  #batchCap: number;
  readonly #onHidden = (): void => {
    if (globalThis.document?.visibilityState === "hidden") void this.flush({ keepalive: true });
  };

  constructor(options: ClientOptions) {
    this.url = checkUrl(options.url);
    this.#options = {
      ingestKey: options.ingestKey,
      maxEpsilon: positive(options.maxEpsilon ?? 4, "maxEpsilon"),
      maxReportsPerPeriod: count(options, "maxReportsPerPeriod", 1, 1),
      batchSize: Math.min(1000, count(options, "batchSize", 500, 1)),
      maxQueue: count(options, "maxQueue", 10000, 1),
      flushInterval: count(options, "flushInterval", 30000, 0),
      refreshInterval: count(options, "refreshInterval", 3600000, 0),
      maxBackoff: count(options, "maxBackoff", 600000, 0),
      timeout: count(options, "timeout", 30000, 1),
      now: options.now ?? (() => new Date()),
    };
    this.#batchCap = this.#options.batchSize;
    this.#lifetime = options.lifetimeEpsilon === undefined ? null : positive(options.lifetimeEpsilon, "lifetimeEpsilon");
    this.#memoize = options.memoize ?? false;
    if (typeof this.#memoize !== "boolean" && !(Array.isArray(this.#memoize) && this.#memoize.every((n) => typeof n === "string"))) {
      throw new InvalidInput("memoize must be a boolean or a list of metric names");
    }
    this.#ratio = options.instantaneousRatio === undefined ? DEFAULT_INSTANTANEOUS_RATIO : options.instantaneousRatio;
    if (this.#ratio !== null && !(typeof this.#ratio === "number" && this.#ratio > 1 && Number.isFinite(this.#ratio))) {
      throw new InvalidInput("instantaneousRatio must be a number above 1, or null");
    }
    this.setContext(options.context ?? {});
    this.#text = options.text;
    this.#storage = options.storage ?? defaultStorage();
    this.#state = this.#loadState();
    this.#inCode = options.metrics !== undefined;
    // A shuffler without sealing throws here (a TypeError), sealing without a shuffler in sealing.
    if (options.shuffler ?? options.sealing) this.#seal = (options.sealing as Sealing)(options, this.#state.secret, this.#specs);
    this.#uploadsTo = this.#seal
      ? `the shuffler at ${options.shuffler ?? "(unset)"} answers uploads with HTTP {status}, which blames the URL, the shuffler key (shufflerKey)`
      : `the collector at ${this.url} answers uploads with HTTP {status}, which blames the URL, the ingest key (ingestKey)`;
    this.#specsKnown = this.#inCode || this.#state.etag !== null || Object.keys(this.#state.specs).length > 0;
    if (options.metrics !== undefined) {
      for (const data of options.metrics) {
        const spec = MetricSpec.fromDict(data, this.#text);
        // The app's own mistake, raised at once rather than sent (as Python's SpecError).
        if (spec.epsilon > this.#options.maxEpsilon) throw new SpecError(`metric ${spec.name}: eps ${spec.epsilon} is above maxEpsilon ${this.#options.maxEpsilon}; pass a higher maxEpsilon to record it`);
        this.#specs.set(spec.name, spec);
      }
    } else {
      for (const data of Object.values(this.#state.specs)) {
        let spec: MetricSpec;
        try {
          spec = MetricSpec.fromDict(data, this.#text);
        } catch {
          delete this.#state.specs[data.name];
          continue;
        }
        // Kept (pinned) whatever its eps; recorded only within maxEpsilon, as a served one.
        this.#accepted.set(spec.name, spec);
        if (this.#withinCeiling(spec, "stored")) this.#specs.set(spec.name, spec);
      }
    }
    this.#loadEvents();
    this.#closeWindows();
    if (this.#options.flushInterval > 0) this.#every(this.#options.flushInterval, () => {
      this.#closeWindows();
      void this.#upload(false);
    });
    if (this.#options.refreshInterval > 0) this.#every(this.#options.refreshInterval, () => void this.refreshSpecs());
    globalThis.document?.addEventListener?.("visibilitychange", this.#onHidden);
  }

  /** Replace the public attributes (see ClientOptions.context) that reports recorded from now
   * on carry as their metrics' dimension values. */
  setContext(context: Record<string, string>): void {
    if (Object(context) !== context || Array.isArray(context) || !Object.values(context).every((v) => typeof v === "string")) throw new InvalidInput("context must map names to strings");
    this.#context = { ...context };
  }

  /** Fetch the served specs now (ETag: an unchanged registry is a 304); true when they arrived.
   * A fetch still under way when the client closes is dropped when it ends (false). */
  async refreshSpecs(): Promise<boolean> {
    const headers: Record<string, string> = {};
    if (this.#state.etag !== null && !this.#inCode) headers["If-None-Match"] = this.#state.etag;
    let answer: Response;
    let metrics: unknown;
    try {
      answer = await fetch(`${this.url}${METRICS_PATH}`, { headers, signal: AbortSignal.timeout(this.#options.timeout) });
      if (answer.status === 304) {
        this.#problemMessages.delete("specs");
        return true;
      }
      if (answer.status !== 200) throw new Error(`HTTP ${answer.status}`);
      metrics = (JSON.parse(await boundedText(answer, MAX_SPECS_BYTES)) as { metrics?: unknown }).metrics;
      if (!Array.isArray(metrics)) throw new Error("no list of metrics");
    } catch (exc) {
      if (this.#closed) return false;
      this.#problemMessages.set("specs", `could not fetch metric specs: ${(exc as Error).message}`);
      return false;
    }
    if (this.#closed) return false;
    this.#problemMessages.delete("specs");
    const served = new Map<string, MetricSpec>();
    for (const data of metrics as SpecData[]) {
      if (data?.type === "text" && this.#text === undefined) continue; // this app records no text
      try {
        const spec = MetricSpec.fromDict(data, this.#text);
        served.set(spec.name, spec);
      } catch (exc) {
        this.#problemMessages.set(`invalid:${String((data as SpecData)?.name)}`, `a served spec is invalid: ${(exc as Error).message}`);
      }
    }
    if (this.#inCode) {
      for (const spec of this.#specs.values()) {
        if (served.get(spec.name)?.fingerprint === spec.fingerprint) continue;
        this.#once(`mismatch:${spec.name}`, "spec_mismatches", `metric ${spec.name}: the collector ${served.has(spec.name) ? "serves another spec" : "does not serve it"}; it refuses these reports`);
      }
      return true;
    }
    for (const spec of served.values()) this.#adopt(spec);
    this.#installEvents();
    this.#specsKnown = true;
    this.#state.etag = answer.headers.get("etag");
    this.#scheduleSave();
    this.#releaseHeld();
    return true;
  }

  /** Adopt a served spec unless it would weaken privacy: above maxEpsilon, or unlike one this
   * device accepted before (stored or adopted; one above maxEpsilon stays pinned, unused). */
  #adopt(spec: MetricSpec): void {
    const accepted = this.#accepted.get(spec.name);
    if (accepted !== undefined) {
      if (accepted.fingerprint !== spec.fingerprint) this.#refuse(spec, "served", "differs from the spec this device accepted");
      return;
    }
    if (!this.#withinCeiling(spec, "served")) return;
    this.#accepted.set(spec.name, spec);
    this.#specs.set(spec.name, spec);
    this.#state.specs[spec.name] = spec.toDict();
  }

  /** Whether a spec from a collector (served now, or stored by an earlier run) is within
   * maxEpsilon; refuses it (a problem, counted in specs_refused) if not. */
  #withinCeiling(spec: MetricSpec, source: "served" | "stored"): boolean {
    if (spec.epsilon <= this.#options.maxEpsilon) return true;
    this.#refuse(spec, source, `eps ${spec.epsilon} is above maxEpsilon ${this.#options.maxEpsilon}`);
    return false;
  }

  #refuse(spec: MetricSpec, source: "served" | "stored", why: string): void {
    this.#once(`refused:${spec.name}|${spec.fingerprint}`, "specs_refused", `refused the ${source} spec of metric ${spec.name} (${spec.fingerprint}): ${why}`);
  }

  /** A problem a developer should see: counted, listed by problems() and logged with
   * console.error, once per key (never a recorded value). */
  #once(key: string, counter: Counter, message: string): void {
    if (this.#problemMessages.has(key)) return;
    this.#counters[counter]++;
    this.#problemMessages.set(key, message);
    console.error(`deniable: ${message}`);
  }

  /** Randomize and queue one value; no I/O. True when a report was queued (or the value is held
   * until specs arrive), false when the budget or an unknown metric kept it back. A value that
   * does not fit its metric throws InvalidInput naming the metric, never the value. */
  record(name: string, value: unknown): boolean {
    if (this.#closed) throw new InvalidInput("the client is closed");
    const spec = this.#specs.get(name);
    if (spec === undefined) {
      if (this.#inCode) throw new InvalidInput(`unknown metric ${JSON.stringify(String(name))}: not among the specs in code`);
      if (!this.#specsKnown) return this.#hold(name, value);
      this.#counters.unknown_metric++;
      return false;
    }
    if (spec.events !== undefined) throw new InvalidInput(`metric ${name} aggregates events on the device: call event() or observe(), which report once per window`);
    const prepared = spec.setRandomizer ? spec.itemsOf(value) : spec.type === "numeric" ? spec.scale(value) : spec.text ? padded(spec, value) : spec.indexOf(value);
    this.#counters.recorded++;
    return this.#admit(spec, prepared, this.#period(spec));
  }

  /** Ask the ledger to admit a report of `prepared` in `period`; if it does, randomize and queue
   * it (a recorded value, or an event window's value labelled with the window's period). */
  #admit(spec: MetricSpec, prepared: number | Uint8Array | number[], period: string): boolean {
    const name = spec.name;
    if (spec.delivery === "shuffled" && !this.#seal) {
      // Shuffled-only without a shuffler: not recorded (nothing randomized, queued or spent).
      this.#problemMessages.set(name + "!", `metric ${name} has delivery rule 'shuffled' and no shuffler; not recorded`);
      return false;
    }
    const key = `${name}|${period}`;
    const spent = this.#state.ledger[key] ?? 0;
    if (spent >= this.#options.maxReportsPerPeriod || this.#overLifetime(spec)) {
      this.#counters.over_budget++;
      return false;
    }
    const payload = this.#randomized(spec, prepared);
    this.#state.ledger[key] = spent + 1;
    this.#state.totals[name] = (this.#state.totals[name] ?? 0) + 1;
    this.#state.queue.push(reportText(uuid4(), name, spec.fingerprint, period, payloadText(payload, spec.type === "numeric"), spec.dimsText(this.#context)));
    this.#counters.admitted++;
    this.#trim();
    this.#scheduleSave();
    return true;
  }

  /** Count one occurrence of an event metric's event today (its rule aggregates by any or count);
   * no I/O and nothing queued: once a window of days has closed, the client sends one randomized
   * report of the window's aggregate (zero included), if it was open on a day of the window.
   * False for a metric without a spec (yet); InvalidInput if the metric takes observe() or record(). */
  event(name: string): boolean {
    return this.#addEvent(name, true, undefined);
  }

  /** Add `value` to an event metric's aggregate of today (sum, min, max, mean, median, last: a
   * number; mode: a category name); no I/O and nothing queued: once a window has closed, the client
   * sends one randomized report of its aggregate, if it observed anything (a sum may report 0).
   * InvalidInput, naming the metric but never the value, if the value does not fit or the metric
   * takes event() or record(). */
  observe(name: string, value: unknown): boolean {
    return this.#addEvent(name, false, value);
  }

  #addEvent(name: string, counted: boolean, value: unknown): boolean {
    if (this.#closed) throw new InvalidInput("the client is closed");
    const spec = this.#specs.get(name);
    if (spec === undefined) {
      if (this.#inCode) throw new InvalidInput(`unknown metric ${JSON.stringify(String(name))}: not among the specs in code`);
      this.#counters.unknown_metric++;
      return false;
    }
    const rule = spec.events;
    if (rule === undefined) throw new InvalidInput(`metric ${name} does not aggregate events: call record()`);
    if (isCounted(rule) !== counted) throw new InvalidInput(`metric ${name} aggregates by ${rule.aggregate}: call ${isCounted(rule) ? "event(metric)" : "observe(metric, value)"}`);
    if (!this.#book.metrics.has(name)) this.#installEvents();
    // Time never goes back: an event counts on the newest day seen (a window already reported stays as it was).
    const aggregate = this.#book.dayOf(name, this.#book.see(dayNumber(this.#options.now())));
    if (counted) aggregate.n++;
    else addObservation(spec, aggregate, value);
    this.#scheduleSave();
    return true;
  }

  /** The saved event state, read once at start; a malformed day aggregate is dropped (its events
   * lost, never guessed) and reported. */
  #loadEvents(): void {
    const saved = this.#state.events;
    if (saved !== undefined) {
      const skipped = this.#book.load(saved);
      if (skipped > 0) this.#problemMessages.set("events", `the saved state had ${skipped} malformed event aggregate(s); their events were dropped`);
    }
    this.#installEvents();
  }

  /** Start the windows of event metrics not yet known here (from today), and mark today active:
   * a client open. */
  #installEvents(): void {
    if (![...this.#specs.values()].some((s) => s.events !== undefined)) return;
    this.#book.install(this.#specs.values(), dayNumber(this.#options.now()));
    this.#book.markActive(this.#book.newest);
  }

  /** Mark today active (the client is open), then queue one report for every window due: at
   * start, at each flush and at the periodic tick, so a window is reported at the first of them
   * after it closed (at the next start if the app was not running, at most MAX_BACKFILL_DAYS late). */
  #closeWindows(): void {
    if (this.#book.metrics.size === 0) return;
    this.#book.markActive(this.#book.see(dayNumber(this.#options.now())));
    for (const { spec, window, value } of this.#book.due(this.#specs)) {
      this.#admit(spec, spec.type === "numeric" ? spec.scale(value) : spec.indexOf(value), window.label);
    }
    this.#scheduleSave();
  }

  /** A fresh randomized answer; for a memoized metric, its value's remembered permanent answer
   * randomized afresh (two layers), or without the fresh layer the remembered answer itself. */
  #randomized(spec: MetricSpec, prepared: number | Uint8Array | number[]): Payload {
    // A set metric is reported afresh, never memoized (its values, the subsets, are too many).
    if (Array.isArray(prepared)) return (spec.setRandomizer as PaddingSampling).randomize(prepared, systemRandomness);
    const plan = this.#plan(spec);
    if (!plan.memoized) return this.#fresh(spec, prepared);
    let key = plan.keys.get(prepared as number);
    if (key === undefined) {
      key = this.#memoKey(spec, prepared, plan.layers !== null);
      if (spec.k > 0) plan.keys.set(prepared as number, key);
    }
    let remembered: Payload | undefined = this.#state.memo[key];
    if (remembered !== undefined && plan.layers !== null && !isIndex(remembered, plan.layers.instantaneous.k)) {
      this.#memoAside(spec.name, key);
      remembered = undefined;
    }
    if (remembered === undefined) {
      remembered = plan.layers === null ? this.#fresh(spec, prepared) : plan.layers.permanent.randomize(prepared as number, systemRandomness);
      this.#state.memo[key] = remembered;
    }
    return plan.layers === null ? remembered : plan.layers.instantaneous.randomize(remembered as number, systemRandomness);
  }

  /** Whether one more report would take the metric past lifetimeEpsilon over any two histories,
   * counted in reports sent (Python's Ledger.admit): the decision depends on no value, nor on
   * how many distinct values the memo holds, since whether a report is sent is itself seen. */
  #overLifetime(spec: MetricSpec): boolean {
    if (this.#lifetime === null) return false;
    return !fitsLifetime(this.#plan(spec), spec.epsilon, this.#ratio, (this.#state.totals[spec.name] ?? 0) + 1, this.#lifetime);
  }

  #plan(spec: MetricSpec): MemoPlan {
    let plan = this.#plans.get(spec.name);
    if (plan === undefined) {
      const asked = this.#memoize === true || (Array.isArray(this.#memoize) && this.#memoize.includes(spec.name));
      const layers = asked && this.#ratio !== null && spec.randomizer !== undefined ? twoLayers(spec.randomizer, this.#ratio) : null;
      plan = { memoized: asked && (this.#ratio === null || layers !== null), layers, keys: new Map() };
      this.#plans.set(spec.name, plan);
    }
    return plan;
  }

  /** A fresh randomized answer of the metric's own mechanism. */
  #fresh(spec: MetricSpec, prepared: number | Uint8Array): Payload {
    const { numericRandomizer: numeric, text: text } = spec;
    if (text) return text.randomize(prepared as Uint8Array, this.#level(spec, text.levels), systemRandomness);
    return (numeric ?? (spec.randomizer as NonNullable<MetricSpec["randomizer"]>)).randomize(prepared as number, systemRandomness);
  }

  /** A text metric's prefix level on this device, drawn uniformly on its first report and kept for
   * its lifetime in the memo under `pin:` + an HMAC of `metric|fingerprint` (a redrawn level
   * would let each period reveal another prefix of the same string). */
  #level(spec: MetricSpec, levels: number): number {
    const key = `pin:${this.#hmac(`${spec.name}|${spec.fingerprint}`)}`;
    const pinned = this.#state.memo[key];
    if (pinned !== undefined && !isIndex((pinned as number) - 1, levels)) this.#memoAside(spec.name, key);
    return (this.#state.memo[key] ??= 1 + systemRandomness.randbelow(levels)) as number;
  }

  /** A remembered answer or pinned level that does not fit its metric (a state this client did
   * not write): the saved state is kept aside as a bad one is on load, reported (as Python's
   * Recorder does), never thrown, and the entry drawn afresh (docs/sdk-js.md says what a redrawn
   * permanent answer means). */
  #memoAside(metric: string, key: string): void {
    let where = "nowhere (its storage cannot keep it)";
    try {
      const text = this.#storage.load();
      if (text !== null) where = this.#storage.setAside?.(text) ?? where;
    } catch (exc) {
      where = `nowhere (${(exc as Error).name})`;
    }
    const message = `the saved state had a malformed memo entry of ${metric} (an answer out of its metric's range); kept as ${where}; the entry was drawn afresh`;
    this.#problemMessages.set("memo", message);
    console.error(`deniable: ${message}`);
    delete this.#state.memo[key];
    this.#scheduleSave();
  }

  /** The HMAC under which a value's permanent answer is kept: a category index, a numeric t
   * exactly, a text metric's padded bytes (hex); only the HMAC is stored, never the value. */
  #memoKey(spec: MetricSpec, prepared: number | Uint8Array, permanent: boolean): string {
    // A number's shortest round-trip text names exactly one float: two t share an answer only
    // when they are the same point on the metric's axis (t is never -0).
    const value = typeof prepared !== "number" ? `s=${hex(prepared)}` : spec.type === "numeric" ? `t=${prepared}` : prepared;
    return this.#hmac(`${spec.name}|${spec.fingerprint}|${value}${permanent ? "|permanent" : ""}`);
  }

  #hmac(message: string): string {
    const secret = Uint8Array.from(this.#state.secret.match(/../g) as string[], (h) => parseInt(h, 16));
    return hmacSha256Hex(secret, new TextEncoder().encode(message));
  }

  /** The current period label of a spec's kind, cached until the clock leaves its UTC day. */
  #period(spec: MetricSpec): string {
    const now = this.#options.now();
    const day = Math.floor(now.getTime() / 86400000);
    if (day !== this.#periodDay) {
      this.#periodDay = day;
      this.#periodLabels.clear();
    }
    let label = this.#periodLabels.get(spec.period);
    if (label === undefined) {
      label = spec.periodOf(now);
      this.#periodLabels.set(spec.period, label);
    }
    return label;
  }

  #hold(name: string, value: unknown): boolean {
    if (this.#held.length >= MAX_HELD) {
      this.#counters.dropped_held++;
      return false;
    }
    this.#counters.recorded++;
    this.#held.push([name, value]);
    return true;
  }

  #releaseHeld(): void {
    const held = this.#held;
    this.#held = [];
    for (const [name, value] of held) {
      if (!this.#specs.has(name)) {
        this.#counters.dropped_held++;
        continue;
      }
      this.#counters.recorded--; // counted once, when it was held
      try {
        this.record(name, value);
      } catch {
        this.#counters.recorded++;
        this.#counters.dropped_held++;
      }
    }
  }

  /** Drop the oldest reports not in flight past maxQueue. */
  #trim(): void {
    const excess = this.#state.queue.length - this.#options.maxQueue;
    if (excess > 0) {
      this.#state.queue.splice(this.#inFlight, excess);
      this.#counters.dropped_queue_full += excess;
    }
  }

  /** Upload every queued report now (ignoring backoff); true when none is left. */
  flush(options: { keepalive?: boolean } = {}): Promise<boolean> {
    this.#closeWindows();
    return this.#upload(true, options.keepalive ?? false);
  }

  #upload(now: boolean, keepalive = false): Promise<boolean> {
    if (this.#uploading !== null) return this.#uploading;
    if (!now && Date.now() < this.#notBefore) return Promise.resolve(this.#state.queue.length === 0);
    this.#uploading = this.#uploadAll(keepalive).finally(() => {
      this.#uploading = null;
    });
    return this.#uploading;
  }

  async #uploadAll(keepalive: boolean): Promise<boolean> {
    while (this.#state.queue.length > 0) {
      let size = Math.min(this.#batchCap, this.#state.queue.length);
      if (keepalive) {
        let bytes = 16;
        size = 0;
        while (size < this.#state.queue.length && size < this.#batchCap && bytes + this.#state.queue[size].length < KEEPALIVE_BYTES) bytes += this.#state.queue[size++].length + 1;
        size = Math.max(size, 1);
      }
      const batch = this.#state.queue.slice(0, size);
      this.#inFlight = size;
      let sent: Sent;
      try {
        sent = await this.#send(batch, keepalive);
      } finally {
        this.#inFlight = 0;
      }
      if (!this.#settle(batch, sent)) return false;
    }
    this.#batchCap = this.#options.batchSize;
    return true;
  }

  /** Apply an upload's outcome; false when the rest must wait (backoff). */
  #settle(batch: string[], sent: Sent): boolean {
    const queue = this.#state.queue;
    if (sent.kind === "ok") {
      queue.splice(0, batch.length);
      this.#counters.delivered += batch.length;
      this.#counters.duplicates += sent.duplicates;
      this.#failures = 0;
      this.#notBefore = 0;
      this.#problemMessages.delete("unreachable");
      this.#problemMessages.delete("refused");
    } else if (sent.kind === "split") {
      if (batch.length === 1) {
        queue.splice(0, 1);
        this.#counters.dropped_rejected++;
      } else {
        this.#batchCap = Math.max(1, batch.length >> 1);
      }
    } else if (sent.kind === "drop") {
      const bad = sent.indices === null ? batch.map((_, i) => i) : sent.indices.filter((i) => i < batch.length);
      const badSet = new Set(bad);
      queue.splice(0, batch.length, ...batch.filter((_, i) => !badSet.has(i)));
      this.#counters.dropped_rejected += badSet.size;
      this.#problemMessages.set("dropped", `the collector refused ${this.#counters.dropped_rejected} report(s) for good: ${sent.reason.slice(0, 200)}`);
    } else {
      this.#failures++;
      this.#counters.retries++;
      const refused = sent.status !== null && sent.status >= 400 && sent.status < 500 && sent.status !== 408 && sent.status !== 429;
      const delay = sent.retryAfter ?? this.#backoff();
      this.#notBefore = Date.now() + delay;
      if (refused) {
        // An answer that blames the URL, the key or a proxy, not the reports: say which, as Python does.
        this.#counters.refused++;
        this.#problemMessages.delete("unreachable");
        this.#problemMessages.set("refused", `${this.#uploadsTo.replace("{status}", String(sent.status))} or a proxy; ${queue.length} report(s) kept and retried`);
      } else {
        this.#problemMessages.delete("refused");
        this.#problemMessages.set("unreachable", `could not deliver ${queue.length} report(s): ${sent.reason}; retrying in ${Math.round(delay / 1000)} s`);
      }
      this.#scheduleSave();
      return false;
    }
    this.#scheduleSave();
    return true;
  }

  /** Exponential backoff with full jitter from the CSPRNG, capped. */
  #backoff(): number {
    const ceiling = Math.min(this.#options.maxBackoff, 1000 * 2 ** Math.min(this.#failures, 30));
    return ceiling * (0.5 + systemRandomness.random() / 2);
  }

  async #send(batch: string[], keepalive: boolean): Promise<Sent> {
    const headers: Record<string, string> = { "Content-Type": "application/json" };
    if (this.#options.ingestKey !== undefined) headers.Authorization = `Bearer ${this.#options.ingestKey}`;
    let answer: Response;
    let body: string;
    try {
      answer = await (this.#seal ?? fetch)(`${this.url}${REPORTS_PATH}`, { method: "POST", headers, body: batchBody(batch), keepalive, signal: AbortSignal.timeout(this.#options.timeout) }, batch);
      body = await boundedText(answer, MAX_ANSWER_BYTES);
    } catch (exc) {
      return retry(null, (exc as Error).message);
    }
    const status = answer.status;
    if (status >= 200 && status < 300) {
      const ack = acknowledgement(body, batch.length);
      if (ack !== null) return { kind: "ok", duplicates: ack };
      return retry(status, `HTTP ${status} is no acknowledgement`);
    }
    if (status === 413) return { kind: "split" };
    const mediaType = (answer.headers.get("content-type") ?? "").split(";")[0].trim().toLowerCase();
    const detail = FINAL.has(status) && mediaType === "application/json" ? collectorRefusal(body) : null;
    if (detail !== null) {
      const indices = status === 422 && Array.isArray(detail) && detail.every((d) => Number.isInteger(d.index))
        ? detail.map((d) => d.index as number) : null;
      return { kind: "drop", indices, reason: typeof detail === "string" ? detail : JSON.stringify(detail) };
    }
    const after = Number(answer.headers.get("retry-after"));
    return retry(status, `HTTP ${status}`, after > 0 ? Math.min(after * 1000, this.#options.maxBackoff) : null);
  }

  /** What is wrong now, in words (never a recorded value). */
  problems(): string[] {
    const out = [...this.#problemMessages.values()];
    if (this.#held.length > 0) out.push(`${this.#held.length} value(s) held until specs arrive`);
    return out;
  }

  /** A snapshot of the counters. */
  stats(): ClientStats {
    return { ...this.#counters, queued: this.#state.queue.length, held: this.#held.length };
  }

  /** The specs in use, by name. */
  metrics(): MetricSpec[] {
    return [...this.#specs.values()];
  }

  /** Stop the timers, try one last upload (bounded by `timeout` ms) and save; nothing is saved
   * after, whatever an exchange still under way brings. */
  async close(timeout = 5000): Promise<void> {
    for (const timer of this.#timers) clearInterval(timer);
    this.#timers = [];
    globalThis.document?.removeEventListener?.("visibilitychange", this.#onHidden);
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([this.flush(), new Promise((resolve) => { timer = setTimeout(resolve, timeout); })]);
    clearTimeout(timer);
    this.#counters.dropped_held += this.#held.length;
    this.#held = [];
    this.save();
    this.#closed = true;
  }

  #every(ms: number, run: () => void): void {
    const timer = setInterval(run, ms);
    (timer as { unref?: () => void }).unref?.();
    this.#timers.push(timer);
  }

  #loadState(): State {
    const secret = hex(systemRandomness.bytes(32));
    const empty: State = { version: 1, specs: {}, etag: null, ledger: {}, queue: [], secret, memo: {}, totals: {} };
    const text = this.#storage.load();
    if (text === null) return empty;
    const problem = stateProblem(text);
    if (problem !== null) {
      // Never thrown (a save in a microtask would crash the app): kept aside, reported, afresh.
      let where = "nowhere (its storage cannot keep it)";
      try {
        where = this.#storage.setAside?.(text) ?? where;
      } catch (exc) {
        where = `nowhere (${(exc as Error).name})`;
      }
      const message = `the saved state was unreadable (${problem}); kept as ${where}; the client started afresh`;
      this.#problemMessages.set("state", message);
      console.error(`deniable: ${message}`);
      return empty;
    }
    const loaded = { ...empty, ...(JSON.parse(text) as State) };
    return /^[0-9a-f]{64}$/.test(loaded.secret) ? loaded : { ...loaded, secret: empty.secret, memo: {} };
  }

  #scheduleSave(): void {
    if (this.#saveScheduled) return;
    this.#saveScheduled = true;
    queueMicrotask(() => this.save());
  }

  /** Write the state: specs, ETag, the ledger of the current periods, randomized reports. */
  save(): void {
    this.#saveScheduled = false;
    if (this.#closed) return;
    const now = this.#options.now();
    for (const key of Object.keys(this.#state.ledger)) {
      const [name, period] = key.split("|");
      const spec = this.#specs.get(name);
      if (spec === undefined || spec.periodOf(now) !== period) delete this.#state.ledger[key];
    }
    try {
      if (this.#book.metrics.size > 0) this.#state.events = this.#book.toJSON();
      this.#storage.save(JSON.stringify(this.#state));
      this.#problemMessages.delete("storage");
    } catch (exc) {
      // A full localStorage or disk: the state stays in memory and the next save tries again.
      this.#problemMessages.set("storage", `could not save the client's state: ${(exc as Error).name}`);
    }
  }
}

/** A delivery to try again later (after `retryAfter` ms, or the backoff). */
const retry = (status: number | null, reason: string, retryAfter: number | null = null): Sent => ({ kind: "retry", status, reason, retryAfter });

/** An answer's body as text, refused (and the rest not read) past `limit` bytes. */
export async function boundedText(answer: Response, limit: number): Promise<string> {
  const reader = answer.body?.getReader();
  const decoder = new TextDecoder();
  let text = "";
  for (let size = 0; reader;) {
    const { done, value } = await reader.read();
    if (done) break;
    if ((size += value.length) > limit) {
      await reader.cancel();
      throw new Error(`the answer is over ${limit} bytes`);
    }
    text += decoder.decode(value, { stream: true });
  }
  return text + decoder.decode();
}

/** A text metric's value as its padded bytes; InvalidInput names the metric, never the value. */
function padded(spec: MetricSpec, value: unknown): Uint8Array {
  try {
    return (spec.text as NonNullable<MetricSpec["text"]>).encode(value);
  } catch (exc) {
    throw new InvalidInput(`metric ${spec.name}: ${(exc as Error).message}`);
  }
}



function checkUrl(url: string): string {
  if (typeof url !== "string" || !/^https?:\/\/[^/]/.test(url)) throw new InvalidInput("url must be an http(s) URL");
  let base = url.replace(/\/+$/, "");
  if (base.endsWith("/v1")) base = base.slice(0, -3);
  return base;
}

function positive(x: unknown, name: string): number {
  if (typeof x !== "number" || !Number.isFinite(x) || x <= 0) throw new InvalidInput(`${name} must be a finite number > 0`);
  return x;
}

/** options[name] (or `fallback`), an integer >= least. */
function count(options: ClientOptions, name: keyof ClientOptions, fallback: number, least: number): number {
  const x = options[name] ?? fallback;
  if (!Number.isInteger(x) || (x as number) < least) throw new InvalidInput(`${name} must be an integer >= ${least}`);
  return x as number;
}

/** The duplicates of the collector's 2xx acknowledgement of `size` reports, or null. */
export function acknowledgement(body: string, size: number): number | null {
  try {
    const document = JSON.parse(body) as { accepted?: unknown; duplicates?: unknown };
    const { accepted, duplicates } = document;
    const isCount = (x: unknown): x is number => Number.isInteger(x) && (x as number) >= 0 && (x as number) <= size;
    return isCount(accepted) && isCount(duplicates) ? duplicates : null;
  } catch {
    return null;
  }
}

/** The `detail` of the collector's own refusal (exactly `{"detail": ...}`), or null. */
export function collectorRefusal(body: string): string | Array<{ index: number | null; reason: string }> | null {
  let document: unknown;
  try {
    document = JSON.parse(body);
  } catch {
    return null;
  }
  if (typeof document !== "object" || document === null || Array.isArray(document)) return null;
  const keys = Object.keys(document);
  if (keys.length !== 1 || keys[0] !== "detail") return null;
  const detail = (document as { detail: unknown }).detail;
  if (typeof detail === "string" && detail.length > 0) return detail;
  const isItem = (item: unknown): boolean => typeof item === "object" && item !== null && !Array.isArray(item)
    && Object.keys(item).sort().join() === "index,reason"
    && ((item as { index: unknown }).index === null || (Number.isInteger((item as { index: unknown }).index) && ((item as { index: number }).index >= 0)))
    && typeof (item as { reason: unknown }).reason === "string";
  if (Array.isArray(detail) && detail.length > 0 && detail.every(isItem)) return detail as Array<{ index: number | null; reason: string }>;
  return null;
}

export { SpecError };

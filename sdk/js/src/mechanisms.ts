/** The randomizers and their parameters, as deniable.client.mechanisms defines them (DESIGN.md
 * "Mechanisms"): brr, krr, oue, olh for categories; duchi, pm, hybrid for numbers. */

import { type Randomness, systemRandomness } from "./random.js";

/** A report's payload as it travels in JSON. */
export type Payload = number | string | { a: number; b: number; y: number } | TextPayload;

/** A text metric's payload: the OUE bits of one sketch row (base64), the level and the row. */
export interface TextPayload { b: string; l: number; r: number }

export const OLH_PRIME = 2147483647;
export const MIN_EPSILON = 1e-3;
export const MAX_EPSILON = 20;
export const MAX_CATEGORIES = 10000;
export const MAX_KRR_CATEGORIES = 2000;
export const NUMERIC_GRID = 2 ** -24;
export const HYBRID_THRESHOLD = 0.6094;

/** A spec or value problem (never naming a recorded value). */
export class SpecError extends Error {
  override name = "SpecError";
}

/** eps as a number in [MIN_EPSILON, MAX_EPSILON], or a SpecError naming the range. */
export function checkEpsilon(epsilon: unknown): number {
  if (typeof epsilon !== "number") throw new SpecError("epsilon must be a number");
  if (!Number.isFinite(epsilon) || epsilon <= 0) throw new SpecError("epsilon must be finite and > 0");
  if (epsilon < MIN_EPSILON) throw new SpecError(`epsilon must be at least ${MIN_EPSILON}`);
  if (epsilon > MAX_EPSILON) throw new SpecError(`epsilon must be at most ${MAX_EPSILON}`);
  return epsilon;
}

export const isIndex = (x: unknown, k: number): x is number => Number.isInteger(x) && (x as number) >= 0 && (x as number) < k;

function checkIndex(value: number, k: number): void {
  if (!isIndex(value, k)) throw new RangeError(`value is not a category index in 0..${k - 1}`);
}

/** A frequency oracle over categories 0..k-1. */
export interface Mechanism {
  readonly name: string;
  readonly k: number;
  readonly epsilon: number;
  readonly pStar: number;
  readonly qStar: number;
  randomize(value: number, rng?: Randomness): Payload;
}

function checkK(k: number, max: number, name: string): number {
  if (!Number.isInteger(k) || k < 2) throw new SpecError("k must be an integer >= 2");
  if (k > MAX_CATEGORIES) throw new SpecError(`at most ${MAX_CATEGORIES} categories, got ${k}`);
  if (k > max) throw new SpecError(`${name} supports at most ${max} categories, got ${k}: use oue or olh`);
  return k;
}

/** k-ary randomized response: keep the value w.p. p = e^eps/(e^eps+k-1), else another uniformly. */
export class KRR implements Mechanism {
  readonly name: string = "krr";
  readonly epsilon: number;
  readonly p: number;
  readonly q: number;
  constructor(readonly k: number, epsilon: number) {
    checkK(k, MAX_KRR_CATEGORIES, "krr");
    this.epsilon = checkEpsilon(epsilon);
    const e = Math.exp(this.epsilon);
    this.p = e / (e + k - 1);
    this.q = 1 / (e + k - 1);
  }
  get pStar(): number { return this.p; }
  get qStar(): number { return this.q; }
  randomize(value: number, rng: Randomness = systemRandomness): number {
    checkIndex(value, this.k);
    if (rng.random() < this.p) return value;
    const other = rng.randbelow(this.k - 1);
    return other + (other >= value ? 1 : 0);
  }
}

/** Binary randomized response: krr with k = 2 (payload 1 means true). */
export class BRR extends KRR {
  override readonly name = "brr";
  constructor(k: number, epsilon: number) {
    if (k !== 2) throw new SpecError("brr is for booleans: k must be 2");
    super(2, epsilon);
  }
}

export const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/** Standard base64 (with padding) of bytes. */
export function toBase64(bytes: Uint8Array): string {
  let out = "";
  for (let i = 0; i < bytes.length; i += 3) {
    const n = (bytes[i] << 16) | ((bytes[i + 1] ?? 0) << 8) | (bytes[i + 2] ?? 0);
    out += B64[n >> 18] + B64[(n >> 12) & 63];
    out += i + 1 < bytes.length ? B64[(n >> 6) & 63] : "=";
    out += i + 2 < bytes.length ? B64[n & 63] : "=";
  }
  return out;
}


/** Optimized unary encoding: bit v set w.p. 1/2 for the value, q = 1/(e^eps+1) for the others. */
export class OUE implements Mechanism {
  readonly name = "oue";
  readonly epsilon: number;
  readonly p = 0.5;
  readonly q: number;
  readonly bytes: number;
  constructor(readonly k: number, epsilon: number) {
    checkK(k, MAX_CATEGORIES, "oue");
    this.epsilon = checkEpsilon(epsilon);
    this.q = 1 / (Math.exp(this.epsilon) + 1);
    this.bytes = (k + 7) >> 3;
    this.#belowP = Math.ceil(this.p * 2 ** 53);
    this.#belowQ = Math.ceil(this.q * 2 ** 53);
  }
  readonly #belowP: number;
  readonly #belowQ: number;
  get pStar(): number { return this.p; }
  get qStar(): number { return this.q; }
  /** One 64-bit little-endian word w per category, as Python draws them (one block of bytes):
   * a bit is set when floor(w / 2^11) < ceil(x 2^53), the probability `random() < x` gives. */
  randomize(value: number, rng: Randomness = systemRandomness): string {
    checkIndex(value, this.k);
    const words = rng.bytes(8 * this.k);
    const view = new DataView(words.buffer, words.byteOffset, words.byteLength);
    const top = (v: number): number => view.getUint32(8 * v + 4, true) * 2097152 + (view.getUint32(8 * v, true) >>> 11);
    const bits = new Uint8Array(this.bytes);
    const belowQ = this.#belowQ;
    for (let v = 0; v < this.k; v++) if (top(v) < belowQ) bits[v >> 3] |= 1 << (v & 7);
    if (top(value) < this.#belowP) bits[value >> 3] |= 1 << (value & 7);
    else bits[value >> 3] &= ~(1 << (value & 7));
    return toBase64(bits);
  }
}

/** ((a*v + b) mod P) mod g exactly (a*v reaches 2^62: split a to stay within 2^53). */
export function olhHash(a: number, b: number, value: number, g: number): number {
  const high = Math.floor(a / 65536);
  const low = a % 65536;
  const part = ((high * value) % OLH_PRIME) * 65536 % OLH_PRIME;
  return ((part + low * value + b) % OLH_PRIME) % g;
}

/** Optimized local hashing: g-ary randomized response on H(v) = ((a v + b) mod P) mod g. */
export class OLH implements Mechanism {
  readonly name = "olh";
  readonly epsilon: number;
  readonly g: number;
  readonly p: number;
  readonly q: number;
  constructor(readonly k: number, epsilon: number) {
    checkK(k, MAX_CATEGORIES, "olh");
    this.epsilon = checkEpsilon(epsilon);
    const e = Math.exp(this.epsilon);
    this.g = pyRound(e) + 1;
    this.p = e / (e + this.g - 1);
    this.q = 1 / this.g;
  }
  get pStar(): number { return this.p; }
  get qStar(): number { return this.q; }
  hash(a: number, b: number, value: number): number { return olhHash(a, b, value, this.g); }
  randomize(value: number, rng: Randomness = systemRandomness): { a: number; b: number; y: number } {
    checkIndex(value, this.k);
    const a = 1 + rng.randbelow(OLH_PRIME - 1);
    const b = rng.randbelow(OLH_PRIME);
    const h = this.hash(a, b, value);
    let y = h;
    if (!(rng.random() < this.p)) {
      const other = rng.randbelow(this.g - 1);
      y = other + (other >= h ? 1 : 0);
    }
    return { a, b, y };
  }
}

/** Python's round(): halves to even. */
export function pyRound(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

const MECHANISMS: Record<string, new (k: number, epsilon: number) => Mechanism> = { brr: BRR, krr: KRR, oue: OUE, olh: OLH };

function vStar(m: Mechanism): number {
  const p = m.pStar, q = m.qStar;
  return (q * (1 - q)) / (p - q) ** 2;
}

/** The mechanism with the least variance constant for (k, eps), as `auto` resolves it. */
export function leastVariance(k: number, epsilon: number): string {
  checkEpsilon(epsilon);
  if (k === 2) return "brr";
  let best: [number, string] | null = null;
  for (const make of [KRR, OLH, OUE]) {
    let m: Mechanism;
    try { m = new make(k, epsilon); } catch { continue; }
    const candidate: [number, string] = [vStar(m), m.name];
    if (best === null || candidate[0] < best[0] || (candidate[0] === best[0] && candidate[1] < best[1])) best = candidate;
  }
  return (best as [number, string])[1];
}

/** A mechanism by name; `auto` resolves. */
export function makeMechanism(name: string, k: number, epsilon: number): Mechanism {
  const resolved = name === "auto" ? leastVariance(k, epsilon) : name;
  const make = Object.hasOwn(MECHANISMS, resolved) ? MECHANISMS[resolved] : undefined;
  if (make === undefined) throw new SpecError(`unknown mechanism ${JSON.stringify(name)}; choose auto, brr, krr, oue or olh`);
  return new make(k, epsilon);
}

/** A randomizer of t in [-1, 1] into y with E[y | t] = t. */
export interface NumericMechanism {
  readonly name: string;
  readonly epsilon: number;
  readonly bound: number;
  variance(t: number): number;
  readonly worstCaseVariance: number;
  randomize(t: number, rng?: Randomness): number;
}

function checkT(t: number): number {
  if (typeof t !== "number" || !(t >= -1 && t <= 1)) throw new RangeError("value is not a number in [-1, 1]");
  return t;
}


/** Duchi et al.'s one-bit mechanism: y = +-C1, C1 = (e+1)/(e-1). */
export class Duchi implements NumericMechanism {
  readonly name: string = "duchi";
  readonly epsilon: number;
  readonly bound: number;
  constructor(epsilon: number) {
    this.epsilon = checkEpsilon(epsilon);
    const e = Math.exp(this.epsilon);
    this.bound = (e + 1) / (e - 1);
  }
  variance(t: number): number { return this.bound ** 2 - t * t; }
  get worstCaseVariance(): number { return this.bound ** 2; }
  randomize(t: number, rng: Randomness = systemRandomness): number {
    checkT(t);
    return rng.random() < 0.5 + t / (2 * this.bound) ? this.bound : -this.bound; // E[y] = t
  }
}

/** Wang et al.'s Piecewise Mechanism, payloads rounded to NUMERIC_GRID. */
export class Piecewise implements NumericMechanism {
  readonly name: string = "pm";
  readonly epsilon: number;
  readonly s: number;
  readonly bound: number;
  readonly windowProbability: number;
  constructor(epsilon: number) {
    this.epsilon = checkEpsilon(epsilon);
    this.s = Math.exp(this.epsilon / 2);
    this.bound = (this.s + 1) / (this.s - 1);
    this.windowProbability = this.s / (this.s + 1);
  }
  window(t: number): [number, number] {
    const left = ((this.bound + 1) * t) / 2 - (this.bound - 1) / 2;
    return [left, left + this.bound - 1];
  }
  variance(t: number): number {
    const s = this.s;
    return (t * t) / (s - 1) + (s + 3) / (3 * (s - 1) ** 2);
  }
  get worstCaseVariance(): number { return this.variance(1); }
  randomize(t: number, rng: Randomness = systemRandomness): number {
    checkT(t);
    const [left, right] = this.window(t);
    let y: number;
    if (rng.random() < this.windowProbability) {
      y = left + (right - left) * rng.random();
    } else {
      const below = left + this.bound;
      const u = (this.bound + 1) * rng.random();
      y = u < below ? -this.bound + u : right + (u - below);
    }
    return this.onGrid(y);
  }
  /** y rounded to the grid (halves to even, as Python's round), kept inside [-C, C]. */
  onGrid(y: number): number {
    const steps = pyRound(y / NUMERIC_GRID);
    const limit = Math.floor(this.bound / NUMERIC_GRID);
    return Math.max(-limit, Math.min(limit, steps)) * NUMERIC_GRID;
  }
}

/** Wang et al.'s Hybrid Mechanism: pm w.p. 1 - e^(-eps/2), else duchi (duchi only at eps <= 0.6094). */
export class Hybrid implements NumericMechanism {
  readonly name = "hybrid";
  readonly epsilon: number;
  readonly duchi: Duchi;
  readonly pm: Piecewise;
  readonly beta: number;
  readonly bound: number;
  constructor(epsilon: number) {
    this.epsilon = checkEpsilon(epsilon);
    this.duchi = new Duchi(this.epsilon);
    this.pm = new Piecewise(this.epsilon);
    const above = this.epsilon > HYBRID_THRESHOLD;
    this.beta = above ? 1 - Math.exp(-this.epsilon / 2) : 0;
    this.bound = above ? this.pm.bound : this.duchi.bound;
  }
  variance(t: number): number {
    const beta = this.beta;
    return beta * (this.pm.variance(t) + t * t) + (1 - beta) * this.duchi.bound ** 2 - t * t;
  }
  get worstCaseVariance(): number { return Math.max(this.variance(0), this.variance(1)); }
  randomize(t: number, rng: Randomness = systemRandomness): number {
    checkT(t);
    if (rng.random() < this.beta) return this.pm.randomize(t, rng);
    return this.duchi.randomize(t, rng);
  }
}

const NUMERIC: Record<string, new (epsilon: number) => NumericMechanism> = { duchi: Duchi, pm: Piecewise, hybrid: Hybrid };

/** A numeric mechanism by name; `auto` takes the least worst-case variance. */
export function makeNumericMechanism(name: string, epsilon: number): NumericMechanism {
  let resolved = name;
  if (name === "auto") {
    let best = Infinity;
    for (const [key, make] of Object.entries(NUMERIC)) {
      const v = new make(epsilon).worstCaseVariance;
      if (v < best) { best = v; resolved = key; }
    }
  }
  const make = Object.hasOwn(NUMERIC, resolved) ? NUMERIC[resolved] : undefined;
  if (make === undefined) throw new SpecError(`unknown mechanism ${JSON.stringify(name)}; choose auto, duchi, pm or hybrid`);
  return new make(epsilon);
}


/** The SDK's default instantaneousRatio: a memoized report's fresh layer has twice the eps. */
export const DEFAULT_INSTANTANEOUS_RATIO = 2;

/** RAPPOR's two layers for a memoized krr or brr metric: a permanent answer per value (krr at
 * permanentEpsilon), randomized afresh on every report (krr at ratio x eps); they compose into
 * exactly the metric's own mechanism (deniable.client.mechanisms.TwoLayers). */
export class TwoLayers {
  readonly instantaneous: KRR;
  readonly permanent: KRR;
  constructor(mechanism: KRR, ratio: number) {
    const { k, epsilon } = mechanism;
    const instantaneous = Math.min(ratio * epsilon, MAX_EPSILON);
    if (!(instantaneous > epsilon)) throw new SpecError("no room for an instantaneous layer");
    const make = (e: number): KRR => (mechanism instanceof BRR ? new BRR(2, e) : new KRR(k, e));
    this.instantaneous = make(instantaneous);
    const spread = (mechanism.p - mechanism.q) / (this.instantaneous.p - this.instantaneous.q);
    this.permanent = make(Math.log((1 + spread * (k - 1)) / (1 - spread)));
  }
  get permanentEpsilon(): number { return this.permanent.epsilon; }
}

/** The two layers a memoized metric uses, or null (oue, olh, numbers: reported afresh). */
export function twoLayers(mechanism: Mechanism, ratio: number): TwoLayers | null {
  if (!(mechanism instanceof KRR)) return null;
  try {
    return new TwoLayers(mechanism, ratio);
  } catch {
    return null;
  }
}

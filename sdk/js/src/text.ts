/** Text metrics (`deniable/text`): pem, the PEM prefix sketch, as deniable.client.mechanisms
 * defines it (DESIGN.md "Text metrics"). Its own entry, so apps that record no text do not load
 * it: `new Client({ url, text: pem })` turns text metrics on. */

import { checkEpsilon, OLH_PRIME, SpecError, type TextPayload, toBase64 } from "./mechanisms.js";
import { type Randomness, systemRandomness } from "./random.js";
import { sha256Hex } from "./sha256.js";
import type { SpecData, TextRandomizer } from "./spec.js";

/** The longest max_length (UTF-8 bytes). */
export const TEXT_MAX_LENGTH = 64;
/** Bytes each prefix level adds. */
export const TEXT_SEGMENT_BYTES = 1;
/** m, the cells of one sketch row. */
export const TEXT_CELLS = 1024;
/** R, the sketch rows per level. */
export const TEXT_ROWS = 16;
/** The most cells a text metric's dimensions may make (client/spec.py's MAX_TEXT_CELLS). */
export const MAX_TEXT_CELLS = 50;
/** The most sketch counts per period over a text metric's cells (MAX_TEXT_CELL_COUNTS there). */
export const MAX_TEXT_CELL_COUNTS = 2_000_000;

const TWO_POW_53 = 9007199254740992;
let coefficients: [number[][], number[]] | null = null;

/** The sketch hash's public coefficients a[r][i] in [1, P-1] and b[r] in [0, P-1], from SHA-256
 * of `deniable.text.v1|a|r|i` and `...|b|r` (first 8 bytes, big-endian, mod the range). */
export function textHashCoefficients(): [number[][], number[]] {
  if (coefficients === null) {
    const draw = (label: string, modulus: number): number =>
      Number(BigInt(`0x${sha256Hex(new TextEncoder().encode(`deniable.text.v1|${label}`)).slice(0, 16)}`) % BigInt(modulus));
    const a = Array.from({ length: TEXT_ROWS }, (_, r) => Array.from({ length: TEXT_MAX_LENGTH }, (_, i) => 1 + draw(`a|${r}|${i}`, OLH_PRIME - 1)));
    const b = Array.from({ length: TEXT_ROWS }, (_, r) => draw(`b|${r}`, OLH_PRIME));
    coefficients = [a, b];
  }
  return coefficients;
}

/** `pem`: a device pinned to one prefix level l in 1..g draws a row r per report, hashes its
 * level-l prefix to a cell of that row and randomizes the one-hot vector by OUE (the cell's bit
 * set w.p. 1/2, every other bit w.p. q = 1/(e^eps + 1)); payload {b: base64 of m/8 bytes, l, r}. */
export class PrefixSketch implements TextRandomizer {
  readonly name = "pem";
  readonly maxLength: number;
  readonly epsilon: number;
  readonly levels: number;
  readonly p = 0.5;
  readonly q: number;
  readonly #belowP: number;
  readonly #belowQ: number;

  constructor(maxLength: number, epsilon: number) {
    if (!Number.isInteger(maxLength) || maxLength < 1 || maxLength > TEXT_MAX_LENGTH) {
      throw new SpecError(`max_length must be an integer in 1..${TEXT_MAX_LENGTH} (UTF-8 bytes)`);
    }
    this.maxLength = maxLength;
    this.epsilon = checkEpsilon(epsilon);
    this.levels = Math.ceil(maxLength / TEXT_SEGMENT_BYTES);
    this.q = 1 / (Math.exp(this.epsilon) + 1);
    this.#belowP = Math.ceil(this.p * TWO_POW_53);
    this.#belowQ = Math.ceil(this.q * TWO_POW_53);
  }

  get pStar(): number { return this.p; }
  get qStar(): number { return this.q; }

  /** The bytes a level-`level` prefix holds. */
  prefixLength(level: number): number {
    return Math.min(level * TEXT_SEGMENT_BYTES, this.maxLength);
  }

  /** A string's UTF-8 bytes cut to maxLength at a character boundary and padded with zero bytes;
   * an Error (never echoing the value) for a non-string or one holding U+0000 or a lone surrogate. */
  encode(value: unknown): Uint8Array {
    if (typeof value !== "string") throw new Error("value is not a string");
    if (value.includes("\u0000")) throw new Error("value holds U+0000, the terminator");
    if (/\p{Cs}/u.test(value)) throw new Error("value is not encodable as UTF-8 (a lone surrogate)");
    const raw = new TextEncoder().encode(value);
    let end = Math.min(raw.length, this.maxLength);
    if (end < raw.length) while (end > 0 && (raw[end] & 0xc0) === 0x80) end--;
    const padded = new Uint8Array(this.maxLength);
    padded.set(raw.subarray(0, end));
    return padded;
  }

  /** h_row(prefix) = ((b_r + sum_i a_{r,i} x_i) mod P) mod m, below 2^46 throughout. */
  cell(row: number, prefix: Uint8Array): number {
    const [a, b] = textHashCoefficients();
    let total = b[row];
    for (let i = 0; i < prefix.length; i++) total += a[row][i] * prefix[i];
    return (total % OLH_PRIME) % TEXT_CELLS;
  }

  /** A report of the padded string at the device's pinned `level` (eps-LDP). One 64-bit
   * little-endian word w per cell, as Python draws them: a bit is set when w < ceil(x 2^53) 2^11,
   * i.e. floor(w / 2^11) < ceil(x 2^53), exact in doubles. */
  randomize(padded: Uint8Array, level: number, rng: Randomness = systemRandomness): TextPayload {
    if (!Number.isInteger(level) || level < 1 || level > this.levels || padded.length !== this.maxLength) {
      throw new RangeError("not a padded string and level of this metric");
    }
    const row = rng.randbelow(TEXT_ROWS);
    const target = this.cell(row, padded.subarray(0, this.prefixLength(level)));
    const words = rng.bytes(8 * TEXT_CELLS);
    const view = new DataView(words.buffer, words.byteOffset, words.byteLength);
    const top = (v: number): number => view.getUint32(8 * v + 4, true) * 2097152 + (view.getUint32(8 * v, true) >>> 11);
    const bits = new Uint8Array(TEXT_CELLS / 8);
    for (let v = 0; v < TEXT_CELLS; v++) if (top(v) < this.#belowQ) bits[v >> 3] |= 1 << (v & 7);
    if (top(target) < this.#belowP) bits[target >> 3] |= 1 << (target & 7);
    else bits[target >> 3] &= ~(1 << (target & 7));
    return { b: toBase64(bits), l: level, r: row };
  }
}

/** The text factory a Client takes (`text: pem`): a text spec's randomizer, `auto` being pem. */
export function pem(data: SpecData): TextRandomizer {
  if (data.categories !== undefined || data.edges !== undefined || data.lower !== undefined || data.upper !== undefined) {
    throw new SpecError("a text metric has max_length only (no categories, edges, lower or upper)");
  }
  if (data.max_length === undefined) throw new SpecError("a text metric needs max_length (UTF-8 bytes)");
  const mechanism = data.mechanism ?? "auto";
  if (mechanism !== "auto" && mechanism !== "pem") throw new SpecError("unknown mechanism; a text metric uses auto or pem");
  const sketch = new PrefixSketch(data.max_length, data.epsilon);
  const cells = Object.values(data.dimensions ?? {}).reduce((product, values) => product * (values.length + 1), 1);
  const counts = cells * sketch.levels * TEXT_ROWS * (TEXT_CELLS + 1);
  if (data.dimensions !== undefined && (cells > MAX_TEXT_CELLS || counts > MAX_TEXT_CELL_COUNTS)) {
    throw new SpecError(`its dimensions make ${cells} cells (${counts} sketch counts); a text metric takes at most ${MAX_TEXT_CELLS} cells and ${MAX_TEXT_CELL_COUNTS} counts`);
  }
  return sketch;
}

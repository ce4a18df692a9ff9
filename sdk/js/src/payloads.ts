/** Payload checks, as the collector applies them (DESIGN.md): canonical form or an Error naming
 * the problem, and the categories a payload supports. Not needed to record, so not in the
 * browser bundle; the shared vectors and the auditor use them. */

import { type PrefixSketch, TEXT_CELLS, TEXT_ROWS } from "./text.js";
import {
  B64, type Mechanism, type TwoLayers, type NumericMechanism, type Payload, Duchi, Hybrid, OLH, OLH_PRIME, OUE, isIndex, toBase64,
} from "./mechanisms.js";

/** The bytes of strict standard base64 (padding required, no whitespace), or null. */
export function fromBase64(text: string): Uint8Array | null {
  if (text.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) return null;
  const pad = text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0;
  const out = new Uint8Array((text.length / 4) * 3 - pad);
  let o = 0;
  for (let i = 0; i < text.length; i += 4) {
    let n = 0;
    for (let j = 0; j < 4; j++) {
      const c = text[i + j];
      n = (n << 6) | (c === "=" ? 0 : B64.indexOf(c));
    }
    for (const byte of [n >> 16, (n >> 8) & 255, n & 255]) if (o < out.length) out[o++] = byte;
  }
  return out;
}

function parseNumber(payload: unknown, bound: number): number {
  if (typeof payload !== "number") throw new Error("payload must be a number");
  if (!Number.isFinite(payload)) throw new Error("payload must be a finite number");
  if (Math.abs(payload) > bound * (1 + 1e-9)) throw new Error(`payload must lie in [-${bound}, ${bound}]`);
  return payload;
}

function parseDuchi(m: Duchi, payload: unknown): number {
  const y = parseNumber(payload, m.bound);
  if (Math.abs(Math.abs(y) - m.bound) > 1e-9 * m.bound) throw new Error(`a duchi payload must be +-${m.bound}`);
  return y < 0 ? -m.bound : m.bound;
}

/** A numeric payload as the collector accepts it, or an Error naming the problem. */
export function parseNumericPayload(m: NumericMechanism, payload: unknown): number {
  if (m instanceof Duchi) return parseDuchi(m, payload);
  if (m instanceof Hybrid && m.beta === 0) return parseDuchi(m.duchi, payload);
  return parseNumber(payload, m.bound);
}

/** P(report supports v | true v) and P(report supports w | true v != w) through both of RAPPOR's
 * layers (what an estimator uses; equal to the metric's own mechanism's). */
export function twoLayersRates({ permanent: a, instantaneous: b }: TwoLayers): { pStar: number; qStar: number } {
  return { pStar: a.p * b.p + (1 - a.p) * b.q, qStar: a.q * b.p + (1 - a.q) * b.q };
}

/** A category payload in canonical form, or an Error naming the problem. */
export function parsePayload(m: Mechanism, payload: unknown): Payload {
  if (m instanceof OUE) {
    if (typeof payload !== "string") throw new Error("payload must be a base64 string");
    const raw = fromBase64(payload);
    if (raw === null) throw new Error("payload is not valid standard base64");
    if (raw.length !== m.bytes) throw new Error(`payload must encode exactly ${m.bytes} bytes for k=${m.k}`);
    if (m.k % 8 && raw[raw.length - 1] >> (m.k % 8)) throw new Error(`payload sets bits past k=${m.k}`);
    return toBase64(raw);
  }
  if (m instanceof OLH) {
    if (typeof payload !== "object" || payload === null || Array.isArray(payload)
      || Object.keys(payload).sort().join() !== "a,b,y") {
      throw new Error('payload must be an object with exactly the keys "a", "b", "y"');
    }
    const { a, b, y } = payload as Record<string, unknown>;
    if (![a, b, y].every(Number.isInteger)) throw new Error("payload a, b and y must be integers");
    if (!((a as number) >= 1 && (a as number) < OLH_PRIME)) throw new Error("payload a must be in [1, 2^31 - 2]");
    if (!((b as number) >= 0 && (b as number) < OLH_PRIME)) throw new Error("payload b must be in [0, 2^31 - 2]");
    if (!isIndex(y, m.g)) throw new Error(`payload y must be in [0, ${m.g - 1}]`);
    return { a: a as number, b: b as number, y: y as number };
  }
  if (!isIndex(payload, m.k)) throw new Error(`payload must be an integer in 0..${m.k - 1}`);
  return payload;
}

/** The categories a valid payload supports. */
export function supported(m: Mechanism, payload: Payload): number[] {
  if (m instanceof OUE) {
    const raw = fromBase64(payload as string) as Uint8Array;
    const out: number[] = [];
    for (let v = 0; v < m.k; v++) if ((raw[v >> 3] >> (v & 7)) & 1) out.push(v);
    return out;
  }
  if (m instanceof OLH) {
    const { a, b, y } = payload as { a: number; b: number; y: number };
    const out: number[] = [];
    for (let v = 0; v < m.k; v++) if (m.hash(a, b, v) === y) out.push(v);
    return out;
  }
  return [payload as number];
}

/** A text metric's (pem) payload in canonical form, or an Error naming the problem. */
export function parseTextPayload(m: PrefixSketch, payload: unknown): Payload {
  if (typeof payload !== "object" || payload === null || Array.isArray(payload) || Object.keys(payload).sort().join() !== "b,l,r") {
    throw new Error('payload must be an object with exactly the keys "b", "l", "r"');
  }
  const { b, l, r } = payload as Record<string, unknown>;
  if (!Number.isInteger(l) || (l as number) < 1 || (l as number) > m.levels) throw new Error(`payload l (the prefix level) must be an integer in 1..${m.levels}`);
  if (!Number.isInteger(r) || (r as number) < 0 || (r as number) >= TEXT_ROWS) throw new Error(`payload r (the sketch row) must be an integer in 0..${TEXT_ROWS - 1}`);
  if (typeof b !== "string") throw new Error("payload b must be a base64 string");
  const raw = fromBase64(b);
  if (raw === null) throw new Error("payload b is not valid standard base64");
  if (raw.length !== TEXT_CELLS / 8) throw new Error(`payload b must encode exactly ${TEXT_CELLS / 8} bytes (${TEXT_CELLS} cells)`);
  return { b: toBase64(raw), l: l as number, r: r as number };
}

/** Uploads through a shuffler (`deniable/shuffle`), as deniable.client.sealing and .shuffling
 * do them (DESIGN.md "Shuffler"): each report padded to its metric's fixed size and sealed with
 * HPKE base mode (RFC 9180: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, ChaCha20-Poly1305) to the
 * collector's current key as the shuffler serves it (GET /v1/keys on the shuffler, never on the
 * collector: one key set for every device, docs/security.md), its outer header bound as the HPKE
 * info, then posted to the shuffler with this device's pseudonym and the shuffler's upload key. The HPKE is @hpke/core and @hpke/chacha20poly1305, optional peer
 * dependencies needed by this entry only: `new Client({ url, shuffler: URL, sealing })`. */

import { Chacha20Poly1305 } from "@hpke/chacha20poly1305";
import { CipherSuite, DhkemX25519HkdfSha256, HkdfSha256 } from "@hpke/core";
import { boundedText, type Post, type Sealing } from "./client.js";
import { OLH_PRIME, toBase64 } from "./mechanisms.js";
import { fromBase64 } from "./payloads.js";
import { hmacSha256Hex, sha256Hex } from "./sha256.js";
import { InvalidInput, type MetricSpec, OTHER, canonicalJson } from "./spec.js";
import { reportText } from "./wire.js";

/** Where a device posts its sealed reports (on the shuffler). */
export const SEALED_PATH = "/v1/sealed";
/** Where the shuffler serves the collector's public sealing keys. */
export const KEYS_PATH = "/v1/keys";
/** The shuffler's answer to reports sealed to a key it does not serve (any more). */
export const KEY_REFUSED = 409;
/** A metric's padded size is a multiple of this many bytes. */
export const PAD_BLOCK = 64;
/** The first field of the HPKE info: the envelope format's version. */
export const INFO_PREFIX = "deniable.sealed.v1";
/** Milliseconds a fetched key is used before the key list is fetched again. */
export const KEY_REFRESH = 600000;
/** The largest GET /v1/keys answer read. */
const MAX_KEYS_BYTES = 64 * 1024;
/** Bodies past this are not sent with keepalive (browsers refuse them). */
const KEEPALIVE_BYTES = 60000;
const LONGEST_PERIOD = "2026-11-21";
const ANY_ID = "00000000-0000-0000-0000-000000000000";
/** The most characters Python's repr gives a finite float. */
const LONGEST_FLOAT = 24;
const utf8 = (text: string): Uint8Array => new TextEncoder().encode(text);

/** A report that cannot be sealed, or sealing keys refused. */
export class SealingError extends Error {
  override name = "SealingError";
}

function payloadBound(spec: MetricSpec): number {
  if (spec.type === "numeric") return LONGEST_FLOAT;
  if (spec.type === "text") return '{"b":"","l":,"r":}'.length + 4 * Math.ceil(128 / 3) + 2 + 2;
  const k = spec.setRandomizer?.width ?? spec.categories.length; // a set's oracle: k + L items
  if (spec.mechanism === "oue") return 2 + 4 * Math.ceil(Math.ceil(k / 8) / 3);
  if (spec.mechanism === "olh") return '{"a":,"b":,"y":}'.length + 3 * String(OLH_PRIME).length;
  return String(k - 1).length;
}

/** The most bytes a report text of `spec` can take (its id, name, fingerprint, the longest
 * period label, the longest payload and dimension values), as Python's report_bound. */
export function reportBound(spec: MetricSpec): number {
  const longest = (values: readonly string[]): string =>
    [...values, OTHER].reduce((a, b) => (utf8(b).length > utf8(a).length ? b : a));
  const context = Object.fromEntries(spec.dimensions.map(([name, values]) => [name, longest(values)]));
  return utf8(reportText(ANY_ID, spec.name, spec.fingerprint, LONGEST_PERIOD, "", spec.dimsText(context))).length + payloadBound(spec);
}

/** The plaintext size of every sealed report of `spec`: reportBound rounded up to PAD_BLOCK. */
export function paddedSize(spec: MetricSpec): number {
  return PAD_BLOCK * Math.ceil(reportBound(spec) / PAD_BLOCK);
}

/** How many bytes every sealed report of `spec` takes (encapsulated key, padded text, tag). */
export function sealedSize(spec: MetricSpec): number {
  return 32 + paddedSize(spec) + 16;
}

/** `text` as UTF-8 followed by spaces up to `size` bytes. */
export function pad(text: string, size: number): Uint8Array {
  const raw = utf8(text);
  if (raw.length > size) throw new SealingError(`a report of ${raw.length} bytes exceeds its padded size ${size}`);
  const out = new Uint8Array(size).fill(0x20);
  out.set(raw);
  return out;
}

/** A public key's id: the first 16 hex digits of SHA-256 over its 32 raw bytes. */
export function keyId(publicKey: Uint8Array): string {
  return sha256Hex(publicKey).slice(0, 16);
}

/** The HPKE info of a report of `spec` sealed under key `key`: the version and the header. */
export function sealingInfo(spec: MetricSpec, key: string): string {
  return [INFO_PREFIX, spec.name, spec.mechanism, canonicalJson(spec.epsilon), spec.fingerprint, key].join("|");
}

/** The envelope id the shuffler dedupes resends by (a resend repeats it; not the stored id). */
export function envelopeId(reportId: string): string {
  return sha256Hex(utf8(`deniable.envelope.v1|${reportId}`)).slice(0, 32);
}

/** This device's pseudonym for the shuffler: HMAC-SHA256 of a fixed label under its secret (hex). */
export function devicePseudonym(secretHex: string): string {
  const secret = Uint8Array.from(secretHex.match(/../g) as string[], (h) => parseInt(h, 16));
  return hmacSha256Hex(secret, utf8("deniable.shuffler.device.v1")).slice(0, 32);
}

const suite = new CipherSuite({ kem: new DhkemX25519HkdfSha256(), kdf: new HkdfSha256(), aead: new Chacha20Poly1305() });

/** The sealed bytes of one report text of `spec` to the raw X25519 key `publicKey`. */
export async function seal(report: string, spec: MetricSpec, publicKey: Uint8Array): Promise<Uint8Array> {
  const recipientPublicKey = await suite.kem.deserializePublicKey(publicKey);
  const info = utf8(sealingInfo(spec, keyId(publicKey)));
  const { enc, ct } = await suite.seal({ recipientPublicKey, info }, pad(report, paddedSize(spec)));
  const out = new Uint8Array(enc.byteLength + ct.byteLength);
  out.set(new Uint8Array(enc));
  out.set(new Uint8Array(ct), enc.byteLength);
  return out;
}

/** The envelope a device sends the shuffler for one report text of `spec`. */
export async function envelope(report: string, spec: MetricSpec, publicKey: Uint8Array): Promise<Record<string, unknown>> {
  const sealed = await seal(report, spec, publicKey);
  return {
    id: envelopeId((JSON.parse(report) as { id: string }).id), metric: spec.name, mechanism: spec.mechanism,
    epsilon: spec.epsilon, fingerprint: spec.fingerprint, key: keyId(publicKey), sealed: toBase64(sealed),
  };
}

/** (id, raw public key) of one served key, its id checked to be its own. */
function publicKeyOf(entry: unknown): [string, Uint8Array] {
  const { id, public: text } = (entry ?? {}) as { id?: unknown; public?: unknown };
  const raw = typeof text === "string" ? fromBase64(text) : null;
  if (raw === null || raw.length !== 32 || id !== keyId(raw)) throw new SealingError("a served key's id is not the SHA-256 of its public key");
  return [id, raw];
}

/** The collector's sealing keys as the shuffler serves them: fetched from the shuffler's
 * GET /v1/keys, pinned by id for the client's life, the current one used, fetched again after
 * KEY_REFRESH or once the shuffler refuses it (as the Python SealingTransport). */
class Keys {
  readonly #pinned = new Map<string, Uint8Array>();
  #current: string | null = null;
  #fetchedAt = -Infinity;

  constructor(readonly url: string, readonly timeout: number) {}

  /** The current key's raw bytes; an Error saying why there is none (the upload is retried). */
  async current(): Promise<Uint8Array> {
    if (this.#current === null || Date.now() - this.#fetchedAt >= KEY_REFRESH) {
      const why = await this.#fetch();
      if (this.#current === null) throw new Error(why || "the shuffler serves no current sealing key");
    }
    return this.#pinned.get(this.#current) as Uint8Array;
  }

  /** Forget the current key (the shuffler no longer takes it): the next upload fetches again. */
  forget(): void {
    this.#current = null;
  }

  async #fetch(): Promise<string> {
    let text: string;
    try {
      const answer = await fetch(`${this.url}${KEYS_PATH}`, { signal: AbortSignal.timeout(this.timeout) });
      if (answer.status !== 200) return `GET ${KEYS_PATH} answered HTTP ${answer.status}`;
      text = await boundedText(answer, MAX_KEYS_BYTES);
    } catch (exc) {
      return `GET ${KEYS_PATH} failed (${(exc as Error).name})`;
    }
    let current: string | null = null;
    try {
      const served = (JSON.parse(text) as { keys?: unknown }).keys;
      if (!Array.isArray(served)) throw new SealingError("no list of keys");
      for (const entry of served) {
        const [id, raw] = publicKeyOf(entry);
        const pinned = this.#pinned.get(id) ?? raw;
        this.#pinned.set(id, pinned);
        if (toBase64(pinned) !== toBase64(raw)) throw new SealingError("a served key differs from the one pinned under its id");
        if ((entry as { current?: unknown }).current === true) current = id;
      }
    } catch (exc) {
      const why = `refused the collector's sealing keys: ${(exc as Error).message}`;
      console.error(`deniable: ${why}`);
      return why;
    }
    this.#fetchedAt = Date.now();
    if (current !== null) this.#current = current;
    return "";
  }
}

/** A Client's uploads through `options.shuffler`: pass `sealing` with `shuffler` to the Client.
 * Budget, queue and resends are the Client's, unchanged; the ingest key is not sent to the
 * shuffler, `shufflerKey` is; a report whose metric is no longer known is refused like a 422
 * (dropped). */
export const sealing: Sealing = (options, secret, specs): Post => {
  if (typeof options.shuffler !== "string" || !/^https?:\/\/[^/]/.test(options.shuffler)) throw new InvalidInput("shuffler must be an http(s) URL");
  const shuffler = options.shuffler.replace(/\/+$/, "").replace(/\/v1$/, "");
  const keys = new Keys(shuffler, options.timeout ?? 30000);
  const headers: Record<string, string> = { "Content-Type": "application/json" };
  if (options.shufflerKey !== undefined) headers.Authorization = `Bearer ${options.shufflerKey}`;
  const device = devicePseudonym(secret);
  return async (_url, init, batch) => {
    const publicKey = await keys.current();
    const known = specs;
    const envelopes: Array<Record<string, unknown>> = [];
    const unknown: number[] = [];
    for (const [index, text] of batch.entries()) {
      const spec = known.get((JSON.parse(text) as { metric: string }).metric);
      try {
        if (spec === undefined) throw new SealingError("unknown metric");
        envelopes.push(await envelope(text, spec, publicKey));
      } catch (exc) {
        if (!(exc instanceof SealingError)) throw exc;
        unknown.push(index);
      }
    }
    if (unknown.length > 0) {
      const reason = "reports of metrics whose spec is no longer known cannot be sealed";
      const detail = unknown.map((index) => ({ index, reason }));
      return new Response(JSON.stringify({ detail }), { status: 422, headers: { "Content-Type": "application/json" } });
    }
    const body = JSON.stringify({ device, envelopes });
    const answer = await fetch(`${shuffler}${SEALED_PATH}`, {
      method: "POST", headers, body,
      keepalive: (init.keepalive ?? false) && body.length < KEEPALIVE_BYTES, signal: init.signal,
    });
    if (answer.status === KEY_REFUSED) keys.forget();
    return answer;
  };
};

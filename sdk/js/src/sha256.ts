/** SHA-256 (FIPS 180-4), synchronous, for spec fingerprints: no dependency, same bytes everywhere. */

/** The round constants and initial hash: the first 32 bits of the fractional parts of the cube
 * and square roots of the first primes (FIPS 180-4 4.2.2 and 5.3.3), computed, not listed. */
const K = new Uint32Array(64);
const H0 = new Uint32Array(8);
for (let n = 2, i = 0; i < 64; n++) {
  let prime = true;
  for (let d = 2; d * d <= n; d++) if (n % d === 0) prime = false;
  if (!prime) continue;
  if (i < 8) H0[i] = (n ** 0.5 % 1) * 4294967296;
  K[i++] = (n ** (1 / 3) % 1) * 4294967296;
}

const rotr = (x: number, n: number): number => (x >>> n) | (x << (32 - n));

/** The SHA-256 digest of `data` as lowercase hex. */
export function sha256Hex(data: Uint8Array): string {
  let hex = "";
  for (const x of sha256(data)) hex += x.toString(16).padStart(8, "0");
  return hex;
}

/** HMAC-SHA256 (RFC 2104) of `message` under `key`, as lowercase hex. */
export function hmacSha256Hex(key: Uint8Array, message: Uint8Array): string {
  const block = new Uint8Array(64);
  block.set(key.length > 64 ? words(sha256(key)) : key);
  const inner = new Uint8Array(64 + message.length);
  const outer = new Uint8Array(96);
  for (let i = 0; i < 64; i++) {
    inner[i] = block[i] ^ 0x36;
    outer[i] = block[i] ^ 0x5c;
  }
  inner.set(message, 64);
  outer.set(words(sha256(inner)), 64);
  return sha256Hex(outer);
}

function words(h: Uint32Array): Uint8Array {
  const out = new Uint8Array(32);
  const view = new DataView(out.buffer);
  h.forEach((w, i) => view.setUint32(4 * i, w));
  return out;
}

function sha256(data: Uint8Array): Uint32Array {
  const length = data.length;
  const padded = new Uint8Array((((length + 9 + 63) >> 6) << 6));
  padded.set(data);
  padded[length] = 0x80;
  const view = new DataView(padded.buffer);
  view.setUint32(padded.length - 8, Math.floor(length / 0x20000000));
  view.setUint32(padded.length - 4, (length << 3) >>> 0);
  const h = H0.slice();
  const w = new Uint32Array(64);
  for (let offset = 0; offset < padded.length; offset += 64) {
    for (let i = 0; i < 16; i++) w[i] = view.getUint32(offset + 4 * i);
    for (let i = 16; i < 64; i++) {
      const s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >>> 3);
      const s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >>> 10);
      w[i] = (w[i - 16] + s0 + w[i - 7] + s1) >>> 0;
    }
    let [a, b, c, d, e, f, g, hh] = h;
    for (let i = 0; i < 64; i++) {
      const t1 = (hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i]) >>> 0;
      const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) >>> 0;
      hh = g; g = f; f = e; e = (d + t1) >>> 0; d = c; c = b; b = a; a = (t1 + t2) >>> 0;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
  }
  return h;
}

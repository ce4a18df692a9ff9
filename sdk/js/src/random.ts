/** Randomness from the platform CSPRNG (`crypto.getRandomValues`) only: uniform floats with 53
 * random bits, integers below n by rejection sampling (no modulo bias), uuid4 ids. */

const BUFFER_WORDS = 2048;
const TWO_POW_26 = 67108864;
const TWO_POW_MINUS_53 = 1.1102230246251565e-16;

/** A source of uniform 32-bit words; the SDK's own is {@link systemRandomness}. */
export interface Randomness {
  /** A uniform float in [0, 1) with 53 random bits. */
  random(): number;
  /** A uniform integer in [0, n), n in [1, 2^32]. */
  randbelow(n: number): number;
  /** n uniform bytes. */
  bytes(n: number): Uint8Array;
}

/** Buffered words from `crypto.getRandomValues` (refilled in blocks: far fewer calls). */
export class CryptoRandomness implements Randomness {
  private words = new Uint32Array(BUFFER_WORDS);
  private next = BUFFER_WORDS;

  /** One uniform 32-bit word. */
  word(): number {
    if (this.next >= BUFFER_WORDS) {
      globalThis.crypto.getRandomValues(this.words);
      this.next = 0;
    }
    return this.words[this.next++];
  }

  random(): number {
    return ((this.word() >>> 5) * TWO_POW_26 + (this.word() >>> 6)) * TWO_POW_MINUS_53;
  }

  randbelow(n: number): number {
    if (!Number.isInteger(n) || n < 1 || n > 4294967296) throw new RangeError("randbelow: n not in 1..2^32");
    if (n === 1) return 0;
    const bits = Math.ceil(Math.log2(n));
    const shift = 32 - bits;
    for (;;) {
      const candidate = shift === 0 ? this.word() : this.word() >>> shift;
      if (candidate < n) return candidate;
    }
  }

  bytes(n: number): Uint8Array {
    const out = new Uint8Array(n);
    globalThis.crypto.getRandomValues(out);
    return out;
  }
}

/** The SDK's CSPRNG. */
export const systemRandomness = new CryptoRandomness();

const HEX = Array.from({ length: 256 }, (_, i) => (i + 256).toString(16).slice(1));
/** Bytes as lowercase hex. */
export const hex = (bytes: Uint8Array): string => Array.from(bytes, (b) => HEX[b]).join("");
const hex8 = (w: number): string => HEX[w >>> 24] + HEX[(w >>> 16) & 255] + HEX[(w >>> 8) & 255] + HEX[w & 255];

/** A uuid4 in canonical text form, always from the system CSPRNG (ids stay unguessable). */
export function uuid4(): string {
  const a = hex8(systemRandomness.word());
  const b = hex8(((systemRandomness.word() & 0xffff0fff) | 0x00004000) >>> 0);
  const c = hex8(((systemRandomness.word() & 0x3fffffff) | 0x80000000) >>> 0);
  const d = hex8(systemRandomness.word());
  return `${a}-${b.slice(0, 4)}-${b.slice(4)}-${c.slice(0, 4)}-${c.slice(4)}${d}`;
}

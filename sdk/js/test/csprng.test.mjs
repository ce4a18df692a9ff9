// Randomness only from the platform CSPRNG (crypto.getRandomValues): no code path of the SDK
// reaches Math.random, at run time or in the shipped files; a copy patched to use it is caught.
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { Client, MemoryStorage } from "../dist/index.js";
import { pem } from "../dist/text.js";

const DIST = fileURLToPath(new URL("../dist/", import.meta.url));

/** The shipped files of `dist` that call a non-cryptographic generator. */
function weakRandomness(dist) {
  return readdirSync(dist).filter((name) => name.endsWith(".js") && /Math\s*\.\s*random|Math\[["']random["']\]/.test(readFileSync(join(dist, name), "utf8")));
}

const SPECS = [
  { name: "b", type: "boolean", epsilon: 1, mechanism: "brr" },
  { name: "k", type: "categorical", categories: ["a", "b", "c"], epsilon: 1, mechanism: "krr" },
  { name: "o", type: "categorical", categories: ["a", "b", "c"], epsilon: 1, mechanism: "oue" },
  { name: "l", type: "categorical", categories: ["a", "b", "c"], epsilon: 1, mechanism: "olh" },
  { name: "d", type: "numeric", lower: 0, upper: 1, epsilon: 1, mechanism: "duchi" },
  { name: "p", type: "numeric", lower: 0, upper: 1, epsilon: 1, mechanism: "pm" },
  { name: "y", type: "numeric", lower: 0, upper: 1, epsilon: 2, mechanism: "hybrid" },
  { name: "h", type: "histogram", edges: [0, 1, 2], epsilon: 1 },
  { name: "t", type: "text", max_length: 4, epsilon: 1 },
];
const VALUES = { b: true, k: "a", o: "b", l: "c", d: 0.5, p: 0.5, y: 0.5, h: 1.5, t: "abc" };

test("every mechanism records through crypto.getRandomValues, never Math.random", () => {
  const real = Math.random;
  const getRandomValues = globalThis.crypto.getRandomValues.bind(globalThis.crypto);
  let calls = 0;
  Math.random = () => { throw new Error("Math.random was called"); };
  const spy = (array) => { calls++; return getRandomValues(array); };
  Object.defineProperty(globalThis.crypto, "getRandomValues", { value: spy, configurable: true, writable: true });
  try {
    const client = new Client({ url: "http://127.0.0.1:9", metrics: SPECS, text: pem, storage: new MemoryStorage(), memoize: ["b"], maxReportsPerPeriod: 5000, maxQueue: 100000, flushInterval: 0, refreshInterval: 0 });
    for (let i = 0; i < 3000; i++) for (const spec of SPECS) assert.equal(client.record(spec.name, VALUES[spec.name]), true);
    assert.ok(calls > 0);
  } finally {
    Math.random = real;
    Object.defineProperty(globalThis.crypto, "getRandomValues", { value: getRandomValues, configurable: true, writable: true });
  }
});

test("no shipped file calls Math.random; a copy patched to is caught", () => {
  assert.deepEqual(weakRandomness(DIST), []);
  const copy = mkdtempSync(join(tmpdir(), "deniable-js-weak-"));
  try {
    cpSync(DIST, copy, { recursive: true });
    const file = join(copy, "random.js");
    const honest = "globalThis.crypto.getRandomValues(this.words);";
    const code = readFileSync(file, "utf8");
    assert.ok(code.includes(honest), "the CSPRNG call moved: update this patch");
    writeFileSync(file, code.replace(honest, "for (let i = 0; i < this.words.length; i++) this.words[i] = Math.random() * 4294967296;"));
    assert.deepEqual(weakRandomness(copy), ["random.js"]);
  } finally {
    rmSync(copy, { recursive: true, force: true });
  }
});

// Memoization: one permanent answer per value (HMAC keys only), randomized afresh by the two
// layers so that the reports still follow the metric's own mechanism.
import assert from "node:assert/strict";
import { createHmac, randomBytes } from "node:crypto";
import { test } from "node:test";
import { Client, hmacSha256Hex, makeMechanism, MemoryStorage } from "../dist/index.js";

const BROWSER = { name: "browser", type: "categorical", categories: ["chrome", "firefox", "safari", "other"], epsilon: 1.0, mechanism: "krr" };
const LOAD = { name: "load_ms", type: "numeric", lower: 0, upper: 5000, epsilon: 1.0, mechanism: "pm" };

/** A client whose clock moves one day per record(), so each report is in its own period. */
function dailyClient(options) {
  let day = Date.UTC(2026, 0, 1);
  const storage = new MemoryStorage();
  const client = new Client({ url: "http://127.0.0.1:9", storage, flushInterval: 0, refreshInterval: 0, maxQueue: 100000, now: () => new Date(day), ...options });
  const record = (name, value) => {
    day += 86400000;
    return client.record(name, value);
  };
  const state = () => { client.save(); return JSON.parse(storage.load()); };
  return { client, record, state };
}

const payloads = (state) => state.queue.map((text) => JSON.parse(text).payload);

test("HMAC-SHA256 agrees with node:crypto", () => {
  for (const size of [0, 1, 55, 64, 65, 200]) {
    const key = randomBytes(size % 70 + 1);
    const message = randomBytes(size);
    assert.equal(hmacSha256Hex(key, message), createHmac("sha256", key).update(message).digest("hex"));
  }
});

test("without the fresh layer, one value repeats its permanent answer; the memo holds HMACs only", () => {
  const { record, state } = dailyClient({ metrics: [BROWSER, LOAD], memoize: true, instantaneousRatio: null });
  for (let i = 0; i < 20; i++) assert.equal(record("browser", "firefox"), true);
  for (let i = 0; i < 5; i++) record("load_ms", i % 2 ? 6000 : 9000); // both clamp to t = 1
  record("load_ms", 100);
  const s = state();
  const browser = payloads(s).slice(0, 20);
  assert.equal(new Set(browser).size, 1, "every report of firefox is its one permanent answer");
  const load = payloads(s).slice(20);
  assert.equal(new Set(load.slice(0, 5)).size, 1);
  assert.equal(Object.keys(s.memo).length, 3);
  for (const key of Object.keys(s.memo)) assert.match(key, /^[0-9a-f]{64}$/);
  assert.ok(!JSON.stringify(s).includes("firefox"), "nothing stored names the value");
});

test("with the fresh layer (the default ratio 2) the reports follow the metric's own krr", () => {
  const n = 4000;
  const { record, state } = dailyClient({ metrics: [BROWSER], memoize: ["browser"] });
  for (let i = 0; i < n; i++) record("browser", "firefox");
  const s = state();
  assert.equal(Object.keys(s.memo).length, 1, "one permanent answer");
  const permanent = Object.values(s.memo)[0];
  const kept = payloads(s).filter((p) => p === permanent).length / n;
  // Given the permanent answer, each report keeps it with the instantaneous krr's p (eps 2, k 4).
  const p = Math.exp(2) / (Math.exp(2) + 3);
  assert.ok(Math.abs(kept - p) < 5 * Math.sqrt((p * (1 - p)) / n), `kept ${kept}, expected ${p}`);
  assert.ok(makeMechanism("krr", 4, 1).p < p);
});

test("oue and olh are reported afresh when asked to memoize with the fresh layer", () => {
  const spec = { name: "wide", type: "categorical", categories: ["a", "b", "c", "d", "e", "f", "g", "h", "i"], epsilon: 1.0, mechanism: "oue" };
  const { record, state } = dailyClient({ metrics: [spec], memoize: true });
  for (let i = 0; i < 50; i++) record("wide", "c");
  const s = state();
  assert.equal(Object.keys(s.memo).length, 0);
  assert.ok(new Set(payloads(s)).size > 1);
});

test("a storage that cannot save (a full localStorage) is a problem, not an exception", () => {
  const full = { load: () => null, save: () => { throw new DOMException("quota", "QuotaExceededError"); } };
  const client = new Client({ url: "http://127.0.0.1:9", storage: full, metrics: [BROWSER], flushInterval: 0, refreshInterval: 0 });
  assert.equal(client.record("browser", "safari"), true);
  client.save();
  assert.deepEqual(client.problems(), ["could not save the client's state: QuotaExceededError"]);
  assert.equal(client.stats().queued, 1, "the report stays queued in memory");
});

test("lifetimeEpsilon is compared exactly, as Python's guarantees: the decimals given, no slack", () => {
  // Ten reports at 0.1 fit a cap of 1 (the float sum is 0.9999999999999999), three at 0.1 a cap
  // of 0.3 (3 * 0.1 is 0.30000000000000004 in floats), and three at 0.33333333334 exceed a cap
  // of 1 by 2e-11, which the old 1e-9 slack let through; Python's lifetime_reports gives 10, 3, 2.
  for (const [epsilon, lifetimeEpsilon, admitted] of [[0.1, 1, 10], [0.1, 0.3, 3], [0.33333333334, 1, 2]]) {
    const device = dailyClient({ metrics: [{ ...BROWSER, epsilon }], lifetimeEpsilon });
    const sent = Array.from({ length: 12 }, () => device.record("browser", "safari")).filter(Boolean).length;
    assert.equal(sent, admitted, `eps ${epsilon}, cap ${lifetimeEpsilon}`);
  }
});

test("lifetimeEpsilon: reports while their eps over any two histories fits, whatever the values", () => {
  const fresh = dailyClient({ metrics: [BROWSER], lifetimeEpsilon: 2.5 });
  assert.deepEqual([1, 2, 3, 4].map(() => fresh.record("browser", "safari")), [true, true, false, false]);
  assert.equal(fresh.client.stats().over_budget, 2);
  // Memoized with the fresh layer (eps_inst 2): one report costs 1, n >= 2 cost 2n; a cap of 6
  // admits 3 reports, as many for a device whose value changes as for one whose value does not.
  for (const values of [["chrome", "chrome", "chrome", "chrome", "chrome"], ["chrome", "safari", "other", "chrome", "firefox"]]) {
    const memo = dailyClient({ metrics: [BROWSER], lifetimeEpsilon: 6, memoize: true });
    assert.deepEqual(values.map((v) => memo.record("browser", v)), [true, true, true, false, false]);
  }
  // Without the fresh layer a second report shows whether the value changed: one report in all.
  for (const values of [["chrome", "chrome", "chrome"], ["chrome", "safari", "chrome"]]) {
    const memo = dailyClient({ metrics: [BROWSER], lifetimeEpsilon: 2.5, memoize: true, instantaneousRatio: null });
    assert.deepEqual(values.map((v) => memo.record("browser", v)), [true, false, false]);
  }
});

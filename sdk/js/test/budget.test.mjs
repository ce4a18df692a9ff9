// The shared vectors on what a device sends and which specs it uses (tests/vectors/wire.json,
// `lifetime` and `stored_specs`), replayed through the JS Client as Python's
// tests/client/test_shared_budget_vectors.py replays them (issue 37, items 2 and 10).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { Client, MemoryStorage } from "../dist/index.js";

const vectors = JSON.parse(readFileSync(new URL("../../../tests/vectors/wire.json", import.meta.url), "utf8"));
const BROWSER = vectors.specs.find(({ input }) => input.name === "browser").input;

test("a lifetime cap sends what the vectors say, the same for every history of values", () => {
  for (const c of vectors.lifetime) {
    let now = Date.UTC(2026, 0, 1, 12);
    const start = now;
    const client = new Client({
      url: "http://127.0.0.1:9", storage: new MemoryStorage(), flushInterval: 0, refreshInterval: 0, metrics: [BROWSER],
      memoize: c.memoize, instantaneousRatio: c.instantaneous_ratio, lifetimeEpsilon: c.lifetime_epsilon,
      maxReportsPerPeriod: c.per_period, now: () => new Date(now),
    });
    const sent = c.values.map((value, index) => {
      now = start + Math.floor(index / c.per_period) * 86400000;
      return client.record("browser", value);
    });
    assert.deepEqual(sent, c.sent, JSON.stringify(c));
    void client.close();
  }
});

test("a stored spec above maxEpsilon is kept but not used, and reported as a problem", () => {
  const errors = console.error;
  console.error = () => {};
  try {
    for (const c of vectors.stored_specs) {
      const storage = new MemoryStorage();
      const specs = Object.fromEntries(c.stored.map((data) => [data.name, data]));
      storage.save(JSON.stringify({ version: 1, specs, etag: null, ledger: {}, queue: [], secret: "ab".repeat(32), memo: {}, totals: {} }));
      const client = new Client({ url: "http://127.0.0.1:9", storage, flushInterval: 0, refreshInterval: 0, maxEpsilon: c.max_epsilon });
      for (const data of c.stored) {
        const value = data.type === "boolean" ? true : data.categories[0];
        assert.equal(client.record(data.name, value), c.used.includes(data.name), `${data.name} at maxEpsilon ${c.max_epsilon}`);
      }
      assert.deepEqual(client.metrics().map((s) => s.name).sort(), c.used);
      assert.equal(client.stats().specs_refused, c.specs_refused);
      for (const name of c.refused) {
        assert.ok(client.problems().some((p) => p.includes(`metric ${name} `) && p.includes("maxEpsilon")), name);
      }
      client.save();
      assert.deepEqual(Object.keys(JSON.parse(storage.load()).specs).sort(), c.stored.map((s) => s.name).sort(), "kept: still pinned");
      void client.close();
    }
  } finally {
    console.error = errors;
  }
});

test("a spec passed in code above maxEpsilon throws, as in Python", () => {
  const loud = vectors.stored_specs[0].stored.find((data) => data.epsilon > 4);
  assert.throws(() => new Client({ url: "http://127.0.0.1:9", storage: new MemoryStorage(), flushInterval: 0, refreshInterval: 0, metrics: [loud] }), /above maxEpsilon/);
  void new Client({ url: "http://127.0.0.1:9", storage: new MemoryStorage(), flushInterval: 0, refreshInterval: 0, metrics: [loud], maxEpsilon: loud.epsilon }).close();
});

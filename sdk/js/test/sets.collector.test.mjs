// A set metric from JS devices to a real collector on loopback: each Client pads and samples its
// set, the collector validates the oracle's payloads over k + L items and counts them, and its
// estimate gives each category's share of devices (docs/STATS.md section 16).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Client, MemoryStorage } from "../dist/index.js";
import { register, startCollector, storedIds } from "./collector.mjs";

const FEATURES = { name: "features", type: "set", categories: ["search", "share", "export", "sync"], max_items: 2, epsilon: 2.0, mechanism: "oue", period: "day" };
const SETS = [["search", "share"], ["search"], [], ["export", "sync", "search"]];

let collector;

before(async () => {
  collector = await startCollector();
  await register(collector.url, FEATURES);
});

after(async () => {
  await collector?.stop();
});

test("JS devices record sets the collector counts and estimates as shares of devices", async () => {
  const devices = 40;
  for (let i = 0; i < devices; i++) {
    const client = new Client({ url: collector.url, metrics: [FEATURES], storage: new MemoryStorage(), flushInterval: 0, refreshInterval: 0 });
    assert.equal(client.record("features", new Set(SETS[i % SETS.length])), true);
    assert.equal(await client.flush(), true);
    assert.deepEqual(client.problems(), []);
    await client.close(100);
  }
  assert.equal((await storedIds(collector.url, "features")).length, devices);
  const answer = await fetch(`${collector.url}/v1/metrics/features/estimate`);
  assert.equal(answer.status, 200);
  const document = await answer.json();
  assert.equal(document.n, devices);
  assert.equal(document.max_items, 2);
  assert.equal(document.oracle, "oue");
  assert.deepEqual(document.estimates.map((row) => row.category), FEATURES.categories);
});

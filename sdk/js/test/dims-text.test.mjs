// Public dimensions (context, setContext) and text metrics (deniable/text) through a real collector
// on loopback: the collector takes the JS reports' dims and pem payloads, and the state holds no
// true value; a text metric's prefix level is pinned for the metric's lifetime.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Client, InvalidInput, MemoryStorage } from "../dist/index.js";
import { pem } from "../dist/text.js";
import { register, startCollector, storedIds } from "./collector.mjs";

const DARK = { name: "dark_by", type: "boolean", epsilon: 1, mechanism: "brr", dimensions: { platform: ["web", "ios"], country: ["DE", "US"] } };
const SEARCH = { name: "search", type: "text", max_length: 8, epsilon: 2 };
const SEARCH_BY = { name: "search_by", type: "text", max_length: 4, epsilon: 4, dimensions: { platform: ["web", "ios"] } };

let collector;

before(async () => {
  collector = await startCollector();
  for (const spec of [DARK, SEARCH, SEARCH_BY]) await register(collector.url, spec);
});

after(async () => {
  await collector?.stop();
});

/** A client that may send 10 reports per metric and period (the collector's own clock). */
function dailyClient(options) {
  const client = new Client({ url: collector.url, flushInterval: 0, refreshInterval: 0, maxReportsPerPeriod: 10, ...options });
  return { client, record: (name, value) => client.record(name, value) };
}

const queued = (storage) => JSON.parse(storage.load()).queue.map((text) => JSON.parse(text));

test("reports carry the context's dimension values (unlisted or missing as other), changed by setContext", async () => {
  const storage = new MemoryStorage();
  const { client, record } = dailyClient({ storage, context: { platform: "ios", country: "FR" } });
  assert.equal(await client.refreshSpecs(), true);
  record("dark_by", true);
  client.setContext({ platform: "web" });
  record("dark_by", false);
  client.setContext({ platform: "web", country: "US", other: "ignored" });
  record("dark_by", true);
  client.save();
  assert.deepEqual(queued(storage).map((r) => r.dims), [
    { country: "other", platform: "ios" }, { country: "other", platform: "web" }, { country: "US", platform: "web" },
  ]);
  assert.ok(queued(storage).every((r) => Object.keys(r).join() === "id,metric,fingerprint,period,payload,dims"));
  const ids = queued(storage).map((r) => r.id);
  assert.equal(await client.flush(), true);
  assert.deepEqual((await storedIds(collector.url, "dark_by")).sort(), ids.sort(), "the collector stores exactly these reports");
  assert.equal(client.stats().dropped_rejected, 0);
  assert.throws(() => client.setContext({ platform: 3 }), InvalidInput);
  assert.throws(() => client.setContext(null), InvalidInput);
  assert.throws(() => new Client({ url: collector.url, context: ["ios"], storage: new MemoryStorage() }), InvalidInput);
  await client.close();
});

test("text: the collector stores the pem reports, the level is pinned for good and no string is stored", async () => {
  const storage = new MemoryStorage();
  const { client, record } = dailyClient({ storage, text: pem });
  assert.equal(await client.refreshSpecs(), true);
  for (const value of ["hello", "hunter2", "hello", "日本語テキスト長い", ""]) assert.equal(record("search", value), true);
  assert.throws(() => client.record("search", 5), /metric search: value is not a string/);
  assert.throws(() => client.record("search", "a\u0000b"), (exc) => exc instanceof InvalidInput && !exc.message.includes("a\u0000b"));
  client.save();
  const reports = queued(storage);
  assert.equal(reports.length, 5);
  assert.equal(new Set(reports.map((r) => r.payload.l)).size, 1, "one prefix level for the metric's lifetime");
  for (const { payload } of reports) {
    assert.deepEqual(Object.keys(payload), ["b", "l", "r"]);
    assert.equal(Buffer.from(payload.b, "base64").length, 128);
  }
  const state = storage.load();
  for (const value of ["hello", "hunter2", "日本語"]) assert.ok(!state.includes(value), "the state holds no true value");
  const pins = Object.entries(JSON.parse(state).memo);
  assert.equal(pins.length, 1);
  assert.match(pins[0][0], /^pin:[0-9a-f]{64}$/);
  assert.equal(pins[0][1], reports[0].payload.l);
  // A restart on the same state keeps the level.
  const again = new Client({ url: collector.url, storage, text: pem, flushInterval: 0, refreshInterval: 0, maxReportsPerPeriod: 10 });
  assert.equal(again.record("search", "other"), true);
  again.save();
  assert.equal(queued(storage).at(-1).payload.l, reports[0].payload.l);
  assert.equal(await again.flush(), true);
  assert.equal((await storedIds(collector.url, "search")).length, 6);
  assert.equal(again.stats().dropped_rejected, 0);
  await client.close();
  await again.close();
});

test("text with dimensions: pem reports carry the context's dims and the collector stores them", async () => {
  const storage = new MemoryStorage();
  const { client, record } = dailyClient({ storage, text: pem, context: { platform: "ios" } });
  assert.equal(await client.refreshSpecs(), true);
  for (const value of ["cat", "dog"]) assert.equal(record("search_by", value), true);
  client.save();
  const reports = queued(storage).filter((r) => r.metric === "search_by");
  assert.deepEqual(reports.map((r) => r.dims), [{ platform: "ios" }, { platform: "ios" }]);
  assert.ok(reports.every((r) => Object.keys(r).join() === "id,metric,fingerprint,period,payload,dims"));
  assert.equal(await client.flush(), true);
  assert.deepEqual((await storedIds(collector.url, "search_by")).sort(), reports.map((r) => r.id).sort());
  assert.equal(client.stats().dropped_rejected, 0);
  await client.close();
});

test("text: the level is uniform over 1..g across devices", () => {
  const spec = { name: "t3", type: "text", max_length: 3, epsilon: 1 };
  const counts = [0, 0, 0];
  const devices = 3000;
  for (let i = 0; i < devices; i++) {
    const storage = new MemoryStorage();
    const client = new Client({ url: "http://127.0.0.1:9", metrics: [spec], text: pem, storage, flushInterval: 0, refreshInterval: 0 });
    client.record("t3", "abc");
    client.save();
    counts[queued(storage)[0].payload.l - 1]++;
  }
  // Each count is Binomial(3000, 1/3): sd 25.8; 5 sd each side (a false alarm about 1 in 10^6).
  for (const count of counts) assert.ok(Math.abs(count - devices / 3) < 5 * Math.sqrt(devices * (1 / 3) * (2 / 3)), counts.join());
});

test("text without deniable/text: a served text spec is skipped quietly, one in code is refused", async () => {
  const client = new Client({ url: collector.url, storage: new MemoryStorage(), flushInterval: 0, refreshInterval: 0 });
  assert.equal(await client.refreshSpecs(), true);
  assert.deepEqual(client.metrics().map((s) => s.name), ["dark_by"]);
  assert.deepEqual(client.problems(), []);
  assert.equal(client.record("search", "hello"), false);
  assert.throws(() => new Client({ url: collector.url, metrics: [SEARCH], storage: new MemoryStorage() }), /metric search is text: pass text: pem/);
  await client.close();
});

test("text memoized without the fresh layer: one permanent report per string, keyed by HMAC only", () => {
  const storage = new MemoryStorage();
  let day = Date.UTC(2026, 0, 1);
  const client = new Client({
    url: "http://127.0.0.1:9", metrics: [SEARCH], text: pem, storage, memoize: true, instantaneousRatio: null, flushInterval: 0, refreshInterval: 0,
    now: () => new Date((day += 86400000)),
  });
  for (let i = 0; i < 5; i++) client.record("search", "same");
  client.record("search", "different");
  client.save();
  const payloads = queued(storage).map((r) => JSON.stringify(r.payload));
  assert.equal(new Set(payloads.slice(0, 5)).size, 1);
  const memo = JSON.parse(storage.load()).memo;
  assert.equal(Object.keys(memo).length, 3, "two strings and the level pin");
  assert.ok(!storage.load().includes("same") && !storage.load().includes("different"));
});

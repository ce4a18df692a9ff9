// The Client against a real collector on loopback (through a proxy that can take it offline).
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Client, MemoryStorage, MetricSpec } from "../dist/index.js";
import { FileStorage } from "../dist/node.js";
import { register, startCollector, startProxy, storedIds } from "./collector.mjs";

const BROWSER = { name: "browser", type: "categorical", categories: ["chrome", "firefox", "safari", "other"], epsilon: 1.0, mechanism: "krr", period: "day" };
const DARK = { name: "dark_mode", type: "boolean", epsilon: 1.0, mechanism: "brr", period: "day" };
const LOAD = { name: "load_ms", type: "numeric", lower: 0, upper: 5000, epsilon: 2.0, mechanism: "pm", period: "day" };
const HIST = { name: "load_hist", type: "histogram", edges: [0, 100, 250, 500, 1000, 5000], epsilon: 2.0, mechanism: "oue", period: "day" };
const WIDE = { name: "screen", type: "categorical", categories: Array.from({ length: 30 }, (_, i) => `s${i}`), epsilon: 2.0, mechanism: "olh", period: "day" };
const WEAK = { name: "weak", type: "boolean", epsilon: 5.0, mechanism: "brr", period: "day" };

let collector;
let proxy;
let folder;

before(async () => {
  collector = await startCollector();
  for (const spec of [BROWSER, DARK, LOAD, HIST, WIDE, WEAK]) await register(collector.url, spec);
  proxy = await startProxy(collector.url);
  folder = mkdtempSync(join(tmpdir(), "deniable-js-state-"));
});

after(async () => {
  await proxy?.close();
  await collector?.stop();
  if (folder) rmSync(folder, { recursive: true, force: true });
});

const queuedIds = (path) => JSON.parse(readFileSync(path, "utf8")).queue.map((text) => JSON.parse(text).id);

test("offline, then a lost acknowledgement, then online: the collector stores exactly the reports recorded", async () => {
  const path = join(folder, "exactly-once.json");
  const client = new Client({ url: proxy.url, metrics: [BROWSER, DARK, LOAD, HIST, WIDE], storage: new FileStorage(path), flushInterval: 0, refreshInterval: 0 });
  proxy.mode = "down";
  assert.equal(client.record("browser", "firefox"), true);
  assert.equal(client.record("browser", "chrome"), false, "one report per metric per period");
  assert.equal(client.record("dark_mode", true), true);
  assert.equal(client.record("load_ms", 412.7), true);
  assert.equal(client.record("load_hist", 412.7), true);
  assert.equal(client.record("screen", "s7"), true);
  assert.throws(() => client.record("browser", "Firefox"), /metric browser: value is not one of its categories/);
  assert.equal(await client.flush(), false);
  client.save();
  const ids = queuedIds(path);
  assert.equal(ids.length, 5);
  assert.ok(!readFileSync(path, "utf8").includes("firefox"), "the state file holds no true value");
  assert.ok(client.problems().some((p) => p.includes("could not deliver 5 report(s)")));
  // The queue survives a restart: a new client on the same file resends the same reports.
  const again = new Client({ url: proxy.url, metrics: [BROWSER, DARK, LOAD, HIST, WIDE], storage: new FileStorage(path), flushInterval: 0, refreshInterval: 0 });
  assert.equal(again.record("browser", "safari"), false, "the ledger survives a restart");
  proxy.mode = "lose-ack";
  assert.equal(await again.flush(), false);
  proxy.mode = "up";
  assert.equal(await again.flush(), true);
  const stats = again.stats();
  assert.equal(stats.delivered, 5);
  assert.equal(stats.duplicates, 5, "the resend after the lost acknowledgement held the same ids");
  assert.equal(stats.queued, 0);
  assert.deepEqual(again.problems(), []);
  const stored = [];
  for (const name of ["browser", "dark_mode", "load_ms", "load_hist", "screen"]) stored.push(...(await storedIds(collector.url, name)));
  assert.deepEqual(stored.sort(), ids.sort());
  await client.close(100);
  await again.close(100);
});

test("only the collector's own problem document drops reports", async () => {
  const client = new Client({ url: proxy.url, metrics: [DARK], storage: new MemoryStorage(), flushInterval: 0, refreshInterval: 0 });
  client.record("dark_mode", false);
  for (const status of [422, 400, 401, 500]) {
    proxy.mode = status;
    assert.equal(await client.flush(), false);
  }
  let stats = client.stats();
  assert.deepEqual([stats.queued, stats.dropped_rejected, stats.retries, stats.refused], [1, 0, 4, 3]);
  proxy.mode = "up";
  // A spec in code the collector does not serve as it is: its own 422 names the report, dropped.
  const wrong = new Client({ url: proxy.url, metrics: [{ ...DARK, epsilon: 0.5 }], storage: new MemoryStorage(), flushInterval: 0, refreshInterval: 0 });
  wrong.record("dark_mode", true);
  assert.equal(await wrong.flush(), true);
  stats = wrong.stats();
  assert.deepEqual([stats.queued, stats.dropped_rejected, stats.delivered], [0, 1, 0]);
  assert.ok(wrong.problems().some((p) => p.includes("refused 1 report(s) for good")));
  await wrong.refreshSpecs();
  assert.equal(wrong.stats().spec_mismatches, 1);
  assert.equal(await client.flush(), true);
  await client.close(100);
  await wrong.close(100);
});

test("a 401 names the URL, the key or a proxy, as Python's problem does, and clears once delivered", async () => {
  const client = new Client({ url: proxy.url, metrics: [DARK], storage: new MemoryStorage(), flushInterval: 0, refreshInterval: 0 });
  client.record("dark_mode", true);
  proxy.mode = 401;
  assert.equal(await client.flush(), false);
  const problems = client.problems();
  const refused = problems.find((p) => p.includes("answers uploads with HTTP 401"));
  assert.ok(refused, problems.join("; "));
  assert.ok(refused.startsWith(`the collector at ${proxy.url} answers uploads with HTTP 401`), refused);
  assert.ok(refused.includes("which blames the URL, the ingest key (ingestKey) or a proxy"), refused);
  assert.ok(refused.includes("1 report(s) kept and retried"), refused);
  assert.ok(!problems.some((p) => p.includes("could not deliver")), "a refusal is not an outage");
  proxy.mode = "up";
  assert.equal(await client.flush(), true);
  assert.deepEqual(client.problems(), []);
  await client.close(100);
});

test("a collector that hangs or streams without end: every request is bounded in time and size", async () => {
  const client = new Client({ url: proxy.url, storage: new MemoryStorage(), flushInterval: 0, refreshInterval: 0, timeout: 1500 });
  proxy.mode = "hang";
  assert.equal(await client.refreshSpecs(), false);
  assert.ok(client.problems().some((p) => p.includes("could not fetch metric specs")));
  proxy.mode = "huge";
  assert.equal(await client.refreshSpecs(), false);
  assert.ok(client.problems().some((p) => p.includes("over 4194304 bytes")), client.problems().join("; "));
  proxy.mode = "up";
  assert.equal(await client.refreshSpecs(), true);
  assert.ok(!client.problems().some((p) => p.includes("could not fetch")), "the fetch problem is over");
  client.record("dark_mode", true);
  proxy.mode = "hang";
  assert.equal(await client.flush(), false);
  assert.equal(client.stats().queued, 1);
  proxy.mode = "up";
  assert.equal(await client.flush(), true);
  await client.close(100);
});

test("served specs: fetched with an ETag, pinned, and never above maxEpsilon", async () => {
  const path = join(folder, "specs.json");
  const client = new Client({ url: proxy.url, storage: new FileStorage(path), flushInterval: 0, refreshInterval: 0 });
  assert.equal(client.record("dark_mode", true), true, "held until the specs arrive");
  assert.equal(client.stats().held, 1);
  proxy.statuses = [];
  assert.equal(await client.refreshSpecs(), true);
  assert.equal(await client.refreshSpecs(), true);
  assert.deepEqual(proxy.statuses, ["GET /v1/metrics 200", "GET /v1/metrics 304"]);
  const names = client.metrics().map((s) => s.name).sort();
  assert.deepEqual(names, ["browser", "dark_mode", "load_hist", "load_ms", "screen"]);
  assert.equal(client.stats().specs_refused, 1, "weak (eps 5) is above maxEpsilon 4");
  assert.ok(client.problems().some((p) => p.includes("metric weak") && p.includes("maxEpsilon")));
  assert.equal(client.stats().held, 0);
  assert.equal(client.stats().admitted, 1, "the held value went through record() once the specs came");
  assert.equal(client.record("weak", true), false);
  assert.equal(client.stats().unknown_metric, 1);
  await client.close(2000);
  // A device that pinned another spec under a served name keeps it and refuses the served one.
  const state = JSON.parse(readFileSync(path, "utf8"));
  const pinned = MetricSpec.fromDict({ ...BROWSER, epsilon: 0.5 });
  state.specs.browser = pinned.toDict();
  state.etag = null;
  writeFileSync(path, JSON.stringify(state));
  const later = new Client({ url: proxy.url, storage: new FileStorage(path), flushInterval: 0, refreshInterval: 0 });
  await later.refreshSpecs();
  assert.equal(later.metrics().find((s) => s.name === "browser").fingerprint, pinned.fingerprint);
  assert.ok(later.stats().specs_refused >= 1);
  assert.ok(later.problems().some((p) => p.includes("metric browser") && p.includes("differs from the spec this device accepted")));
  await later.close(100);
});

test("close while a spec fetch is under way: what that fetch brings is dropped, and nothing is saved after close", async () => {
  const saves = [];
  const storage = { load: () => null, save: (text) => saves.push(text) };
  const client = new Client({ url: proxy.url, storage, flushInterval: 0, refreshInterval: 0 });
  let release;
  proxy.held = new Promise((resolve) => { release = resolve; });
  proxy.mode = "held";
  proxy.statuses = [];
  try {
    const fetching = client.refreshSpecs();
    await client.close(100);
    const closedWith = saves.length;
    assert.ok(closedWith >= 1, "close saved");
    release();
    assert.equal(await fetching, false, "the fetch ended after close: dropped");
    assert.deepEqual(proxy.statuses, ["GET /v1/metrics 200"], "its answer did arrive");
    await new Promise((resolve) => setTimeout(resolve, 0));
    assert.equal(saves.length, closedWith, "nothing saved after close");
    assert.deepEqual(client.metrics(), [], "nothing adopted");
    assert.deepEqual(client.problems(), [], "nothing close interrupted is a problem");
  } finally {
    proxy.mode = "up";
  }
});

test("a few thousand simulated JS devices: every estimate covers its truth", async () => {
  const devices = 3000;
  const truth = (i) => ({ dark: i % 10 < 3, browser: BROWSER.categories[[0, 0, 0, 0, 1, 1, 1, 2, 2, 3][i % 10]], load: (i % 5) * 1000 + 250 });
  const ids = [];
  let next = 0;
  async function worker() {
    while (next < devices) {
      const i = next++;
      const client = new Client({ url: collector.url, metrics: [DARK, BROWSER, LOAD], storage: new MemoryStorage(), flushInterval: 0, refreshInterval: 0 });
      const t = truth(i);
      client.record("dark_mode", t.dark);
      client.record("browser", t.browser);
      client.record("load_ms", t.load);
      assert.equal(await client.flush(), true);
      ids.push(client.stats().delivered);
      await client.close(100);
    }
  }
  await Promise.all(Array.from({ length: 8 }, worker));
  assert.equal(ids.reduce((a, b) => a + b, 0), 3 * devices);
  const estimate = async (name) => (await fetch(`${collector.url}/v1/metrics/${name}/estimate?confidence=0.99999&method=unbiased`)).json();
  // Three joint 99.999% intervals: a false failure once in 33,000 runs (the SDK draws only from
  // the CSPRNG, so this test cannot be seeded). The earlier tests left a few reports in these
  // metrics: each moves a share by at most 1/n.
  const covers = (low, high, truth, n, width = 1) => low - (width * (n - devices)) / n <= truth && truth <= high + (width * (n - devices)) / n;
  const dark = await estimate("dark_mode");
  assert.ok(dark.n >= devices && dark.n < devices + 10, String(dark.n));
  const row = dark.estimates.find((e) => e.category === "true");
  assert.ok(covers(row.ci_low, row.ci_high, 0.3, dark.n), JSON.stringify(row));
  const browser = await estimate("browser");
  assert.ok(browser.n >= devices && browser.n < devices + 10, String(browser.n));
  const shares = { chrome: 0.4, firefox: 0.3, safari: 0.2, other: 0.1 };
  for (const e of browser.estimates) assert.ok(covers(e.ci_low, e.ci_high, shares[e.category], browser.n), JSON.stringify(e));
  const load = await estimate("load_ms");
  assert.ok(covers(load.mean.ci_low, load.mean.ci_high, 2250, load.n, 5000), JSON.stringify(load.mean));
});

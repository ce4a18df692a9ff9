// deniable/shuffle and the collector's sealing keys, with a real collector and shuffler: after
// `deniable keys rotate` (and the shuffler's next fetch of the collector's keys) a client keeps
// sealing to the key it fetched until KEY_REFRESH has passed (its clock moved by node:test's
// mock), then fetches the shuffler's GET /v1/keys again and seals to the new key; the reports
// sealed to the old key in the meantime still open at the collector (its grace period), each
// key's reports in batches of their own, and a key served under an id that is not its SHA-256
// is refused: nothing is sealed to it, the reports wait.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, mock, test } from "node:test";
import { Client, MemoryStorage } from "../dist/index.js";
import { KEY_REFRESH, keyId, sealing } from "../dist/shuffle.js";
import { PYTHON, ROOT, startPipeline, startProxy } from "./collector.mjs";

const METRICS = ["first", "second", "third"].map((name) => ({ name: `rot_${name}`, type: "boolean", epsilon: 1 }));
const MIN_BATCH = 2;
let pipeline;
let folder;

before(async () => {
  folder = mkdtempSync(join(tmpdir(), "deniable-js-rotation-"));
  pipeline = await startPipeline(folder, MIN_BATCH, METRICS);
});

after(async () => {
  if (pipeline) await pipeline.stop();
  rmSync(folder, { recursive: true, force: true });
});

/** The id of the key the shuffler serves as current. */
async function currentKey() {
  const { keys } = await (await fetch(`${pipeline.shuffler}/v1/keys`)).json();
  return keys.find((k) => k.current).id;
}

/** The shuffler's current key once it differs from `old` (it fetches the collector's keys every
 * 0.2 s in these tests). */
async function keyAfter(old) {
  const deadline = performance.now() + 30000;
  let current = await currentKey();
  while (current === old && performance.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    current = await currentKey();
  }
  return current;
}

/** The key ids of the sealed reports of each upload the shuffler's proxy forwarded, from its `from`th upload. */
function sealedTo(proxy, from) {
  return proxy.requests.filter((r) => r.method === "POST").slice(from).map((r) => JSON.parse(r.body).envelopes.map((e) => e.key));
}

const keyFetches = (proxy) => proxy.statuses.filter((s) => s.startsWith("GET /v1/keys")).length;

function device(collector, shuffler) {
  const storage = new MemoryStorage();
  const client = new Client({
    url: collector, shuffler, sealing, shufflerKey: pipeline.shuffler_key, metrics: METRICS, storage, flushInterval: 0, refreshInterval: 0,
  });
  return { client, storage };
}

/** The ids of the reports `device` has queued. */
function queuedIds({ client, storage }) {
  client.save();
  return JSON.parse(storage.load()).queue.map((text) => JSON.parse(text).id);
}

/** Every stored report id of a metric, from the admin export. */
async function storedIds(name) {
  const answer = await fetch(`${pipeline.collector}/v1/admin/metrics/${name}/reports?limit=1000`, {
    headers: { Authorization: `Bearer ${pipeline.admin_token}` },
  });
  assert.equal(answer.status, 200);
  return (await answer.json()).reports.map((r) => r.id);
}

test("after a rotation a client seals to the old key until KEY_REFRESH, then to the new one; the old key's reports still open", async () => {
  const collector = await startProxy(pipeline.collector);
  const shuffler = await startProxy(pipeline.shuffler);
  const devices = [];
  const recorded = [];
  const upload = async (dev, metrics) => {
    for (const name of metrics) assert.ok(dev.client.record(name, true));
    recorded.push(...queuedIds(dev));
    assert.equal(await dev.client.flush(), true);
  };
  // The clients' clock starts KEY_REFRESH in the past, so that moving it on never passes today.
  mock.timers.enable({ apis: ["Date"], now: Date.now() - KEY_REFRESH - 60000 });
  try {
    // Two devices, so that every (metric, key) has MIN_BATCH devices: a batch holds one key.
    const old = await currentKey();
    const pair = [device(collector.url, shuffler.url), device(collector.url, shuffler.url)];
    devices.push(...pair);
    for (const dev of pair) await upload(dev, [METRICS[0].name]);
    assert.deepEqual(sealedTo(shuffler, 0), [[old], [old]]);
    assert.equal(keyFetches(shuffler), 2);

    await promisify(execFile)(PYTHON, ["-m", "deniable.cli.main", "keys", "rotate", "--file", join(folder, "sealing-keys.json")], { cwd: ROOT });
    const rotated = await keyAfter(old);
    assert.notEqual(rotated, old);

    // Within KEY_REFRESH of its fetch, a client still seals to the key it has: no new fetch.
    mock.timers.tick(KEY_REFRESH - 1);
    for (const dev of pair) await upload(dev, [METRICS[1].name]);
    assert.deepEqual(sealedTo(shuffler, 2), [[old], [old]]);
    assert.equal(keyFetches(shuffler), 2);

    // At KEY_REFRESH it fetches the shuffler's keys again and seals to the new current one.
    mock.timers.tick(1);
    for (const dev of pair) await upload(dev, [METRICS[2].name]);
    assert.deepEqual(sealedTo(shuffler, 4), [[rotated], [rotated]]);
    assert.equal(keyFetches(shuffler), 4);
    // Devices ask the shuffler for keys, never the collector.
    assert.equal(keyFetches(collector), 0);
  } finally {
    mock.timers.reset();
    for (const { client } of devices) await client.close(100);
    await collector.close();
    await shuffler.close();
  }
  // Every report reaches the collector, the two sealed to the retired key included.
  assert.equal(new Set(recorded).size, 6);
  const deadline = performance.now() + 120000;
  let stored = [];
  while (stored.length < recorded.length && performance.now() < deadline) {
    stored = (await Promise.all(METRICS.map(({ name }) => storedIds(name)))).flat();
    if (stored.length < recorded.length) await new Promise((r) => setTimeout(r, 200));
  }
  assert.deepEqual(stored.sort(), recorded.sort());
  const answer = await fetch(`${pipeline.collector}/v1/privacy`, { headers: { Authorization: `Bearer ${pipeline.admin_token}` } });
  const batches = (await answer.json()).shuffled.batches.filter((b) => METRICS.some((m) => m.name === b.metric));
  assert.deepEqual(batches.map((b) => [b.n, b.refused]), [[2, 0], [2, 0], [2, 0]]);
});

test("a key served under an id that is not its SHA-256 is refused: nothing is sealed to it, the reports wait", async () => {
  const collector = await startProxy(pipeline.collector);
  const shuffler = await startProxy(pipeline.shuffler);
  const keys = shuffler;
  const stranger = randomBytes(32);
  const tamper = {
    // another party's key under the collector's id
    swapped: (entry) => ({ ...entry, public: stranger.toString("base64") }),
    // the collector's key under another id
    renamed: (entry) => ({ ...entry, id: keyId(stranger) }),
  };
  const dev = device(collector.url, shuffler.url);
  try {
    assert.ok(dev.client.record(METRICS[0].name, false));
    for (const change of Object.values(tamper)) {
      keys.rewrite = (path, body) => {
        if (path !== "/v1/keys") return body;
        const document = JSON.parse(body);
        return JSON.stringify({ keys: document.keys.map((entry) => (entry.current ? change(entry) : entry)) });
      };
      const before = keyFetches(keys);
      assert.equal(await dev.client.flush(), false);
      assert.equal(keyFetches(keys), before + 1);
      assert.equal(dev.client.stats().queued, 1);
      assert.ok(dev.client.problems().some((p) => p.includes("not the SHA-256 of its public key")), dev.client.problems().join());
      assert.deepEqual(shuffler.requests.filter((r) => r.method === "POST"), []);
    }
    // Served as it is, the key is taken and the waiting report goes.
    keys.rewrite = null;
    assert.equal(await dev.client.flush(), true);
    assert.deepEqual(sealedTo(shuffler, 0), [[await currentKey()]]);
  } finally {
    await dev.client.close(100);
    await collector.close();
    await shuffler.close();
  }
});

// deniable/shuffle: sealing as the Python client seals (the shared vectors), and JS-sealed reports
// through a real shuffler to a real collector, which opens them with its own code
// (collector/unsealing.py) and stores exactly the reports recorded, a resend only once.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Client, MemoryStorage, MetricSpec } from "../dist/index.js";
import { pem } from "../dist/text.js";
import { devicePseudonym, envelopeId, keyId, paddedSize, reportBound, seal, sealedSize, sealing, sealingInfo } from "../dist/shuffle.js";
import { startPipeline, startProxy } from "./collector.mjs";

const vectors = JSON.parse(readFileSync(new URL("../../../tests/vectors/wire.json", import.meta.url), "utf8"));
const specs = new Map(vectors.specs.map(({ input }) => [input.name, MetricSpec.fromDict(input, pem)]));

test("padded and sealed sizes, HPKE info, key and envelope ids, pseudonym: as Python computes them", () => {
  const { sizes, key, envelope_id: envelope, pseudonym } = vectors.sealing;
  assert.equal(sizes.length, vectors.specs.length);
  const publicKey = Buffer.from(key.public, "base64");
  assert.equal(keyId(publicKey), key.id);
  for (const expected of sizes) {
    const spec = specs.get(expected.metric);
    assert.deepEqual(
      { metric: spec.name, report_bound: reportBound(spec), padded_size: paddedSize(spec), sealed_size: sealedSize(spec), info: sealingInfo(spec, key.id) },
      expected,
    );
  }
  assert.equal(envelopeId(envelope.report_id), envelope.id);
  assert.equal(devicePseudonym(pseudonym.secret), pseudonym.device);
});

test("every sealed report of a metric takes its sealed size, whatever the report", async () => {
  const spec = specs.get("browser");
  const publicKey = Buffer.from(vectors.sealing.key.public, "base64");
  const short = await seal('{"id":"x"}', spec, publicKey);
  const long = await seal(vectors.reports.find((r) => r.metric === "browser").text, spec, publicKey);
  assert.equal(short.length, sealedSize(spec));
  assert.equal(long.length, sealedSize(spec));
  await assert.rejects(seal("x".repeat(paddedSize(spec) + 1), spec, publicKey), /exceeds its padded size/);
});

test("shuffler and sealing go together", () => {
  const base = { url: "http://127.0.0.1:9", storage: new MemoryStorage(), flushInterval: 0, refreshInterval: 0 };
  assert.throws(() => new Client({ ...base, shuffler: "http://127.0.0.1:9" }), TypeError);
  assert.throws(() => new Client({ ...base, sealing }), /shuffler must be an http\(s\) URL/);
  assert.throws(() => new Client({ ...base, shuffler: "ftp://x", sealing }), /shuffler must be an http\(s\) URL/);
});

const METRICS = [
  { name: "browser", type: "categorical", categories: ["chrome", "firefox", "safari"], epsilon: 1, mechanism: "oue", dimensions: { platform: ["web", "ios"] } },
  { name: "load_ms", type: "numeric", lower: 0, upper: 1000, epsilon: 1 },
  { name: "theme", type: "categorical", categories: ["light", "dark"], epsilon: 2, delivery: "shuffled" },
];
const DEVICES = 3;
let pipeline;
let folder;

before(async () => {
  folder = mkdtempSync(join(tmpdir(), "deniable-js-shuffle-"));
  pipeline = await startPipeline(folder, DEVICES, METRICS);
});

after(async () => {
  if (pipeline) await pipeline.stop();
  rmSync(folder, { recursive: true, force: true });
});

/** Every stored report of a metric (id -> payload), from the admin export. */
async function stored(name) {
  const answer = await fetch(`${pipeline.collector}/v1/admin/metrics/${name}/reports?limit=1000`, {
    headers: { Authorization: `Bearer ${pipeline.admin_token}` },
  });
  assert.equal(answer.status, 200);
  return new Map((await answer.json()).reports.map((r) => [r.id, { payload: r.payload, dims: r.dims }]));
}

test("JS-sealed reports through a real shuffler: the collector opens and stores exactly those recorded, a resend once", async () => {
  const proxy = await startProxy(pipeline.shuffler);
  const recorded = new Map();
  const clients = [];
  try {
    for (let device = 0; device < DEVICES; device++) {
      const storage = new MemoryStorage();
      const client = new Client({
        url: pipeline.collector, shuffler: device === 0 ? proxy.url : pipeline.shuffler, sealing, ingestKey: pipeline.ingest_key, shufflerKey: pipeline.shuffler_key,
        metrics: METRICS, storage, flushInterval: 0, refreshInterval: 0, context: { platform: "web" },
      });
      clients.push(client);
      assert.ok(client.record("browser", "firefox"));
      assert.ok(client.record("load_ms", 412.5));
      assert.equal(client.record("browser", "chrome"), false); // the budget: one per period
      client.save();
      for (const text of JSON.parse(storage.load()).queue) recorded.set(JSON.parse(text).id, JSON.parse(text));
    }
    // Device 0's shuffler stores its upload but the acknowledgement is lost: it resends.
    proxy.mode = "lose-ack";
    assert.equal(await clients[0].flush(), false);
    assert.equal(clients[0].stats().queued, 2);
    proxy.mode = "up";
    assert.equal(await clients[0].flush(), true);
    assert.deepEqual([clients[0].stats().delivered, clients[0].stats().duplicates], [2, 2]);
    for (const client of clients.slice(1)) {
      assert.equal(await client.flush(), true);
      assert.deepEqual([client.stats().delivered, client.stats().duplicates, client.stats().queued], [2, 0, 0]);
    }
    const posts = proxy.statuses.filter((s) => s.startsWith("POST"));
    assert.ok(posts.length > 0 && posts.every((s) => s.startsWith("POST /v1/sealed 202")), proxy.statuses.join());
    assert.ok(proxy.requests.filter((r) => r.method === "POST").every((r) => r.authorization === `Bearer ${pipeline.shuffler_key}`));
    // The shuffler releases a batch per metric once DEVICES devices wait; wait for the collector.
    const deadline = Date.now() + 120000;
    let got = new Map();
    while (got.size < recorded.size && Date.now() < deadline) {
      got = new Map([...(await stored("browser")), ...(await stored("load_ms"))]);
      if (got.size < recorded.size) await new Promise((r) => setTimeout(r, 200));
    }
    assert.deepEqual([...got.keys()].sort(), [...recorded.keys()].sort());
    for (const [id, report] of recorded) {
      assert.deepEqual(got.get(id).payload, report.payload);
      assert.deepEqual(got.get(id).dims, report.dims ?? null);
    }
    const health = await (await fetch(`${pipeline.shuffler}/healthz`)).json();
    // Liveness only: counts, polled, would show each upload's arrival and size.
    assert.deepEqual(health, { status: "ok" });
  } finally {
    for (const client of clients) await client.close(100);
    await proxy.close();
  }
});

test("a shuffled-only metric: never sent without a shuffler (a problem says why), sent sealed with one", async () => {
  const base = { url: pipeline.collector, ingestKey: pipeline.ingest_key, flushInterval: 0, refreshInterval: 0 };
  const direct = new Client({ ...base, storage: new MemoryStorage() }); // specs from the collector
  const sealed = new Client({ ...base, storage: new MemoryStorage(), shuffler: pipeline.shuffler, sealing, shufflerKey: pipeline.shuffler_key });
  try {
    assert.equal(await direct.refreshSpecs(), true); // the served specs, the rule among them
    assert.equal(direct.record("theme", "dark"), false);
    assert.equal(direct.record("theme", "light"), false);
    assert.equal(direct.record("browser", "safari"), true);
    assert.equal(direct.stats().queued, 1);
    assert.equal(await direct.flush(), true);
    const problems = direct.problems();
    assert.equal(problems.length, 1, problems.join());
    assert.match(problems[0], /metric theme has delivery rule 'shuffled'/);
    assert.equal((await stored("theme")).size, 0);

    assert.equal(await sealed.refreshSpecs(), true);
    assert.equal(sealed.record("theme", "dark"), true);
    assert.equal(await sealed.flush(), true);
    assert.deepEqual([sealed.stats().delivered, sealed.problems()], [1, []]);
  } finally {
    await direct.close(100);
    await sealed.close(100);
  }
});

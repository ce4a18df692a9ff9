// A collector that serves a fresh key per GET /v1/keys (issue 37, item 3) cannot link a JS
// device's shuffled report to it: JS clients take keys from the shuffler only, the shuffler serves
// one key set to all of them, and a batch holds reports sealed to one key. test/partition.py runs
// the partitioning collector (testkit.key_server) and a real shuffler, restarted between two
// groups of devices so the collector does hand out two keys: each group's reports form their own
// batch, and the key that opens a report names its group of MIN_BATCH devices, never its device.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { test } from "node:test";
import { Client, MemoryStorage } from "../dist/index.js";
import { sealing } from "../dist/shuffle.js";
import { PYTHON, ROOT } from "./collector.mjs";

const SPEC = { name: "browser", type: "categorical", categories: ["a", "b", "c"], epsilon: 1 };
const MIN_BATCH = 3;
const GROUPS = 2;

/** partition.py, answering one JSON line per command. */
async function startPartition(folder) {
  const child = spawn(PYTHON, [join(ROOT, "sdk/js/test/partition.py"), folder, String(MIN_BATCH), JSON.stringify(SPEC)], {
    cwd: ROOT, env: { ...process.env, PYTHONPATH: ROOT }, stdio: ["pipe", "pipe", "inherit"],
  });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await lines.next();
    if (done) throw new Error("partition.py exited");
    return JSON.parse(value);
  };
  const ask = async (command) => { child.stdin.write(`${command}\n`); return next(); };
  const stop = async () => {
    child.stdin.end();
    await new Promise((r) => (child.exitCode !== null ? r() : child.once("exit", r)));
  };
  return { ...(await next()), ask, stop };
}

test("a key-partitioning collector never gets two keys into one batch of JS-sealed reports", async () => {
  const folder = mkdtempSync(join(tmpdir(), "deniable-js-partition-"));
  const servers = await startPartition(folder);
  const groupOf = new Map(); // report id -> [group, device]
  const keysAsked = [];
  try {
    let shuffler = servers.shuffler;
    for (let group = 0; group < GROUPS; group++) {
      if (group > 0) shuffler = (await servers.ask("restart")).shuffler; // a new key fetched
      for (let device = 0; device < MIN_BATCH; device++) {
        const storage = new MemoryStorage();
        const client = new Client({
          url: servers.collector, shuffler, sealing, shufflerKey: servers.shuffler_key,
          metrics: [SPEC], storage, flushInterval: 0, refreshInterval: 0,
        });
        const realFetch = globalThis.fetch;
        globalThis.fetch = (url, init) => { keysAsked.push(String(url)); return realFetch(url, init); };
        try {
          assert.ok(client.record("browser", "b"));
          client.save();
          for (const text of JSON.parse(storage.load()).queue) groupOf.set(JSON.parse(text).id, [group, device]);
          assert.equal(await client.flush(), true);
        } finally {
          globalThis.fetch = realFetch;
          await client.close(100);
        }
      }
    }
    const { fetches, reports } = await servers.ask(`opened ${GROUPS * MIN_BATCH}`);
    // Only the shuffler asked the collector for keys (once per start), never a device.
    assert.equal(fetches, GROUPS);
    assert.ok(keysAsked.every((url) => !url.endsWith("/v1/keys") || !url.startsWith(servers.collector)), keysAsked.join());
    assert.equal(reports.length, GROUPS * MIN_BATCH);
    const byBatch = new Map();
    const devicesPerKey = new Map();
    for (const { id, batch, key, opened_by: openedBy } of reports) {
      assert.notEqual(openedBy, null, "every report opens with a key the collector handed out");
      const [group, device] = groupOf.get(id);
      if (!byBatch.has(batch)) byBatch.set(batch, { keys: new Set(), opened: new Set(), groups: new Set() });
      const entry = byBatch.get(batch);
      entry.keys.add(key); entry.opened.add(openedBy); entry.groups.add(group);
      if (!devicesPerKey.has(openedBy)) devicesPerKey.set(openedBy, new Set());
      devicesPerKey.get(openedBy).add(`${group}-${device}`);
    }
    // Each batch: one key id, one opening key, one group of devices; two groups, two keys.
    for (const { keys, opened, groups } of byBatch.values()) assert.deepEqual([keys.size, opened.size, groups.size], [1, 1, 1]);
    assert.equal(byBatch.size, GROUPS);
    // The key that opens a report names MIN_BATCH devices, never fewer.
    assert.deepEqual([...devicesPerKey.values()].map((devices) => devices.size), Array(GROUPS).fill(MIN_BATCH));
  } finally {
    await servers.stop();
    rmSync(folder, { recursive: true, force: true });
  }
});

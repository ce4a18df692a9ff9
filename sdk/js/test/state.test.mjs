// A saved state that cannot be read is set aside (kept for inspection), reported by
// problems(), and never thrown: not from the constructor, record() nor the save queued in a
// microtask (which an app could not catch). No collector needed: nothing is uploaded.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { Client, MemoryStorage } from "../dist/index.js";
import { FileStorage } from "../dist/node.js";

const DARK = { name: "dark_mode", type: "boolean", epsilon: 1.0, mechanism: "brr", period: "day" };
const folder = mkdtempSync(join(tmpdir(), "deniable-js-bad-state-"));
after(() => rmSync(folder, { recursive: true, force: true }));

const open = (storage) =>
  new Client({ url: "http://127.0.0.1:9", metrics: [DARK], storage, flushInterval: 0, refreshInterval: 0 });
const settle = () => new Promise((resolve) => setTimeout(resolve, 20));
const good = { version: 1, specs: {}, etag: null, ledger: {}, queue: [], secret: "ab".repeat(32), memo: {}, totals: {}, memoSizes: {} };

const BAD = {
  "ledger as a string": [JSON.stringify({ ...good, ledger: "oops" }), "malformed ledger"],
  "a ledger count as text": [JSON.stringify({ ...good, ledger: { "dark_mode|2026-01-01": "1" } }), "malformed ledger"],
  "queue as an object": [JSON.stringify({ ...good, queue: { a: 1 } }), "malformed queue"],
  "totals and specs wrong": [JSON.stringify({ ...good, totals: [1], specs: 3 }), "malformed specs, totals"],
  "a null spec": [JSON.stringify({ ...good, specs: { x: null } }), "malformed specs"],
  "not JSON": ['{"version": 1, "ledger": {', "not JSON"],
  "not an object": ["[1, 2]", "not a version 1 state"],
  "another version": [JSON.stringify({ ...good, version: 2 }), "not a version 1 state"],
  "a memo answer of null": [JSON.stringify({ ...good, memo: { ["cd".repeat(32)]: null } }), "malformed memo"],
  "a pinned level as text": [JSON.stringify({ ...good, memo: { ["pin:" + "cd".repeat(32)]: "3" } }), "malformed memo"],
};

for (const [what, [text, why]] of Object.entries(BAD)) {
  test(`a state with ${what} is set aside and reported, never thrown`, async () => {
    const storage = new MemoryStorage();
    storage.save(text);
    const client = open(storage);
    assert.equal(client.record("dark_mode", true), true);
    await settle(); // the queued save runs
    const problem = client.problems().find((p) => p.startsWith("the saved state was unreadable"));
    assert.equal(problem, `the saved state was unreadable (${why}); kept as MemoryStorage.aside; the client started afresh`);
    assert.equal(storage.aside, text);
    const saved = JSON.parse(storage.load());
    assert.equal(saved.queue.length, 1);
    assert.deepEqual(Object.values(saved.ledger), [1]);
    await client.close({ timeout: 0 });
  });
}

test("a good state is read without a problem", async () => {
  const storage = new MemoryStorage();
  storage.save(JSON.stringify({ ...good, queue: ["x"] }));
  const client = open(storage);
  await settle();
  assert.deepEqual(client.problems().filter((p) => p.includes("saved state")), []);
  assert.equal(storage.aside, null);
  assert.equal(client.stats().queued, 1);
  await client.close({ timeout: 0 });
});

test("a state file with the ledger as a string is moved aside byte for byte, and the app keeps running", async () => {
  const path = join(folder, "state.json");
  const text = JSON.stringify({ ...good, ledger: "oops" });
  writeFileSync(path, text);
  const client = open(new FileStorage(path));
  client.record("dark_mode", false);
  await settle();
  const aside = readdirSync(folder).filter((name) => name.startsWith("state.json.bad-"));
  assert.equal(aside.length, 1);
  assert.equal(readFileSync(join(folder, aside[0]), "utf8"), text);
  assert.ok(client.problems().some((p) => p.includes(`kept as ${join(folder, aside[0])}`)));
  assert.equal(typeof JSON.parse(readFileSync(path, "utf8")).ledger, "object");
  await client.close({ timeout: 0 });
  assert.ok(existsSync(path));
});

test("a remembered answer out of its metric's range is set aside and redrawn, never thrown from record()", async () => {
  const memoizing = (storage) => new Client({ url: "http://127.0.0.1:9", metrics: [DARK], storage, memoize: true, flushInterval: 0, refreshInterval: 0 });
  const first = new MemoryStorage();
  first.save(JSON.stringify(good));
  const writer = memoizing(first);
  assert.equal(writer.record("dark_mode", true), true);
  await settle();
  await writer.close({ timeout: 0 });
  const written = JSON.parse(first.load());
  const [key] = Object.keys(written.memo);
  assert.equal(Object.keys(written.memo).length, 1);
  for (const answer of [7, -1, 0.5]) {
    const storage = new MemoryStorage();
    const text = JSON.stringify({ ...written, ledger: {}, totals: {}, memo: { [key]: answer } });
    storage.save(text);
    const client = memoizing(storage);
    assert.equal(client.record("dark_mode", true), true, `answer ${answer}`);
    await settle();
    const message = "the saved state had a malformed memo entry of dark_mode (an answer out of its metric's range); kept as MemoryStorage.aside; the entry was drawn afresh";
    assert.ok(client.problems().includes(message), client.problems().join("; "));
    assert.equal(storage.aside, text);
    const saved = JSON.parse(storage.load());
    assert.ok([0, 1].includes(saved.memo[key]), `redrawn: ${saved.memo[key]}`);
    assert.equal(saved.queue.length, written.queue.length + 1);
    assert.equal(saved.secret, written.secret);
    await client.close({ timeout: 0 });
  }
});

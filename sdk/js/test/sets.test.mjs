// The set metric's randomizer replays the Python client's draws (tests/vectors/set.json, generated
// by tests/vectors/set_generate.py): the same oracle resolution, padding, sampled item and payload.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { Client, InvalidInput, MemoryStorage, MetricSpec, PaddingSampling, SpecError, payloadText, supported, parsePayload } from "../dist/index.js";
import { Replay } from "./replay.mjs";

const vectors = JSON.parse(readFileSync(new URL("../../../tests/vectors/set.json", import.meta.url), "utf8"));

test("set: the oracle over k + L items resolves as in Python", () => {
  for (const c of vectors.cases) {
    const ps = new PaddingSampling(c.k, c.max_items, c.epsilon, c.oracle);
    assert.equal(ps.oracle.name, c.resolved, JSON.stringify(c));
    assert.equal(ps.width, c.width);
    assert.ok(Math.abs(ps.pStar - c.p_star) <= 1e-15 && Math.abs(ps.qStar - c.q_star) <= 1e-15);
  }
  for (const c of vectors.invalid_cases) assert.throws(() => new PaddingSampling(c.k, c.max_items, c.epsilon, c.oracle), undefined, JSON.stringify(c));
});

test("set: the randomizer replays Python's draws to the same sampled item and payload", () => {
  for (const v of vectors.draws) {
    const ps = new PaddingSampling(v.k, v.max_items, v.epsilon, v.oracle);
    const prepared = ps.checkValue(v.value);
    assert.deepEqual(prepared, v.prepared);
    const rng = new Replay(v.draws);
    const sampled = ps.sample(prepared, rng);
    assert.equal(sampled, v.sampled);
    const payload = ps.oracle.randomize(sampled, rng);
    assert.equal(rng.i, v.draws.length, "every draw used");
    assert.equal(payloadText(payload), v.text);
    const again = new PaddingSampling(v.k, v.max_items, v.epsilon, v.oracle).randomize(new Set(v.value), new Replay(v.draws));
    assert.equal(payloadText(again), v.text);
    assert.deepEqual(supported(ps.oracle, parsePayload(ps.oracle, payload)), v.supported);
  }
});

test("set: refused values, and the CSPRNG draws every item of the padded set", () => {
  const ps = new PaddingSampling(4, 2, 1, "krr");
  for (const bad of vectors.invalid_values) assert.throws(() => ps.checkValue(bad), RangeError, JSON.stringify(bad));
  const seen = new Set();
  for (let i = 0; i < 400; i++) seen.add(ps.sample([1]));
  assert.deepEqual([...seen].sort(), [1, 4]);
});

test("set specs resolve to Python's fields and fingerprints; invalid ones are refused", () => {
  for (const { input, resolved } of vectors.specs) assert.deepEqual(MetricSpec.fromDict(input).toDict(), resolved, input.name);
  for (const input of vectors.invalid_specs) assert.throws(() => MetricSpec.fromDict(input), SpecError, JSON.stringify(input));
  const spec = MetricSpec.fromDict(vectors.specs[0].input);
  for (const { value, prepared } of vectors.values) {
    assert.deepEqual(spec.itemsOf(value), prepared);
    assert.deepEqual(spec.itemsOf(new Set(value)), prepared);
  }
  for (const bad of ["search", ["nope"], [1], { search: 1 }]) assert.throws(() => spec.itemsOf(bad), InvalidInput);
});

test("the Client records a set afresh through padding-and-sampling, never memoized", () => {
  const spec = vectors.specs[0].input;
  const client = new Client({ url: "http://127.0.0.1:9", storage: new MemoryStorage(), flushInterval: 0, refreshInterval: 0, metrics: [spec], memoize: true, instantaneousRatio: null, maxReportsPerPeriod: 5 });
  for (let i = 0; i < 5; i++) assert.equal(client.record("features", ["search", "sync"]), true);
  assert.throws(() => client.record("features", "search"), InvalidInput);
  assert.equal(client.stats().queued, 5);
  assert.equal(MetricSpec.fromDict(spec).setRandomizer.oracle.k, 8);
  void client.close();
});

// The shared wire contract (tests/vectors/wire.json, generated from the Python client): the JS
// SDK must compute every fingerprint, period, hash, payload check and randomized draw the same.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import {
  MetricSpec, OLH, TwoLayers, parseNumericPayload, parsePayload, supported, batchBody, makeMechanism, makeNumericMechanism, olhHash, payloadText, Piecewise, pythonFloatText, reportText,
} from "../dist/index.js";

const vectors = JSON.parse(readFileSync(new URL("../../../tests/vectors/wire.json", import.meta.url), "utf8"));

const close = (a, b, what) => assert.ok(Math.abs(a - b) <= 1e-12 * Math.max(1, Math.abs(b)), `${what}: ${a} != ${b}`);

test("spec fingerprints, resolution and bucket labels", () => {
  for (const { input, resolved, categories } of vectors.specs) {
    const spec = MetricSpec.fromDict(input);
    assert.deepEqual(spec.toDict(), resolved, input.name);
    assert.deepEqual([...spec.categories], spec.type === "numeric" ? [] : categories, input.name);
  }
});

test("invalid specs are refused", () => {
  for (const input of vectors.invalid_specs) assert.throws(() => MetricSpec.fromDict(input), undefined, JSON.stringify(input));
});

test("period labels (day, ISO week, month)", () => {
  for (const { moment, day, week, month } of vectors.periods) {
    for (const [kind, label] of Object.entries({ day, week, month })) {
      const spec = MetricSpec.fromDict({ name: "p", type: "boolean", epsilon: 1, period: kind });
      assert.equal(spec.periodOf(new Date(moment)), label, `${kind} of ${moment}`);
    }
  }
});

test("the OLH hash", () => {
  for (const { a, b, v, g, h } of vectors.olh_hash) assert.equal(olhHash(a, b, v, g), h, JSON.stringify({ a, b, v, g }));
});

test("mechanism parameters", () => {
  for (const p of vectors.parameters) {
    if (p.k !== undefined) {
      const m = makeMechanism(p.mechanism, p.k, p.epsilon);
      close(m.pStar, p.p_star, `${p.mechanism} p*`);
      close(m.qStar, p.q_star, `${p.mechanism} q*`);
      if (p.g !== null) assert.equal(m.g, p.g);
    } else {
      const m = makeNumericMechanism(p.mechanism, p.epsilon);
      close(m.bound, p.bound, `${p.mechanism} bound`);
      close(m.worstCaseVariance, p.worst_case_variance, `${p.mechanism} variance`);
    }
  }
});

test("RAPPOR's two layers: the permanent eps that composes into the metric's mechanism", () => {
  for (const v of vectors.two_layers) {
    const two = new TwoLayers(makeMechanism(v.mechanism, v.k, v.epsilon), v.ratio);
    close(two.permanentEpsilon, v.permanent_epsilon, `${v.mechanism} k=${v.k} eps=${v.epsilon} ratio=${v.ratio} permanent`);
    close(two.instantaneousEpsilon, v.instantaneous_epsilon, "instantaneous");
    close(two.pStar, v.p_star, "p*");
    close(two.qStar, v.q_star, "q*");
  }
});

test("payload validity and canonical text", () => {
  for (const group of vectors.payloads) {
    const numeric = group.k === undefined;
    const m = numeric ? makeNumericMechanism(group.mechanism, group.epsilon) : makeMechanism(group.mechanism, group.k, group.epsilon);
    for (const c of group.cases) {
      const what = `${group.mechanism} ${JSON.stringify(c.payload)}`;
      const parse = numeric ? parseNumericPayload : parsePayload;
      if (c.valid) {
        const canonical = parse(m, c.payload);
        assert.equal(payloadText(canonical, numeric), c.canonical, what);
        if (!numeric) assert.deepEqual(supported(m, canonical), c.supported, `${what} supports`);
      }
      else assert.throws(() => parse(m, c.payload), undefined, what);
    }
  }
});

test("the numeric grid", () => {
  for (const { epsilon, y, grid } of vectors.numeric_grid) assert.equal(new Piecewise(epsilon).onGrid(y), grid, `${epsilon} ${y}`);
});

test("float payload texts as Python writes them", () => {
  for (const { x, text } of vectors.float_texts) assert.equal(pythonFloatText(x), text);
});

class Replay {
  constructor(draws) { this.draws = draws; this.i = 0; }
  random() {
    const d = this.draws[this.i++];
    assert.equal(d?.[0], "f", "expected a float draw");
    return d[1];
  }
  randbelow(n) {
    const d = this.draws[this.i++];
    assert.deepEqual(d?.slice(0, 2), ["i", n], "expected an integer draw below the same n");
    return d[2];
  }
  bytes() { throw new Error("no bytes"); }
}

test("randomizers replay Python's draws to the same payloads", () => {
  const specs = new Map(vectors.specs.map(({ input }) => [input.name, MetricSpec.fromDict(input)]));
  for (const v of vectors.draws) {
    const spec = specs.get(v.metric);
    const rng = new Replay(v.draws);
    const numeric = spec.type === "numeric";
    const prepared = numeric ? spec.scale(v.value) : spec.indexOf(v.value);
    assert.equal(prepared, v.prepared, `${v.metric} prepared`);
    const payload = numeric ? spec.numericRandomizer.randomize(prepared, rng) : spec.randomizer.randomize(prepared, rng);
    assert.equal(rng.i, v.draws.length, `${v.metric}: every draw used`);
    assert.equal(payloadText(payload, numeric), v.text, `${v.metric} payload`);
  }
});

test("report and batch texts", () => {
  const specs = new Map(vectors.specs.map(({ input }) => [input.name, MetricSpec.fromDict(input)]));
  const texts = vectors.reports.map((r) => {
    const numeric = specs.get(r.metric).type === "numeric";
    const text = reportText(r.id, r.metric, r.fingerprint, r.period, payloadText(r.payload, numeric));
    assert.equal(text, r.text);
    return text;
  });
  assert.equal(batchBody(texts), vectors.batch_body);
  assert.ok(new OLH(10, 1) instanceof OLH);
});

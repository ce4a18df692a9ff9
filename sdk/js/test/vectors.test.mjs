// The shared wire contract (tests/vectors/wire.json, generated from the Python client): the JS
// SDK must compute every fingerprint, period, hash, payload check and randomized draw the same.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import {
  MetricSpec, OLH, TwoLayers, parseNumericPayload, parsePayload, parseTextPayload, supported, twoLayersRates, batchBody, makeMechanism, makeNumericMechanism, olhHash, payloadText, Piecewise,
  pythonFloatText, reportText,
} from "../dist/index.js";
import { PrefixSketch, pem, textHashCoefficients } from "../dist/text.js";
import { Replay } from "./replay.mjs";

const vectors = JSON.parse(readFileSync(new URL("../../../tests/vectors/wire.json", import.meta.url), "utf8"));

const close = (a, b, what) => assert.ok(Math.abs(a - b) <= 1e-12 * Math.max(1, Math.abs(b)), `${what}: ${a} != ${b}`);

test("spec fingerprints, resolution and bucket labels", () => {
  for (const { input, resolved, categories } of vectors.specs) {
    const spec = MetricSpec.fromDict(input, pem);
    assert.deepEqual(spec.toDict(), resolved, input.name);
    assert.deepEqual([...spec.categories], categories, input.name);
  }
});

test("invalid specs are refused", () => {
  for (const input of vectors.invalid_specs) assert.throws(() => MetricSpec.fromDict(input, pem), undefined, JSON.stringify(input));
});

test("a text spec needs deniable/text", () => {
  const text = vectors.specs.find(({ input }) => input.type === "text").input;
  assert.throws(() => MetricSpec.fromDict(text), /is text: pass text: pem/);
});

test("dimension values from a context, and their wire member", () => {
  const specs = new Map(vectors.specs.map(({ input }) => [input.name, MetricSpec.fromDict(input, pem)]));
  for (const { metric, context, dims, text } of vectors.dimension_values) {
    const wire = specs.get(metric).dimsText(context);
    assert.equal(wire, text, `${metric} ${JSON.stringify(context)}`);
    assert.deepEqual(JSON.parse(`{${wire.slice(1)}}`).dims, dims);
  }
  assert.equal(specs.get("dark_mode").dimsText({ platform: "ios" }), "");
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
    close(two.instantaneous.epsilon, v.instantaneous_epsilon, "instantaneous");
    const { pStar, qStar } = twoLayersRates(two);
    close(pStar, v.p_star, "p*");
    close(qStar, v.q_star, "q*");
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

test("randomizers replay Python's draws to the same payloads", () => {
  const specs = new Map(vectors.specs.map(({ input }) => [input.name, MetricSpec.fromDict(input, pem)]));
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
  const specs = new Map(vectors.specs.map(({ input }) => [input.name, MetricSpec.fromDict(input, pem)]));
  const texts = vectors.reports.map((r) => {
    const spec = specs.get(r.metric);
    const numeric = spec.type === "numeric";
    const text = reportText(r.id, r.metric, r.fingerprint, r.period, payloadText(r.payload, numeric), spec.dimsText(r.context ?? {}));
    assert.equal(text, r.text);
    return text;
  });
  assert.equal(batchBody(texts), vectors.batch_body);
  assert.ok(new OLH(10, 1) instanceof OLH);
});

test("pem: the hash's public coefficients and prefix cells", () => {
  const [a, b] = textHashCoefficients();
  assert.deepEqual(a, vectors.text.a);
  assert.deepEqual(b, vectors.text.b);
  const sketch = new PrefixSketch(64, 1);
  for (const { row, prefix, cell } of vectors.text.cells) assert.equal(sketch.cell(row, Buffer.from(prefix, "hex")), cell, `${row} ${prefix}`);
});

test("pem: strings as padded bytes, cut at a character boundary", () => {
  for (const { max_length: maxLength, value, padded } of vectors.text.encodings) {
    const sketch = new PrefixSketch(maxLength, 1);
    const what = `${maxLength} ${JSON.stringify(value)}`;
    if (padded === null) assert.throws(() => sketch.encode(value), undefined, what);
    else assert.equal(Buffer.from(sketch.encode(value)).toString("hex"), padded, what);
  }
  assert.throws(() => new PrefixSketch(8, 1).encode("a\ud800"), /lone surrogate/);
  assert.throws(() => new PrefixSketch(8, 1).encode("\udc00b"), /lone surrogate/);
  assert.equal(new PrefixSketch(8, 1).encode("\ud83d\ude00").length, 8);
});

test("pem: payload validity and canonical text", () => {
  for (const group of vectors.text.payloads) {
    const sketch = new PrefixSketch(group.max_length, group.epsilon);
    for (const c of group.cases) {
      const what = JSON.stringify(c.payload).slice(0, 80);
      if (c.valid) assert.equal(payloadText(parseTextPayload(sketch, c.payload)), c.canonical, what);
      else assert.throws(() => parseTextPayload(sketch, c.payload), undefined, what);
    }
  }
});

test("pem: the randomizer replays Python's draws to the same payloads", () => {
  for (const v of vectors.text.draws) {
    const sketch = new PrefixSketch(v.max_length, v.epsilon);
    const rng = new Replay(v.draws);
    const payload = sketch.randomize(sketch.encode(v.value), v.level, rng);
    assert.equal(rng.i, v.draws.length, "every draw used");
    assert.equal(payloadText(payload), v.text, `${v.max_length} ${v.value}`);
  }
});

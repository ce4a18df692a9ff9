// The audit sampler goes through record() and its reports follow the mechanism's distribution.
import assert from "node:assert/strict";
import { test } from "node:test";
import { sample } from "../scripts/sampling.mjs";

test("sampled brr reports keep the true bit with probability e^eps/(1+e^eps)", () => {
  const n = 20000;
  const body = JSON.parse(sample({ name: "b", type: "boolean", epsilon: 1, mechanism: "brr" }, true, n));
  assert.equal(body.reports.length, n);
  assert.equal(new Set(body.reports.map((r) => r.id)).size, n, "every report has its own id");
  const kept = body.reports.filter((r) => r.payload === 1).length / n;
  const p = Math.E / (1 + Math.E);
  // 5 standard errors: a broken randomizer (no flip, or flip 1/2) is far outside; a sound one fails 1 run in 1.7 million.
  assert.ok(Math.abs(kept - p) < 5 * Math.sqrt((p * (1 - p)) / n), `kept ${kept}, expected ${p}`);
});

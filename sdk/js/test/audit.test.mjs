// `deniable audit --sdk js`: the Python auditor draws reports through this SDK's record() path
// (scripts/sample.mjs, in node) and bounds the eps they give with the same Clopper-Pearson test
// as Python's reports. The real randomizers must pass; a claim the code does not keep must fail.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { PYTHON, ROOT } from "./collector.mjs";

/** `deniable audit --spec SPEC --sdk js` in a subprocess: its exit status, stderr and JSON document. */
function audit(spec, ...extra) {
  const args = ["-m", "deniable.cli.main", "audit", "--spec", JSON.stringify(spec), "--sdk", "js", "--format", "json", "--jobs", "1", ...extra];
  return new Promise((resolve) => {
    const child = execFile(PYTHON, args, { cwd: ROOT, encoding: "utf8", maxBuffer: 1 << 24 }, (_error, stdout, stderr) => {
      resolve({ status: child.exitCode, stderr, document: stdout ? JSON.parse(stdout) : null });
    });
  });
}

// The JS draws cannot be seeded: an honest randomizer whose event ratio is exactly e^eps fails an
// audit at confidence c with probability at most 1 - c, so the audits that must pass run at
// 1 - 10^-6 (the ones that must fail keep the default 0.99, for power).
const PASS_CONFIDENCE = "0.999999";

test("the JS randomizers pass the auditor through their real record path", async () => {
  for (const spec of [
    { name: "dark_mode", type: "boolean", epsilon: 1, mechanism: "brr" },
    { name: "browser", type: "categorical", categories: ["a", "b", "c"], epsilon: 2, mechanism: "oue" },
  ]) {
    const { status, document, stderr } = await audit(spec, "--confidence", PASS_CONFIDENCE);
    assert.equal(status, 0, stderr);
    assert.equal(document.results[0].verdict, "pass", JSON.stringify(document.results[0]));
  }
});

test("--seed is refused with --sdk js in one line", async () => {
  const { status, stderr } = await audit({ name: "dark_mode", type: "boolean", epsilon: 1 }, "--seed", "1");
  assert.notEqual(status, 0);
  assert.match(stderr, /--seed goes with --sdk python/);
});

/** Audit `spec` through a copy of the built SDK with `patches` ([file in dist, honest code, broken
 * code]) applied: the broken randomizer runs through the real record() path. */
async function auditPatched(patches, spec, ...extra) {
  const copy = mkdtempSync(join(tmpdir(), "deniable-js-broken-"));
  try {
    const sdk = join(ROOT, "sdk", "js");
    cpSync(join(sdk, "dist"), join(copy, "dist"), { recursive: true });
    cpSync(join(sdk, "scripts"), join(copy, "scripts"), { recursive: true });
    for (const [name, honest, broken] of patches) {
      const file = join(copy, "dist", name);
      const code = readFileSync(file, "utf8");
      assert.equal(code.split(honest).length, 2, `${name}: the patched code moved (${honest}): update this patch`);
      writeFileSync(file, code.replace(honest, broken));
    }
    return await audit(spec, "--sdk-dir", copy, ...extra);
  } finally {
    rmSync(copy, { recursive: true, force: true });
  }
}

const FIVE = ["a", "b", "c", "d", "e"];
const KRR_KEEP = "if (rng.random() < this.p)\n            return value;";
const PM_WINDOW = "if (rng.random() < this.windowProbability) {";
const E_WINDOW = "Math.exp(this.epsilon) / (Math.exp(this.epsilon) + 1)";

// The broken randomizers tests/estimators/test_audit.py (and test_heavy_hitters.py, for text)
// catch in Python, patched into the JS SDK. Each is unseeded (the JS SDK draws only from the
// CSPRNG), so each sample size keeps a miss far out in the tail: the z values are those of
// test_audit.py's docstring at its sample sizes (python -m bench.audit_power), scaled by
// sqrt(samples) where a case uses fewer.
const BROKEN = [
  {
    what: "a krr kept 5 points too often", // log-ratio 1.26 at k = 3: z > 10 at 200,000 reports
    patches: [["mechanisms.js", KRR_KEEP, "if (rng.random() < this.p + 0.05)\n            return value;"]],
    spec: { name: "browser", type: "categorical", categories: ["a", "b", "c"], epsilon: 1, mechanism: "krr" },
  },
  {
    what: "a krr keeping the value as for 2 eps", // z = 56 at 40,000 per input; 25 at 8,000
    patches: [["mechanisms.js", KRR_KEEP, "if (rng.random() < Math.exp(2 * this.epsilon) / (Math.exp(2 * this.epsilon) + this.k - 1))\n            return value;"]],
    spec: { name: "k", type: "categorical", categories: FIVE, epsilon: 1, mechanism: "krr" },
    extra: ["--samples", "8000"],
  },
  {
    what: "a brr one point too truthful", // z = 5.2 at 100,000 per input: a miss once in 12 million
    patches: [["mechanisms.js", KRR_KEEP, "if (rng.random() < this.p + 0.01)\n            return value;"]],
    spec: { name: "b", type: "boolean", epsilon: 1, mechanism: "brr" },
  },
  {
    what: "an oue with p = 0.6", // z = 21 at 40,000 per input; 10.5 at 10,000
    patches: [["mechanisms.js", "if (top(value) < this.#belowP)", "if (top(value) < Math.ceil(0.6 * 2 ** 53))"]],
    spec: { name: "o", type: "categorical", categories: FIVE, epsilon: 1, mechanism: "oue" },
    extra: ["--samples", "10000"],
  },
  {
    what: "an oue that never flips its middle bit", // an infinite ratio: bound 8.35 at 40,000 whatever the draws; > 5 at 5,000
    patches: [["mechanisms.js", "            bits[value >> 3] &= ~(1 << (value & 7));\n        return toBase64(bits);",
      "            bits[value >> 3] &= ~(1 << (value & 7));\n        const middle = this.k >> 1;\n        bits[middle >> 3] &= ~(1 << (middle & 7));\n        if (value === middle) bits[middle >> 3] |= 1 << (middle & 7);\n        return toBase64(bits);"]],
    spec: { name: "o", type: "categorical", categories: FIVE, epsilon: 1, mechanism: "oue" },
    extra: ["--samples", "5000"],
  },
  {
    what: "an olh that leaks the hash bucket one time in ten", // z = 9.2 at 40,000 per input
    patches: [["mechanisms.js", "        return { a, b, y };", "        if (rng.random() < 0.1)\n            y = h;\n        return { a, b, y };"]],
    spec: { name: "h", type: "categorical", categories: FIVE, epsilon: 1, mechanism: "olh" },
  },
  {
    what: "a pm whose window probability uses e^eps", // z = 37 at 40,000 per input; 11.7 at 4,000
    patches: [["mechanisms.js", PM_WINDOW, `if (rng.random() < ${E_WINDOW}) {`]],
    spec: { name: "p", type: "numeric", lower: 0, upper: 10, epsilon: 1, mechanism: "pm" },
    extra: ["--samples", "4000"],
  },
  {
    what: "a pm wrong only for interior t", // bound 1.43 (SD 0.013) at 40,000 per input: > 1 by 33 SD
    patches: [["mechanisms.js", PM_WINDOW, `if (rng.random() < (Math.abs(t) === 1 ? this.windowProbability : ${E_WINDOW})) {`]],
    spec: { name: "p", type: "numeric", lower: 0, upper: 10, epsilon: 1, mechanism: "pm" },
  },
  {
    what: "a pem whose own cell's bit is set w.p. 0.8, not 1/2", // log-ratio 2.4 against eps 1
    patches: [["text.js", "if (top(target) < this.#belowP)", "if (top(target) < this.#belowP || rng.random() < 0.6)"]],
    spec: { name: "search", type: "text", max_length: 4, epsilon: 1 },
    extra: ["--samples", "6000"],
  },
];

// Two audits at a time: each is mostly a Python and a node process starting up.
describe("broken randomizers patched into a copy of the JS SDK", { concurrency: 2 }, () => {
  for (const { what, patches, spec, extra = [] } of BROKEN) {
    test(`${what} is caught: the audit of a patched copy fails`, async () => {
      const { status, document, stderr } = await auditPatched(patches, spec, ...extra);
      assert.equal(status, 1, stderr);
      assert.equal(document.results[0].verdict, "fail", JSON.stringify(document.results[0]));
      assert.ok(document.results[0].lower_bound > spec.epsilon, JSON.stringify(document.results[0]));
    });
  }

  test("a krr randomizing as for half its eps is loose", async () => { // upper bound ~0.59 (SD 0.019) at 20,000 per input: 16 SD below 0.9
    const patches = [["mechanisms.js", KRR_KEEP, "if (rng.random() < Math.exp(this.epsilon / 2) / (Math.exp(this.epsilon / 2) + this.k - 1))\n            return value;"]];
    const { status, document, stderr } = await auditPatched(patches, { name: "k", type: "categorical", categories: FIVE, epsilon: 1, mechanism: "krr" }, "--samples", "20000");
    assert.equal(status, 0, stderr);
    assert.equal(document.results[0].verdict, "loose", JSON.stringify(document.results[0]));
  });

  test("the real pem passes at the sample size that catches the broken one", async () => {
    const { status, document, stderr } = await audit({ name: "search", type: "text", max_length: 4, epsilon: 1 }, "--samples", "6000", "--confidence", PASS_CONFIDENCE);
    assert.equal(status, 0, stderr);
    assert.equal(document.results[0].verdict, "pass", JSON.stringify(document.results[0]));
  });
});

// `deniable audit --sdk js`: the Python auditor draws reports through this SDK's record() path
// (scripts/sample.mjs, in node) and bounds the eps they give with the same Clopper-Pearson test
// as Python's reports. The real randomizers must pass; a claim the code does not keep must fail.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { PYTHON, ROOT } from "./collector.mjs";

function audit(spec, ...extra) {
  const answer = spawnSync(PYTHON, ["-m", "deniable.cli.main", "audit", "--spec", JSON.stringify(spec), "--sdk", "js", "--format", "json", "--jobs", "1", ...extra], { cwd: ROOT, encoding: "utf8" });
  return { status: answer.status, stderr: answer.stderr, document: answer.stdout ? JSON.parse(answer.stdout) : null };
}

test("the JS randomizers pass the auditor through their real record path", () => {
  for (const spec of [
    { name: "dark_mode", type: "boolean", epsilon: 1, mechanism: "brr" },
    { name: "browser", type: "categorical", categories: ["a", "b", "c"], epsilon: 2, mechanism: "oue" },
  ]) {
    const { status, document, stderr } = audit(spec);
    assert.equal(status, 0, stderr);
    assert.equal(document.results[0].verdict, "pass", JSON.stringify(document.results[0]));
  }
});

test("--seed is refused with --sdk js in one line", () => {
  const { status, stderr } = audit({ name: "dark_mode", type: "boolean", epsilon: 1 }, "--seed", "1");
  assert.notEqual(status, 0);
  assert.match(stderr, /--seed goes with --sdk python/);
});

test("a krr kept 5 points too often is caught: the audit of a patched copy fails", () => {
  const copy = mkdtempSync(join(tmpdir(), "deniable-js-broken-"));
  try {
    const sdk = join(ROOT, "sdk", "js");
    cpSync(join(sdk, "dist"), join(copy, "dist"), { recursive: true });
    cpSync(join(sdk, "scripts"), join(copy, "scripts"), { recursive: true });
    const file = join(copy, "dist", "mechanisms.js");
    const honest = "if (rng.random() < this.p)";
    const code = readFileSync(file, "utf8");
    assert.ok(code.includes(honest), "the krr keep test moved: update this patch");
    writeFileSync(file, code.replace(honest, "if (rng.random() < this.p + 0.05)"));
    const spec = { name: "browser", type: "categorical", categories: ["a", "b", "c"], epsilon: 1, mechanism: "krr" };
    const { status, document, stderr } = audit(spec, "--sdk-dir", copy);
    assert.equal(status, 1, stderr);
    assert.equal(document.results[0].verdict, "fail", JSON.stringify(document.results[0]));
  } finally {
    rmSync(copy, { recursive: true, force: true });
  }
});

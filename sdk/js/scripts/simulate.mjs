// 20,000 simulated JS devices (real SDK code, Node) and as many Python ones (`deniable simulate`)
// through one real collector, same specs under two names: prints each estimate beside its truth
// and the interval widths of both, which should agree within noise. Run: npm run build &&
// node scripts/simulate.mjs [devices]   (SQLite; PostgreSQL with DENIABLE_JS_BACKEND=postgresql)
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { Client, MemoryStorage } from "../dist/index.js";
import { ROOT, register, startCollector } from "../test/collector.mjs";

const DEVICES = Number(process.argv[2] ?? 20000);
const SHARES = { chrome: 0.4, firefox: 0.3, safari: 0.2, other: 0.1 };
const SPECS = [
  { type: "categorical", categories: Object.keys(SHARES), epsilon: 1.0, mechanism: "krr", period: "day" },
  { type: "categorical", categories: Object.keys(SHARES), epsilon: 1.0, mechanism: "oue", period: "day" },
  { type: "categorical", categories: Object.keys(SHARES), epsilon: 1.0, mechanism: "olh", period: "day" },
];

const collector = await startCollector();

/** A metric's unbiased estimate; asked again once if the pooled connection was closed meanwhile
 * (the collector closes idle keep-alive connections while the Python devices run). */
async function estimate(name) {
  const url = `${collector.url}/v1/metrics/${name}/estimate?method=unbiased`;
  try {
    return await (await fetch(url)).json();
  } catch {
    return await (await fetch(url)).json();
  }
}
try {
  console.log(`| metric | SDK | n | category | truth | estimate | 95% simultaneous interval | half-width | covers |\n|---|---|---|---|---|---|---|---|---|`);
  for (const spec of SPECS) {
    for (const sdk of ["js", "py"]) await register(collector.url, { ...spec, name: `${spec.mechanism}_${sdk}` });
    const name = `${spec.mechanism}_js`;
    const values = Object.entries(SHARES).flatMap(([c, s]) => Array(Math.round(s * DEVICES)).fill(c));
    for (let start = 0; start < values.length; start += 1000) {
      // 1,000 devices share one client with a budget of 1,000: exactly what 1,000 devices send.
      const client = new Client({ url: collector.url, metrics: [{ ...spec, name }], storage: new MemoryStorage(), maxReportsPerPeriod: 1000, flushInterval: 0, refreshInterval: 0 });
      for (const value of values.slice(start, start + 1000)) client.record(name, value);
      if (!(await client.flush())) throw new Error(client.problems().join("; "));
      await client.close(100);
    }
    const weights = JSON.stringify(Object.fromEntries(Object.entries(SHARES).map(([c, s]) => [c, Math.round(s * 10)])));
    execFileSync(join(ROOT, ".venv/bin/deniable"), ["--collector", collector.url, "simulate", "--metric", `${spec.mechanism}_py`, "--clients", String(DEVICES), "--distribution", weights], { cwd: ROOT, stdio: "ignore" });
    for (const sdk of ["js", "py"]) {
      const document = await estimate(`${spec.mechanism}_${sdk}`);
      for (const e of document.estimates) {
        const truth = SHARES[e.category];
        const covers = e.ci_low <= truth && truth <= e.ci_high ? "yes" : "NO";
        console.log(`| ${spec.mechanism} | ${sdk} | ${document.n} | ${e.category} | ${truth} | ${e.frequency.toFixed(4)} | [${e.ci_low.toFixed(4)}, ${e.ci_high.toFixed(4)}] | ${((e.ci_high - e.ci_low) / 2).toFixed(4)} | ${covers} |`);
      }
    }
  }
} finally {
  await collector.stop();
}

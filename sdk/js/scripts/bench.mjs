// record() throughput in Node: the whole record path (validate, budget, randomize, report text,
// queue), no network. Prints a table: per wall-clock second, and per second of this process's CPU
// time (what the code costs when other processes share the cores). Run: npm run bench [-- reports]
import { Client, MemoryStorage } from "../dist/index.js";
import { pem } from "../dist/text.js";

const N = Number(process.argv[2] ?? 200000);
const METRICS = [
  { name: "b", type: "boolean", epsilon: 1, mechanism: "brr" },
  { name: "k", type: "categorical", categories: ["a", "b", "c", "d"], epsilon: 1, mechanism: "krr" },
  { name: "o", type: "categorical", categories: Array.from({ length: 32 }, (_, i) => `c${i}`), epsilon: 1, mechanism: "oue" },
  { name: "l", type: "categorical", categories: Array.from({ length: 32 }, (_, i) => `c${i}`), epsilon: 1, mechanism: "olh" },
  { name: "p", type: "numeric", lower: 0, upper: 100, epsilon: 1, mechanism: "pm" },
  { name: "h", type: "histogram", edges: [0, 10, 100, 1000], epsilon: 1, mechanism: "krr" },
  { name: "d", type: "boolean", epsilon: 1, mechanism: "brr", dimensions: { platform: ["web", "ios"] } },
  { name: "t", type: "text", max_length: 16, epsilon: 1, mechanism: "pem" },
];
const VALUES = { b: true, k: "c", o: "c3", l: "c3", p: 42.5, h: 50, d: true, t: "hello world" };

console.log(`| metric | records | seconds | records/s | CPU seconds | records per CPU second |\n|---|---|---|---|---|---|`);
for (const spec of METRICS) {
  const n = spec.type === "text" ? Math.ceil(N / 10) : N; // a pem report draws 8 KiB of randomness
  const client = new Client({ url: "http://127.0.0.1:9", metrics: [spec], text: pem, context: { platform: "ios" }, storage: new MemoryStorage(), maxReportsPerPeriod: n + 1000, maxQueue: n + 1000, flushInterval: 0, refreshInterval: 0 });
  for (let i = 0; i < 1000; i++) client.record(spec.name, VALUES[spec.name]);
  const cpu = process.cpuUsage();
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) client.record(spec.name, VALUES[spec.name]);
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const used = process.cpuUsage(cpu);
  const cpuSeconds = (used.user + used.system) / 1e6;
  const rate = (s) => Math.round(n / s).toLocaleString("en-US");
  const what = `${spec.type} ${spec.mechanism}${spec.dimensions ? " with dimensions" : ""}`;
  console.log(`| ${what} | ${n} | ${seconds.toFixed(3)} | ${rate(seconds)} | ${cpuSeconds.toFixed(3)} | ${rate(cpuSeconds)} |`);
}

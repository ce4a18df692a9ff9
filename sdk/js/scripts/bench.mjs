// record() throughput in Node: the whole record path (validate, budget, randomize, report text,
// queue), no network. Prints a table. Run: npm run bench [-- reports]
import { Client, MemoryStorage } from "../dist/index.js";

const N = Number(process.argv[2] ?? 200000);
const METRICS = [
  { name: "b", type: "boolean", epsilon: 1, mechanism: "brr" },
  { name: "k", type: "categorical", categories: ["a", "b", "c", "d"], epsilon: 1, mechanism: "krr" },
  { name: "o", type: "categorical", categories: Array.from({ length: 32 }, (_, i) => `c${i}`), epsilon: 1, mechanism: "oue" },
  { name: "l", type: "categorical", categories: Array.from({ length: 32 }, (_, i) => `c${i}`), epsilon: 1, mechanism: "olh" },
  { name: "p", type: "numeric", lower: 0, upper: 100, epsilon: 1, mechanism: "pm" },
  { name: "h", type: "histogram", edges: [0, 10, 100, 1000], epsilon: 1, mechanism: "krr" },
];
const VALUES = { b: true, k: "c", o: "c3", l: "c3", p: 42.5, h: 50 };

console.log(`| metric | records | seconds | records/s |\n|---|---|---|---|`);
for (const spec of METRICS) {
  const client = new Client({ url: "http://127.0.0.1:9", metrics: [spec], storage: new MemoryStorage(), maxReportsPerPeriod: N + 1000, maxQueue: N + 1000, flushInterval: 0, refreshInterval: 0 });
  for (let i = 0; i < 1000; i++) client.record(spec.name, VALUES[spec.name]);
  const start = process.hrtime.bigint();
  for (let i = 0; i < N; i++) client.record(spec.name, VALUES[spec.name]);
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  console.log(`| ${spec.type} ${spec.mechanism} | ${N} | ${seconds.toFixed(3)} | ${Math.round(N / seconds).toLocaleString("en-US")} |`);
}

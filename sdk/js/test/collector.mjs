// A real collector for the node tests: `python -m deniable.collector` from the repository's venv
// on loopback, SQLite in a temporary folder, or PostgreSQL (a database of its own on the test
// server, created and dropped here) when DENIABLE_JS_BACKEND is "postgresql" (the *.postgres.test
// files), and a toggling proxy in front of it to take it offline or lose its acknowledgements.
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
export const PYTHON = process.env.DENIABLE_PYTHON ?? join(ROOT, ".venv/bin/python");

/** A free loopback port: within DENIABLE_TEST_PORTS when it is set (testkit.ports picks it). */
export function freePort() {
  if (process.env.DENIABLE_TEST_PORTS) {
    return Promise.resolve(Number(python("from testkit.ports import spare_port; print(spare_port())")));
  }
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function python(code) {
  return execFileSync(PYTHON, ["-c", code], { cwd: ROOT, encoding: "utf8" }).trim();
}

/** Why PostgreSQL cannot be used at the test server (testkit.postgres), one line; null if it can. */
export function postgresProblem() {
  const problem = python("from testkit.postgres import postgres_problem; print(postgres_problem() or '')");
  return problem === "" ? null : problem;
}

/** Run the tests of `module` (a test file's URL) against a PostgreSQL collector: skipped with the
 * reason when the server does not answer, failed instead when DENIABLE_REQUIRE_POSTGRES is set (CI). */
export async function onPostgres(module, test) {
  const problem = postgresProblem();
  if (problem !== null && !process.env.DENIABLE_REQUIRE_POSTGRES) {
    test("the same tests on PostgreSQL", { skip: `PostgreSQL is unreachable (${problem})` }, () => {});
    return;
  }
  if (problem !== null) throw new Error(`PostgreSQL is unreachable (${problem}) and DENIABLE_REQUIRE_POSTGRES is set`);
  process.env.DENIABLE_JS_BACKEND = "postgresql";
  await import(module);
}

/** Start a collector; returns { url, stop, backend }. */
export async function startCollector() {
  const folder = mkdtempSync(join(tmpdir(), "deniable-js-"));
  const postgres = process.env.DENIABLE_JS_BACKEND === "postgresql";
  let database = `sqlite:///${join(folder, "reports.db")}`;
  let dbName = null;
  if (postgres) {
    dbName = python("from testkit.postgres import create_database; print(create_database('jssdk'))");
    database = python(`from testkit.postgres import database_url; print(database_url(${JSON.stringify(dbName)}))`);
  }
  const port = await freePort();
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("DENIABLE_")));
  env.DENIABLE_DATABASE_URL = database;
  const child = spawn(PYTHON, ["-m", "deniable.collector", "--host", "127.0.0.1", "--port", String(port)], {
    cwd: folder, env, stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  child.stderr.on("data", (chunk) => { log = (log + chunk).slice(-4000); });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 90000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the collector exited: ${log}`);
    try {
      if ((await fetch(`${url}/readyz`)).status === 200) break;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) throw new Error(`the collector did not get ready: ${log}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  const stop = async () => {
    child.kill("SIGTERM");
    await new Promise((r) => (child.exitCode !== null ? r() : child.once("exit", r)));
    if (dbName !== null) python(`from testkit.postgres import drop_databases; drop_databases([${JSON.stringify(dbName)}])`);
    rmSync(folder, { recursive: true, force: true });
  };
  return { url, stop, backend: postgres ? "postgresql" : "sqlite" };
}

/** Register a metric (the collector has no admin token: open on loopback). */
export async function register(url, spec) {
  const answer = await fetch(`${url}/v1/metrics`, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(spec),
  });
  if (answer.status !== 201 && answer.status !== 200) throw new Error(`register ${spec.name}: ${answer.status} ${await answer.text()}`);
  return answer.json();
}

/** Every stored report id of a metric, from the admin export. */
export async function storedIds(url, name) {
  const ids = [];
  let after = null;
  for (;;) {
    const query = after === null ? "" : `&after=${encodeURIComponent(after)}`;
    const page = await (await fetch(`${url}/v1/admin/metrics/${name}/reports?limit=50000${query}`)).json();
    ids.push(...page.reports.map((r) => r.id));
    if (page.next === null) return ids;
    after = page.next;
  }
}

/** A collector and a shuffler forwarding to it (testkit's Pipeline, test/pipeline.py) with
 * `specs` registered, sealing keys in `folder`/sealing-keys.json; the shuffler releases a batch
 * once `minBatch` devices wait. Resolves to { collector, shuffler, admin_token, ingest_key, stop }. */
export async function startPipeline(folder, minBatch, specs) {
  const child = spawn(PYTHON, [join(ROOT, "sdk/js/test/pipeline.py"), folder, String(minBatch), JSON.stringify(specs)], {
    cwd: ROOT, env: { ...process.env, PYTHONPATH: ROOT }, stdio: ["pipe", "pipe", "inherit"],
  });
  const line = await new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (chunk) => {
      out += chunk;
      if (out.includes("\n")) resolve(out.split("\n")[0]);
    });
    child.once("exit", (code) => reject(new Error(`the pipeline exited (${code})`)));
  });
  const stop = async () => {
    child.stdin.end();
    await new Promise((r) => (child.exitCode !== null ? r() : child.once("exit", r)));
  };
  return { ...JSON.parse(line), stop };
}

/** A proxy to `target`: mode "up" forwards, "down" drops connections, "lose-ack" forwards and
 * then drops the answer to a POST (an upload's acknowledgement; a GET is answered), "hang" never answers, "huge" streams a spec list without end, a number
 * answers that status with a non-collector body. Each forwarded request is kept in `requests`
 * ({ method, path, body, authorization }); `rewrite(path, body)`, if set, replaces a forwarded answer's body. */
export async function startProxy(target) {
  const proxy = { mode: "up", statuses: [], requests: [], rewrite: null };
  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    if (proxy.mode === "down") { req.socket.destroy(); return; }
    if (proxy.mode === "hang") return; // never answers
    if (proxy.mode === "held") await proxy.held; // answers once the test resolves proxy.held
    if (proxy.mode === "huge") {
      res.writeHead(200, { "content-type": "application/json" });
      res.write('{"metrics": [');
      const filler = `${JSON.stringify({ name: "x", type: "boolean", epsilon: 1 })},`.repeat(1000);
      const pump = () => { while (!res.destroyed && res.write(filler)); if (!res.destroyed) res.once("drain", pump); };
      res.on("close", () => res.destroy());
      pump();
      return;
    }
    if (typeof proxy.mode === "number") {
      res.writeHead(proxy.mode, { "content-type": "application/json" });
      res.end(JSON.stringify({ detail: "proxy says no", status: proxy.mode }));
      return;
    }
    const headers = { ...req.headers };
    delete headers.host;
    delete headers["content-length"];
    const answer = await fetch(`${target}${req.url}`, { method: req.method, headers, body: chunks.length ? Buffer.concat(chunks) : undefined });
    const path = req.url.split("?")[0];
    let body = Buffer.from(await answer.arrayBuffer());
    if (proxy.rewrite !== null) body = Buffer.from(proxy.rewrite(path, body.toString("utf8")));
    proxy.statuses.push(`${req.method} ${path} ${answer.status}`);
    proxy.requests.push({ method: req.method, path, body: Buffer.concat(chunks).toString("utf8"), authorization: req.headers.authorization ?? null });
    if (proxy.mode === "lose-ack" && req.method === "POST") { req.socket.destroy(); return; }
    const out = {};
    for (const [k, v] of answer.headers) if (!["content-length", "transfer-encoding", "connection", "content-encoding"].includes(k)) out[k] = v;
    res.writeHead(answer.status, out);
    res.end(body);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  proxy.url = `http://127.0.0.1:${server.address().port}`;
  proxy.close = () => new Promise((r) => { server.closeAllConnections(); server.close(r); });
  return proxy;
}

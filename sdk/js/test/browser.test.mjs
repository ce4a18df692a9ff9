// Headless Chromium (the system /usr/bin/chromium, driven over the DevTools pipe): a static page
// loads the built bundle, records offline, goes online, and the collector stores exactly the
// reports recorded; no request leaves for another origin.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { register, startCollector, storedIds } from "./collector.mjs";

const CHROMIUM = process.env.DENIABLE_CHROMIUM ?? "/usr/bin/chromium";
const missing = !existsSync(CHROMIUM);
if (missing && process.env.DENIABLE_REQUIRE_BROWSER) throw new Error(`${CHROMIUM} is missing and DENIABLE_REQUIRE_BROWSER is set`);

const DARK = { name: "dark_mode", type: "boolean", epsilon: 1.0, mechanism: "brr", period: "day" };
const BROWSER = { name: "browser", type: "categorical", categories: ["chrome", "firefox", "safari", "other"], epsilon: 1.0, mechanism: "olh", period: "day" };
const FILES = { "/index.html": ["examples/index.html", "text/html"], "/deniable.min.js": ["dist/deniable.min.js", "text/javascript"] };

let collector, site, chrome, profile;

/** The page's origin: the example page and bundle, and /v1/ forwarded to the collector. */
async function startSite(target) {
  const state = { online: true, requests: [] };
  const server = http.createServer(async (req, res) => {
    state.requests.push(`${req.method} ${req.url}`);
    const file = FILES[req.url];
    if (file) {
      res.writeHead(200, { "content-type": file[1] });
      res.end(readFileSync(new URL(`../${file[0]}`, import.meta.url)));
      return;
    }
    if (!req.url.startsWith("/v1/")) { res.writeHead(404); res.end(); return; }
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    if (!state.online) { req.socket.destroy(); return; }
    const answer = await fetch(`${target}${req.url}`, { method: req.method, headers: { "content-type": req.headers["content-type"] ?? "application/json" }, body: chunks.length ? Buffer.concat(chunks) : undefined });
    res.writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "application/json" });
    res.end(Buffer.from(await answer.arrayBuffer()));
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  state.url = `http://127.0.0.1:${server.address().port}`;
  state.close = () => new Promise((r) => { server.closeAllConnections(); server.close(r); });
  return state;
}

/** Chromium with --remote-debugging-pipe: commands on fd 3, answers and events on fd 4. */
function startChrome() {
  profile = mkdtempSync(join(tmpdir(), "deniable-chromium-"));
  const child = spawn(CHROMIUM, ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--remote-debugging-pipe", `--user-data-dir=${profile}`, "about:blank"], { stdio: ["ignore", "ignore", "ignore", "pipe", "pipe"] });
  const pending = new Map();
  const events = [];
  let buffer = "";
  let next = 0;
  child.stdio[4].on("data", (chunk) => {
    buffer += chunk.toString("utf8");
    let end;
    while ((end = buffer.indexOf("\0")) >= 0) {
      const message = JSON.parse(buffer.slice(0, end));
      buffer = buffer.slice(end + 1);
      if (message.id !== undefined && pending.has(message.id)) {
        const { resolve, reject } = pending.get(message.id);
        pending.delete(message.id);
        if (message.error) reject(new Error(JSON.stringify(message.error)));
        else resolve(message.result);
      } else events.push(message);
    }
  });
  const send = (method, params = {}, sessionId = undefined) => new Promise((resolve, reject) => {
    const id = ++next;
    pending.set(id, { resolve, reject });
    child.stdio[3].write(`${JSON.stringify({ id, method, params, sessionId })}\0`);
  });
  return { child, send, events };
}

before(async () => {
  if (missing) return;
  collector = await startCollector();
  for (const spec of [DARK, BROWSER]) await register(collector.url, spec);
  site = await startSite(collector.url);
  chrome = startChrome();
});

after(async () => {
  if (chrome) {
    chrome.child.kill("SIGTERM");
    await new Promise((r) => (chrome.child.exitCode !== null ? r() : chrome.child.once("exit", r)));
  }
  await site?.close();
  await collector?.stop();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

test("a page records offline, goes online, and the collector stores exactly its reports", { skip: missing && `${CHROMIUM} is missing` }, async () => {
  const { targetId } = await chrome.send("Target.createTarget", { url: `${site.url}/index.html` });
  const { sessionId } = await chrome.send("Target.attachToTarget", { targetId, flatten: true });
  await chrome.send("Network.enable", {}, sessionId);
  const run = async (expression) => {
    const { result, exceptionDetails } = await chrome.send("Runtime.evaluate", { expression, awaitPromise: true, returnByValue: true }, sessionId);
    if (exceptionDetails) throw new Error(JSON.stringify(exceptionDetails));
    return result.value;
  };
  for (let i = 0; await run("typeof window.deniable") !== "object"; i++) {
    assert.ok(i < 300, "the page did not load the bundle");
    await new Promise((r) => setTimeout(r, 100));
  }
  site.online = false;
  const offline = await run(`(async () => {
    const client = new deniable.Client({ url: location.origin, flushInterval: 0, refreshInterval: 0 });
    window.client = client;
    const held = client.record("browser", "firefox");
    await client.refreshSpecs();
    const recorded = [held, client.record("dark_mode", true), client.record("dark_mode", false)];
    return { recorded, flushed: await client.flush(), stats: client.stats() };
  })()`);
  assert.deepEqual(offline.recorded, [true, true, true], "offline before any spec: held in memory");
  assert.deepEqual([offline.flushed, offline.stats.held, offline.stats.queued], [true, 3, 0]);
  site.online = true;
  const online = await run(`(async () => {
    await client.refreshSpecs();
    const recorded = [client.record("dark_mode", true), client.record("dark_mode", false)];
    client.save();
    const state = localStorage.getItem("deniable.state");
    const ids = JSON.parse(state).queue.map((t) => JSON.parse(t).id);
    return { recorded, ids, state, stats: client.stats() };
  })()`);
  assert.deepEqual(online.recorded, [false, false], "one report per metric per period: the held ones spent it");
  assert.deepEqual([online.stats.held, online.stats.admitted, online.stats.over_budget], [0, 2, 3]);
  assert.equal(online.ids.length, 2, "the held browser value and one dark_mode report");
  const { specs, ...rest } = JSON.parse(online.state); // the specs name every category: public
  assert.ok(specs.browser && !JSON.stringify(rest).includes("firefox"), "localStorage holds no true value");
  site.online = false;
  assert.equal(await run("client.flush()"), false);
  site.online = true;
  assert.equal(await run("client.flush()"), true);
  const stats = await run("client.stats()");
  assert.deepEqual([stats.delivered, stats.queued], [2, 0]);
  const stored = [...(await storedIds(collector.url, "dark_mode")), ...(await storedIds(collector.url, "browser"))];
  assert.deepEqual(stored.sort(), online.ids.sort());
  const urls = chrome.events.filter((e) => e.method === "Network.requestWillBeSent").map((e) => e.params.request.url);
  assert.ok(urls.length >= 4, urls.join(" "));
  for (const url of urls) assert.ok(url.startsWith(`${site.url}/`), `a request left for another origin: ${url}`);
});

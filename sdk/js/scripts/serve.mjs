// The example page, or a page of your own, on a tiny static server with the built bundles and
// /v1/ forwarded to a collector, so the page and the collector share one origin (no CORS).
//   node scripts/serve.mjs [collector URL, default http://127.0.0.1:8000] [port, default 8080] [folder]
// With a folder, its files are served (its index.html at /) in place of examples/index.html;
// /deniable.min.js, /deniable-text.min.js and /deniable-shuffle.min.js stay the built bundles.
import http from "node:http";
import { existsSync, readFileSync, statSync } from "node:fs";
import { extname, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

const target = (process.argv[2] ?? "http://127.0.0.1:8000").replace(/\/+$/, "");
const port = Number(process.argv[3] ?? 8080);
const folder = process.argv[4] === undefined ? null : resolve(process.argv[4]);
const SDK = fileURLToPath(new URL("..", import.meta.url));
const TYPES = { ".html": "text/html", ".js": "text/javascript", ".mjs": "text/javascript", ".css": "text/css", ".json": "application/json", ".svg": "image/svg+xml", ".png": "image/png" };
const BUNDLES = Object.fromEntries(
  ["deniable.min.js", "deniable-text.min.js", "deniable-shuffle.min.js"].map((name) => [`/${name}`, resolve(SDK, "dist", name)]),
);
const EXAMPLE = resolve(SDK, "examples", "index.html");

if (folder !== null && !(existsSync(folder) && statSync(folder).isDirectory())) {
  console.error(`error: ${process.argv[4]} is not a folder`);
  process.exit(1);
}
if (!(port >= 1 && port <= 65535)) {
  console.error(`error: port ${process.argv[3]} is not 1..65535`);
  process.exit(1);
}

/** The file a path names: a bundle, then the folder's (never outside it), else the example page. */
function fileFor(path) {
  if (BUNDLES[path]) return BUNDLES[path];
  if (folder === null) return path === "/" || path === "/index.html" ? EXAMPLE : null;
  const file = resolve(folder, "." + (path === "/" ? "/index.html" : decodeURIComponent(path)));
  if (file !== folder && !file.startsWith(folder + sep)) return null;
  return existsSync(file) && statSync(file).isFile() ? file : null;
}

http.createServer(async (req, res) => {
  const path = new URL(req.url, "http://x").pathname;
  if (!path.startsWith("/v1/")) {
    let file = null;
    try { file = fileFor(path); } catch { file = null; }
    if (file === null) { res.writeHead(404); res.end(); return; }
    res.writeHead(200, { "content-type": TYPES[extname(file)] ?? "application/octet-stream" });
    res.end(readFileSync(file));
    return;
  }
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  try {
    const headers = { "content-type": req.headers["content-type"] ?? "application/json" };
    if (req.headers.authorization) headers.authorization = req.headers.authorization;
    if (req.headers["if-none-match"]) headers["if-none-match"] = req.headers["if-none-match"];
    const answer = await fetch(`${target}${req.url}`, { method: req.method, headers, body: chunks.length ? Buffer.concat(chunks) : undefined });
    const out = { "content-type": answer.headers.get("content-type") ?? "application/json" };
    if (answer.headers.get("etag")) out.etag = answer.headers.get("etag");
    res.writeHead(answer.status, out);
    res.end(Buffer.from(await answer.arrayBuffer()));
  } catch {
    res.writeHead(502, { "content-type": "text/plain" });
    res.end("collector unreachable");
  }
}).listen(port, "127.0.0.1", () => console.log(`http://127.0.0.1:${port}/ (collector ${target}${folder ? `, page ${folder}` : ""})`));

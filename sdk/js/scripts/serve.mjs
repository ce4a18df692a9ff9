// The example page on a tiny static server: examples/index.html and the built bundle, with
// /v1/ forwarded to a collector, so the page and the collector share one origin (no CORS).
//   node scripts/serve.mjs [collector URL, default http://127.0.0.1:8000] [port, default 8080]
import http from "node:http";
import { readFileSync } from "node:fs";

const target = (process.argv[2] ?? "http://127.0.0.1:8000").replace(/\/+$/, "");
const port = Number(process.argv[3] ?? 8080);
const FILES = { "/": ["examples/index.html", "text/html"], "/index.html": ["examples/index.html", "text/html"], "/deniable.min.js": ["dist/deniable.min.js", "text/javascript"] };

http.createServer(async (req, res) => {
  const file = FILES[req.url];
  if (file) {
    res.writeHead(200, { "content-type": file[1] });
    res.end(readFileSync(new URL(`../${file[0]}`, import.meta.url)));
    return;
  }
  if (!req.url.startsWith("/v1/")) { res.writeHead(404); res.end(); return; }
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
}).listen(port, "127.0.0.1", () => console.log(`http://127.0.0.1:${port}/ (collector ${target})`));

// The browser bundles: esbuild joins and minifies the modules into one ES module, terser minifies
// it again (a few hundred bytes smaller gzipped than esbuild alone). dist/deniable.min.js is the client;
// dist/deniable-text.min.js is text metrics (pem), loaded only by apps that record text;
// dist/deniable-shuffle.min.js is sealing for a shuffler, with the HPKE library (@hpke/*) inside.
import { writeFileSync } from "node:fs";
import { build } from "esbuild";
import { minify } from "terser";

const BUNDLES = { "src/browser.ts": "dist/deniable.min.js", "src/text.ts": "dist/deniable-text.min.js", "src/shuffle.ts": "dist/deniable-shuffle.min.js" };

for (const [entry, out] of Object.entries(BUNDLES)) {
  const joined = await build({
    entryPoints: [new URL(`../${entry}`, import.meta.url).pathname], bundle: true, format: "esm", platform: "neutral",
    target: "es2022", minify: true, write: false, logLevel: "warning",
  });
  const { code } = await minify(joined.outputFiles[0].text, { module: true, ecma: 2020, compress: { passes: 3 }, mangle: true });
  writeFileSync(new URL(`../${out}`, import.meta.url), code);
}

// Prints the browser bundles' sizes: minified (esbuild + terser) and gzipped (level 9), in bytes.
// Run: npm run size
import { readFileSync } from "node:fs";
import { gzipSync } from "node:zlib";

console.log("| bundle | minified bytes | gzipped bytes |\n|---|---|---|");
for (const name of ["deniable.min.js", "deniable-text.min.js", "deniable-shuffle.min.js"]) {
  const bundle = readFileSync(new URL(`../dist/${name}`, import.meta.url));
  console.log(`| dist/${name} | ${bundle.length} | ${gzipSync(bundle, { level: 9 }).length} |`);
}

// Prints the browser bundle's size: minified (esbuild) and gzipped (level 9). Run: npm run size
import { readFileSync } from "node:fs";
import { gzipSync } from "node:zlib";

const bundle = readFileSync(new URL("../dist/deniable.min.js", import.meta.url));
const gzipped = gzipSync(bundle, { level: 9 }).length;
console.log("| bundle | minified bytes | gzipped bytes |\n|---|---|---|");
console.log(`| dist/deniable.min.js | ${bundle.length} | ${gzipped} |`);

// Counts tokens of files with js-tiktoken (cl100k_base and o200k_base) and as
// characters / 4, for comparing a raw log with what the plugin makes of it.
//
// js-tiktoken ships its vocabularies in the package, so this works offline once
// installed. It is not a dependency of herd: install it in a scratch directory
// outside the repository and run this script from there, for example
//
//   mkdir -p /work/tok && cd /work/tok && npm init -y && npm install js-tiktoken
//   node /path/to/plugins-example/testdata/count-tokens.mjs RAW.log OUT.txt ...
//
// Files are read as UTF-8 (invalid bytes replaced, as herd does).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

// Resolve js-tiktoken from the directory the script is run in, not from here.
const require = createRequire(join(process.cwd(), "count-tokens.cjs"));
const { getEncoding } = require("js-tiktoken");

const encodings = ["cl100k_base", "o200k_base"].map((name) => [name, getEncoding(name)]);
const rows = [["file", "chars", "chars/4", ...encodings.map(([name]) => name)]];
for (const path of process.argv.slice(2)) {
  const text = readFileSync(path).toString("utf8");
  const n_chars = [...text].length;
  rows.push([
    path,
    n_chars,
    Math.ceil(n_chars / 4),
    // allowedSpecial "all": a log may contain text that looks like a special token.
    ...encodings.map(([, enc]) => enc.encode(text, "all").length),
  ]);
}
const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => String(r[i]).length)));
for (const row of rows) {
  process.stdout.write(row.map((cell, i) => String(cell).padStart(widths[i])).join("  ") + "\n");
}

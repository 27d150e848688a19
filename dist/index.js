// runwarden's GitHub Action shim: picks the prebuilt binary for this
// runner, verifies its SHA-256 against SHA256SUMS, and runs `runwarden
// action` with the inherited environment, passing the exit code through.
// dist/post.js runs it again at the end of the job, after a `mode: watch`
// step only.
// Plain Node, no dependencies.
"use strict";
const fs = require("fs");
const path = require("path");
const crypto = require("crypto");
const { spawnSync } = require("child_process");

// Workflow-command data escaping: these messages can carry paths.
function escapeData(s) {
  return String(s).replace(/%/g, "%25").replace(/\r/g, "%0D").replace(/\n/g, "%0A").replace(/##\[/g, "%23#[");
}

function fail(message) {
  process.stdout.write(`::error title=runwarden::${escapeData(message)}\n`);
  process.exit(2);
}

function input(name) {
  return (process.env[`INPUT_${name.toUpperCase().replace(/ /g, "_")}`] || "").trim();
}

const PLATFORMS = { linux: { x64: "x86_64-linux", arm64: "aarch64-linux" } };

// Where every release's binaries are, for a runner dist/ has none for.
function releases() {
  const repo = process.env.GITHUB_ACTION_REPOSITORY;
  const server = process.env.GITHUB_SERVER_URL || "https://github.com";
  return repo ? `${server}/${repo}/releases` : "the action's releases page";
}

function bundled() {
  if (process.platform !== "linux") {
    const os = { darwin: "macOS", win32: "Windows" }[process.platform] || process.platform;
    fail(`runwarden's action runs on Linux runners (x86_64 and arm64); ${os} is not supported yet.`);
  }
  const key = PLATFORMS.linux[process.arch];
  if (!key) {
    fail(
      `runwarden has no prebuilt binary for ${process.platform}/${process.arch}. ` +
        "Build it from source (cargo build --release in a checkout of runwarden) " +
        "and pass the path of target/release/runwarden as the `binary` input."
    );
  }
  const rel = `${key}/runwarden`;
  const file = path.join(__dirname, rel);
  let sums;
  try {
    sums = fs.readFileSync(path.join(__dirname, "SHA256SUMS"), "utf8");
  } catch (e) {
    fail(`cannot read dist/SHA256SUMS: ${e.message}`);
  }
  const lines = sums.split("\n").map((l) => l.trim().split(/\s+/)).filter((p) => p.length === 2);
  const line = lines.find((p) => p[1] === rel || p[1] === `*${rel}`);
  if (!line) {
    const have = lines
      .map((p) => p[1].replace(/^\*/, "").match(/^([a-z0-9_]+-[a-z]+)\/runwarden$/))
      .filter(Boolean)
      .map((m) => m[1]);
    fail(
      `this version of the action has no binary for ${key} in dist/ (it has ${have.join(", ") || "none"}). ` +
        `Every release's binaries are at ${releases()}; or build runwarden from source ` +
        "and pass its path as the `binary` input."
    );
  }
  let actual;
  try {
    actual = crypto.createHash("sha256").update(fs.readFileSync(file)).digest("hex");
  } catch (e) {
    fail(`cannot read dist/${rel}: ${e.message}`);
  }
  if (actual !== line[0]) {
    fail(`checksum mismatch for dist/${rel}: expected ${line[0]}, got ${actual}; refusing to run it`);
  }
  return file;
}

// Only the post step (dist/post.js) finishes a watch: the token it read
// from its own state reaches this file in-process (never through the
// environment, which an earlier step can set through $GITHUB_ENV). A
// runwarden control variable inherited from the environment is dropped,
// and said.
const env = Object.assign({}, process.env);
for (const name of ["RUNWARDEN_WATCH_STATE", "RUNWARDEN_POST_WATCH"]) {
  if (env[name] !== undefined) {
    process.stdout.write(`::notice title=runwarden::ignored ${name} from the environment (an earlier step set it): only the post step hands a watch over\n`);
    delete env[name];
  }
}
if (typeof globalThis.runwardenPostWatch === "string" && globalThis.runwardenPostWatch) {
  env.RUNWARDEN_WATCH_STATE = globalThis.runwardenPostWatch;
}

const override = input("binary");
const binary = override ? path.resolve(process.env.GITHUB_WORKSPACE || process.cwd(), override) : bundled();
const run = spawnSync(binary, ["action"], { stdio: "inherit", env });
if (run.error) fail(`cannot run ${binary}: ${run.error.message}`);
process.exit(run.status === null ? 2 : run.status);

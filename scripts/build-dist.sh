#!/usr/bin/env bash
# Builds dist/<platform>/runwarden, fully static, and writes
# dist/SHA256SUMS (TARGET and PLATFORM default to x86_64 Linux; the release
# workflow builds aarch64 on an arm64 runner). Run it when the version in Cargo.toml changes (see
# docs/releasing.md), not on every commit: the binary is large.
#
# Static glibc (crt-static): musl would need a toolchain target this
# project's machines cannot fetch. Name resolution (the actions-cache
# surface) uses glibc's built-in `files` and `dns` services, which need no
# dlopen since glibc 2.34; other NSS modules are not loaded (see
# docs/releasing.md). getrandom uses the syscall (no /dev/urandom), so a
# probe of local surfaces runs in an empty chroot.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${TARGET:-x86_64-unknown-linux-gnu}"
platform="${PLATFORM:-x86_64-linux}"
export SOURCE_DATE_EPOCH=0
export CARGO_INCREMENTAL=0
# Remapped paths: the binary does not depend on where it was built.
export RUSTFLAGS="-C target-feature=+crt-static --cfg getrandom_backend=\"linux_getrandom\" --remap-path-prefix=$HOME=/home --remap-path-prefix=$PWD=/src"
cargo build --release --locked --target "$target" --target-dir target/dist
install -D -m 0755 "target/dist/$target/release/runwarden" "dist/$platform/runwarden"
# The man pages (one per command), generated from the same command line
# definition.
rm -rf dist/man dist/runwarden.1 && mkdir -p dist/man
"dist/$platform/runwarden" man --dir dist/man >/dev/null
(cd dist && sha256sum */runwarden > SHA256SUMS)
cat dist/SHA256SUMS
ls -l "dist/$platform/runwarden"

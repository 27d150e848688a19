#!/usr/bin/env python3
"""Benchmark: the same probe with this runwarden and with the reference
tool (PyPI runwarden==0.1.0), printing the ratio of median wall times and of
peak RSS.

Usage: python3 bench/compare.py [--surface filesystem|git] [--transport local|http]
                                [--runs N] [--sizes 0,400,10000]

`--surface filesystem` (default) probes a directory holding N foreign files;
`--surface git` probes a bare remote holding N foreign refs (default 50) and
also prints, per tool and probe:
- round trips: the times it made git contact the remote (each starts a
  git-upload-pack or git-receive-pack on the remote side), counted with
  strace for a local remote, and as authenticated HTTP requests for
  `--transport http`;
- git processes: the `git` commands it started, counted by a `git` first on
  PATH that logs each call and hands it to the real one.
`--transport http` serves the remote over smart HTTP (`git http-backend` on
loopback, behind basic auth), the shape CI uses.

It builds the binary the action ships (static, the flags of
scripts/build-dist.sh, in target/dist), installs the reference into
bench/.venv (once),
and for each size makes a directory holding that many foreign files (one in
ten with content), then probes it with both tools N times each, alternating.
Wall time is of the tool started directly from this script (which adds
the same ~0.6 ms process start to both tools; `/bin/true` is printed as
that floor). Peak RSS is measured in a second run of each: the largest
resident set of the probe's process tree as GNU
time (`/usr/bin/time`, Debian package `time`) reports it: wait4(2) called
from this Python process would count Python's own RSS, which a child keeps
in its ru_maxrss across fork and exec. Nothing here asserts a speed: it
prints figures.

Both tools run with the surface and their temp directories on tmpfs
(/dev/shm) where it exists: on ext4, the inode allocator slows every create
for ~30 s after many deletes (find_inode_bit/recently_deleted), which would
measure the disk's recent history rather than either tool.

The reference lists at most 500 entries of a directory (its MAX_ENTRIES cap),
so from 500 entries up it does less work than runwarden, which lists every
entry; those rows are marked.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / "bench" / ".venv"
REFERENCE = "runwarden==0.1.0"


def ensure_reference() -> Path:
    exe = VENV / "bin" / "runwarden"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", REFERENCE], check=True)
    return exe


TARGET = "x86_64-unknown-linux-gnu"


def build() -> Path:
    """The binary the action ships: built as scripts/build-dist.sh builds
    it (static glibc, same flags and target dir, so the two share a cache),
    not copied to dist/. A dynamic build spends about a millisecond per
    process in the loader, which a probe of four processes would count."""
    home = os.environ.get("HOME", "/root")
    env = dict(
        os.environ,
        SOURCE_DATE_EPOCH="0",
        CARGO_INCREMENTAL="0",
        RUSTFLAGS=f'-C target-feature=+crt-static --cfg getrandom_backend="linux_getrandom" '
        f"--remap-path-prefix={home}=/home --remap-path-prefix={ROOT}=/src",
    )
    subprocess.run(
        ["cargo", "build", "--release", "--quiet", "--locked", "--target", TARGET,
         "--target-dir", str(ROOT / "target" / "dist")],
        cwd=ROOT, env=env, check=True,
    )
    return ROOT / "target" / "dist" / TARGET / "release" / "runwarden"


GNU_TIME = "/usr/bin/time"
BASE = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def measure(argv, cwd) -> tuple[float, int, int]:
    """(wall seconds, peak RSS KiB, exit code) of one run: two runs, in
    fact. The wall time is of the tool started directly; GNU time, which
    reports the RSS, is a process of its own (a fork, an exec and a wait:
    about 0.8 ms here), so it gets a second run of its own rather than a
    place on the clock of the first."""
    rss_file = Path(cwd) / ".rss"
    env = dict(os.environ, TMPDIR=str(cwd))
    # Each run starts with no dirty data from the run before (the other
    # tool's plants and cleanup), which would otherwise land on its clock.
    os.sync()
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    os.sync()
    subprocess.run(
        [GNU_TIME, "-f", "%M", "-o", str(rss_file), *argv],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # GNU time prefixes "Command exited with non-zero status N" lines.
    rss = int(rss_file.read_text().split()[-1])
    return wall, rss, done.returncode


def git(*args, cwd=None, input=None):
    env = dict(os.environ, GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1")
    subprocess.run(["git", *args], cwd=cwd, input=input, env=env, check=True, capture_output=True)


def git_remote(tmp: Path, n: int) -> Path:
    """A bare remote with a main branch and n foreign refs."""
    remote = tmp / "remote.git"
    git("init", "-q", "--bare", str(remote))
    seed = tmp / "seed"
    git("init", "-q", str(seed))
    git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "--allow-empty", "-m", "foreign", cwd=seed)
    git("push", "-q", str(remote), "HEAD:refs/heads/main", cwd=seed)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=seed, capture_output=True, text=True).stdout.strip()
    lines = "".join(f"create refs/heads/foreign/{i} {sha}\n" for i in range(n))
    git("update-ref", "--stdin", cwd=remote, input=lines.encode())
    return remote


def round_trips(argv, cwd) -> int | None:
    """Times the run made git contact the remote, from strace's execve log."""
    if not shutil.which("strace"):
        return None
    log = Path(cwd) / ".strace"
    env = dict(os.environ, TMPDIR=str(cwd))
    subprocess.run(["strace", "-f", "-qq", "-e", "trace=execve", "-o", str(log), *argv],
                   cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    count = 0
    for line in log.read_text(errors="replace").splitlines():
        if "execve(" in line and "= 0" in line and re.search(r'execve\("[^"]*git-(upload|receive)-pack"', line):
            count += 1
    return count


def git_processes(argv, cwd) -> int:
    """`git` commands one run starts: a `git` first on PATH logs each call
    and execs the real one (git's own helpers run from its exec path and
    are not counted: they are git's work, not the tool's)."""
    shim = Path(cwd) / ".shim"
    shim.mkdir(exist_ok=True)
    log = Path(cwd) / ".git-calls"
    log.write_text("")
    real = shutil.which("git")
    (shim / "git").write_text(f'#!/bin/sh\necho "$1" >> "{log}"\nexec "{real}" "$@"\n')
    (shim / "git").chmod(0o755)
    env = dict(os.environ, TMPDIR=str(cwd), PATH=f"{shim}:{os.environ['PATH']}")
    subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return len(log.read_text().splitlines())


class SmartHttp:
    """`git http-backend` over loopback HTTP behind basic auth (one user
    who may push), counting requests: each is one round trip."""

    USER, PASSWORD = "bench", "bench-secret"

    def __init__(self, root: Path):
        import base64
        import http.server
        import threading

        self.requests = 0
        expected = "Basic " + base64.b64encode(f"{self.USER}:{self.PASSWORD}".encode()).decode()
        backend = subprocess.run(["git", "--exec-path"], capture_output=True, text=True).stdout.strip()
        bench = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def setup(self):
                super().setup()
                # Headers and body go out as separate writes: without this,
                # Nagle's algorithm and the client's delayed ACK add ~40 ms
                # to every response, which would measure the socket, not git.
                import socket
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def serve(self):
                bench.requests += 1
                if self.headers.get("Authorization") != expected:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="bench"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                path, _, query = self.path.partition("?")
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                env = {
                    "PATH": os.environ["PATH"],
                    "GIT_PROJECT_ROOT": str(root),
                    "GIT_HTTP_EXPORT_ALL": "1",
                    "REMOTE_USER": bench.USER,
                    "REQUEST_METHOD": self.command,
                    "PATH_INFO": path,
                    "QUERY_STRING": query,
                    "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                    "CONTENT_LENGTH": str(len(body)),
                    "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
                    "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
                }
                out = subprocess.run([f"{backend}/git-http-backend"], input=body, env=env,
                                     capture_output=True).stdout
                head, _, rest = out.partition(b"\r\n\r\n")
                status = 200
                headers = []
                for line in head.decode("latin-1").split("\r\n"):
                    k, _, v = line.partition(":")
                    if k.lower() == "status":
                        status = int(v.strip().split()[0])
                    elif k:
                        headers.append((k, v.strip()))
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(rest)))
                self.end_headers()
                self.wfile.write(rest)

            do_GET = serve
            do_POST = serve

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, repo: str) -> str:
        return f"http://{self.USER}:{self.PASSWORD}@127.0.0.1:{self.port}/{repo}"

    def close(self):
        self.server.shutdown()


def populate(d: Path, n: int) -> None:
    for i in range(n):
        p = d / f"foreign-{i:06d}"
        if i % 10 == 0:
            p.write_text(f"payload {i}\n")
        else:
            p.touch()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--surface", choices=["filesystem", "git"], default="filesystem")
    ap.add_argument("--transport", choices=["local", "http"], default="local")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--sizes", default=None)
    args = ap.parse_args()
    sizes = args.sizes or ("0,400,10000" if args.surface == "filesystem" else "50")
    if not os.access(GNU_TIME, os.X_OK):
        print("needs GNU time: apt-get install time", file=sys.stderr)
        return 2
    ours = build()
    ref = ensure_reference()
    version = subprocess.run([str(ours), "--version"], capture_output=True, text=True).stdout.strip()
    where = BASE or tempfile.gettempdir()
    what = "entries" if args.surface == "filesystem" else "refs"
    over = f" over {args.transport}" if args.surface == "git" else ""
    print(f"{args.surface} surface{over}: {version} (static release build) vs reference {REFERENCE}; {args.runs} runs each, medians, in {where}")
    floor = []
    for _ in range(args.runs):
        start = time.perf_counter()
        subprocess.run(["/bin/true"])
        floor.append(time.perf_counter() - start)
    print(f"(starting a process from this script: /bin/true takes {statistics.median(floor) * 1000:.1f} ms, in both tools' times)")
    header = f"{what:>8}  {'ours ms':>8}  {'ref ms':>8}  {'speed-up':>8}  {'ours RSS':>9}  {'ref RSS':>9}  {'RSS ratio':>9}"
    if args.surface == "git":
        header += "  round trips  git processes"
    print(header + "  note")
    for n in [int(x) for x in sizes.split(",")]:
        with tempfile.TemporaryDirectory(prefix="rw-bench-", dir=BASE) as tmp:
            tmp = Path(tmp)
            if args.surface == "filesystem":
                target = tmp / "shared"
                target.mkdir()
                populate(target, n)
                ours_surface = f"    type: filesystem\n    path: {json.dumps(str(target))}\n"
                ref_surface = {"name": "shared", "type": "filesystem", "params": {"path": str(target)}}
            else:
                target = git_remote(tmp, n)
                server = None
                remote = str(target)
                if args.transport == "http":
                    git("config", "http.receivepack", "true", cwd=target)
                    server = SmartHttp(tmp)
                    remote = server.url("remote.git")
                ours_surface = f"    type: git-remote\n    remote: {json.dumps(remote)}\n"
                ref_surface = {"name": "shared", "type": "git_remote", "params": {"remote": remote}}
            (tmp / "ours.yml").write_text(f"version: 1\nsurfaces:\n  - name: shared\n{ours_surface}")
            (tmp / "ref.json").write_text(json.dumps({"surfaces": [ref_surface], "declared": []}))
            ours_argv = [str(ours), "probe", "--config", "ours.yml", "--report", "ours-report.json"]
            ref_argv = [str(ref), "probe", "--config", "ref.json", "--report", "ref-report.json"]
            # runwarden 0.1.0 probes local remotes only ("must be a local
            # path"): over HTTP there is nothing to compare, so ours alone.
            ref_runs = not (args.surface == "git" and args.transport == "http")
            o, r = [], []
            for _ in range(args.runs):
                o.append(measure(ours_argv, tmp))
                if ref_runs:
                    r.append(measure(ref_argv, tmp))
            if not ref_runs:
                ow = statistics.median(w for w, _, _ in o) * 1000
                orss = statistics.median(m for _, m, _ in o)
                before = server.requests
                subprocess.run(ours_argv, cwd=tmp, env=dict(os.environ, TMPDIR=str(tmp)),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                trips = server.requests - before
                procs = git_processes(ours_argv, tmp)
                print(f"{n:>8}  {ow:>8.1f}  {'n/a':>8}  {'n/a':>8}  {orss:>6} KiB  {'n/a':>9}  {'n/a':>9}"
                      f"  {trips:>5}/n/a    {procs:>6}/n/a     HTTP requests (info/refs GETs and POSTs) of"
                      " one probe; the reference probes local remotes only")
                server.close()
                continue
            for name, runs in (("runwarden", o), ("reference", r)):
                codes = {c for _, _, c in runs}
                if codes != {1}:
                    print(f"warning: {name} exited {codes}, expected 1 (open channels)", file=sys.stderr)
            ow = statistics.median(w for w, _, _ in o) * 1000
            rw = statistics.median(w for w, _, _ in r) * 1000
            orss = statistics.median(m for _, m, _ in o)
            rrss = statistics.median(m for _, m, _ in r)
            row = f"{n:>8}  {ow:>8.1f}  {rw:>8.1f}  {rw / ow:>7.1f}x  {orss:>6} KiB  {rrss:>6} KiB  {rrss / orss:>8.1f}x"
            note = ""
            if args.surface == "git":
                if server is None:
                    trips = (round_trips(ours_argv, tmp), round_trips(ref_argv, tmp))
                else:
                    trips = []
                    for argv in (ours_argv, ref_argv):
                        before = server.requests
                        subprocess.run(argv, cwd=tmp, env=dict(os.environ, TMPDIR=str(tmp)),
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                        trips.append(server.requests - before)
                procs = (git_processes(ours_argv, tmp), git_processes(ref_argv, tmp))
                row += f"  {trips[0]:>5}/{trips[1]:<5}  {procs[0]:>6}/{procs[1]:<6}"
                note = "ours: 12 carriers and its control; ref: 5 carriers"
                if server is not None:
                    note += "; http round trips = requests, 401 challenges included"
                    server.close()
            elif n > 500:
                note = "reference lists only 500 entries"
            print(f"{row}  {note}")
            if args.surface == "filesystem":
                left = [p.name for p in target.iterdir() if not p.name.startswith("foreign-")]
                if left:
                    print(f"  left in the directory after the runs: {left[:5]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Benchmark: the same probe with this runwarden and with the reference
tool (PyPI runwarden==0.1.0), and a watch against the floor of the tools
that read what it reads. Its markdown table is the README's.

Usage: sudo python3 bench/compare.py [--surface all|filesystem|git|watch]
                                     [--fs ext4,tmpfs] [--runs N]
                                     [--sizes 0,400] [--transport local|http]
                                     [--watch-entries 200000]

Every measurement runs on a file system made for it (root: it mounts):
- `ext4`: a fresh image, `mkfs.ext4`, loop-mounted, per size (a fresh file
  system has no history: on an old one the inode allocator slows every
  create for ~30 s after many deletes, which would measure the disk's past);
- `tmpfs`: a fresh tmpfs mount.
The surface, both tools' TMPDIR and every scratch file live there; one
unmeasured run of each tool warms the cache first. Then the tools run
alternately, N times each (at least 7), and the medians are printed.

It builds the binary the action ships (static, the flags of
scripts/build-dist.sh, in target/dist) and installs the reference into
bench/.venv (once). Wall time is of the tool started directly from this
script (`/bin/true`'s time is printed as that floor); peak RSS is measured
in a second run under GNU time (`/usr/bin/time`, Debian package `time`).

- `filesystem`: a directory holding N foreign files (one in ten with
  content). The reference lists at most 500 entries of a directory, so
  rows from 500 up are marked.
- `git`: a bare remote holding N foreign refs (default 50). Also printed,
  per tool and probe: round trips (the times it made git contact the
  remote: each starts a git-upload-pack or git-receive-pack, counted with
  strace; for `--transport http`, authenticated HTTP requests), git
  commands (what the tool itself started, counted by a `git` first on
  PATH) and git processes (every git program that ran, git's own helpers
  and the remote's side included, counted with strace).
- `watch`: `runwarden watch -- true` over a generated tree (N entries:
  directories of 999 files, one file in ten with content), two snapshots
  and their diff, against the floor printed in the same run: `find
  -printf` with sizes and times, `getfattr -R -d` (Debian package
  `attr`), and reading every non-empty file, each timed alone. The tree is
  a few seconds old when watched, as a real one is.

Nothing here asserts a speed: it prints figures.
"""

import argparse
import contextlib
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


def traced(argv, cwd) -> tuple[int, int] | None:
    """(round trips, git processes) of one run, from strace's execve log:
    each git-upload-pack or git-receive-pack started is a contact with the
    remote; every program from git's exec path or named git is a git
    process (the remote's side of a local remote included)."""
    if not shutil.which("strace"):
        return None
    log = Path(cwd) / ".strace"
    env = dict(os.environ, TMPDIR=str(cwd))
    subprocess.run(["strace", "-f", "-qq", "-e", "trace=execve", "-o", str(log), *argv],
                   cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    trips = procs = 0
    for line in log.read_text(errors="replace").splitlines():
        m = re.search(r'execve\("([^"]*)"', line)
        if not m or "= 0" not in line:
            continue
        prog = m.group(1).rsplit("/", 1)[-1]
        if prog.startswith("git"):
            procs += 1
        if re.fullmatch(r"git-(upload|receive)-pack", prog):
            trips += 1
    return trips, procs


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


def tree(root: Path, n: int) -> None:
    """n entries: directories of 999 files each, one entry in ten a file
    with content."""
    root.mkdir()
    made = 0
    d = 0
    while made < n:
        sub = root / f"d{d:04d}"
        sub.mkdir()
        made += 1
        for f in range(min(999, n - made)):
            with open(sub / f"f{f:04d}", "w") as fh:
                if made % 10 == 0:
                    fh.write(f"content {made}\n" * 8)
            made += 1
        d += 1


@contextlib.contextmanager
def fresh_fs(kind: str, size_mib: int):
    """A file system made for one measurement, mounted on a new
    directory: a loop-mounted ext4 image, or a tmpfs."""
    top = Path(tempfile.mkdtemp(prefix="rw-bench-", dir="/var/tmp"))
    mnt = top / "mnt"
    mnt.mkdir()
    try:
        if kind == "ext4":
            img = top / "fs.img"
            with open(img, "wb") as f:
                f.truncate(size_mib << 20)
            subprocess.run(["mkfs.ext4", "-q", "-F", str(img)], check=True)
            subprocess.run(["mount", "-o", "loop", str(img), str(mnt)], check=True)
        else:
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(mnt)],
                           check=True)
        try:
            yield mnt
        finally:
            subprocess.run(["umount", str(mnt)], check=True)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def median_ms(xs) -> float:
    return statistics.median(xs) * 1000


def wall(argv, cwd, env=None) -> float:
    os.sync()
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env or dict(os.environ, TMPDIR=str(cwd)),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


class Row:
    """One measurement: what was probed, on which file system, and its
    figures (for the printed line and the markdown table)."""

    def __init__(self, what, fs, ours, ref=None, extra="", note=""):
        self.what, self.fs, self.ours, self.ref, self.extra, self.note = what, fs, ours, ref, extra, note

    def ratio(self) -> str:
        return f"{self.ref / self.ours:.1f}x" if self.ref else ""

    def line(self) -> str:
        ref = f"{self.ref:8.1f}" if self.ref else f"{'n/a':>8}"
        return f"{self.what:<34} {self.fs:<6} {self.ours:8.1f} {ref} {self.ratio():>8}  {self.extra}  {self.note}".rstrip()


def probe_row(args, ours, ref, surface, n, fs, mnt) -> Row:
    tmp = mnt
    server = None
    if surface == "filesystem":
        target = tmp / "shared"
        target.mkdir()
        populate(target, n)
        ours_surface = f"    type: filesystem\n    path: {json.dumps(str(target))}\n"
        ref_surface = {"name": "shared", "type": "filesystem", "params": {"path": str(target)}}
    else:
        target = git_remote(tmp, n)
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
    # runwarden 0.1.0 probes local remotes only ("must be a local path").
    ref_runs = not (surface == "git" and args.transport == "http")
    wall(ours_argv, tmp)
    if ref_runs:
        wall(ref_argv, tmp)
    o, r = [], []
    for _ in range(args.runs):
        o.append(measure(ours_argv, tmp))
        if ref_runs:
            r.append(measure(ref_argv, tmp))
    for name, runs in (("runwarden", o), ("reference", r)):
        codes = {c for _, _, c in runs}
        if runs and codes != {1}:
            print(f"warning: {name} exited {codes}, expected 1 (open channels)", file=sys.stderr)
    ow = median_ms(w for w, _, _ in o)
    rw = median_ms(w for w, _, _ in r) if r else None
    orss = statistics.median(m for _, m, _ in o)
    extra = f"RSS {orss / 1024:.1f} MiB"
    if r:
        extra += f" vs {statistics.median(m for _, m, _ in r) / 1024:.1f} MiB"
    note = ""
    what = f"{surface}, {n} {'entries' if surface == 'filesystem' else 'refs'}"
    if surface == "git":
        cmds = (git_processes(ours_argv, tmp), git_processes(ref_argv, tmp) if ref_runs else None)
        if server is None:
            t = (traced(ours_argv, tmp), traced(ref_argv, tmp))
            if t[0] and t[1]:
                extra += (f"; round trips {t[0][0]} vs {t[1][0]}; git commands {cmds[0]} vs {cmds[1]};"
                          f" git processes {t[0][1]} vs {t[1][1]}")
        else:
            before = server.requests
            wall(ours_argv, tmp)
            extra += f"; HTTP requests {server.requests - before}; git commands {cmds[0]}"
            server.close()
            what += " over HTTP"
        note = "ours: 12 carriers and its control; ref: 5 carriers"
    elif n > 500:
        note = "reference lists only 500 entries"
    return Row(what, fs, ow, rw, extra, note)


def watch_rows(args, ours, fs, mnt) -> list[Row]:
    root = mnt / "tree"
    tree(root, args.watch_entries)
    (mnt / "rw.yml").write_text(
        f"version: 1\nsurfaces:\n  - name: tree\n    type: filesystem\n    path: {json.dumps(str(root))}\n")
    # As old as a real tree is by the time it is watched: an entry changed
    # in the second before the first snapshot is read again (docs/watch.md).
    time.sleep(3)
    argv = [str(ours), "watch", "--config", "rw.yml", "--report", "watch.json", "--", "true"]
    floor = {
        "find -printf": ["sh", "-c", "find tree -printf '%s %T@ %C@ %p\\n' >/dev/null"],
        "getfattr -R -d": ["sh", "-c", "getfattr -R -d tree >/dev/null 2>&1"],
        "read non-empty files": ["sh", "-c", "find tree -type f -size +0 -print0 | xargs -0 cat >/dev/null"],
    }
    wall(argv, mnt)
    times = {k: [] for k in floor}
    w = []
    for _ in range(args.runs):
        w.append(wall(argv, mnt))
        for k, cmd in floor.items():
            times[k].append(wall(cmd, mnt))
    with open(mnt / "watch.json") as f:
        summary = json.load(f)["summary"]
    if summary.get("error") or summary.get("fail"):
        print(f"warning: the watch reported {summary}", file=sys.stderr)
    parts = {k: median_ms(v) for k, v in times.items()}
    total = sum(parts.values())
    shown = ", ".join(f"{k} {v:.0f}" for k, v in parts.items())
    return [Row(f"watch, {args.watch_entries} entries", fs, median_ms(w), None,
                f"floor {total:.0f} ms ({shown})", "two snapshots and their diff")]


def markdown(rows: list[Row]) -> str:
    out = ["| measurement | fs | this tool | earlier tool | ratio | also |",
           "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        ref = f"{r.ref:.1f} ms" if r.ref else ("(none: watch is new)" if r.what.startswith("watch") else "n/a")
        out.append(f"| {r.what} | {r.fs} | {r.ours:.1f} ms | {ref} | {r.ratio()} | {r.extra} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--surface", choices=["all", "filesystem", "git", "watch"], default="all")
    ap.add_argument("--fs", default="ext4,tmpfs")
    ap.add_argument("--transport", choices=["local", "http"], default="local")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--sizes", default=None)
    ap.add_argument("--watch-entries", type=int, default=200_000)
    args = ap.parse_args()
    if args.runs < 7:
        print("--runs must be at least 7 (medians of fewer runs move too much)", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("needs root: each measurement mounts a file system of its own", file=sys.stderr)
        return 2
    if not os.access(GNU_TIME, os.X_OK):
        print("needs GNU time: apt-get install time", file=sys.stderr)
        return 2
    surfaces = ["filesystem", "git", "watch"] if args.surface == "all" else [args.surface]
    if "watch" in surfaces and not shutil.which("getfattr"):
        print("the watch floor needs getfattr: apt-get install attr", file=sys.stderr)
        return 2
    ours = build()
    ref = ensure_reference()
    version = subprocess.run([str(ours), "--version"], capture_output=True, text=True).stdout.strip()
    floor = [wall(["/bin/true"], "/") for _ in range(args.runs)]
    print(f"{version} (static release build) vs {REFERENCE}; {args.runs} runs each, alternating, medians;"
          f" starting /bin/true from here takes {median_ms(floor):.1f} ms")
    rows = []
    for fs in args.fs.split(","):
        for surface in surfaces:
            if surface == "watch":
                with fresh_fs(fs, 4096) as mnt:
                    rows.extend(watch_rows(args, ours, fs, mnt))
                print(rows[-1].line(), flush=True)
                continue
            sizes = args.sizes or ("0,400" if surface == "filesystem" else "50")
            for n in [int(x) for x in sizes.split(",")]:
                with fresh_fs(fs, 1024) as mnt:
                    rows.append(probe_row(args, ours, ref, surface, n, fs, mnt))
                print(rows[-1].line(), flush=True)
    print()
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

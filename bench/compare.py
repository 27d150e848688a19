#!/usr/bin/env python3
"""Benchmark: every figure of runwarden against the floor of the tools it
must use, measured in the same run, with runwarden==0.1.0 (PyPI, the
earlier Python tool) kept beside it as history, not as the target. Its
markdown table is the README's speed table.

Usage: sudo python3 bench/compare.py
           [--surface all|filesystem|git|watch|action] [--fs ext4,tmpfs]
           [--runs N] [--repeat N] [--sizes 0,400] [--transport local|http]
           [--watch-entries 200000] [--watch-big]

Every measurement runs on a file system made for it (root: it mounts):
- `ext4`: a fresh image, `mkfs.ext4`, loop-mounted, per row (a fresh file
  system has no history: on an old one the inode allocator slows every
  create for ~30 s after many deletes, which would measure the disk's past);
- `tmpfs`: a fresh tmpfs mount.
The surface, the tools' TMPDIR and every scratch file live there. The
bench runs in a mount namespace of its own (it re-executes itself under
`unshare --mount --propagation private`), so its mounts are never seen
outside and vanish with it. One unmeasured run of each command warms the
cache first; then runwarden, its floor and 0.1.0 run alternately, N times
each (at least 7, default 9), each timed run after an `os.sync()` (no
dirty data from the run before lands on its clock), and the medians are
printed. `--repeat N` runs the whole bench N times in a row and prints
each row's ratio in every repetition, whether every one was within
target (three consecutive runs is how issue 45 judges it), and the
table of the last one.

It builds the binary the action ships (static, the flags of
scripts/build-dist.sh, in target/dist) and installs 0.1.0 into
bench/.venv (once). Wall time is of the command started directly from
this script (`/bin/true`'s time is printed in the heading); peak RSS is
measured in a separate run under GNU time (`/usr/bin/time`, Debian
package `time`). Nothing here asserts a speed: it prints figures, each
row's ratio to its floor, its target and whether it is within it, and a
last line counting the rows within target.

The rows, their floors and targets:
- `filesystem, N entries` (default N = 0 and 400): a probe of a directory
  holding N foreign files (one in ten with content). Floor: three starts
  of the same binary in sequence, `runwarden --version` three times,
  timed as one measurement (what a probe must do: the orchestrator, run A
  and run B). Targets: 2.5x for 0 entries, 3x for 400 (and for any other
  size). 0.1.0 lists at most 500 entries of a directory, so sizes from
  500 up are marked.
- `git, N refs` (default 50): a probe of a local bare remote holding N
  foreign refs. Floor: the git CLI making the same ref updates and reads
  runwarden's routes make, in the fewest commands. Per run, untimed: a
  fresh bare repository holding fresh objects (new random nonces, so that
  every push sends new objects, as runwarden's do) for 11 refs (branch
  name, tag name, annotated tag, commit message, author name, author
  email, file content, file path, notes, a custom ref under refs/<x>/ and
  a branch to delete), and a fresh empty bare repository to fetch into.
  Timed: five git commands in sequence: a `push --porcelain --no-verify`
  creating the 11 refs; a push deleting the one branch; `ls-remote` from
  the fresh repository; one `fetch --no-tags` of the 7 content refs
  (annotated tag, commit message, author name and email, file content
  and path, notes) and of the deleted commit by its id into it; a push
  deleting the 10 others. Git runs with the environment runwarden gives
  it (GIT_CONFIG_NOSYSTEM=1, GIT_CONFIG_GLOBAL=/dev/null, LC_ALL=C,
  GIT_TERMINAL_PROMPT=0; `-c maintenance.auto=false -c gc.auto=0 -c
  core.fsync=none -c fetch.unpackLimit=1` for the local repositories; the
  remote's config is git's defaults for both). An unmeasured warm-up checks every command
  succeeds. Target: 1.3x. Also printed, per tool: round trips (the times
  it made git contact the remote: each starts a git-upload-pack or
  git-receive-pack, counted with strace; for `--transport http`,
  authenticated HTTP requests), git commands (what the tool itself
  started, counted by a `git` first on PATH) and git processes (every git
  program that ran, git's own helpers and the remote's side included,
  counted with strace). The floor's five commands are counted the same
  way. Each count is taken over three untimed runs and shown as a range
  when they differ (runwarden's round trips vary from run to run with
  the same commands). (`--transport http` puts the remote behind `git http-backend` over
  loopback; the floor and 0.1.0, which probes local remotes only, do not
  run then.)
- `watch, N entries` (default 200,000): `runwarden watch -- true` over a
  generated tree (directories of 999 files, one file in ten with
  content), two snapshots and their diff. Floor: what reads the same, each
  timed alone and summed: `find -printf` with sizes and times, `getfattr
  -R -d` (Debian package `attr`), reading every non-empty file. The tree
  is a few seconds old when watched, as a real one is. Target: 1.1x. Its
  peak RSS is printed too. With `--watch-big`, a 1,000,000-entry tree's
  peak RSS is printed against its cap: under 64 MiB.
- `action end to end`: the time a job pays for the action. A tree shaped
  like a GitHub-hosted runner's is generated once per file system
  (untimed): a home of 50,000 entries (dotfiles, ~/.cargo/registry,
  ~/.npm, ~/.cache/pip) holding the runner's work directory, a checkout
  of 30,000 files as GITHUB_WORKSPACE (a git work tree whose origin is a
  bare repository on the same file system, its push credential left in
  its config as actions/checkout leaves it), a tool cache of 200,000
  entries (tool/version/x64 trees, as /opt/hostedtoolcache), RUNNER_TEMP
  with the runner's empty command files (GITHUB_OUTPUT,
  GITHUB_STEP_SUMMARY, GITHUB_ENV, GITHUB_PATH, GITHUB_STATE) and the
  event payload. The action runs from a copy of dist/ under
  `_work/_actions` whose binary is the fresh build and whose SHA256SUMS
  is regenerated for it, so the shim's checksum check runs for real, as
  the runner runs it: `node dist/index.js` in the workspace, with the
  environment the runner gives a JavaScript action on a hosted runner
  (GITHUB_ACTIONS=true, RUNNER_ENVIRONMENT=github-hosted, RUNNER_OS,
  RUNNER_ARCH, ...) and an INPUT_<NAME> (upper case, hyphens kept) for
  every input action.yml gives a default. No config (so the action
  probes what discovery proposes), no GitHub token (`github-token`'s
  default, `${{ github.token }}`, is left unset, as is GITHUB_TOKEN:
  nothing is published, no check run, comment or upload, and no API is
  asked for the committed config) and no runtime token (no Actions cache
  or artifacts surface). This user's home in /etc/passwd is the
  generated home (a bind mount, in the bench's namespace only), as on a
  hosted runner, where $HOME is the passwd home; TMPDIR is a directory on
  the file system under test. Timed: the whole
  `node dist/index.js`; the shim's share, named in the row: `node -e 0`
  (node's start) and `node -e` reading SHA256SUMS and hashing the binary
  as the shim does (its checksum); and `runwarden action` started
  directly with the same environment. The runner's command files are
  emptied (untimed) before every run, as each step gets its own. No
  floor and no target: it is measured and printed.

Nothing here asserts a speed: it prints figures.
"""

import argparse
import contextlib
import json
import os
import re
import secrets
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


def peak_rss(argv, cwd, env=None) -> int:
    """Peak RSS (KiB) of one run under GNU time: a run of its own, never a
    timed one, since GNU time is a process of its own (a fork, an exec and
    a wait: about 0.8 ms here) that would land on the clock."""
    rss_file = Path(cwd) / ".rss"
    os.sync()
    subprocess.run(
        [GNU_TIME, "-f", "%M", "-o", str(rss_file), *argv],
        cwd=cwd,
        env=env or dict(os.environ, TMPDIR=str(cwd)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # GNU time prefixes "Command exited with non-zero status N" lines.
    return int(rss_file.read_text().split()[-1])


def measure(argv, cwd) -> tuple[float, int, int]:
    """(wall seconds, peak RSS KiB, exit code) of one run: two runs, in
    fact. The wall time is of the tool started directly; the RSS comes
    from a second run under GNU time (peak_rss)."""
    env = dict(os.environ, TMPDIR=str(cwd))
    # Each run starts with no dirty data from the run before (the other
    # tool's plants and cleanup), which would otherwise land on its clock.
    os.sync()
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    return wall, peak_rss(argv, cwd, env), done.returncode


def starts(binary: Path, cwd: Path) -> float:
    """The filesystem rows' floor: three starts of the same binary in
    sequence (`runwarden --version`), timed as one measurement. A probe
    cannot do with fewer processes: the orchestrator, run A and run B."""
    env = dict(os.environ, TMPDIR=str(cwd))
    os.sync()
    start = time.perf_counter()
    for _ in range(3):
        subprocess.run([str(binary), "--version"], cwd=cwd, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def git(*args, cwd=None, input=None):
    """Untimed setup git, blind to this machine's git config."""
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


# The git floor's environment: what runwarden's git.rs gives git (prompts
# off, no system or global config, C locale), and the three settings it
# gives its scratch repositories, here on the command line of the local
# side only (a local transport drops them for the remote's side, which
# keeps git's defaults, as it does under runwarden).
FLOOR_GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "LC_ALL": "C",
                 "GIT_TERMINAL_PROMPT": "0"}
FLOOR_GIT_CFG = ["-c", "maintenance.auto=false", "-c", "gc.auto=0", "-c", "core.fsync=none", "-c", "fetch.unpackLimit=1"]
# Identity for the untimed preparation's commit-tree only.
FLOOR_IDENT = ["-c", "user.name=runwarden", "-c", "user.email=probe@runwarden.invalid"]


def floor_env() -> dict:
    """This environment with git's, as runwarden's git.rs sets it."""
    return dict(os.environ, **FLOOR_GIT_ENV)


def floor_git(cwd: Path, *args, input: bytes | None = None, env: dict | None = None) -> str:
    """One untimed preparation command; its stdout."""
    return subprocess.run(["git", *FLOOR_GIT_CFG, *FLOOR_IDENT, *args], cwd=cwd,
                          env=dict(floor_env(), **(env or {})), input=input,
                          capture_output=True, check=True).stdout.decode().strip()


def git_floor_prepare(tmp: Path, remote: Path) -> list[tuple[Path, list[str]]]:
    """Untimed: a fresh bare repository `a` holding fresh objects (new
    nonces every call, so each push really sends new objects, as
    runwarden's do) for the floor's 11 refs, a fresh empty bare repository
    `b` to fetch into, and the five timed commands, as (cwd, git args)."""
    a, b = tmp / "floor-a.git", tmp / "floor-b.git"
    for d in (a, b):
        shutil.rmtree(d, ignore_errors=True)
        floor_git(tmp, "init", "-q", "--bare", str(d))
    nonce = lambda: secrets.token_hex(16)
    empty_tree = floor_git(a, "mktree", input=b"")

    def commit(message: str, tree: str = empty_tree, env: dict | None = None) -> str:
        return floor_git(a, "commit-tree", tree, "-m", message, env=env)

    def blob(data: bytes) -> str:
        return floor_git(a, "hash-object", "-w", "--stdin", input=data)

    content_tree = floor_git(a, "mktree", input=f"100644 blob {blob(nonce().encode())}\tfile\n".encode())
    path_tree = floor_git(a, "mktree", input=f"100644 blob {blob(b'')}\t{nonce()}\n".encode())
    base = commit("base " + nonce())
    tag = floor_git(a, "mktag", input=(f"object {base}\ntype commit\ntag rw-annotated\n"
                                       f"tagger runwarden <probe@runwarden.invalid> 0 +0000\n\n{nonce()}\n").encode())
    notes_tree = floor_git(a, "mktree", input=f"100644 blob {blob(nonce().encode())}\t{base}\n".encode())
    p = "refs/heads/rw/x"
    # The 7 refs whose content carries the message (fetched back), then
    # the 3 whose name does (read by ls-remote only).
    content = {
        "refs/tags/rw-annotated": tag,
        f"{p}/commit-message": commit(nonce()),
        f"{p}/author-name": commit("a", env={"GIT_AUTHOR_NAME": nonce()}),
        f"{p}/author-email": commit("a", env={"GIT_AUTHOR_EMAIL": nonce() + "@x"}),
        f"{p}/file-content": commit("c", content_tree),
        f"{p}/file-path": commit("p", path_tree),
        "refs/notes/rw": commit("notes", notes_tree),
    }
    named = {
        f"refs/heads/rw/{nonce()}": base,
        f"refs/tags/rw-{nonce()}": base,
        f"refs/rw/{nonce()}": base,
    }
    refs = {**content, **named}
    deleted = commit("deleted " + nonce())
    deleted_ref = f"{p}/deleted"
    url = str(remote)
    push = ["push", "--porcelain", "--no-verify", url]
    return [
        (a, push + [f"{sha}:{ref}" for ref, sha in refs.items()] + [f"{deleted}:{deleted_ref}"]),
        (a, push + [f":{deleted_ref}"]),
        (b, ["ls-remote", url]),
        (b, ["fetch", "--no-tags", "-q", url] + [f"+{ref}:refs/b/{i}" for i, ref in enumerate(content)] + [deleted]),
        (a, push + [f":{ref}" for ref in refs]),
    ]


def git_floor_run(cmds) -> float:
    """The timed part of the git floor: the five commands in sequence, one
    measurement. check=True: a floor that failed would be no floor."""
    env = floor_env()
    os.sync()
    start = time.perf_counter()
    for cwd, argv in cmds:
        subprocess.run(["git", *FLOOR_GIT_CFG, *argv], cwd=cwd, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def traced(argv, cwd, env=None) -> tuple[int, int] | None:
    """(round trips, git processes) of one run, from strace's execve log:
    each git-upload-pack or git-receive-pack started is a contact with the
    remote; every program from git's exec path or named git is a git
    process (the remote's side of a local remote included)."""
    if not shutil.which("strace"):
        return None
    log = Path(cwd) / ".strace"
    env = env or dict(os.environ, TMPDIR=str(cwd))
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
    log.unlink()
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
    """n foreign files in d (one in ten with content): what a probe of a
    shared directory lists past its own plants."""
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
def fresh_fs(kind: str, size_mib: int, inodes: int | None = None):
    """A file system made for one measurement, mounted on a new
    directory: a loop-mounted ext4 image (with at least `inodes` inodes:
    mkfs's default of one per 16 KiB is too few for the big trees), or a
    tmpfs."""
    top = Path(tempfile.mkdtemp(prefix="rw-bench-", dir="/var/tmp"))
    mnt = top / "mnt"
    mnt.mkdir()
    try:
        if kind == "ext4":
            img = top / "fs.img"
            with open(img, "wb") as f:
                f.truncate(size_mib << 20)
            extra = ["-N", str(inodes)] if inodes else []
            subprocess.run(["mkfs.ext4", "-q", "-F", *extra, str(img)], check=True)
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
    # Medians: one slow run (a flush, another process) does not move them.
    return statistics.median(xs) * 1000


def wall(argv, cwd, env=None) -> float:
    """Wall seconds of one run, after an os.sync() (as measure()), for the
    commands whose RSS is not wanted: warm-ups and floors."""
    os.sync()
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env or dict(os.environ, TMPDIR=str(cwd)),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


class Row:
    """One measurement: what was measured, on which file system, runwarden's
    figure, its floor measured in the same run, the target (a ratio to the
    floor, or a cap on the figure itself), 0.1.0's figure (history), and
    what else is worth printing. `unit` is "ms" for times, "MiB" for the
    peak-RSS row."""

    def __init__(self, what, fs, ours, floor=None, target=None, ref=None, also="", note="",
                 unit="ms", cap=None):
        self.what, self.fs, self.ours, self.floor = what, fs, ours, floor
        self.target, self.ref, self.also, self.note = target, ref, also, note
        self.unit, self.cap = unit, cap

    def key(self) -> tuple[str, str]:
        return self.what, self.fs

    def ratio(self) -> float | None:
        return self.ours / self.floor if self.floor else None

    def within(self) -> bool | None:
        """True or False against the target; None when the row has none."""
        if self.cap is not None:
            return self.ours < self.cap
        if self.target is not None and self.ratio() is not None:
            return self.ratio() <= self.target
        return None

    def cells(self) -> list[str]:
        """The table's cells, in the order of HEADINGS."""
        fmt = lambda v: f"{v:.1f} {self.unit}"
        ratio = self.ratio()
        if self.cap is not None:
            target = f"< {self.cap} {self.unit}"
        elif self.target is not None:
            target = f"{self.target:g}x"
        else:
            target = "n/a"
        within = {True: "yes", False: "**no**", None: "n/a"}[self.within()]
        return [
            self.what,
            self.fs,
            fmt(self.ours),
            fmt(self.floor) if self.floor else "n/a",
            f"{ratio:.2f}x" if ratio is not None else "n/a",
            target,
            within,
            f"{self.ref:.1f} ms" if self.ref else "n/a",
            self.also,
        ]

    def line(self) -> str:
        c = self.cells()
        return (f"{c[0]:<34} {c[1]:<6} {c[2]:>10} {c[3]:>10} {c[4]:>7} {c[5]:>10} {c[6]:>6}"
                f" {c[7]:>10}  {c[8]}").rstrip()


HEADINGS = ["measurement", "fs", "runwarden", "floor", "ratio", "target", "within",
            "runwarden 0.1.0", "also"]


def filesystem_target(n: int) -> float:
    """Issue 45's targets: 2.5x three starts for an empty directory, 3x for
    one of foreign entries (400 in the issue; the same for other sizes)."""
    return 2.5 if n == 0 else 3.0


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
    # runwarden 0.1.0 probes local remotes only ("must be a local path"),
    # and the git floor is of a local remote too.
    local = not (surface == "git" and args.transport == "http")
    # The floor: three starts of the binary (filesystem), or the git CLI
    # making the same updates and reads (git), prepared afresh (untimed)
    # before each timed run.
    if surface == "filesystem":
        floor_once = lambda: starts(ours, tmp)
    elif local:
        floor_once = lambda: git_floor_run(git_floor_prepare(tmp, target))
    else:
        floor_once = None
    # Warm-up, unmeasured: every command once (the git floor's with
    # check=True, so a failing floor stops the bench here).
    wall(ours_argv, tmp)
    if local:
        wall(ref_argv, tmp)
    if floor_once:
        floor_once()
    o, f, r = [], [], []
    for _ in range(args.runs):
        o.append(measure(ours_argv, tmp))
        if floor_once:
            f.append(floor_once())
        if local:
            r.append(measure(ref_argv, tmp))
    for name, runs in (("runwarden", o), ("runwarden 0.1.0", r)):
        codes = {c for _, _, c in runs}
        if runs and codes != {1}:
            print(f"warning: {name} exited {codes}, expected 1 (open channels)", file=sys.stderr)
    ow = median_ms(w for w, _, _ in o)
    fw = median_ms(f) if f else None
    rw = median_ms(w for w, _, _ in r) if r else None
    orss = statistics.median(m for _, m, _ in o)
    also = f"RSS {orss / 1024:.1f} MiB"
    if r:
        also += f" (0.1.0: {statistics.median(m for _, m, _ in r) / 1024:.1f} MiB)"
    note = ""
    what = f"{surface}, {n} {'entries' if surface == 'filesystem' else 'refs'}"
    if surface == "filesystem":
        target_ratio = filesystem_target(n)
        also = f"floor: 3 starts of `runwarden --version`; {also}"
        if n > 500:
            note = "0.1.0 lists only 500 entries"
    else:
        target_ratio = 1.3
        # Counted over three untimed runs each, shown as a range when they
        # differ: how many times git contacts the remote varies from run
        # to run with the same commands.
        counts = lambda f: [f() for _ in range(3)]
        cmds = (span(counts(lambda: git_processes(ours_argv, tmp))),
                span(counts(lambda: git_processes(ref_argv, tmp))) if local else None)
        if server is None:
            t = [counts(lambda: traced(argv, tmp)) for argv in (ours_argv, ref_argv)]
            fl = counts(lambda: floor_counts(tmp, target))
            if all(all(x) for x in t) and all(fl):
                trips = [span(x[0] for x in t[0]), span(x[0] for x in t[1]), span(x[1] for x in fl)]
                procs = [span(x[1] for x in t[0]), span(x[1] for x in t[1]), span(x[2] for x in fl)]
                also = (f"round trips {trips[0]} (0.1.0: {trips[1]}, floor: {trips[2]});"
                        f" git commands {cmds[0]} (0.1.0: {cmds[1]}, floor: {fl[0][0]});"
                        f" git processes {procs[0]} (0.1.0: {procs[1]}, floor: {procs[2]}); {also}")
        else:
            before = server.requests
            wall(ours_argv, tmp)
            also = f"HTTP requests {server.requests - before}; git commands {cmds[0]}; {also}"
            server.close()
            what += " over HTTP"
            target_ratio = None
            note = "over HTTP: no floor measured (the floor is of a local remote)"
        note = note or "runwarden: 12 carriers and its control; 0.1.0: 5 carriers"
    return Row(what, fs, ow, fw, target_ratio, rw, also, note)


def span(xs) -> str:
    """Counts from several runs: one number, or their range."""
    xs = list(xs)
    return f"{min(xs)}" if min(xs) == max(xs) else f"{min(xs)}-{max(xs)}"


def floor_counts(tmp: Path, remote: Path) -> tuple[int, int, int] | None:
    """(commands, round trips, git processes) of one git floor, its five
    commands traced one by one as runwarden's runs are (untimed)."""
    cmds = git_floor_prepare(tmp, remote)
    trips = procs = 0
    for cwd, argv in cmds:
        t = traced(["git", *FLOOR_GIT_CFG, *argv], cwd, floor_env())
        if t is None:
            return None
        trips, procs = trips + t[0], procs + t[1]
    return len(cmds), trips, procs


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
    for cmd in floor.values():
        wall(cmd, mnt)
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
    # Peak RSS from a run of its own, under GNU time (unmeasured).
    rss = peak_rss(argv, mnt)
    parts = {k: median_ms(v) for k, v in times.items()}
    total = sum(parts.values())
    shown = ", ".join(f"{k} {v:.0f} ms" for k, v in parts.items())
    return [Row(f"watch, {args.watch_entries} entries", fs, median_ms(w), total, 1.1, None,
                f"floor: {shown}; peak RSS {rss / 1024:.1f} MiB", "two snapshots and their diff")]


def watch_big_row(args, ours, fs, mnt) -> Row:
    """`--watch-big`: a 1,000,000-entry tree, only the watch's peak RSS
    (one run under GNU time), against the 64 MiB cap: a watch's memory
    must not grow with the tree."""
    n = 1_000_000
    root = mnt / "tree"
    tree(root, n)
    (mnt / "rw.yml").write_text(
        f"version: 1\nsurfaces:\n  - name: tree\n    type: filesystem\n    path: {json.dumps(str(root))}\n")
    time.sleep(3)
    argv = [str(ours), "watch", "--config", "rw.yml", "--report", "watch.json", "--", "true"]
    start = time.perf_counter()
    rss = peak_rss(argv, mnt)
    took = time.perf_counter() - start
    return Row(f"watch, {n} entries: peak RSS", fs, rss / 1024, None, None, None,
               f"one run under GNU time, {took:.1f} s", unit="MiB", cap=64)


def spread(root: Path, entries: int, per_dir: int, fanout: int, prefix: str = "f",
           count_dirs: bool = True) -> int:
    """Fills `root` with `entries` entries (files and the directories that
    hold them, unless count_dirs is false: then `entries` files) in a
    tree two levels deep: `fanout` directories each holding `fanout`
    directories of `per_dir` files, one file in ten with content. Returns
    the entries made."""
    made = 0
    root.mkdir(parents=True, exist_ok=True)
    i = 0
    while made < entries:
        top = root / f"{prefix}{i // fanout:03d}"
        if i % fanout == 0:
            top.mkdir(exist_ok=True)
            made += count_dirs
        sub = top / f"{prefix}{i % fanout:03d}"
        sub.mkdir(exist_ok=True)
        made += count_dirs
        for f in range(min(per_dir, entries - made)):
            fd = os.open(sub / f"{prefix}{f:04d}.dat", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            if f % 10 == 0:
                os.write(fd, f"{prefix} {i} {f}\n".encode() * 16)
            os.close(fd)
            made += 1
        i += 1
    return made


# The runner's file commands and what each variable names, as the runner
# lays them out under RUNNER_TEMP.
RUNNER_FILES = {
    "GITHUB_OUTPUT": "set_output",
    "GITHUB_STEP_SUMMARY": "step_summary",
    "GITHUB_ENV": "set_env",
    "GITHUB_PATH": "add_path",
    "GITHUB_STATE": "save_state",
}


def runner_tree(mnt: Path) -> dict:
    """Untimed, once per file system: a tree shaped like a GitHub-hosted
    runner's (/home/runner, /opt/hostedtoolcache), and the environment a
    runner gives a JavaScript action on it. Returns the environment's
    runner variables and the paths the row needs."""
    home = mnt / "home" / "runner"
    work = home / "work"
    workspace = work / "repo" / "repo"
    temp = work / "_temp"
    tools = mnt / "opt" / "hostedtoolcache"
    # The home: 50,000 entries, dotfiles and the package caches discovery
    # proposes (cargo's registry, npm's cache, pip's cache), beside the
    # runner's work directory (not counted: it is the workspace's).
    home.mkdir(parents=True)
    for dotfile in (".bashrc", ".profile", ".bash_logout", ".gitconfig", ".wget-hsts", ".sudo_as_admin_successful"):
        (home / dotfile).write_text("# generated\n")
    # The dotfiles, and the directories above each spread's root
    # (.cargo, .cargo/registry, .npm, .npm/_cacache, .cache, .cache/pip,
    # .local, .local/share).
    made = 6 + 8
    made += spread(home / ".cargo" / "registry", 20_000, 100, 16, "crate")
    made += spread(home / ".npm" / "_cacache", 15_000, 60, 16, "cache")
    made += spread(home / ".cache" / "pip", 8_000, 50, 12, "wheel")
    spread(home / ".local" / "share", 50_000 - made, 40, 12, "share")
    # The workspace: a checkout of 30,000 files in a few hundred
    # directories, committed, its origin a bare repository on the same
    # file system, the push credential left in its config as
    # actions/checkout's persist-credentials leaves it (so discovery
    # proposes origin live, as on a hosted runner).
    spread(workspace / "src", 30_000, 100, 18, "mod", count_dirs=False)
    origin = mnt / "origin" / "repo.git"
    env = dict(floor_env(), GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@b", GIT_COMMITTER_NAME="a",
               GIT_COMMITTER_EMAIL="a@b")
    for argv, cwd in (
        (["init", "-q", "--bare", str(origin)], mnt),
        (["init", "-q", "-b", "main"], workspace),
        (["add", "-A"], workspace),
        (["commit", "-q", "-m", "generated"], workspace),
        (["remote", "add", "origin", str(origin)], workspace),
        (["config", "http.https://github.com/.extraheader", "AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Ym9ndXM="], workspace),
        (["push", "-q", "origin", "main"], workspace),
    ):
        subprocess.run(["git", *argv], cwd=cwd, env=env, check=True, capture_output=True)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=workspace, env=env, check=True,
                         capture_output=True, text=True).stdout.strip()
    # The tool cache: 200,000 entries in tool/version/x64 trees, each with
    # its x64.complete marker, as /opt/hostedtoolcache holds them.
    versions = [("node", v) for v in ("18.20.8", "20.19.5", "22.20.0")] + \
               [("Python", v) for v in ("3.9.23", "3.10.18", "3.11.13", "3.12.11", "3.13.7")] + \
               [("go", v) for v in ("1.22.12", "1.23.12", "1.24.7")] + \
               [("Ruby", v) for v in ("3.2.9", "3.3.9")] + [("PyPy", "3.10.16"), ("CodeQL", "2.23.1")]
    tools.mkdir(parents=True)
    made = 0
    for k, (tool, version) in enumerate(versions):
        d = tools / tool / version
        made += (not (tools / tool).exists()) + 1 + 1  # tool, version, x64.complete
        d.mkdir(parents=True, exist_ok=True)
        (tools / tool / f"{version}" / "x64.complete").touch()
        share = (200_000 - 3 * len(versions)) // len(versions) if k < len(versions) - 1 else 200_000 - made - 1
        made += 1 + spread(d / "x64", share, 80, 14, "lib")
    # RUNNER_TEMP: the runner's command files (empty), the event payload.
    commands = temp / "_runner_file_commands"
    commands.mkdir(parents=True)
    files = {var: commands / f"{name}_{secrets.token_hex(8)}" for var, name in RUNNER_FILES.items()}
    for f in files.values():
        f.touch()
    event = work / "_temp" / "_github_workflow" / "event.json"
    event.parent.mkdir(parents=True)
    event.write_text(json.dumps({"ref": "refs/heads/main", "after": sha, "before": "0" * 40,
                                 "repository": {"full_name": "octo/repo", "fork": False,
                                                "default_branch": "main"},
                                 "sender": {"login": "octocat", "type": "User"}}))
    tmpdir = mnt / "tmp"
    tmpdir.mkdir(mode=0o1777)
    runner_env = {
        "CI": "true",
        "GITHUB_ACTIONS": "true",
        "RUNNER_ENVIRONMENT": "github-hosted",
        "RUNNER_OS": "Linux",
        "RUNNER_ARCH": "X64",
        "RUNNER_NAME": "GitHub Actions 1000000001",
        "RUNNER_TEMP": str(temp),
        "RUNNER_TOOL_CACHE": str(tools),
        "RUNNER_WORKSPACE": str(work / "repo"),
        "AGENT_TOOLSDIRECTORY": str(tools),
        "ImageOS": "ubuntu24",
        "HOME": str(home),
        "TMPDIR": str(tmpdir),
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_EVENT_NAME": "push",
        "GITHUB_REPOSITORY": "octo/repo",
        "GITHUB_REPOSITORY_OWNER": "octo",
        "GITHUB_REPOSITORY_ID": "1",
        "GITHUB_SHA": sha,
        "GITHUB_REF": "refs/heads/main",
        "GITHUB_REF_NAME": "main",
        "GITHUB_REF_TYPE": "branch",
        "GITHUB_RUN_ID": "4242",
        "GITHUB_RUN_NUMBER": "1",
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_JOB": "bench",
        "GITHUB_WORKFLOW": "ci",
        "GITHUB_WORKFLOW_REF": "octo/repo/.github/workflows/ci.yml@refs/heads/main",
        "GITHUB_WORKFLOW_SHA": sha,
        "GITHUB_ACTOR": "octocat",
        "GITHUB_TRIGGERING_ACTOR": "octocat",
        "GITHUB_ACTION": "__runwarden_runwarden",
        "GITHUB_ACTION_REPOSITORY": "runwarden/runwarden",
        "GITHUB_ACTION_REF": "v1",
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_API_URL": "https://api.github.com",
        "GITHUB_GRAPHQL_URL": "https://api.github.com/graphql",
        "GITHUB_RETENTION_DAYS": "90",
        **{var: str(f) for var, f in files.items()},
    }
    return {"env": runner_env, "home": home, "workspace": workspace, "files": list(files.values()),
            "actions": work / "_actions" / "runwarden" / "runwarden" / "v1"}


def action_inputs() -> dict:
    """INPUT_<NAME> for every input action.yml gives a default, as the
    runner names them (upper case, spaces to `_`, hyphens kept) and with
    what it would give, except `${{ github.token }}`, the job's token,
    which this bench does not have: `github-token` is left unset. (An input
    with no default is left unset too, where the runner sets it empty: the
    shim and `runwarden action` read both as absent.)"""
    inputs, name = {}, None
    in_inputs = False
    for line in (ROOT / "action.yml").read_text().splitlines():
        if re.match(r"^\S", line):
            in_inputs = line.startswith("inputs:")
            continue
        if not in_inputs:
            continue
        m = re.match(r"^  ([A-Za-z0-9_-]+):\s*$", line)
        if m:
            name = m.group(1)
            continue
        m = re.match(r"^    default:\s*(.*)$", line)
        if m and name:
            v = m.group(1).strip()
            if v.startswith('"'):
                v = json.loads(v)
            elif v.startswith("'"):
                v = v[1:-1].replace("''", "'")
            if "${{" in v:
                # An expression the runner evaluates (`${{ github.token }}`):
                # the bench has no value for it, so it is not set. (Set
                # but empty, runwarden 0.x takes INPUT_GITHUB-TOKEN for a
                # token when it looks for a committed config, and asks the
                # API with it.)
                continue
            inputs[f"INPUT_{name.upper().replace(' ', '_')}"] = v
    return inputs


def action_copy(ours: Path, where: Path) -> Path:
    """The action as the runner downloads it (action.yml and dist/), with
    the fresh build as dist/x86_64-linux/runwarden and SHA256SUMS
    regenerated for it, so the shim's checksum check passes for real."""
    where.mkdir(parents=True)
    shutil.copy(ROOT / "action.yml", where / "action.yml")
    shutil.copytree(ROOT / "dist", where / "dist")
    binary = where / "dist" / "x86_64-linux" / "runwarden"
    shutil.copy(ours, binary)
    sums = subprocess.run(["sha256sum", "x86_64-linux/runwarden"], cwd=where / "dist", check=True,
                          capture_output=True, text=True).stdout
    (where / "dist" / "SHA256SUMS").write_text(sums)
    return where


# What the shim does before it spawns the binary: read SHA256SUMS, hash the
# binary, compare (node's start is timed apart, with `node -e 0`).
CHECKSUM_JS = (
    'const fs=require("fs"),path=require("path"),crypto=require("crypto");'
    'const d=process.argv[1];'
    'const sums=fs.readFileSync(path.join(d,"SHA256SUMS"),"utf8");'
    'const h=crypto.createHash("sha256").update(fs.readFileSync(path.join(d,"x86_64-linux/runwarden"))).digest("hex");'
    'if(!sums.split("\\n").some(l=>l.startsWith(h+" ")))process.exit(3);'
)


@contextlib.contextmanager
def passwd_home(home: Path, mnt: Path):
    """This user's home in /etc/passwd made the generated home, by a bind
    mount over /etc/passwd in the bench's own mount namespace: on a hosted
    runner $HOME is the passwd home, so discovery proposes no
    `passwd-home` (which here would be /root, on another disk)."""
    uid = str(os.geteuid())
    lines = []
    for line in Path("/etc/passwd").read_text().splitlines():
        f = line.split(":")
        if len(f) >= 7 and f[2] == uid:
            f[5] = str(home)
        lines.append(":".join(f))
    copy = mnt / "passwd"
    copy.write_text("\n".join(lines) + "\n")
    subprocess.run(["mount", "--bind", str(copy), "/etc/passwd"], check=True)
    try:
        yield
    finally:
        subprocess.run(["umount", "/etc/passwd"], check=True)


def action_env(rt: dict) -> dict:
    """The environment of the action's step: this machine's (PATH, ...)
    without any runner, input or runwarden variable of its own, then the
    runner's and the inputs."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "RUNNER_", "ACTIONS_", "INPUT_", "RUNWARDEN_", "SUDO_"))
           and k not in ("CI", "TMPDIR", "HOME", "GH_TOKEN")}
    env.update(rt["env"])
    env.update(action_inputs())
    return env


def action_row(args, ours, fs, mnt) -> Row:
    start = time.perf_counter()
    rt = runner_tree(mnt)
    generated = time.perf_counter() - start
    action = action_copy(ours, rt["actions"])
    env = action_env(rt)
    ws = rt["workspace"]
    dist = action / "dist"
    whole = ["node", str(dist / "index.js")]
    direct = [str(dist / "x86_64-linux" / "runwarden"), "action"]
    checksum = ["node", "-e", CHECKSUM_JS, str(dist)]
    bare = ["node", "-e", "0"]

    def fresh_files():
        # Each step gets its own command files (the runner's are per step).
        for f in rt["files"]:
            f.write_bytes(b"")

    def timed(argv) -> tuple[float, int]:
        fresh_files()
        os.sync()
        t = time.perf_counter()
        done = subprocess.run(argv, cwd=ws, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - t, done.returncode

    with passwd_home(rt["home"], mnt):
        # Once by hand (the warm-up): its output, exit code and report are
        # what the note and the checks read.
        fresh_files()
        first = subprocess.run(whole, cwd=ws, env=env, capture_output=True, text=True)
        (mnt / "action-first.out").write_text(first.stdout + first.stderr)
        report = json.loads((ws / "runwarden-report.json").read_text())
        found = action_findings(report, first)
        outputs = Path(env["GITHUB_OUTPUT"]).read_text()
        if "fail-count<<" not in outputs or not Path(env["GITHUB_STEP_SUMMARY"]).read_text():
            print("warning: the action wrote no outputs or no job summary", file=sys.stderr)
        if subprocess.run(checksum, env=env).returncode != 0:
            print("warning: the checksum script did not match SHA256SUMS", file=sys.stderr)
        timed(direct), timed(checksum), timed(bare)
        t = {"whole": [], "direct": [], "checksum": [], "bare": []}
        codes = set()
        for _ in range(args.runs):
            for k, argv in (("whole", whole), ("direct", direct), ("checksum", checksum), ("bare", bare)):
                w, c = timed(argv)
                t[k].append(w)
                if k in ("whole", "direct"):
                    codes.add(c)
    if codes != {first.returncode}:
        print(f"warning: the action exited {codes}, its first run {first.returncode}", file=sys.stderr)
    m = {k: median_ms(v) for k, v in t.items()}
    shim = m["checksum"]
    also = (f"shim {shim:.0f} ms (node start {m['bare']:.0f}, checksum {shim - m['bare']:.0f});"
            f" `runwarden action` alone {m['direct']:.0f} ms; {found['summary']}; exit {first.returncode}")
    note = (f"no GitHub token: nothing published; runner tree generated in {generated:.0f} s"
            f" (untimed)")
    row = Row("action end to end", fs, m["whole"], None, None, None, also, note)
    row.details = found
    return row


def action_findings(report: dict, first) -> dict:
    """What the action's first run found, for the note and the report:
    the surfaces it probed (each with its verdict counts), what discovery
    left out, what cleanup left behind, and anything odd (ERROR verdicts,
    ::error lines that are not findings, stderr lines)."""
    per = {}
    errors = []
    for f in report.get("findings", []):
        name = f"{f.get('surface')} ({f.get('surface_type')})"
        v = f.get("verdict", "?")
        per.setdefault(name, {}).setdefault(v, 0)
        per[name][v] += 1
        if v == "error":
            errors.append(f"ERROR {f.get('channel')}: {f.get('detail', '')}"[:300])
    surfaces = "; ".join(f"{n}: " + ", ".join(f"{c} {v}" for v, c in sorted(vs.items()))
                         for n, vs in per.items())
    s = report.get("summary", {})
    counts = ", ".join(f"{v} {k}" for k, v in s.items() if isinstance(v, int) and v)
    discovered = (report.get("config") or {}).get("discovered") or {}
    left = (report.get("cleanup") or {}).get("left") or []
    odd = [l for l in first.stdout.splitlines()
           if l.startswith("::error") and "Undeclared channel" not in l]
    odd += [l for l in first.stderr.splitlines() if re.search(r"warning|error", l, re.I)]
    return {
        "surfaces": surfaces or "none",
        "count": len(per),
        "summary": f"{len(per)} surfaces probed ({counts})",
        "runner": discovered.get("runner", "?"),
        "skipped": discovered.get("skipped", []),
        "left": left,
        "errors": errors + odd,
    }


def markdown(rows: list[Row]) -> str:
    """The README's speed table, then one line per kind of row saying what
    its figures are not (each once)."""
    out = ["| " + " | ".join(HEADINGS) + " |", "|" + " --- |" * len(HEADINGS)]
    for r in rows:
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in r.cells()) + " |")
    notes = {}
    for r in rows:
        kind = r.what.split(",")[0]
        if r.what.startswith("action"):
            notes.setdefault(r.what, (
                "`node dist/index.js` as a hosted runner runs it, on a generated runner-shaped tree"
                " (a 30,000-file checkout, a 200,000-entry tool cache, a 50,000-entry home), probing what"
                " discovery proposes; no GitHub token, so nothing is published and no API is asked;"
                " no floor and no target: measured, with the shim's share named"))
        elif r.note and kind not in notes:
            notes[kind] = r.note
    if notes:
        out.append("")
        out.extend(f"- {kind}: {note}" for kind, note in notes.items())
    return "\n".join(out)


def verdict(rows: list[Row]) -> str:
    judged = [r for r in rows if r.within() is not None]
    within = [r for r in judged if r.within()]
    missed = "; ".join(f"{r.what} ({r.fs})" for r in judged if not r.within())
    unjudged = len(rows) - len(judged)
    return (f"verdict: {len(within)} of {len(judged)} rows within target"
            + (f" (not within: {missed})" if missed else "")
            + (f"; {unjudged} rows without a target" if unjudged else ""))


def bench_once(args, ours, ref, surfaces) -> list[Row]:
    """One whole bench: every row on every file system, each on a file
    system made for it."""
    rows = []
    for fs in args.fs.split(","):
        for surface in surfaces:
            if surface == "watch":
                with fresh_fs(fs, 4096) as mnt:
                    rows.extend(watch_rows(args, ours, fs, mnt))
                print(rows[-1].line(), flush=True)
                if args.watch_big:
                    with fresh_fs(fs, 4096, inodes=1_100_000) as mnt:
                        rows.append(watch_big_row(args, ours, fs, mnt))
                    print(rows[-1].line(), flush=True)
                continue
            if surface == "action":
                # ~300,000 entries and a checkout: more inodes than mkfs's
                # default gives 4 GiB.
                with fresh_fs(fs, 4096, inodes=600_000) as mnt:
                    rows.append(action_row(args, ours, fs, mnt))
                print(rows[-1].line(), flush=True)
                d = rows[-1].details
                print(f"  discovery ({d['runner']} runner) probed {d['surfaces']}", flush=True)
                for what, items in (("skipped", d["skipped"]), ("left after cleanup", d["left"]),
                                    ("odd", d["errors"])):
                    for item in items:
                        print(f"  {what}: {item}", flush=True)
                continue
            sizes = args.sizes or ("0,400" if surface == "filesystem" else "50")
            for n in [int(x) for x in sizes.split(",")]:
                with fresh_fs(fs, 1024) as mnt:
                    rows.append(probe_row(args, ours, ref, surface, n, fs, mnt))
                print(rows[-1].line(), flush=True)
    return rows


def in_own_namespace() -> None:
    """Re-executes the bench in a mount namespace of its own (once): its
    mounts (the file systems, the /etc/passwd of the action row) are never
    seen outside and go with it if it dies."""
    if os.environ.get("RUNWARDEN_BENCH_NS") == "1":
        return
    if not shutil.which("unshare"):
        sys.exit("needs unshare (util-linux): the bench mounts in a namespace of its own")
    os.environ["RUNWARDEN_BENCH_NS"] = "1"
    os.execvp("unshare", ["unshare", "--mount", "--propagation", "private", "--",
                          sys.executable, str(Path(__file__).resolve()), *sys.argv[1:]])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--surface", choices=["all", "filesystem", "git", "watch", "action"], default="all")
    ap.add_argument("--fs", default="ext4,tmpfs")
    ap.add_argument("--transport", choices=["local", "http"], default="local")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--repeat", type=int, default=1,
                    help="run the whole bench N times in a row and print each row's ratio in each")
    ap.add_argument("--sizes", default=None)
    ap.add_argument("--watch-entries", type=int, default=200_000)
    ap.add_argument("--watch-big", action="store_true",
                    help="also a 1,000,000-entry watch: its peak RSS against a 64 MiB cap")
    args = ap.parse_args()
    if args.runs < 7:
        print("--runs must be at least 7 (medians of fewer runs move too much)", file=sys.stderr)
        return 2
    if args.repeat < 1:
        print("--repeat must be at least 1", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("needs root: each measurement mounts a file system of its own", file=sys.stderr)
        return 2
    if not os.access(GNU_TIME, os.X_OK):
        print("needs GNU time: apt-get install time", file=sys.stderr)
        return 2
    surfaces = ["filesystem", "git", "watch", "action"] if args.surface == "all" else [args.surface]
    if "watch" in surfaces and not shutil.which("getfattr"):
        print("the watch floor needs getfattr: apt-get install attr", file=sys.stderr)
        return 2
    if "action" in surfaces and not shutil.which("node"):
        print("the action row needs node (the runner runs the shim with it)", file=sys.stderr)
        return 2
    in_own_namespace()
    ours = build()
    ref = ensure_reference()
    version = subprocess.run([str(ours), "--version"], capture_output=True, text=True).stdout.strip()
    true = [wall(["/bin/true"], "/") for _ in range(args.runs)]
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip() \
        if shutil.which("node") else "no node"
    print(f"{version} (static release build) against the floor of the tools, measured in the same run;"
          f" {REFERENCE} as history; {args.runs} runs each, alternating, medians; node {node};"
          f" starting /bin/true from here takes {median_ms(true):.1f} ms; load average"
          f" {os.getloadavg()[0]:.2f} (other heavy work on the machine moves every figure)", flush=True)
    print(f"{'measurement':<34} {'fs':<6} {'runwarden':>10} {'floor':>10} {'ratio':>7} {'target':>10}"
          f" {'within':>6} {'0.1.0':>10}  also", flush=True)
    reps = []
    for i in range(args.repeat):
        if args.repeat > 1:
            print(f"-- repetition {i + 1} of {args.repeat}", flush=True)
        reps.append(bench_once(args, ours, ref, surfaces))
        print(f"{verdict(reps[-1])}; load average {os.getloadavg()[0]:.2f}", flush=True)
    if args.repeat > 1:
        print()
        print(f"per row, over {args.repeat} repetitions (ratio to floor, or the figure for a cap):")
        for row in reps[-1]:
            same = [next(r for r in rows if r.key() == row.key()) for rows in reps]
            if row.cap is not None:
                shown = ", ".join(f"{r.ours:.1f} {r.unit}" for r in same)
            elif row.ratio() is not None:
                shown = ", ".join(f"{r.ratio():.2f}x" for r in same)
            else:
                shown = ", ".join(f"{r.ours:.0f} {r.unit}" for r in same)
            judged = [r.within() for r in same]
            every = "n/a" if row.within() is None else ("yes" if all(judged) else "no")
            print(f"  {row.what:<34} {row.fs:<6} {shown}  within every time: {every}")
        rows_ok = sum(1 for row in reps[-1] if row.within() is not None and all(
            next(r for r in rows if r.key() == row.key()).within() for rows in reps))
        judged = sum(1 for row in reps[-1] if row.within() is not None)
        print(f"within target in all {args.repeat} repetitions: {rows_ok} of {judged} rows")
    print()
    print(markdown(reps[-1]))
    print()
    print(verdict(reps[-1]) + (f" (last of {args.repeat} repetitions)" if args.repeat > 1 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

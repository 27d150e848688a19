#!/usr/bin/env python3
"""Benchmark: the same probe with this runwarden and with the reference
tool (PyPI runwarden==0.1.0), printing the ratio of median wall times and of
peak RSS.

Usage: python3 bench/compare.py [--surface filesystem|git] [--runs N] [--sizes 0,400,10000]

`--surface filesystem` (default) probes a directory holding N foreign files;
`--surface git` probes a local bare remote holding N foreign refs, and also
prints each tool's round trips: the number of times it made git contact the
remote (each starts a git-upload-pack or git-receive-pack on the remote
side), counted once per tool with strace.

It builds the release binary, installs the reference into bench/.venv (once),
and for each size makes a directory holding that many foreign files (one in
ten with content), then probes it with both tools N times each, alternating.
Peak RSS is the largest resident set of the probe's process tree as GNU
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


def build() -> Path:
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    return ROOT / "target" / "release" / "runwarden"


GNU_TIME = "/usr/bin/time"
BASE = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def measure(argv, cwd) -> tuple[float, int, int]:
    """(wall seconds, peak RSS KiB, exit code) of one run."""
    rss_file = Path(cwd) / ".rss"
    env = dict(os.environ, TMPDIR=str(cwd))
    # Each run starts with no dirty data from the run before (the other
    # tool's plants and cleanup), which would otherwise land on its clock.
    os.sync()
    start = time.perf_counter()
    done = subprocess.run(
        [GNU_TIME, "-f", "%M", "-o", str(rss_file), *argv],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - start
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
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--sizes", default=None)
    args = ap.parse_args()
    sizes = args.sizes or ("0,400,10000" if args.surface == "filesystem" else "0,1000,10000")
    if not os.access(GNU_TIME, os.X_OK):
        print("needs GNU time: apt-get install time", file=sys.stderr)
        return 2
    ours = build()
    ref = ensure_reference()
    version = subprocess.run([str(ours), "--version"], capture_output=True, text=True).stdout.strip()
    where = BASE or tempfile.gettempdir()
    what = "entries" if args.surface == "filesystem" else "refs"
    print(f"{args.surface} surface: {version} (release build) vs reference {REFERENCE}; {args.runs} runs each, medians, in {where}")
    header = f"{what:>8}  {'ours ms':>8}  {'ref ms':>8}  {'speed-up':>8}  {'ours RSS':>9}  {'ref RSS':>9}  {'RSS ratio':>9}"
    if args.surface == "git":
        header += "  round trips (ours/ref)"
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
                ours_surface = f"    type: git-remote\n    remote: {json.dumps(str(target))}\n"
                ref_surface = {"name": "shared", "type": "git_remote", "params": {"remote": str(target)}}
            (tmp / "ours.yml").write_text(f"version: 1\nsurfaces:\n  - name: shared\n{ours_surface}")
            (tmp / "ref.json").write_text(json.dumps({"surfaces": [ref_surface], "declared": []}))
            ours_argv = [str(ours), "probe", "--config", "ours.yml", "--report", "ours-report.json"]
            ref_argv = [str(ref), "probe", "--config", "ref.json", "--report", "ref-report.json"]
            o, r = [], []
            for _ in range(args.runs):
                o.append(measure(ours_argv, tmp))
                r.append(measure(ref_argv, tmp))
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
                trips = (round_trips(ours_argv, tmp), round_trips(ref_argv, tmp))
                row += f"  {trips[0]}/{trips[1]}".ljust(25)
                note = "ours: 12 carriers + control remote; ref: 5 carriers"
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

#!/usr/bin/env python3
"""The surface contract's figures at a git revision (default: the work tree).

What a surface type costs to write and where its untyped and refusal code
sits, measured the same way at any revision so that two can be compared
(`scripts/surface-figures.py d1ae77c` against `scripts/surface-figures.py`):

- methods: `fn`s in the type's folder inside impls of the kernel's traits
  (any `pub trait` of src/surface/*.rs);
- from_value: `serde_json::from_value(` calls, code before `#[cfg(test)]`;
- key reads: `["key"]` and `.get("key")` reads of JSON;
- json!: `json!` builds;
- 401/403: those literals outside comments (where HTTP refusals are
  decided, or described to the classifier);
- lines: every line of the type's folder.

Totals count src/surface's folders; `kernel` is src/surface/*.rs.
"""

import re
import subprocess
import sys


def files(rev):
    """(path, text) of every .rs file under src/surface (and src/github,
    src/http for the refusal count) at `rev`, or in the work tree."""
    roots = ["src/surface", "src/github", "src/github.rs", "src/http", "src/http.rs"]
    if rev is None:
        out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", *roots],
                             capture_output=True, text=True, check=True).stdout.split()
        return [(p, open(p, errors="replace").read()) for p in out if p.endswith(".rs")]
    out = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, *roots],
                         capture_output=True, text=True, check=True).stdout.split()
    return [(p, subprocess.run(["git", "show", f"{rev}:{p}"], capture_output=True,
                               text=True, check=True).stdout)
            for p in out if p.endswith(".rs")]


def code(text):
    """The text before its tests, without line comments."""
    text = re.split(r"#\[cfg\(test\)\]\s*mod\s+tests", text)[0]
    return "\n".join(re.sub(r"^\s*//.*$", "", line) for line in text.splitlines())


def unquoted(text):
    """`text` with its character and string literals emptied (a brace in
    one is none)."""
    text = re.sub(r"'(\\.|[^'\\])'", "' '", text)
    text = re.sub(r'r#+"(.|\n)*?"#+', '""', text)
    return re.sub(r'"(\\.|[^"\\])*"', '""', text, flags=re.S)


def block(text, i):
    depth, j = 1, i
    while j < len(text) and depth:
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        j += 1
    return text[i:j - 1]


def main():
    rev = sys.argv[1] if len(sys.argv) > 1 else None
    fs = files(rev)
    traits = set()
    for p, t in fs:
        if re.fullmatch(r"src/surface/[^/]+\.rs", p):
            traits |= set(re.findall(r"pub trait (\w+)", t))
    rows = {}
    for p, t in fs:
        m = re.match(r"src/surface/([^/]+)/", p)
        key = m.group(1) if m else ("kernel" if p.startswith("src/surface") else "http+github")
        r = rows.setdefault(key, dict(methods=0, from_value=0, keys=0, json=0, refusal=0, lines=0))
        c = code(t)
        r["lines"] += t.count("\n")
        r["from_value"] += len(re.findall(r"from_value\(", c))
        r["keys"] += len(re.findall(r"\[\"[\w-]+\"\]", c)) + len(re.findall(r"\.get\(\"[\w-]+\"\)", c))
        r["json"] += len(re.findall(r"json!", c))
        r["refusal"] += len(re.findall(r"\b40[13]\b", c))
        if m:
            c = unquoted(c)
            for im in re.finditer(r"impl(?:<[^>]*>)?\s+(?:[\w:]+::)?(\w+)(?:<[^>]*>)?\s+for\s+[^{]+\{", c):
                if im.group(1) in traits:
                    r["methods"] += len(re.findall(r"\bfn\s+\w+", block(c, im.end())))
    print(f"{'':18} {'methods':>7} {'from_value':>10} {'key reads':>9} {'json!':>6} {'401/403':>7} {'lines':>6}")
    total = dict(from_value=0, keys=0, json=0, refusal=0, lines=0)
    for k in sorted(rows, key=lambda k: (k in ("kernel", "http+github"), k)):
        r = rows[k]
        print(f"{k:18} {r['methods']:7} {r['from_value']:10} {r['keys']:9} {r['json']:6} {r['refusal']:7} {r['lines']:6}")
        if k not in ("kernel", "http+github"):
            for f in total:
                total[f] += r[f]
    print(f"{'types, total':18} {'':7} {total['from_value']:10} {total['keys']:9} {total['json']:6} {total['refusal']:7} {total['lines']:6}")


if __name__ == "__main__":
    main()

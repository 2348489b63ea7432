#!/usr/bin/env python3
"""Checks smarm-core's layering: a file imports only from its own layer and
the layers below.

core/src has one folder per layer (docs/architecture.md draws the map).
Every `crate::LAYER` path in a file's code (comments are skipped: a doc
may point anywhere) must name the file's own layer or a lower one. The
crate root (lib.rs) sits above every layer: it wires them together and
exports the API.

Also fails on a core file over MAX_LINES lines or a function over
MAX_FN_LINES lines without a `// long fn: why` comment just above it
(tests excluded), so the layers stay readable, and on a file in core/src
outside every layer.

Usage: scripts/layers.py            (exit 1 and a list on a violation)
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "core" / "src"

# Bottom to top.
LAYERS = ["sync", "seam", "lockfree", "actor", "sched", "msg", "locks", "io", "spawn", "supervise", "rt"]
RANK = {name: i for i, name in enumerate(LAYERS)}
MAX_LINES = 600
MAX_FN_LINES = 90

FN = re.compile(r'^\s*(pub(\([a-z]+\))? )?(const )?(unsafe )?(extern "C" )?fn (\w+)')


def long_fns(lines):
    """Yields (line number, name, length) of functions over MAX_FN_LINES
    lines that no `// long fn:` comment above them explains."""
    for i, line in enumerate(lines):
        m = FN.match(line)
        if not m:
            continue
        depth, seen, j = 0, False, i
        for j in range(i, len(lines)):
            code = lines[j].split("//", 1)[0]
            depth += code.count("{") - code.count("}")
            seen = seen or "{" in code
            if (seen and depth == 0) or (not seen and code.rstrip().endswith(";")):
                break
        k = i
        while k > 0 and lines[k - 1].strip().startswith(("//", "#[")):
            k -= 1
        explained = any(lines[x].strip().startswith("// long fn:") for x in range(k, i))
        if j - i + 1 > MAX_FN_LINES and not explained:
            yield i + 1, m.group(6), j - i + 1


PATH = re.compile(r"(?<![\w$])crate::([a-z_]+)")


def code_lines(text):
    """Yields (line number, code) with comments and string literals cut."""
    for n, line in enumerate(text.split("\n"), 1):
        s = line.strip()
        if s.startswith("//"):
            continue
        line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
        yield n, line.split("//", 1)[0]


def main():
    bad = []
    for f in sorted(SRC.rglob("*.rs")):
        rel = f.relative_to(SRC)
        if rel.parts == ("lib.rs",):
            continue
        layer = rel.parts[0]
        if len(rel.parts) < 2 or layer not in RANK:
            bad.append(f"core/src/{rel}: outside every layer ({', '.join(LAYERS)})")
            continue
        text = f.read_text()
        is_test = rel.name == "tests.rs" or "tests" in rel.parts[:-1]
        lines = text.count("\n")
        if not is_test and lines > MAX_LINES:
            bad.append(f"core/src/{rel}: {lines} lines (at most {MAX_LINES}; split it)")
        if not is_test:
            for n, name, length in long_fns(text.split("\n")):
                bad.append(f"core/src/{rel}:{n}: fn {name} is {length} lines (split it, or say why not in a `// long fn:` comment above it)")
        for n, code in code_lines(text):
            for m in PATH.finditer(code):
                to = m.group(1)
                if to not in RANK:
                    bad.append(f"core/src/{rel}:{n}: crate::{to} is not a layer (import through one)")
                elif RANK[to] > RANK[layer]:
                    bad.append(f"core/src/{rel}:{n}: layer {layer} imports crate::{to}, a layer above it")
    for b in bad:
        print(b)
    if bad:
        print(f"layers: {len(bad)} violations (bottom to top: {' < '.join(LAYERS)})")
        return 1
    print(f"layers: {sum(1 for _ in SRC.rglob('*.rs'))} files, every import goes down or stays in its layer")
    return 0


if __name__ == "__main__":
    sys.exit(main())

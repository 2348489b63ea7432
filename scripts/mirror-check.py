#!/usr/bin/env python3
"""Fails when code a loom replica mirrors changed since the replica was
last checked against it.

Loom cannot run the scheduler (actors need the asm context switch), so
some models (core/tests/loom_shutdown.rs) run a replica of its atomics
layer. Each replica step carries a marker naming the original and a hash
of its code as last reviewed:

    // mirror: core/src/sched/mod.rs find_work 1a2b3c4d5e6f

The original is the function `fn find_work` in that file (`name#k`: the
k-th such function, counting from 1, when the name repeats). The hash is
over its code with comments and whitespace removed, so a reworded comment
does not trip the check, a changed statement does. On a mismatch: review
the replica against the new code (and fix it), then record the new hash
with `scripts/mirror-check.py --update`.

Usage: scripts/mirror-check.py [--update]   (from the repository root)
"""
import hashlib
import pathlib
import re
import sys

MARK = re.compile(r"^(\s*)// mirror: (\S+) (\S+) ([0-9a-f]{12}|-)\s*$")


def function_text(path, spec):
    name, _, k = spec.partition("#")
    k = int(k) if k else 1
    lines = pathlib.Path(path).read_text().splitlines()
    start = re.compile(r"^\s*(pub(\([a-z]+\))? )?(const )?(unsafe )?fn " + re.escape(name) + r"\s*[<(]")
    hits = [i for i, l in enumerate(lines) if start.match(l)]
    if len(hits) < k:
        raise SystemExit(f"{path}: no fn {name} (occurrence {k}); was it renamed or moved?")
    if k == 1 and len(hits) > 1 and "#" not in spec:
        raise SystemExit(f"{path}: fn {name} appears {len(hits)} times: name one as {name}#k")
    i = hits[k - 1]
    depth, seen, out = 0, False, []
    for l in lines[i:]:
        code = l.split("//", 1)[0]
        out.append(code)
        depth += code.count("{") - code.count("}")
        seen = seen or "{" in code
        if seen and depth == 0:
            break
        if not seen and code.rstrip().endswith(";"):
            break  # a declaration without a body
    return re.sub(r"\s+", "", "".join(out))


def digest(path, spec):
    return hashlib.sha256(function_text(path, spec).encode()).hexdigest()[:12]


def main():
    update = "--update" in sys.argv[1:]
    bad, checked = 0, 0
    for test in sorted(pathlib.Path("core/tests").glob("loom_*.rs")):
        lines = test.read_text().splitlines(keepends=True)
        changed = False
        for n, l in enumerate(lines):
            m = MARK.match(l.rstrip("\n"))
            if not m:
                continue
            indent, path, spec, recorded = m.groups()
            now = digest(path, spec)
            checked += 1
            if now == recorded:
                continue
            if update:
                lines[n] = f"{indent}// mirror: {path} {spec} {now}\n"
                changed = True
                print(f"{test}:{n + 1}: {path} {spec}: recorded {now}")
            else:
                bad += 1
                print(f"{test}:{n + 1}: {path} fn {spec} changed since its replica "
                      f"was checked (recorded {recorded}, now {now}): review the "
                      f"replica, then run scripts/mirror-check.py --update")
        if changed:
            test.write_text("".join(lines))
    if checked == 0:
        raise SystemExit("mirror-check: no `// mirror:` markers found")
    if bad:
        raise SystemExit(f"mirror-check: {bad} of {checked} mirrored functions changed")
    print(f"mirror-check: {checked} mirrored functions unchanged")


if __name__ == "__main__":
    main()

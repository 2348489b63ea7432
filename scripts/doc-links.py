#!/usr/bin/env python3
"""Fails when code or docs cite a repository file that does not exist, or a
document outside the repository.

Scans every tracked .rs, .md, .sh, .py and .toml file and .ci/run for paths such as
`docs/sim.md`, `core/src/sched/mod.rs` or `scripts/loom.sh` (rooted at one of
the repository's top-level folders) and checks that each exists. A path
with a glob (`loom_*.rs`) or a placeholder (`NAME`, `TARGET`) is skipped.
Also fails on a citation of a development machine's documents
(`ARCHITECTURE.md`, `TOOLCHAIN.md`, `STYLE.md`, `../shared`), which a
reader of the repository cannot open.

Usage: scripts/doc-links.py   (from the repository root)
"""
import pathlib
import re
import subprocess
import sys

ROOTS = "docs|scripts|core|ports|arch|tests|benches|examples|fuzz|\\.ci"
PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w./-]*\w\.(?:md|rs|sh|py|toml|txt|supp))" % ROOTS)
FOREIGN = re.compile(r"ARCHITECTURE\.md|TOOLCHAIN\.md|STYLE\.md|\.\./shared")
SKIP_FILES = {"scripts/doc-links.py"}


def main():
    files = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout.split()
    bad = []
    for f in files:
        if f in SKIP_FILES or f.startswith("fuzz/corpus"):
            continue
        if not re.search(r"\.(rs|md|sh|py|toml)$", f) and f != ".ci/run":
            continue
        try:
            text = pathlib.Path(f).read_text()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if FOREIGN.search(line):
                bad.append(f"{f}:{n}: cites a document outside the repository: {line.strip()}")
            for m in PATH.finditer(line):
                p = m.group(1).rstrip(".")
                if "*" in p or re.search(r"[A-Z]{3,}", p.split("/")[-1].split(".")[0]):
                    continue
                cands = [pathlib.Path(p), pathlib.Path(f).parent / p]
                if not any(c.exists() for c in cands):
                    bad.append(f"{f}:{n}: {p} does not exist")
    for b in bad:
        print(b)
    if bad:
        sys.exit(f"doc-links: {len(bad)} citations of missing files")
    print(f"doc-links: every cited path exists ({len(files)} files scanned)")


if __name__ == "__main__":
    main()

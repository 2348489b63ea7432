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

Links, in every scanned file:
- an absolute link into the repository (`REPO/blob/main/docs/io.md`,
  `REPO/tree/main/docs`, `REPO#readme`) must name an existing path, and
  its `#anchor`, if any, a heading of that Markdown file (the README
  without a path);
- in a Markdown file, a relative link (`[io](docs/io.md#sockets)`,
  `[top](#usage)`) must name an existing path and heading;
- a published crate's README (its manifest's `readme`, without
  `publish = false`) has no relative link at all: crates.io and docs.rs
  render it away from the repository, where such a link breaks.

Usage: scripts/doc-links.py   (from the repository root)
"""
import pathlib
import re
import subprocess
import sys
import tomllib

ROOTS = "docs|scripts|core|ports|arch|tests|benches|examples|fuzz|\\.ci"
PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w./-]*\w\.(?:md|rs|sh|py|toml|txt|supp))" % ROOTS)
FOREIGN = re.compile(r"ARCHITECTURE\.md|TOOLCHAIN\.md|STYLE\.md|\.\./shared")
SKIP_FILES = {"scripts/doc-links.py"}
REPO = "https://github.com/smarm-rs/smarm"
REPO_LINK = re.compile(
    re.escape(REPO) + r"(?:/(?:blob|tree)/main/([\w./-]*[\w/]))?(?:#([\w-]+))?(?![\w./-])"
)
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading):
    """GitHub's anchor for a Markdown heading."""
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return s.replace(" ", "-")


def anchors(path):
    """The anchors of a Markdown file's headings (outside code blocks)."""
    out, fenced = {"readme"}, False
    for line in pathlib.Path(path).read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            out.add(slug(line.lstrip("#")))
    return out


def check_target(path, anchor):
    """What is wrong with a link to `path` (a repository path) and
    `anchor`, or None."""
    p = pathlib.Path(path)
    if not p.exists():
        return f"{path} does not exist"
    if anchor and p.suffix == ".md" and anchor not in anchors(p):
        return f"{path} has no heading #{anchor}"
    return None


def published_readmes():
    """The README of every crate that can be published."""
    out = set()
    root = tomllib.loads(pathlib.Path("Cargo.toml").read_text())
    for member in root["workspace"]["members"]:
        pkg = tomllib.loads((pathlib.Path(member) / "Cargo.toml").read_text())["package"]
        if pkg.get("publish", True) is not False and isinstance(pkg.get("readme"), str):
            out.add(str(pathlib.Path(member) / pkg["readme"]))
    return out


def main():
    files = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout.split()
    readmes = published_readmes()
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
        fenced = False
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
            for m in REPO_LINK.finditer(line):
                err = check_target(m.group(1) or "README.md", m.group(2))
                if err:
                    bad.append(f"{f}:{n}: {m.group(0)}: {err}")
            if f.endswith(".md"):
                if line.startswith("```"):
                    fenced = not fenced
                if fenced:
                    continue
                for m in MD_LINK.finditer(line):
                    target = m.group(1)
                    if re.match(r"[a-z]+:", target):
                        continue
                    if f in readmes:
                        bad.append(f"{f}:{n}: a relative link in a published crate's README: {target}")
                        continue
                    path, _, anchor = target.partition("#")
                    full = (pathlib.Path(f).parent / path) if path else pathlib.Path(f)
                    err = check_target(str(full), anchor)
                    if err:
                        bad.append(f"{f}:{n}: link {target}: {err}")
    for b in bad:
        print(b)
    if bad:
        sys.exit(f"doc-links: {len(bad)} citations of missing files")
    print(f"doc-links: every cited path exists ({len(files)} files scanned)")


if __name__ == "__main__":
    main()

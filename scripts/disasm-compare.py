#!/usr/bin/env python3
"""Compares the machine code of two builds of one binary, function by function.

A move of code between modules renames its functions (the module path is
part of the symbol) and shifts every address; neither changes what runs.
This script disassembles both binaries (objdump), keys each function by
its demangled name with module paths and LLVM's hash suffix removed (the
last path segment plus its generic arguments, e.g. `Addr<M,P>::send`),
normalises addresses, jump targets and symbol hashes in the instructions,
and reports, for the functions named on the command line (regexes over
the key) or for all of them, which are identical, which differ (with
instruction counts) and which exist in one build only.

Usage:
    scripts/disasm-compare.py OLD_BINARY NEW_BINARY [REGEX ...]
    e.g. scripts/disasm-compare.py old/msg_pairs new/msg_pairs send push park switch

Exit status 0 always (a difference is a finding to read, not a failure).
"""
import collections
import re
import subprocess
import sys

HEADER = re.compile(r"^[0-9a-f]+ <(.+)>:$")
HASH = re.compile(r"::h[0-9a-f]{16}")


def key(name):
    """`smarm_core::sched::switch::park<P>` -> `park<P>`; keeps the type
    of a method (`Addr<M,P>::send`) and drops module paths inside generic
    arguments too."""
    name = HASH.sub("", name)
    # Drop leading module paths of every path segment (lowercase idents
    # followed by ::), inside generics as well.
    name = re.sub(r"\b(?:[a-z_][a-z0-9_]*::)+", "", name)
    # A method in an impl block written in another module than its type
    # demangles as `<impl T>::f` / `<impl Tr for T>::f`.
    name = re.sub(r"^<impl (.+?) for (.+)>::", r"<\2 as \1>::", name)
    name = re.sub(r"^<impl (.+)>::", r"\1::", name)
    return name.replace(" ", "")


def normalise(ins):
    ins = HASH.sub("", ins)
    ins = re.sub(r"<.*>\s*$", "<>", ins)         # symbolic targets (end of line)
    ins = re.sub(r"\b0x[0-9a-f]+\b", "IMM", ins)   # immediates and addresses
    ins = re.sub(r"\b[0-9a-f]{5,}\b", "ADDR", ins)  # bare jump/call targets
    return re.sub(r"\s+", " ", ins).strip()


def functions(binary):
    out = subprocess.run(
        ["objdump", "-d", "-C", "--no-show-raw-insn", "--no-addresses", binary],
        capture_output=True, text=True, check=True,
    ).stdout
    fns = collections.defaultdict(list)
    cur = None
    for line in out.split("\n"):
        m = HEADER.match(line) or re.match(r"^<(.+)>:$", line)
        if m:
            cur = key(m.group(1))
            fns[cur].append([])
            continue
        if cur is None or not line.strip() or line.startswith("Disassembly"):
            continue
        fns[cur][-1].append(normalise(line))
    return fns


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    old, new = functions(sys.argv[1]), functions(sys.argv[2])
    pats = [re.compile(p) for p in sys.argv[3:]]
    names = sorted(set(old) | set(new))
    if pats:
        names = [n for n in names if any(p.search(n) for p in pats)]
    same = differ = only = 0
    for n in names:
        a, b = old.get(n), new.get(n)
        if a is None or b is None:
            only += 1
            print(f"only in {'new' if a is None else 'old'}: {n}")
            continue
        if sorted(map(tuple, a)) == sorted(map(tuple, b)):
            same += 1
            if pats:
                print(f"same ({sum(map(len, a))} instructions): {n}")
        else:
            differ += 1
            print(f"DIFFERS: {n}: {sum(map(len, a))} -> {sum(map(len, b))} instructions")
    print(f"disasm-compare: {same} identical, {differ} differ, {only} in one build only")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Side-by-side A/B of criterion bench binaries: the same bench built at two
(or more) commits, run in alternating rounds, each run from a fresh copy of
its binary, and reported as medians with each side's ratio to the first.

Why fresh copies: on the 2-core VM these benches are tuned on, the same
bytes run from two files measured up to 1.25x apart, steadily, run after
run (spawn_join, one worker: 300 vs 240 ns); copying the binary anew for
each run gives each side a new placement each round, so the medians no
longer carry one file's luck (docs/benchmarks.md, "A/B runs need a fresh
copy per run").

A side is LABEL=BINARY (a bench binary built before), LABEL=rev:REV (the
bench named by --bench, built at git revision REV in a copy of that tree
under the temp dir, kept there with its own target dir for the next run)
or LABEL=tree (the bench built from this working tree, uncommitted changes
included), e.g.

    scripts/ab.py --bench spawn_join --rounds 5 --filter smarm/1w \\
        old=rev:HEAD~3 new=tree

A tree exported at a revision builds the whole bench crate once (minutes
on two cores). Each tree has its own target dir: cargo fingerprints a
workspace crate by its path and its sources' mtimes, so two trees sharing
one could run each other's binary (docs/benchmarks.md, "A/B runs need a
target dir per tree").

Each run is `BIN --bench --warm-up-time W --measurement-time M FILTER`
(`SMARM_BENCH_WORKERS` from --workers when given). Output: one line per
benchmark id, criterion's mean per run (its `estimates.json`, read as
`scripts/bench.py` reads it), the median per side with its ratio to the
first side, and every run's mean.
"""
import argparse
import collections
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # importing bench.py leaves no __pycache__ in scripts/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import ROOT, bench_executables, collect  # noqa: E402  as bench.py builds and reads them


def build_side(spec, bench, env):
    """The binary for one side's spec (see the module doc)."""
    if spec != "tree" and not spec.startswith("rev:"):
        if not os.path.isfile(spec):
            sys.exit(f"ab.py: no such binary: {spec!r} (or say tree, or rev:REV)")
        return spec
    if not bench:
        sys.exit(f"ab.py: {spec!r} needs --bench NAME (which bench to build)")
    if spec == "tree":
        return bench_executables([bench], env)[bench]
    rev = spec[len("rev:"):]
    p = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=ROOT,
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"ab.py: not a revision here: {rev!r}")
    sha = p.stdout.strip()
    tree = os.path.join(tempfile.gettempdir(), f"smarm-ab-{sha[:12]}")
    if not os.path.isdir(tree):
        part = tree + ".part"
        shutil.rmtree(part, ignore_errors=True)
        os.makedirs(part)
        archive = subprocess.Popen(["git", "archive", sha], cwd=ROOT, stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", part], stdin=archive.stdout, check=True)
        if archive.wait() != 0:
            sys.exit(f"ab.py: git archive {sha} failed")
        os.rename(part, tree)
    print(f"{spec}: {sha[:12]} in {tree}", file=sys.stderr)
    return bench_executables([bench], dict(env, CARGO_TARGET_DIR=os.path.join(tree, "target")), root=tree)[bench]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sides", nargs="+", help="LABEL=BINARY, LABEL=rev:REV or LABEL=tree; the first is the reference")
    ap.add_argument("--bench", help="the bench to build for rev: and tree sides (e.g. spawn_join)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--filter", default="", help="criterion filter (a regex over benchmark ids)")
    ap.add_argument("--workers", help="SMARM_BENCH_WORKERS for each run")
    ap.add_argument("--warm-up-time", default="1")
    ap.add_argument("--measurement-time", default="1.5")
    args = ap.parse_args()
    env = dict(os.environ)
    sides = []
    for s in args.sides:
        label, sep, spec = s.partition("=")
        if not sep or not label:
            sys.exit(f"ab.py: want LABEL=BINARY, LABEL=rev:REV or LABEL=tree, got {s!r}")
        sides.append((label, build_side(spec, args.bench, env)))
    if args.workers:
        env["SMARM_BENCH_WORKERS"] = args.workers
    res = collections.defaultdict(lambda: collections.defaultdict(list))
    with tempfile.TemporaryDirectory(prefix="smarm-ab-") as tmp:
        for r in range(args.rounds):
            for label, path in sides:
                exe = os.path.join(tmp, f"{label}-{r}")
                shutil.copy2(path, exe)
                # Each run writes its criterion results under a directory of
                # its own (CRITERION_HOME, as bench.py runs them), read back
                # with bench.py's `collect`.
                out = os.path.join(tmp, f"out-{label}-{r}")
                cmd = [exe, "--bench", "--warm-up-time", args.warm_up_time,
                       "--measurement-time", args.measurement_time, "--noplot"]
                if args.filter:
                    cmd.append(args.filter)
                run = subprocess.run(cmd, cwd=tmp, env=dict(env, CRITERION_HOME=out),
                                     capture_output=True, text=True)
                if run.returncode != 0:
                    sys.exit(f"ab.py: {label} run {r} failed:\n{run.stderr[-2000:]}")
                # A filter that matches no benchmark leaves no results.
                if not os.path.isdir(out):
                    sys.exit(f"ab.py: {label} run {r} measured nothing: does --filter "
                             f"{args.filter!r} match a benchmark id (BINARY --list)?")
                for name, row in collect(out).items():
                    res[name][label].append(row[0])
                os.remove(exe)
                shutil.rmtree(out)
                print(f"round {r + 1}/{args.rounds}: {label} done", file=sys.stderr)
    ref = sides[0][0]
    for name, per in res.items():
        if ref not in per:
            continue
        base = statistics.median(per[ref])
        cols = []
        for label, _ in sides:
            if per.get(label):
                m = statistics.median(per[label])
                cols.append(f"{label} {m:10.0f} ns x{m / base:.3f}")
        raw = " | ".join(" ".join(f"{t:.0f}" for t in per[label]) for label, _ in sides if per.get(label))
        print(f"{name:48s} " + "  ".join(cols) + f"   runs (ns): {raw}")


if __name__ == "__main__":
    main()

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

Build each side's binary first, e.g.

    git stash; cargo bench --no-run -p smarm-benches --bench spawn_join
    cp target/release/deps/spawn_join-<hash> /tmp/old-spawn_join; git stash pop
    cargo bench --no-run -p smarm-benches --bench spawn_join
    scripts/ab.py --rounds 5 --filter smarm/1w \\
        old=/tmp/old-spawn_join new=target/release/deps/spawn_join-<hash>

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
from bench import collect  # noqa: E402  criterion's JSON results, as bench.py reads them


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sides", nargs="+", help="LABEL=BINARY, the first is the reference")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--filter", default="", help="criterion filter (a regex over benchmark ids)")
    ap.add_argument("--workers", help="SMARM_BENCH_WORKERS for each run")
    ap.add_argument("--warm-up-time", default="1")
    ap.add_argument("--measurement-time", default="1.5")
    args = ap.parse_args()
    sides = []
    for s in args.sides:
        label, sep, path = s.partition("=")
        if not sep or not os.path.isfile(path):
            sys.exit(f"ab.py: want LABEL=BINARY with an existing binary, got {s!r}")
        sides.append((label, path))
    env = dict(os.environ)
    if args.workers:
        env["SMARM_BENCH_WORKERS"] = args.workers
    res = collections.defaultdict(lambda: collections.defaultdict(list))
    with tempfile.TemporaryDirectory(prefix="smarm-ab-") as tmp:
        for r in range(args.rounds):
            for label, path in sides:
                exe = os.path.join(tmp, f"{label}-{r}")
                shutil.copy2(path, exe)
                # Each run writes its criterion results under a directory of
                # its own (criterion follows CARGO_TARGET_DIR), read back
                # with bench.py's `collect`.
                out = os.path.join(tmp, f"out-{label}-{r}")
                cmd = [exe, "--bench", "--warm-up-time", args.warm_up_time,
                       "--measurement-time", args.measurement_time, "--noplot"]
                if args.filter:
                    cmd.append(args.filter)
                run = subprocess.run(cmd, cwd=tmp, env=dict(env, CARGO_TARGET_DIR=out),
                                     capture_output=True, text=True)
                if run.returncode != 0:
                    sys.exit(f"ab.py: {label} run {r} failed:\n{run.stderr[-2000:]}")
                # A filter that matches no benchmark leaves no results.
                if not os.path.isdir(out):
                    sys.exit(f"ab.py: {label} run {r} measured nothing: does --filter "
                             f"{args.filter!r} match a benchmark id (BINARY --list)?")
                for name, row in collect(os.path.join(out, "criterion")).items():
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

#!/usr/bin/env python3
"""smarm's bench driver: run the criterion suite, save a baseline, compare a
run against a baseline, and turn a run into benches/REPORT.md with SVG plots.
Python 3 standard library only (CI machines have python3; see README).

  scripts/bench.py run [--repeats N] [--workers 1,2,4] [--bench NAME ...] [--impl NAME ...] [--no-go]
        Builds the benches once (`cargo bench --no-run`) and runs them N
        times (default 3), each process from a fresh copy of its binary,
        with a short criterion measurement (default 1.5 s, warm-up 0.5 s),
        one progress line per bench process, and, when `go` is installed, the Go peer
        program benches/go/peers.go once per worker count (GOMAXPROCS);
        writes target/bench-runs/latest.json: host, port, arch, commit,
        workers, and per row the best repeat's mean time, 95% interval and
        fastest / slowest sample, each repeat's time, and the cycle count
        where measured.
  scripts/bench.py save [RUN] [--to PATH]
        Copies a run (default: the latest) to a baseline file (default:
        benches/baselines/<port>-<arch>-<N>cpu.json).
  scripts/bench.py compare [BASELINE] [RUN] [--floor 0.10]
        Compares a run against a baseline row by row and flags each row
        outside its noise band (below); exits 1 if any row is slower.
  scripts/bench.py report [RUN] [--scaling RUN2 ...] [--out benches]
        Writes benches/REPORT.md and benches/report/*.svg from a run; each
        --scaling run (e.g. from a many-core machine) adds its msg_pairs and
        yield_many figures as a scaling section.
  scripts/bench.py readme [RUN]
        Rewrites README.md's benchmark table (between the bench-table
        markers) from a run: smarm / tokio, / may, / Go per workload and
        worker count, with the run's commit.
  scripts/bench.py selftest
        Checks compare on the committed baseline: against itself nothing is
        flagged; against a copy with some rows made 1.5x slower exactly
        those rows are flagged; and the parsing of row ids, Go rows and
        criterion samples, the peer tables and the README rewrite on
        made-up data (CI runs this; it runs no bench).

A row's time is its best repeat (interference on a shared machine only
adds time, so the fastest of N repeats is the most repeatable estimate).
The noise band of a row: max(floor, 2 x spread + the half-widths of both
runs' 95% intervals), all relative to the row's time, where the spread is
how far the baseline's second-best repeat lies from its best: a row whose
best two repeats disagree gets a wider band. The floor (default 10%)
covers what a few repeats on a shared machine cannot show.
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
RUNS = os.path.join(TARGET, "bench-runs")
LATEST = os.path.join(RUNS, "latest.json")
IMPLS = ("smarm", "tokio", "may", "go")
# The peers smarm is measured against, in report order: smarm / peer ratios.
PEERS = ("tokio", "may", "go")
PEER_NAMES = {"tokio": "tokio", "may": "may", "go": "Go"}


# ---------------------------------------------------------------- host facts


def sh(*cmd):
    try:
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") or line.startswith("Model"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return sh("sysctl", "-n", "machdep.cpu.brand_string") or platform.processor() or "unknown"


def host_meta():
    port = {"Linux": "linux", "Darwin": "darwin"}.get(platform.system(), platform.system().lower())
    return {
        "host": platform.node(),
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "port": port,
        "arch": platform.machine(),
        "commit": sh("git", "rev-parse", "HEAD"),
        "dirty": bool(sh("git", "status", "--porcelain", "--untracked-files=no")),
        "rustc": sh("rustc", "--version"),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def default_baseline(meta=None):
    m = meta or host_meta()
    return os.path.join(ROOT, "benches", "baselines", f"{m['port']}-{m['arch']}-{m['cpus']}cpu.json")


# ---------------------------------------------------------------- run


def sample_range(path):
    """(fastest, slowest) time per iteration over criterion's samples
    (sample.json: per sample, iterations and total time), or None."""
    try:
        with open(path) as f:
            smp = json.load(f)
        per = [t / i for i, t in zip(smp["iters"], smp["times"]) if i]
    except (OSError, KeyError, ValueError, TypeError):
        return None
    return (min(per), max(per)) if per else None


def collect(crit_dir):
    """criterion's results under crit_dir: full_id -> (ns per iteration,
    ci low, ci high, elements per iteration or None, (fastest, slowest)
    sample or None)."""
    rows = {}
    for dirpath, _, files in os.walk(crit_dir):
        if os.path.basename(dirpath) != "new" or "benchmark.json" not in files:
            continue
        with open(os.path.join(dirpath, "benchmark.json")) as f:
            b = json.load(f)
        with open(os.path.join(dirpath, "estimates.json")) as f:
            e = json.load(f)["mean"]
        tp = b.get("throughput") or {}
        rows[b["full_id"]] = (
            e["point_estimate"],
            e["confidence_interval"]["lower_bound"],
            e["confidence_interval"]["upper_bound"],
            tp.get("Elements"),
            sample_range(os.path.join(dirpath, "sample.json")),
        )
    return rows


def parse_go_rows(text):
    """The Go peer program's output (one JSON object a line; other lines
    ignored) in collect's form."""
    rows = {}
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        rows[r["id"]] = (r["ns"], r["ci"][0], r["ci"][1], r.get("elements"), (r["min"], r["max"]))
    return rows


def cmd_run(a):
    meta = host_meta()
    meta.update(
        repeats=a.repeats,
        measurement_time_s=a.measurement_time,
        warm_up_time_s=a.warm_up_time,
        workers=a.workers or ",".join(str(w) for w in sorted({1, 2, meta["cpus"]})),
        load_before=os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    )
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out_dir = os.path.join(RUNS, stamp)
    os.makedirs(out_dir, exist_ok=True)
    flags = ["--warm-up-time", str(a.warm_up_time), "--measurement-time", str(a.measurement_time), "--noplot"]
    env = dict(os.environ)
    if a.workers:
        env["SMARM_BENCH_WORKERS"] = a.workers
    benches = a.bench or bench_names()
    unknown = sorted(set(benches) - set(bench_names()) - REPORTS)
    if unknown:
        sys.exit(f"unknown bench(es): {', '.join(unknown)} (see benches/Cargo.toml)")
    worker_list = [int(w) for w in meta["workers"].split(",")]
    jobs = plan(benches, env, a.isolate, worker_list, a.impl)
    meta["isolated"] = a.isolate
    meta["impls"] = a.impl
    go_benches = [b for b in benches if b in GO_BENCHES]
    go = None
    if go_benches and a.go:
        go = build_go(out_dir)
    meta["go"] = go and go["version"]
    exes = bench_executables(sorted({b for b, _, _ in jobs}), env)
    start = time.time()
    for r in range(a.repeats):
        crit = os.path.join(out_dir, f"rep{r}", "criterion")
        cyc = os.path.join(out_dir, f"rep{r}", "cycles.jsonl")
        os.makedirs(crit, exist_ok=True)
        renv = dict(env, CRITERION_HOME=crit, SMARM_BENCH_CYCLES=cyc)
        n = len(jobs) + (len(worker_list) if go else 0)
        print(f"== repeat {r + 1}/{a.repeats}: {n} bench processes", flush=True)
        with open(os.path.join(out_dir, f"rep{r}", "log.txt"), "w") as log:
            for i, (bench, filt, extra) in enumerate(jobs):
                # A fresh copy of the binary for every process: on the VM
                # these benches are tuned on, one file's placement biased
                # every run of it (docs/benchmarks.md, "A/B runs need a
                # fresh copy per run"). Run where `cargo bench` runs it.
                exe = os.path.join(out_dir, f"rep{r}", f"{bench}-{i}")
                shutil.copy2(exes[bench], exe)
                cmd = [exe, "--bench", *flags]
                cmd += [filt] if filt else []
                tag = " ".join([bench] + ([filt] if filt else []) + [f"{k}={v}" for k, v in extra.items()])
                print(f"[{i + 1}/{n}] {tag} ...", end="", flush=True)
                log.write(f"== {' '.join(f'{k}={v}' for k, v in extra.items())} {' '.join(cmd)}\n")
                log.flush()
                t0 = time.time()
                p = subprocess.run(cmd, cwd=os.path.join(ROOT, "benches"), env=dict(renv, **extra),
                                   stdout=log, stderr=subprocess.STDOUT)
                os.remove(exe)
                print(f" {time.time() - t0:.0f} s", flush=True)
                if p.returncode != 0:
                    sys.exit(f"bench {bench} failed (repeat {r + 1}); see {out_dir}/rep{r}/log.txt")
            for j, w in enumerate(worker_list if go else []):
                print(f"[{len(jobs) + j + 1}/{n}] go peers GOMAXPROCS={w} ...", end="", flush=True)
                t0 = time.time()
                cmd = [go["bin"], "-bench", ",".join(go_benches), "-port", meta["port"],
                       "-warm-up", str(a.warm_up_time), "-measurement", str(a.measurement_time)]
                log.write(f"== GOMAXPROCS={w} {' '.join(cmd)}\n")
                log.flush()
                p = subprocess.run(cmd, cwd=ROOT, env=dict(renv, GOMAXPROCS=str(w)), capture_output=True, text=True)
                log.write(p.stdout + p.stderr)
                print(f" {time.time() - t0:.0f} s", flush=True)
                if p.returncode != 0:
                    sys.exit(f"the Go peer program failed (repeat {r + 1}); see {out_dir}/rep{r}/log.txt")
                with open(os.path.join(out_dir, f"rep{r}", "go.jsonl"), "a") as f:
                    f.write(p.stdout)
    meta["wall_s"] = round(time.time() - start, 1)
    meta["load_after"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    write_run(out_dir, meta)


def bench_executables(benches, env, root=ROOT):
    """Builds `benches` in the workspace at `root` as `cargo bench` would and
    returns bench name -> its executable (cargo's JSON messages name it)."""
    cmd = ["cargo", "bench", "-p", "smarm-benches", "--no-run", "--message-format=json"]
    for b in benches:
        cmd += ["--bench", b]
    print("building the benches...", flush=True)
    p = subprocess.run(cmd, cwd=root, env=env, stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit("cargo bench --no-run failed (its errors are above)")
    exes = {}
    for line in p.stdout.splitlines():
        if not line.startswith("{"):
            continue
        m = json.loads(line)
        if m.get("reason") == "compiler-artifact" and m.get("executable") and "bench" in m["target"]["kind"]:
            exes[m["target"]["name"]] = m["executable"]
    missing = [b for b in benches if b not in exes]
    if missing:
        sys.exit(f"cargo built no executable for: {', '.join(missing)}")
    return exes


# Bench binaries that are reports, not criterion benches (they print their
# own side-by-side tables; `cargo bench --bench NAME` runs them).
REPORTS = {"echo_report", "million_report"}

# The bench binaries benches/go/peers.go has rows for.
GO_BENCHES = ("switch_cost", "yield_many", "ping_pong_steady", "spawn_join", "msg_pairs", "skynet")
GO_SRC = os.path.join(ROOT, "benches", "go", "peers.go")


def build_go(out_dir):
    """Builds the Go peer program into target/ with the `go` on PATH:
    {"bin", "version"}, or None (said on stdout) without one."""
    go = shutil.which("go")
    if not go:
        print("no `go` on PATH: the Go peer column is skipped (Debian: apt-get install golang)", flush=True)
        return None
    binary = os.path.join(TARGET, "peers-go")
    p = subprocess.run(
        [go, "build", "-o", binary, GO_SRC], cwd=ROOT, capture_output=True, text=True,
        env=dict(os.environ, GOCACHE=os.path.join(TARGET, "go-cache")),
    )
    if p.returncode != 0:
        sys.exit(f"go build {GO_SRC} failed:\n{p.stderr}")
    version = subprocess.run([go, "version"], capture_output=True, text=True).stdout.strip()
    print(f"Go peer program built ({version})", flush=True)
    return {"bin": binary, "version": version}


def bench_names():
    """The criterion [[bench]] names in benches/Cargo.toml, in file order."""
    names, prev = [], ""
    with open(os.path.join(ROOT, "benches", "Cargo.toml")) as f:
        for line in f:
            if line.startswith("name = ") and "[[bench]]" in prev:
                name = line.split('"')[1]
                if name not in REPORTS:
                    names.append(name)
            prev = line
    return names


def plan(benches, env, isolate, workers, only=None):
    """(bench, criterion filter, extra environment) per bench process. With
    `isolate`, one process per bench and implementation (`/smarm/`,
    `/smarm_mutex/`, ..., `/tokio/`): rows of one binary run in sequence,
    and a smarm runtime built after another one was dropped in the same
    process measured slower on the reference host (switch_cost/local: up to
    2x), which would bias whichever variant runs later; separate processes
    put every implementation in the same position. may's scheduler is
    process-global with one worker count, so `/may/` runs once per worker
    count (SMARM_BENCH_MAY_WORKERS); without `isolate` may rows run for the
    first count a binary asks for only. `only`: the implementations to run
    (all when empty; with `isolate` only)."""
    if not isolate:
        return [(b, None, {}) for b in benches]
    print("listing rows (builds the benches)...", flush=True)
    jobs = []
    for b in benches:
        out = subprocess.run(
            ["cargo", "bench", "-q", "-p", "smarm-benches", "--bench", b, "--", "--list"],
            cwd=ROOT, env=env, capture_output=True, text=True, check=True,
        ).stdout
        impls = []
        for line in out.splitlines():
            if line.endswith(": benchmark"):
                try:
                    impl = split_id(line[: -len(": benchmark")])[1]
                except StopIteration:
                    continue
                if impl not in impls:
                    impls.append(impl)
        for impl in impls:
            if only and impl not in only:
                continue
            if impl == "may":
                jobs += [(b, "/may/", {"SMARM_BENCH_MAY_WORKERS": str(w)}) for w in workers]
            else:
                jobs.append((b, f"/{impl}/", {}))
    return jobs


def aggregate(out_dir):
    """Rows of the repeats under out_dir (rep0, rep1, ...): per row the best
    (lowest) repeat's time and 95% interval, and every repeat's time. The
    best, not the median: on a shared machine interference only ever adds
    time, so the fastest repeat is the most repeatable estimate."""
    reps, cycles = [], {}
    r = 0
    while os.path.isdir(os.path.join(out_dir, f"rep{r}")):
        rows = collect(os.path.join(out_dir, f"rep{r}", "criterion"))
        go = os.path.join(out_dir, f"rep{r}", "go.jsonl")
        if os.path.exists(go):
            with open(go) as f:
                rows.update(parse_go_rows(f.read()))
        reps.append(rows)
        cyc = os.path.join(out_dir, f"rep{r}", "cycles.jsonl")
        if os.path.exists(cyc):
            with open(cyc) as f:
                for line in f:
                    c = json.loads(line)
                    cycles.setdefault(c["id"], []).append(c["cycles_per_iter"])
        r += 1
    rows = {}
    for rid in sorted(set().union(*reps)):
        got = [rep[rid] for rep in reps if rid in rep]
        best = min(got, key=lambda g: g[0])
        row = {"ns": best[0], "reps": [g[0] for g in got], "ci": [best[1], best[2]], "elements": best[3]}
        if len(best) > 4 and best[4]:
            row["range"] = list(best[4])
        if rid in cycles:
            row["cycles"] = min(cycles[rid])
        rows[rid] = row
    return rows


def write_run(out_dir, meta):
    run = {"meta": meta, "rows": aggregate(out_dir)}
    for p in (os.path.join(out_dir, "run.json"), LATEST):
        with open(p, "w") as f:
            json.dump(run, f, indent=1, sort_keys=True)
    print(f"{len(run['rows'])} rows from {meta.get('repeats')} repeat(s) in {meta.get('wall_s')} s -> {LATEST}")


def cmd_rebuild(a):
    """Re-aggregates a run directory (after a change to `aggregate`)."""
    write_run(a.dir, load(os.path.join(a.dir, "run.json"))["meta"])


def load(path):
    with open(path) as f:
        return json.load(f)


def cmd_save(a):
    run = load(a.run)
    to = a.to or default_baseline(run["meta"])
    os.makedirs(os.path.dirname(to), exist_ok=True)
    shutil.copyfile(a.run, to)
    print(f"baseline saved: {to}")


# ---------------------------------------------------------------- compare


def rel_spread(row):
    """How far the second-best repeat is from the best: how stable the
    best-of-N estimate is (0 with one repeat)."""
    r = sorted(row.get("reps") or [row["ns"]])
    return (r[1] - r[0]) / r[0] if len(r) > 1 else 0.0


def rel_ci(row):
    lo, hi = row["ci"]
    return (hi - lo) / 2 / row["ns"]


def compare(base, run, floor):
    """Rows of both: (id, base ns, run ns, ratio, band, verdict)."""
    out = []
    for rid in sorted(set(base["rows"]) & set(run["rows"])):
        b, r = base["rows"][rid], run["rows"][rid]
        band = max(floor, 2 * rel_spread(b) + rel_ci(b) + rel_ci(r))
        ratio = r["ns"] / b["ns"]
        verdict = "SLOWER" if ratio > 1 + band else "faster" if ratio < 1 / (1 + band) else "ok"
        out.append((rid, b["ns"], r["ns"], ratio, band, verdict))
    return out


def fmt_ns(ns):
    for unit, div in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= div:
            return f"{ns / div:.3g} {unit}"
    return f"{ns:.3g} ns"


def cmd_compare(a):
    base, run = load(a.baseline), load(a.run)
    bm, rm = base["meta"], run["meta"]
    for k in ("port", "arch", "cpus", "cpu"):
        if bm.get(k) != rm.get(k):
            print(f"warning: {k} differs (baseline {bm.get(k)!r}, run {rm.get(k)!r}): ratios mix hosts")
    print(f"baseline {a.baseline} ({bm['commit'][:10]}) vs run {a.run} ({rm['commit'][:10]})")
    rows = compare(base, run, a.floor)
    w = max(len(r[0]) for r in rows) if rows else 10
    print(f"{'row':<{w}}  {'baseline':>10}  {'run':>10}  {'ratio':>6}  {'band':>6}  verdict")
    for rid, b, r, ratio, band, v in rows:
        print(f"{rid:<{w}}  {fmt_ns(b):>10}  {fmt_ns(r):>10}  {ratio:6.3f}  ±{band * 100:4.0f}%  {v}")
    slower = [r for r in rows if r[5] == "SLOWER"]
    faster = [r for r in rows if r[5] == "faster"]
    missing = sorted(set(base["rows"]) - set(run["rows"]))
    print(f"{len(rows)} rows compared: {len(slower)} slower, {len(faster)} faster, {len(missing)} not in run")
    lb = max(bm.get("load_before") or 0, bm.get("load_after") or 0)
    lr = max(rm.get("load_before") or 0, rm.get("load_after") or 0)
    if slower and lr > lb + 0.5:
        print(f"note: the run's host was busier than the baseline's (load average up to {lr:.1f} vs {lb:.1f}):"
              " rows that wake parked workers may be flagged by noise; rerun at a quiet moment to confirm")
    sys.exit(1 if slower else 0)


def cmd_selftest(a):
    base = load(a.baseline)
    same = compare(base, base, a.floor)
    assert same and all(v == "ok" for *_, v in same), "a baseline against itself must flag nothing"
    slowed = json.loads(json.dumps(base))
    ids = sorted(slowed["rows"])[::7]
    for rid in ids:
        row = slowed["rows"][rid]
        row["ns"] *= 1.5
        row["reps"] = [x * 1.5 for x in row["reps"]]
        row["ci"] = [x * 1.5 for x in row["ci"]]
    flagged = sorted(r[0] for r in compare(base, slowed, a.floor) if r[5] == "SLOWER")
    # A row whose own noise band exceeds 50% may pass: only check the others.
    expect = sorted(r[0] for r in compare(base, base, a.floor) if r[0] in ids and r[4] < 0.45)
    assert set(expect) <= set(flagged) <= set(ids), f"flagged {flagged}, expected {expect}"
    print(f"selftest: {len(same)} rows unflagged against themselves; {len(flagged)}/{len(ids)} slowed rows flagged")
    checks = selftest_parsing()
    print(f"selftest: {checks} parsing and report checks")
    print("2 passed, 0 failed")


def selftest_parsing():
    """The run and report machinery on made-up rows: ids, Go output,
    criterion samples, peer ratios, Savina scaling, error bars, the README
    rewrite. Returns the number of checks."""
    import tempfile

    n = 0

    def check(cond, what):
        nonlocal n
        assert cond, what
        n += 1

    check(split_id("msg_pairs/linux/2w/go/32") == ("msg_pairs", "go", "2w/32"), "split_id go")
    check(split_id("yield_many/linux/may/1w") == ("yield_many", "may", "1w"), "split_id may")
    check(split_id("switch_cost/linux/smarm_mutex/local_1w") == ("switch_cost", "smarm_mutex", "local_1w"),
          "split_id variant")
    check((workers_of("1w/32"), case_of("1w/32")) == (1, "32"), "workers/case 1w/32")
    check((workers_of("local_1w"), case_of("local_1w")) == (1, "local"), "workers/case local_1w")
    check((workers_of("2w"), case_of("2w")) == (2, ""), "workers/case 2w")
    check(impl_order("smarm_striped") < impl_order("tokio") < impl_order("may") < impl_order("go"), "impl order")
    go_out = ("note: not a row\n"
              '{"id":"spawn_join/linux/go/2w","ns":2000,"ci":[1900,2100],"min":1500,"max":3000,'
              '"elements":null,"samples":20}\n'
              '{"id":"yield_many/linux/go/2w","ns":65536,"ci":[60000,70000],"min":32768,"max":98304,'
              '"elements":32768,"samples":20}\n')
    g = parse_go_rows(go_out)
    check(g["spawn_join/linux/go/2w"] == (2000, 1900, 2100, None, (1500, 3000)), "Go row")
    check(g["yield_many/linux/go/2w"][3] == 32768 and len(g) == 2, "Go row elements")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "sample.json")
        write(path, json.dumps({"sampling_mode": "Linear", "iters": [1, 2, 4], "times": [30, 40, 100]}))
        check(sample_range(path) == (20, 30), "criterion sample range")
        check(sample_range(os.path.join(d, "none.json")) is None, "no sample file")

    def row(ns, lo=None, hi=None, elements=None):
        return {"ns": ns, "ci": [ns * 0.9, ns * 1.1], "range": [lo or ns, hi or ns], "reps": [ns],
                "elements": elements}

    run = {"meta": {"commit": "0123456789abcdef", "dirty": False, "date": "2026-12-02T00:00:00+00:00",
                    "cpus": 2, "cpu": "test cpu", "repeats": 1, "measurement_time_s": 1.5},
           "rows": {
               "spawn_join/linux/smarm/1w": row(100, 90, 120),
               "spawn_join/linux/tokio/1w": row(200, 180, 300),
               "spawn_join/linux/may/1w": row(50),
               "spawn_join/linux/go/1w": row(400),
               "msg_pairs/linux/2w/smarm/32": row(3000, elements=1000),
               "msg_pairs/linux/2w/go/32": row(6000, elements=1000),
               "savina_big/linux/smarm/1w": row(1000),
               "savina_big/linux/smarm/2w": row(1500),
               "savina_big/linux/tokio/1w": row(2000),
               "savina_big/linux/tokio/2w": row(1000),
           }}
    t = table(run)
    r = peer_ratios(t)
    got = r[("spawn_join", "")][1]["tokio"]
    check(all(abs(x - y) < 1e-9 for x, y in zip(got, (0.5, 90 / 220, 110 / 180))), f"ratio, interval: {got}")
    check(r[("spawn_join", "")][1]["may"][0] == 2.0 and r[("spawn_join", "")][1]["go"][0] == 0.25, "may, Go ratios")
    check(r[("msg_pairs", "32")][2]["go"][0] == 0.5, "per-message ratio")
    check(r[("savina_big", "")][2]["tokio"][0] == 1.5, "savina ratio")
    lines = []
    check(peer_table(t, lines, bold=False), "peer table written")
    check(lines[0] == "| workload | case | 1w ÷tokio | 1w ÷may | 1w ÷Go | 2w ÷tokio | 2w ÷may | 2w ÷Go |",
          f"peer table head: {lines[0]}")
    check("| spawn_join | - | 0.50 | 2.00 | 0.25 |  |  |  |" in lines, "peer table row")
    check("| msg_pairs | 32 |  |  |  |  |  | 0.50 |" in lines, "peer table msg_pairs row")
    sv = []
    check(savina_scaling(t, sv) and "| savina_big | smarm | 1.50 |" in sv and "| savina_big | tokio | 0.50 |" in sv,
          f"savina scaling: {sv}")
    svg = svg_lines("t", "x", "y", [("smarm", [(1, 2.0, 1.0, 3.0)]), ("go", [(1, 1.0)])], hline=1.0)
    check(svg.count('class="err"') == 1 and 'stroke-dasharray="2,3"' in svg, "error bars, reference line")
    tall = svg_lines("t", "x", "y", [("smarm", [(1, 1.0, 0.5, 100.0), (2, 2.0)])])
    ticks = [float(v) for v in re.findall(r'text-anchor="end">([\d.]+)<', tall)]
    bar_tops = [float(v) for v in re.findall(r'class="err"[^>]*y2="([\d.]+)"', tall)]
    check(ticks and max(ticks) <= 4.2 and bar_tops and min(bar_tops) >= 40,
          f"the scale follows the points, an outlier's bar is cut: {ticks}, {bar_tops}")
    text = f"before\n{README_BEGIN}\nold table\n{README_END}\nafter\n"
    new = rewrite_between(text, readme_block(run))
    check(new.startswith("before\n" + README_BEGIN) and new.endswith(README_END + "\nafter\n"), "markers kept")
    check("old table" not in new and "`0123456789`" in new and "| spawn_join | - | 0.50 |" in new, "table rewritten")
    check(rewrite_between(new, readme_block(run)) == new, "rewrite is idempotent")
    try:
        rewrite_between("no markers", "x")
        check(False, "a README without markers is refused")
    except ValueError:
        n += 1
    return n


# ---------------------------------------------------------------- report


def split_id(rid):
    """full id -> (workload, impl, param): 'msg_pairs/linux/1w/smarm/32' ->
    ('msg_pairs', 'smarm', '1w/32')."""
    seg = rid.split("/")
    i = next(i for i, s in enumerate(seg) if i >= 2 and s.startswith(IMPLS))
    return seg[0], seg[i], "/".join(seg[2:i] + seg[i + 1 :])


def per_elem(row):
    return row["ns"] / row["elements"] if row.get("elements") else row["ns"]


def impl_order(name):
    """smarm's variants first, then the peers in PEERS order."""
    return (PEERS.index(name) + 1 if name in PEERS else 0, name)


def param_key(p):
    return [(0, int(t.rstrip("wt")), t) if t.rstrip("wt").isdigit() else (1, 0, t) for t in p.split("/")]


def table(run):
    """workload -> param -> impl -> row."""
    t = {}
    for rid, row in run["rows"].items():
        try:
            w, impl, param = split_id(rid)
        except StopIteration:
            continue
        t.setdefault(w, {}).setdefault(param, {})[impl] = row
    return t


UNITS = {
    "msg_pairs": "ns per message",
    "mpsc_contention": "ns per message",
    "yield_many": "ns per yield",
    "spawn_storm": "ns per spawn+join (under load)",
    "chained_spawn": "ns per spawn",
    "switch_cost": "ns per yield round trip (local) / message round trip (remote)",
    "ring": "ns per push+pop",
    "spawn_join": "ns per spawn+join",
    "catch_unwind": "ns per panicking actor (spawn, panic, join)",
    "ping_pong_oneshot": "ns per spawned pair and one exchange",
    "ping_pong_steady": "ns per round trip",
    "call": "ns per call (a request, a oneshot reply)",
    "skynet_1M": "time per 1M-leaf tree",
    "skynet_10k": "time per 10k-leaf tree",
    "savina_threadring": "ns per message (token hop)",
    "savina_counting": "ns per message",
    "savina_big": "ns per message (ping, pong, control)",
    "savina_chameneos": "ns per message (arrivals and replies)",
    "savina_fjthroughput": "ns per message (each with a small computation)",
    "echo": "ns per round trip over loopback TCP (`accept`: ns per connection)",
}

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]


def esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def svg_lines(title, xlabel, ylabel, series, logx=False, hline=None):
    """A line chart: series = [(label, [(x, y) or (x, y, lo, hi), ...])];
    lo..hi is drawn as an error bar. `hline`: a dotted reference line at
    that y (e.g. a ratio of 1)."""
    W, H, L, R, T, B = 640, 380, 70, 170, 40, 50
    series = [(label, [tuple(p) + (p[1], p[1]) if len(p) == 2 else tuple(p) for p in s]) for label, s in series]
    pts = [p for _, s in series for p in s]
    if not pts:
        return None
    fx = (lambda x: math.log2(x)) if logx else (lambda x: x)
    xs = sorted({p[0] for p in pts})
    x0, x1 = fx(xs[0]), fx(xs[-1])
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    # Error bars may reach past the top (a slow outlier sample on a busy
    # host); the scale follows the points, and a bar is cut at twice the
    # highest point.
    ymax = max(p[1] for p in pts)
    y1 = max(ymax * 1.1, min(max(p[3] for p in pts), 2 * ymax) * 1.05)
    if hline is not None:
        y1 = max(y1, hline * 1.1)
    step = 10 ** math.floor(math.log10(y1 / 4)) if y1 > 0 else 1
    for m in (1, 2, 5, 10):
        if y1 / (step * m) <= 6:
            step *= m
            break
    sx = lambda x: L + (fx(x) - x0) / (x1 - x0) * (W - L - R)
    sy = lambda y: H - B - y / y1 * (H - T - B)
    o = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="15">{esc(title)}</text>',
    ]
    y = 0.0
    while y <= y1:
        o.append(f'<line x1="{L}" x2="{W - R}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" stroke="#ddd"/>')
        o.append(f'<text x="{L - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:g}</text>')
        y += step
    for x in xs:
        o.append(f'<line x1="{sx(x):.1f}" x2="{sx(x):.1f}" y1="{T}" y2="{H - B}" stroke="#eee"/>')
        o.append(f'<text x="{sx(x):.1f}" y="{H - B + 16}" text-anchor="middle">{x:g}</text>')
    o.append(f'<line x1="{L}" x2="{W - R}" y1="{H - B}" y2="{H - B}" stroke="black"/>')
    o.append(f'<line x1="{L}" x2="{L}" y1="{T}" y2="{H - B}" stroke="black"/>')
    o.append(f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">{esc(xlabel)}</text>')
    o.append(
        f'<text x="16" y="{(T + H - B) / 2}" text-anchor="middle" '
        f'transform="rotate(-90 16 {(T + H - B) / 2})">{esc(ylabel)}</text>'
    )
    if hline is not None:
        o.append(f'<line x1="{L}" x2="{W - R}" y1="{sy(hline):.1f}" y2="{sy(hline):.1f}" stroke="#555" '
                 'stroke-dasharray="2,3"/>')
    for i, (label, s) in enumerate(series):
        c = PALETTE[i % len(PALETTE)]
        dash = ' stroke-dasharray="5,3"' if label.startswith(PEERS) else ""
        path = " ".join(f"{sx(p[0]):.1f},{sy(p[1]):.1f}" for p in sorted(s))
        o.append(f'<polyline points="{path}" fill="none" stroke="{c}" stroke-width="2"{dash}/>')
        for x, y, lo, hi in s:
            o.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{c}"/>')
            hi = min(hi, y1)
            if hi > lo:
                o.append(f'<line class="err" x1="{sx(x):.1f}" x2="{sx(x):.1f}" y1="{sy(lo):.1f}" '
                         f'y2="{sy(hi):.1f}" stroke="{c}" stroke-width="1"/>')
                for yy in (lo, hi):
                    o.append(f'<line x1="{sx(x) - 4:.1f}" x2="{sx(x) + 4:.1f}" y1="{sy(yy):.1f}" '
                             f'y2="{sy(yy):.1f}" stroke="{c}" stroke-width="1"/>')
        ly = T + 10 + i * 18
        o.append(f'<line x1="{W - R + 10}" x2="{W - R + 30}" y1="{ly}" y2="{ly}" stroke="{c}" stroke-width="2"{dash}/>')
        o.append(f'<text x="{W - R + 35}" y="{ly + 4}">{esc(label)}</text>')
    o.append("</svg>")
    return "\n".join(o) + "\n"


def svg_bars(title, ylabel, bars):
    """A bar chart: bars = [(label, value, note)]."""
    W, H, L, T, B = 640, 340, 70, 40, 60
    if not bars:
        return None
    y1 = max(v for _, v, _ in bars) * 1.15
    bw = (W - L - 20) / len(bars)
    sy = lambda y: H - B - y / y1 * (H - T - B)
    o = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="15">{esc(title)}</text>',
        f'<line x1="{L}" x2="{W - 20}" y1="{H - B}" y2="{H - B}" stroke="black"/>',
        f'<text x="16" y="{(T + H - B) / 2}" text-anchor="middle" '
        f'transform="rotate(-90 16 {(T + H - B) / 2})">{esc(ylabel)}</text>',
    ]
    for i, (label, v, note) in enumerate(bars):
        x = L + i * bw + bw * 0.15
        c = "#999" if label.startswith(PEERS) else PALETTE[i % len(PALETTE)]
        o.append(f'<rect x="{x:.1f}" y="{sy(v):.1f}" width="{bw * 0.7:.1f}" height="{H - B - sy(v):.1f}" fill="{c}"/>')
        o.append(f'<text x="{x + bw * 0.35:.1f}" y="{sy(v) - 6:.1f}" text-anchor="middle">{esc(note)}</text>')
        o.append(f'<text x="{x + bw * 0.35:.1f}" y="{H - B + 16}" text-anchor="middle">{esc(label)}</text>')
    o.append("</svg>")
    return "\n".join(o) + "\n"


def worker_token(t):
    """The worker count a param token names ('2w', 'local_1w'), or None."""
    tail = t.rsplit("_", 1)[-1]
    return int(tail[:-1]) if tail.endswith("w") and tail[:-1].isdigit() else None


def workers_of(param):
    for t in param.split("/"):
        if worker_token(t) is not None:
            return worker_token(t)
    return None


def case_of(param):
    """A param without its worker count: '1w/32' -> '32', 'local_1w' ->
    'local', '2w' -> ''."""
    out = []
    for t in param.split("/"):
        if worker_token(t) is None:
            out.append(t)
        elif "_" in t:
            out.append(t.rsplit("_", 1)[0])
    return "/".join(out)


def span(row, samples=True):
    """(low, high) per element: the fastest and slowest sample where known
    (`samples`), else the 95% interval."""
    lo, hi = (samples and row.get("range")) or row["ci"]
    e = row.get("elements") or 1
    return lo / e, hi / e


def point(x, row):
    return (x, per_elem(row)) + span(row)


def peer_ratios(t):
    """(workload, case) -> workers -> peer -> (smarm / peer time, low,
    high); low and high divide smarm's 95% interval by the peer's (the
    widest ratio both intervals allow)."""
    out = {}
    for w, params in t.items():
        for p, impls in params.items():
            sm = impls.get("smarm")
            if not sm:
                continue
            for peer in PEERS:
                pr = impls.get(peer)
                if not pr:
                    continue
                (slo, shi), (plo, phi) = span(sm, False), span(pr, False)
                r = sm["ns"] / pr["ns"]
                lo = slo / phi if phi > 0 else r
                hi = shi / plo if plo > 0 else r
                out.setdefault((w, case_of(p)), {}).setdefault(workers_of(p), {})[peer] = (r, lo, hi)
    return out


def peer_table(t, lines, bold=True):
    """Markdown: one row per workload and case, a smarm / peer column per
    worker count and peer present."""
    ratios = peer_ratios(t)
    peers = [p for p in PEERS if any(p in pw for ws in ratios.values() for pw in ws.values())]
    workers = sorted({w for ws in ratios.values() for w in ws if w is not None})
    cols = [(w, p) for w in workers for p in peers]
    if not cols:
        return False
    head = ["workload", "case"] + [f"{w}w ÷{PEER_NAMES[p]}" for w, p in cols]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for (w, case) in sorted(ratios, key=lambda k: (k[0], param_key(k[1]) if k[1] else [])):
        cells = [w, case or "-"]
        for wk, p in cols:
            r = ratios[(w, case)].get(wk, {}).get(p)
            cells.append(("**%.2f**" if bold else "%.2f") % r[0] if r else "")
        lines.append("| " + " | ".join(cells) + " |")
    return True


def savina_scaling(t, lines):
    """Markdown: per Savina workload and implementation, the time at each
    worker count over the time at 1 worker (below 1: more workers help)."""
    rows = []
    for w in sorted(x for x in t if x.startswith("savina_")):
        by_impl = {}
        for p, impls in t[w].items():
            for impl, row in impls.items():
                by_impl.setdefault(impl, {})[workers_of(p)] = row["ns"]
        for impl in sorted(by_impl, key=impl_order):
            ns = by_impl[impl]
            if 1 in ns:
                rows.append((w, impl, {k: v / ns[1] for k, v in ns.items() if k != 1}))
    ws = sorted({k for *_, r in rows for k in r})
    if not rows or not ws:
        return False
    lines.append("| workload | impl | " + " | ".join(f"{k}w / 1w" for k in ws) + " |")
    lines.append("|---|---|" + "---|" * len(ws))
    for w, impl, r in rows:
        lines.append(f"| {w} | {impl} | " + " | ".join(f"{r[k]:.2f}" if k in r else "" for k in ws) + " |")
    return True


def scaling_plots(t, tag, out, plots):
    """msg_pairs ns/message vs pairs (one chart per worker count) and vs
    workers; yield_many ns/yield vs workers."""
    mp = t.get("msg_pairs", {})
    ws = sorted({workers_of(p) for p in mp})
    for w in ws:
        series = {}
        for p, impls in mp.items():
            if workers_of(p) != w:
                continue
            pairs = int(p.split("/")[-1])
            for impl, row in impls.items():
                series.setdefault(impl, []).append(point(pairs, row))
        name = f"msg_pairs_{tag}_{w}w.svg"
        s = svg_lines(f"msg_pairs, {w} worker(s), {tag} host", "pairs", "ns per message",
                      sorted(series.items(), key=lambda kv: impl_order(kv[0])), logx=True)
        if s:
            plots.append((name, f"msg_pairs: ns per message against pairs, {w} worker(s)"))
            write(os.path.join(out, name), s)
    series = {}
    for p, impls in mp.items():
        pairs = p.split("/")[-1]
        for impl, row in impls.items():
            if impl in ("smarm", "smarm_ring") + PEERS:
                series.setdefault(f"{impl} {pairs}p", []).append(point(workers_of(p), row))
    if len(ws) > 1:
        name = f"msg_pairs_{tag}_workers.svg"
        plots.append((name, "msg_pairs: ns per message against workers (default, ring, peers)"))
        write(os.path.join(out, name), svg_lines(f"msg_pairs against workers, {tag} host", "workers",
              "ns per message", sorted(series.items(), key=lambda kv: impl_order(kv[0]))))
    series = {}
    for p, impls in t.get("yield_many", {}).items():
        for impl, row in impls.items():
            series.setdefault(impl, []).append(point(workers_of(p), row))
    if series:
        name = f"yield_many_{tag}.svg"
        plots.append((name, "yield_many: ns per yield against workers, per run-queue variant"))
        write(os.path.join(out, name), svg_lines(f"yield_many against workers, {tag} host", "workers",
              "ns per yield", sorted(series.items(), key=lambda kv: impl_order(kv[0]))))
    series = {}
    for p, impls in t.get("echo", {}).items():
        conns = p.split("/")[-1]
        if not conns.isdigit():
            continue
        for impl, row in impls.items():
            series.setdefault(f"{impl} {workers_of(p)}w", []).append(point(int(conns), row))
    if series:
        name = f"echo_{tag}.svg"
        plots.append((name, "echo: ns per round trip against open connections, per side and worker count"))
        write(os.path.join(out, name), svg_lines(f"echo over loopback, {tag} host", "connections",
              "ns per round trip", sorted(series.items(), key=lambda kv: impl_order(kv[0])), logx=True))
    series = {}
    for (w, case), ws in peer_ratios(t).items():
        if w.startswith("savina_"):
            for wk, pr in ws.items():
                if "tokio" in pr:
                    series.setdefault(w[len("savina_"):], []).append((wk,) + pr["tokio"])
    if series:
        name = f"savina_{tag}.svg"
        plots.append((name, "Savina: smarm / tokio time against workers (bars: from the 95% intervals)"))
        write(os.path.join(out, name), svg_lines(f"Savina, smarm / tokio, {tag} host", "workers",
              "smarm / tokio time (below 1: smarm faster)", sorted(series.items()), hline=1.0))


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def md_tables(t, lines, only=None):
    for w in sorted(t):
        if only and w not in only:
            continue
        params = t[w]
        impls = sorted({i for p in params.values() for i in p}, key=impl_order)
        has_tokio = "tokio" in impls
        smarms = [i for i in impls if i.startswith("smarm")]
        others = [p for p in PEERS[1:] if p in impls and "smarm" in impls]
        lines.append(f"\n### {w}\n\n{UNITS.get(w, 'ns')}" + ("" if has_tokio else " (no tokio counterpart)") + "\n")
        head = (["case"] + impls + ([f"{i}/tokio" for i in smarms] if has_tokio else [])
                + [f"smarm/{PEER_NAMES[p]}" for p in others])
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for p in sorted(params, key=param_key):
            r = params[p]
            cells = [p or "-"]
            for i in impls:
                if i in r:
                    c = fmt_ns(per_elem(r[i]))
                    if "cycles" in r[i]:
                        c += f" ({r[i]['cycles']:.0f} cyc)"
                    cells.append(c)
                else:
                    cells.append("")
            if has_tokio:
                tk = r.get("tokio")
                for i in smarms:
                    cells.append(f"**{r[i]['ns'] / tk['ns']:.2f}**" if tk and i in r else "")
            for peer in others:
                pr = r.get(peer)
                cells.append(f"**{r['smarm']['ns'] / pr['ns']:.2f}**" if pr and "smarm" in r else "")
            lines.append("| " + " | ".join(cells) + " |")


def host_line(m):
    return (f"{m['cpus']} CPUs, {m['cpu']}, port `{m['port']}`, {m['arch']}, commit `{m['commit'][:10]}`"
            + (" (dirty)" if m.get("dirty") else "") + f", {m['date']}; {m.get('rustc', '')}")


def cmd_report(a):
    run = load(a.run)
    m = run["meta"]
    out = os.path.join(ROOT, a.out)
    plot_dir = os.path.join(out, "report")
    os.makedirs(plot_dir, exist_ok=True)
    t = table(run)
    plots = []
    sc = t.get("switch_cost", {})
    bars = []
    for impl, row in sorted(sc.get("local_1w", {}).items(), key=lambda kv: impl_order(kv[0])):
        note = f"{row['ns']:.0f} ns" + (f" / {row['cycles']:.0f} cyc" if "cycles" in row else "")
        bars.append((impl, row["ns"], note))
    if bars:
        plots.append(("switch_cost_local.svg", "yield round trip on one worker, per run-queue variant, and tokio"))
        write(os.path.join(plot_dir, "switch_cost_local.svg"),
              svg_bars("yield round trip, 1 worker (lower is better)", "ns per yield round trip", bars))
    scaling_plots(t, f"{m['cpus']}cpu", plot_dir, plots)
    L = [
        "# smarm benchmark report",
        "",
        "Generated by `scripts/bench.py report` from one run of the criterion suite",
        "(`scripts/bench.py run`); do not edit by hand. Every ratio is smarm / peer",
        "(tokio; may, a stackful coroutine runtime; Go's goroutines)",
        "measured side by side in the same run on the same host: below 1 means smarm is",
        "faster. Times are criterion's mean per iteration (per element where the",
        f"workload counts elements), the best of {m.get('repeats', 1)} repeat(s); error bars",
        "span the fastest and slowest sample of that repeat (on ratio plots, both rows'",
        "95% intervals).",
        "",
        f"**Host**: {host_line(m)}.",
        f"Criterion: warm-up {m.get('warm_up_time_s')} s, measurement {m.get('measurement_time_s')} s per row;",
        f"the whole suite took {m.get('wall_s')} s (load average {m.get('load_before') or 0:.2f} before,"
        f" {m.get('load_after') or 0:.2f} after).",
        "",
        "Run-queue variants: `smarm` is the default (`AutoQueue`: the MPMC ring on one",
        "worker, the striped rings on more), `smarm_ring` the ring alone, `smarm_mutex`",
        "the mutex queue, `smarm_striped` the stripes alone (one ring per worker); `smarm_channel`",
        "uses smarm's channels instead of mailboxes. `(N cyc)` is the arch cycle counter",
        "(rdtsc / cntvct_el0) per iteration, read around the same loop.",
    ]
    if a.note:
        L += ["", a.note]
    if m.get("go") is not None or "go" in m:
        L += ["", f"Go: {m.get('go') or 'not installed on the host: no Go column'}."]
    L += ["", "## Plots", ""]
    for name, cap in plots:
        L.append(f"![{cap}](report/{name})\n")
    L += ["## Peers: smarm / peer", "",
          "smarm's default run queue against each peer, per worker count (lower: smarm faster).", ""]
    if not peer_table(t, L):
        L.append("(no peer rows in this run)")
    sv = []
    if savina_scaling(t, sv):
        L += ["", "## Savina: time at N workers / time at 1 worker", "", *sv]
    L += ["", "## Tables"]
    md_tables(t, L)
    for path in a.scaling or []:
        s = load(path)
        sm = s["meta"]
        st = table(s)
        tag = f"{sm['cpus']}cpu"
        splots = []
        scaling_plots(st, tag, plot_dir, splots)
        L += ["", f"## Scaling: {sm['cpus']}-CPU host", "", f"**Host**: {host_line(sm)}.",
              f"Workers {sm.get('workers')}; suite part took {sm.get('wall_s')} s.", ""]
        for name, cap in splots:
            L.append(f"![{cap} ({tag})](report/{name})\n")
        md_tables(st, L, only=("msg_pairs", "yield_many"))
    if a.remaining:
        L += ["", "## Not yet measured", "", a.remaining]
    write(os.path.join(out, "REPORT.md"), "\n".join(L) + "\n")
    print(f"wrote {os.path.join(a.out, 'REPORT.md')} and {len(plots)} plots in {os.path.join(a.out, 'report')}")


# ---------------------------------------------------------------- readme

README_BEGIN = "<!-- bench-table:begin (scripts/bench.py readme writes this part) -->"
README_END = "<!-- bench-table:end -->"


def readme_block(run):
    """The README's generated part: which run, and the peer table."""
    m = run["meta"]
    L = [
        README_BEGIN,
        "",
        f"From the run at commit `{m['commit'][:10]}`" + (" (tree dirty)" if m.get("dirty") else "")
        + f" on {m['date'][:10]}, {m['cpus']} CPUs ({m['cpu']}),",
        f"best of {m.get('repeats', 1)} repeat(s), {m.get('measurement_time_s')} s per row, "
        + (f"Go {m['go'].split()[2]}" if m.get("go") and len(m["go"].split()) > 2 else "no Go") + ".",
        "Each cell is smarm's time over the peer's, side by side in that run (lower",
        "is better; 1 worker against tokio's current_thread, more against its",
        "multi_thread; may and Go with as many workers).",
        "",
    ]
    if not peer_table(table(run), L, bold=False):
        L.append("(no peer rows in this run)")
    L += ["", README_END]
    return "\n".join(L)


def rewrite_between(text, block):
    """`text` with everything from README_BEGIN to README_END replaced by
    `block` (which carries both markers)."""
    i, j = text.find(README_BEGIN), text.find(README_END)
    if i < 0 or j < i:
        raise ValueError("README.md has no bench-table markers")
    return text[:i] + block + text[j + len(README_END):]


def cmd_readme(a):
    path = os.path.join(ROOT, "README.md")
    with open(path) as f:
        text = f.read()
    try:
        new = rewrite_between(text, readme_block(load(a.run)))
    except ValueError as e:
        sys.exit(str(e))
    write(path, new)
    print(f"README.md: benchmark table rewritten from {a.run}")


# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the suite")
    r.add_argument("--repeats", type=int, default=3)
    r.add_argument("--measurement-time", type=float, default=1.5)
    r.add_argument("--warm-up-time", type=float, default=0.5)
    r.add_argument("--workers", help="worker counts for msg_pairs / yield_many, e.g. 1,2,4,8,16")
    r.add_argument("--bench", action="append", help="only this bench binary (repeatable)")
    r.add_argument("--no-isolate", dest="isolate", action="store_false",
                   help="one process per bench binary instead of one per bench and implementation")
    r.add_argument("--no-go", dest="go", action="store_false", help="skip the Go peer program")
    r.add_argument("--impl", action="append",
                   help="only this implementation's rows (smarm, smarm_mutex, tokio, may, ...; repeatable;"
                        " the Go program runs unless --no-go)")
    rb = sub.add_parser("rebuild", help="re-aggregate a run directory")
    rb.add_argument("dir")
    s = sub.add_parser("save", help="save a run as a baseline")
    s.add_argument("run", nargs="?", default=LATEST)
    s.add_argument("--to")
    c = sub.add_parser("compare", help="compare a run against a baseline")
    c.add_argument("baseline", nargs="?", default=None)
    c.add_argument("run", nargs="?", default=LATEST)
    c.add_argument("--floor", type=float, default=0.10)
    t = sub.add_parser("selftest", help="check compare on the committed baseline")
    t.add_argument("baseline", nargs="?", default=None)
    t.add_argument("--floor", type=float, default=0.10)
    p = sub.add_parser("report", help="write benches/REPORT.md and plots")
    p.add_argument("run", nargs="?", default=LATEST)
    p.add_argument("--scaling", action="append", help="a run from another host for the scaling section")
    p.add_argument("--out", default="benches")
    p.add_argument("--note", help="a paragraph added under the host line")
    p.add_argument("--remaining", help="what remains to be measured (a paragraph)")
    rd = sub.add_parser("readme", help="rewrite README.md's benchmark table from a run")
    rd.add_argument("run", nargs="?", default=LATEST)
    a = ap.parse_args()
    if a.cmd in ("compare", "selftest") and a.baseline is None:
        a.baseline = default_baseline()
        bdir = os.path.dirname(a.baseline)
        if a.cmd == "selftest" and not os.path.exists(a.baseline) and os.path.isdir(bdir):
            # Another host kind: any committed baseline tests compare itself.
            a.baseline = os.path.join(bdir, sorted(os.listdir(bdir))[0])
    {"run": cmd_run, "rebuild": cmd_rebuild, "save": cmd_save, "compare": cmd_compare, "selftest": cmd_selftest, "report": cmd_report,
     "readme": cmd_readme}[
        a.cmd
    ](a)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""smarm's bench driver: run the criterion suite, save a baseline, compare a
run against a baseline, and turn a run into benches/REPORT.md with SVG plots.
Python 3 standard library only (CI machines have python3; see README).

  scripts/bench.py run [--repeats N] [--workers 1,2,4] [--bench NAME ...]
        Runs `cargo bench -p smarm-benches` N times (default 3) with a short
        criterion measurement (default 1.5 s, warm-up 0.5 s) and writes
        target/bench-runs/latest.json: host, port, arch, commit, workers,
        and per row the best repeat's mean time and 95% interval, each
        repeat's time, and the cycle count where measured.
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
  scripts/bench.py selftest
        Checks compare on the committed baseline: against itself nothing is
        flagged; against a copy with some rows made 1.5x slower exactly
        those rows are flagged (CI runs this; it runs no bench).

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
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
RUNS = os.path.join(TARGET, "bench-runs")
LATEST = os.path.join(RUNS, "latest.json")
IMPLS = ("smarm", "tokio")


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


def collect(crit_dir):
    """criterion's results under crit_dir: full_id -> (ns per iteration,
    ci low, ci high, elements per iteration or None)."""
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
        )
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
    jobs = plan(a.bench or bench_names(), env, a.isolate)
    meta["isolated"] = a.isolate
    start = time.time()
    for r in range(a.repeats):
        crit = os.path.join(out_dir, f"rep{r}", "criterion")
        cyc = os.path.join(out_dir, f"rep{r}", "cycles.jsonl")
        os.makedirs(crit, exist_ok=True)
        renv = dict(env, CRITERION_HOME=crit, SMARM_BENCH_CYCLES=cyc)
        print(f"== repeat {r + 1}/{a.repeats}: {len(jobs)} bench processes", flush=True)
        with open(os.path.join(out_dir, f"rep{r}", "log.txt"), "w") as log:
            for bench, filt in jobs:
                cmd = ["cargo", "bench", "-p", "smarm-benches", "--bench", bench, "--", *flags]
                cmd += [filt] if filt else []
                log.write(f"== {' '.join(cmd)}\n")
                log.flush()
                p = subprocess.run(cmd, cwd=ROOT, env=renv, stdout=log, stderr=subprocess.STDOUT)
                if p.returncode != 0:
                    sys.exit(f"cargo bench failed (repeat {r + 1}); see {out_dir}/rep{r}/log.txt")
    meta["wall_s"] = round(time.time() - start, 1)
    meta["load_after"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    write_run(out_dir, meta)


# Bench binaries that are reports, not criterion benches (they print their
# own side-by-side tables; `cargo bench --bench NAME` runs them).
REPORTS = {"echo_report", "million_report"}


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


def plan(benches, env, isolate):
    """(bench, criterion filter) per bench process. With `isolate`, one
    process per bench and implementation (`/smarm/`, `/smarm_mutex/`, ...,
    `/tokio/`): rows of one binary run in sequence, and a smarm runtime
    built after another one was dropped in the same process measured
    slower on the reference host (switch_cost/local: up to 2x), which would
    bias whichever variant runs later; separate processes put every
    implementation in the same position."""
    if not isolate:
        return [(b, None) for b in benches]
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
        jobs += [(b, f"/{impl}/") for impl in impls]
    return jobs


def aggregate(out_dir):
    """Rows of the repeats under out_dir (rep0, rep1, ...): per row the best
    (lowest) repeat's time and 95% interval, and every repeat's time. The
    best, not the median: on a shared machine interference only ever adds
    time, so the fastest repeat is the most repeatable estimate."""
    reps, cycles = [], {}
    r = 0
    while os.path.isdir(os.path.join(out_dir, f"rep{r}")):
        reps.append(collect(os.path.join(out_dir, f"rep{r}", "criterion")))
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
    print("1 passed, 0 failed")


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
    return (name.startswith("tokio"), name)


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
    "skynet_1M": "time per 1M-leaf tree",
    "echo": "ns per round trip over loopback TCP (`accept`: ns per connection)",
}

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]


def esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def svg_lines(title, xlabel, ylabel, series, logx=False):
    """A line chart: series = [(label, [(x, y), ...])]."""
    W, H, L, R, T, B = 640, 380, 70, 170, 40, 50
    pts = [p for _, s in series for p in s]
    if not pts:
        return None
    fx = (lambda x: math.log2(x)) if logx else (lambda x: x)
    xs = sorted({p[0] for p in pts})
    x0, x1 = fx(xs[0]), fx(xs[-1])
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    y1 = max(p[1] for p in pts) * 1.1
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
    for i, (label, s) in enumerate(series):
        c = PALETTE[i % len(PALETTE)]
        dash = ' stroke-dasharray="5,3"' if label.startswith("tokio") else ""
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in sorted(s))
        o.append(f'<polyline points="{path}" fill="none" stroke="{c}" stroke-width="2"{dash}/>')
        for x, y in s:
            o.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{c}"/>')
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
        c = "#999" if label.startswith("tokio") else PALETTE[i % len(PALETTE)]
        o.append(f'<rect x="{x:.1f}" y="{sy(v):.1f}" width="{bw * 0.7:.1f}" height="{H - B - sy(v):.1f}" fill="{c}"/>')
        o.append(f'<text x="{x + bw * 0.35:.1f}" y="{sy(v) - 6:.1f}" text-anchor="middle">{esc(note)}</text>')
        o.append(f'<text x="{x + bw * 0.35:.1f}" y="{H - B + 16}" text-anchor="middle">{esc(label)}</text>')
    o.append("</svg>")
    return "\n".join(o) + "\n"


def workers_of(param):
    for t in param.split("/"):
        if t.endswith("w") and t[:-1].isdigit():
            return int(t[:-1])
    return None


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
                series.setdefault(impl, []).append((pairs, per_elem(row)))
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
            if impl in ("smarm", "smarm_striped", "tokio"):
                series.setdefault(f"{impl} {pairs}p", []).append((workers_of(p), per_elem(row)))
    if len(ws) > 1:
        name = f"msg_pairs_{tag}_workers.svg"
        plots.append((name, "msg_pairs: ns per message against workers (ring, striped, tokio)"))
        write(os.path.join(out, name), svg_lines(f"msg_pairs against workers, {tag} host", "workers",
              "ns per message", sorted(series.items(), key=lambda kv: impl_order(kv[0]))))
    series = {}
    for p, impls in t.get("yield_many", {}).items():
        for impl, row in impls.items():
            series.setdefault(impl, []).append((workers_of(p), per_elem(row)))
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
            series.setdefault(f"{impl} {workers_of(p)}w", []).append((int(conns), per_elem(row)))
    if series:
        name = f"echo_{tag}.svg"
        plots.append((name, "echo: ns per round trip against open connections, per side and worker count"))
        write(os.path.join(out, name), svg_lines(f"echo over loopback, {tag} host", "connections",
              "ns per round trip", sorted(series.items(), key=lambda kv: impl_order(kv[0])), logx=True))


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
        lines.append(f"\n### {w}\n\n{UNITS.get(w, 'ns')}" + ("" if has_tokio else " (no tokio counterpart)") + "\n")
        head = ["case"] + impls + ([f"{i}/tokio" for i in smarms] if has_tokio else [])
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
        "(`scripts/bench.py run`); do not edit by hand. Every ratio is smarm / tokio",
        "measured side by side in the same run on the same host: below 1 means smarm is",
        "faster. Times are criterion's mean per iteration (per element where the",
        f"workload counts elements), the best of {m.get('repeats', 1)} repeat(s).",
        "",
        f"**Host**: {host_line(m)}.",
        f"Criterion: warm-up {m.get('warm_up_time_s')} s, measurement {m.get('measurement_time_s')} s per row;",
        f"the whole suite took {m.get('wall_s')} s (load average {m.get('load_before') or 0:.2f} before,"
        f" {m.get('load_after') or 0:.2f} after).",
        "",
        "Run-queue variants: `smarm` is the default MPMC ring, `smarm_mutex` the mutex",
        "queue, `smarm_striped` the striped ring (one ring per CPU); `smarm_channel`",
        "uses smarm's channels instead of mailboxes. `(N cyc)` is the arch cycle counter",
        "(rdtsc / cntvct_el0) per iteration, read around the same loop.",
    ]
    if a.note:
        L += ["", a.note]
    L += ["", "## Plots", ""]
    for name, cap in plots:
        L.append(f"![{cap}](report/{name})\n")
    L += ["## Tables"]
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
    a = ap.parse_args()
    if a.cmd in ("compare", "selftest") and a.baseline is None:
        a.baseline = default_baseline()
        bdir = os.path.dirname(a.baseline)
        if a.cmd == "selftest" and not os.path.exists(a.baseline) and os.path.isdir(bdir):
            # Another host kind: any committed baseline tests compare itself.
            a.baseline = os.path.join(bdir, sorted(os.listdir(bdir))[0])
    {"run": cmd_run, "rebuild": cmd_rebuild, "save": cmd_save, "compare": cmd_compare, "selftest": cmd_selftest, "report": cmd_report}[
        a.cmd
    ](a)


if __name__ == "__main__":
    main()

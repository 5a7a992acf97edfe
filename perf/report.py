#!/usr/bin/env python3
"""Figures of one perf/run.sh sitting, and its results page (markdown + PNG chart).

Used by run.sh while the sitting runs:
  report.py check JSON [EXPECTED]     "<msgs/s>\\t<errors>\\t<reason>" of one comet-bench report
                                      (EXPECTED: messages a draining run must reach)
  report.py line JSON                 p50/p99/p99.9 and errors of one report, one line
  report.py delta A B                 |B - A| / A in per cent (one decimal)
  report.py within DELTA LIMIT        exit 0 when DELTA < LIMIT
  report.py java-windows LOG          "<tps>\\t<failed so far>" per window the Java producer printed
  report.py w4-rate RAW SYSTEM...     half the slower system's median W1 throughput
and at its end:
  report.py report RUN_DIR OUT_PREFIX [--readme README] -- SYSTEM...

Inputs in RUN_DIR: raw/<system>.<workload>.<rep>.json (measured comet-bench runs),
warmup.tsv (every warm-up round: system, workload, rep, round, msgs/s, errors),
warmup-verdicts.tsv (system, workload, rep, rounds, converged, last change %), java.tsv
(measured Java producer windows: system, workload, rep, window, TPS, failed), loadavg.tsv
(label, time, 1/5/15-minute load), failures.tsv (system, workload, rep, reason), meta.txt,
and for a replicated workload (W1-HA) raw/<system>.<workload>.<rep>.lag.tsv (perf/ha_lag.py
samples of the master's replication lag); its reports watch the master first and its slave
second.
"""

import glob
import json
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ha_lag  # noqa: E402 (perf/ha_lag.py, beside this file)

WORKLOADS = [
    ("W1", "1 KiB sync sends, 64 threads, SYNC_FLUSH"),
    ("W1-HA", "1 KiB sync sends, 64 threads, SYNC_FLUSH on master and slave, "
              "brokerRole=SYNC_MASTER with one slave"),
    ("W2", "1 KiB sync sends, 64 threads, ASYNC_FLUSH"),
    ("AW-S", "1 KiB async window 256, SYNC_FLUSH"),
    ("AW-A", "1 KiB async window 256, ASYNC_FLUSH"),
    ("W3", "128 B batches of 32, 16 threads, SYNC_FLUSH"),
    ("W4", "end-to-end at a fixed rate, SYNC_FLUSH (latency from intended send time)"),
    ("W5", "drain a backlog, one push consumer group"),
]
README_START = "<!-- perf-summary:start -->"
README_END = "<!-- perf-summary:end -->"
# 5.x prints "Current Time: ... | Send TPS: 7274 | Max RT(ms): 1018 | Average RT(ms):   8.373
# | Send Failed: 0 | Response Failed: 0" every 10 s; TPS and average RT cover that window,
# Send Failed counts from the start.
JAVA_LINE = re.compile(r"Send TPS: (\d+)\D+Max RT\(ms\): (\d+)\D+Average RT\(ms\):\s*([\d.]+)"
                       r"\D+Send Failed: (\d+)")


# ---- one report ---------------------------------------------------------------------------

def read_json(path):
    with open(path) as handle:
        return json.load(handle)


def run_errors(report, expected=0):
    """(count, reason) of what makes a measured run fail; (0, "") when it is clean."""
    problems = []
    count = 0
    for field, what in (("errors_total", "errors"), ("send_errors_total", "failed sends"),
                        ("e2e_missing_total", "sent but never delivered")):
        value = report.get(field) or 0
        if value:
            count += value
            problems.append(f"{value} {what}")
    first = report.get("first_error") or report.get("send_first_error")
    received = report.get("messages_total") or 0
    if expected and received < expected:
        count += expected - received
        problems.append(f"drained {received} of {expected} messages")
    reason = ", ".join(problems)
    if first and problems:
        reason += f" (first: {first})"
    return count, reason


def check(path, expected=0):
    report = read_json(path)
    count, reason = run_errors(report, expected)
    tput = report.get("throughput_msgs_per_s") or 0.0
    return f"{tput:.0f}\t{count}\t{reason or '-'}"


def line(path):
    r = read_json(path)
    return (f"p50 {r['latency_us_p50']} us  p99 {r['latency_us_p99']} us  "
            f"p99.9 {r['latency_us_p999']} us  errors {run_errors(r)[0]}")


def delta_pct(a, b):
    a, b = float(a), float(b)
    if a <= 0:
        return 100.0 if b > 0 else 0.0
    return abs(b - a) / a * 100.0


def java_windows(path):
    if not os.path.exists(path):
        return []
    with open(path, errors="replace") as handle:
        found = JAVA_LINE.findall(handle.read())
    return [(int(tps), int(failed)) for tps, _max_rt, _avg_rt, failed in found]


# ---- a sitting ----------------------------------------------------------------------------

def read_tsv(path, columns):
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path) as handle:
        for text in handle:
            fields = text.rstrip("\n").split("\t")
            if len(fields) >= columns:
                rows.append(fields[:columns - 1] + ["\t".join(fields[columns - 1:])])
    return rows


def load_runs(raw):
    """{(system, workload): {rep: report}} of the measured runs."""
    runs = {}
    for path in glob.glob(os.path.join(raw, "*.json")):
        system, workload, rep, _ = os.path.basename(path).split(".")
        runs.setdefault((system, workload), {})[rep] = read_json(path)
    return runs


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def spread(values):
    """(median, min, max, (max - min) / median) of the values present."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    mid = statistics.median(values)
    rel = (max(values) - min(values)) / mid if mid else None
    return mid, min(values), max(values), rel


def broker_cpu(report):
    watched = report.get("cpu", {}).get("watched") or []
    return watched[0] if watched else {}


def replicated(workload):
    """Whether the workload ran against a master + slave pair (its slave is watched second)."""
    return workload.endswith("-HA")


def slave_cores(report):
    watched = report.get("cpu", {}).get("watched") or []
    return watched[1].get("cpu_cores") if len(watched) > 1 else None


def idle_peer_cores(report, first_peer=1):
    watched = report.get("cpu", {}).get("watched") or []
    cores = [w.get("cpu_cores") for w in watched[first_peer:] if w.get("cpu_cores") is not None]
    return sum(cores) if cores else None


def us_per_msg(report):
    cpu_s = broker_cpu(report).get("cpu_s")
    msgs = report.get("messages_total")
    return cpu_s / msgs * 1e6 if cpu_s is not None and msgs else None


def summarise(all_reps, failed_reps, pair=False):
    """Medians and spreads of one system's measured runs of one workload, leaving out the
    runs that failed (their figures are not evidence; the workload is marked instead).
    PAIR: the runs went against a master + slave pair (the slave's CPU is reported apart)."""
    reps = {rep: r for rep, r in all_reps.items() if rep not in failed_reps}
    reports = list(reps.values())

    def field(name):
        return [r.get(name) for r in reports]

    return {
        "runs": len(reports),
        "failed_runs": len(failed_reps),
        "tput_by_rep": {rep: r.get("throughput_msgs_per_s") for rep, r in reps.items()},
        "p999_by_rep": {rep: r.get("latency_us_p999") for rep, r in reps.items()},
        "throughput": spread(field("throughput_msgs_per_s")),
        "p50": median(field("latency_us_p50")),
        "p99": median(field("latency_us_p99")),
        "p999": spread(field("latency_us_p999")),
        "broker_us_per_msg": median([us_per_msg(r) for r in reports]),
        "broker_cores": median([broker_cpu(r).get("cpu_cores") for r in reports]),
        "idle_peer_cores": median([idle_peer_cores(r, 2 if pair else 1) for r in reports]),
        "slave_cores": median([slave_cores(r) for r in reports]) if pair else None,
        "reps": sorted(reps),
        "errors": sum(run_errors(r)[0] for r in reports),
    }


def fmt(value, digits=0):
    if value is None:
        return "–"
    if digits == 0:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def fmt_spread(s, digits=0):
    if s is None:
        return "–", "–", "–"
    mid, low, high, rel = s
    return (fmt(mid, digits), f"{fmt(low, digits)}–{fmt(high, digits)}",
            "–" if rel is None else f"{rel * 100:.1f}%")


def pair_ratios(a_by_rep, b_by_rep):
    """a/b for every run pair (the same rep of both systems, run back to back)."""
    ratios = []
    for rep, a in a_by_rep.items():
        b = b_by_rep.get(rep)
        if a is not None and b:
            ratios.append(a / b)
    return ratios


def ratio_cell(a, b, pairs, digits=2):
    if a is None or not b:
        return "–", "–"
    cell = f"{a / b:.{digits}f}×"
    if not pairs:
        return cell, "–"
    return cell, f"{min(pairs):.{digits}f}–{max(pairs):.{digits}f}×"


def results_table(summary, systems):
    head = ["workload", "system", "status", "runs", "msgs/s (median)", "min–max", "spread",
            "p50 µs", "p99 µs", "p99.9 µs (median)", "p99.9 min–max", "broker µs CPU/msg",
            "broker cores", "idle peer cores"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for workload, _ in WORKLOADS:
        for s in systems:
            fig = summary.get((s, workload))
            if fig is None:
                continue
            tput = fmt_spread(fig["throughput"])
            p999 = fmt_spread(fig["p999"])
            status = f"**FAILED** ({fig['failed_runs']} runs)" if fig["failed_runs"] else "ok"
            lines.append("| " + " | ".join([
                workload, s, status, str(fig["runs"]), *tput, fmt(fig["p50"]), fmt(fig["p99"]),
                p999[0], p999[1], fmt(fig["broker_us_per_msg"], 1),
                fmt(fig["broker_cores"], 2), fmt(fig["idle_peer_cores"], 2)]) + " |")
    return "\n".join(lines)


def ratio_table(summary, systems):
    peers = [s for s in systems if s != "comet"]
    if "comet" not in systems or not peers:
        return "(one system only: no ratios)"
    lines = ["| workload | peer | throughput comet/peer (medians) | per run pair | "
             "p99.9 comet/peer (medians) | per run pair | failed runs |",
             "|---|---|---|---|---|---|---|"]
    for workload, _ in WORKLOADS:
        c = summary.get(("comet", workload))
        for p in peers:
            q = summary.get((p, workload))
            if not c or not q:
                continue
            t = ratio_cell((c["throughput"] or [None])[0], (q["throughput"] or [None])[0],
                           pair_ratios(c["tput_by_rep"], q["tput_by_rep"]))
            l = ratio_cell((c["p999"] or [None])[0], (q["p999"] or [None])[0],
                           pair_ratios(c["p999_by_rep"], q["p999_by_rep"]), 3)
            failed = ", ".join(f"{name} **{fig['failed_runs']}**" for name, fig
                               in (("comet", c), (p, q)) if fig["failed_runs"]) or "none"
            lines.append(f"| {workload} | {p} | {t[0]} | {t[1]} | {l[0]} | {l[1]} | {failed} |")
    return "\n".join(lines)


def java_summary(java_rows):
    """{(system, workload): {"tps_by_rep", "tps": spread, "failed"}} of measured windows."""
    out = {}
    for system, workload, rep, _window, tps, failed in java_rows:
        entry = out.setdefault((system, workload), {"tps_by_rep": {}, "failed": 0})
        entry["failed"] += int(failed)
        # A window with failed sends fails the run (run.sh); its TPS is not evidence.
        if int(failed) == 0:
            entry["tps_by_rep"][rep] = float(tps)
    for entry in out.values():
        entry["tps"] = spread(list(entry["tps_by_rep"].values()))
    return out


def java_table(java, systems):
    lines = ["| workload | system | runs | Send TPS (median) | min–max | spread | failed |",
             "|---|---|---|---|---|---|---|"]
    for workload in ("W1", "W2"):
        for s in systems:
            entry = java.get((s, workload))
            if not entry:
                continue
            lines.append(f"| {workload} | {s} | {len(entry['tps_by_rep'])} | "
                         + " | ".join(fmt_spread(entry["tps"])) + f" | {entry['failed']} |")
        c, a = java.get(("comet", workload)), java.get(("apache", workload))
        if c and a and c["tps"] and a["tps"]:
            cell = ratio_cell(c["tps"][0], a["tps"][0],
                              pair_ratios(c["tps_by_rep"], a["tps_by_rep"]))
            lines.append(f"| {workload} | comet/apache | | {cell[0]} | {cell[1]} | | |")
    return "\n".join(lines) if len(lines) > 2 else "(the Java benchmark producer did not run)"


def warmup_table(rounds, verdicts, runs, java_rows, loads):
    """Every warm-up: its rounds' figures, the last change, the verdict, how far the
    measured run that followed landed from the last round, and the load as it began."""
    load_at = {label: one for label, _when, one, _five, _fifteen in loads}
    by_key = {}
    for system, workload, rep, _round, tput, errors in rounds:
        by_key.setdefault((system, workload, rep), []).append((float(tput), int(errors)))
    measured = {}
    for (system, workload), reps in runs.items():
        for rep, r in reps.items():
            measured[(system, workload, rep)] = r.get("throughput_msgs_per_s")
    for system, workload, rep, _window, tps, _failed in java_rows:
        measured[(system, workload + "-java", rep)] = float(tps)
    lines = ["| workload | system | run | warm-up rounds, msgs/s (errors) | last change | "
             "verdict | measured run vs last round | load (1 min) at the measured run |",
             "|---|---|---|---|---|---|---|---|"]
    capped = 0
    for system, workload, rep, count, converged, last in verdicts:
        figures = by_key.get((system, workload, rep), [])
        shown = ", ".join(fmt(t) + (f" ({e})" if e else "") for t, e in figures)
        ok = converged == "1"
        capped += 0 if ok else 1
        verdict = "converged" if ok else f"**cap hit** ({count} rounds)"
        m = measured.get((system, workload, rep))
        after = (f"{(m - figures[-1][0]) / figures[-1][0] * 100:+.1f}%"
                 if m is not None and figures and figures[-1][0] else "–")
        load = load_at.get(f"{workload} {system} run {rep}", "–")
        lines.append(f"| {workload} | {system} | {rep} | {shown} | "
                     f"{(last + '%') if last else '–'} | {verdict} | {after} | {load} |")
    return "\n".join(lines), capped, len(verdicts)


def load_table(loads):
    lines = ["| when | UTC | load 1 min | 5 min | 15 min |", "|---|---|---|---|---|"]
    for label, when, one, five, fifteen in loads:
        if " run " in label:
            continue
        lines.append(f"| {label} | {when} | {one} | {five} | {fifteen} |")
    return "\n".join(lines)


def goals(summary, java, failures):
    def med(system, workload, key):
        fig = summary.get((system, workload)) or {}
        value = fig.get(key)
        return value[0] if isinstance(value, tuple) else value

    def pairs(workload, key):
        c, a = summary.get(("comet", workload)), summary.get(("apache", workload))
        if not c or not a:
            return []
        return pair_ratios(c[key], a[key])

    def verdict(ok):
        return "**met**" if ok else "**not met**"

    def span(values, digits=2):
        if not values:
            return ""
        return f" (run pairs {min(values):.{digits}f}–{max(values):.{digits}f}×)"

    lines = []
    for workload, target in (("W1", 5), ("W2", 2), ("AW-S", 3), ("AW-A", 3)):
        c, a = med("comet", workload, "throughput"), med("apache", workload, "throughput")
        if c and a:
            lines.append(f"- {workload} throughput Comet/Apache ≥ {target}×: {c / a:.2f}×"
                         f"{span(pairs(workload, 'tput_by_rep'))} {verdict(c / a >= target)}")
        jc, ja = java.get(("comet", workload)), java.get(("apache", workload))
        if jc and ja and jc["tps"] and ja["tps"]:
            rc = jc["tps"][0] / max(1.0, ja["tps"][0])
            lines.append(f"- {workload} with the Java benchmark producer ≥ {target}×: {rc:.2f}×"
                         f"{span(pair_ratios(jc['tps_by_rep'], ja['tps_by_rep']))} "
                         f"{verdict(rc >= target)}")
    for workload in ("W1", "W4"):
        c, a = med("comet", workload, "p999"), med("apache", workload, "p999")
        if c and a:
            ps = pairs(workload, "p999_by_rep")
            extra = f", run pairs {min(ps):.3f}–{max(ps):.3f}×" if ps else ""
            lines.append(f"- {workload} p99.9 Comet ≤ Apache/10: {c:,.0f} µs vs {a:,.0f} µs "
                         f"({c / a:.3f}×{extra}) {verdict(c * 10 <= a)}")
    comet_failed = sorted({w for s, w, _rep, _why in failures if s == "comet"})
    comet_ran = any(s == "comet" for s, _ in summary)
    if comet_ran:
        lines.append("- zero failed sends in every Comet workload: "
                     + ("failures in " + ", ".join(comet_failed) + " **not met**"
                        if comet_failed else "none **met**"))
    t, p99 = med("comet", "AW-S", "throughput"), med("comet", "AW-S", "p99")
    if t and p99:
        lines.append(f"- absolute, async window (AW-S): ≥ 100k msgs/s of 1 KiB SYNC_FLUSH sends "
                     f"with p99 < 2 ms: {t:,.0f} msgs/s, p99 {p99:,.0f} µs "
                     f"{verdict(t >= 100_000 and p99 < 2000)}")
    return "\n".join(lines) if lines else "(not enough systems ran to compare)"


def lag_figures(raw, system, workload, reps):
    """ha_lag.summarise over the measured runs' lag files (pooled) and per run."""
    paths = {rep: os.path.join(raw, f"{system}.{workload}.{rep}.lag.tsv") for rep in reps}
    paths = {rep: path for rep, path in paths.items() if os.path.exists(path)}
    pooled = ha_lag.summarise(list(paths.values())) if paths else None
    per_run = {rep: ha_lag.summarise([path]) for rep, path in paths.items()}
    return pooled, per_run


def replication_section(summary, raw, systems):
    """Markdown of the replicated workloads: lag, slave CPU and the goals of issue 19, or
    None when no replicated workload ran."""
    pairs = sorted({w for (_s, w) in summary if replicated(w)})
    if not pairs:
        return None
    head = ["workload", "system", "runs", "lag samples (missed)", "lag bytes p50", "lag bytes p99",
            "p99 per run", "lag ms p50", "lag ms p99", "p99 per run", "master cores",
            "slave cores"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def span(values):
        values = [v for v in values if v is not None]
        return f"{fmt(min(values))}–{fmt(max(values))}" if values else "–"

    for workload in pairs:
        for s in systems:
            fig = summary.get((s, workload))
            if fig is None:
                continue
            pooled, per_run = lag_figures(raw, s, workload, fig["reps"])
            if pooled is None:
                pooled = (0, None, None, None, None, 0)
            count, b50, b99, m50, m99, missed = pooled
            lines.append("| " + " | ".join([
                workload, s, str(fig["runs"]), f"{count} ({missed})", fmt(b50), fmt(b99),
                span([f[2] for f in per_run.values()]),
                fmt(m50) if m50 is not None else "not reported",
                fmt(m99) if m99 is not None else "not reported",
                span([f[4] for f in per_run.values()]),
                fmt(fig["broker_cores"], 2), fmt(fig["slave_cores"], 2)]) + " |")
    goal_lines = []

    def med(system, workload, key):
        value = (summary.get((system, workload)) or {}).get(key)
        return value[0] if isinstance(value, tuple) else value

    def verdict(ok):
        return "**met**" if ok else "**not met**"

    def run_pairs(a, b, key):
        if not a or not b:
            return ""
        ratios = pair_ratios(a[key], b[key])
        return f" (run pairs {min(ratios):.2f}–{max(ratios):.2f}×)" if ratios else ""

    for workload in pairs:
        base = workload[:-len("-HA")]
        c, a = summary.get(("comet", workload)), summary.get(("apache", workload))
        ct, at = med("comet", workload, "throughput"), med("apache", workload, "throughput")
        if ct and at:
            goal_lines.append(f"- {workload} throughput Comet/Apache ≥ 5×: {ct / at:.2f}×"
                              f"{run_pairs(c, a, 'tput_by_rep')} {verdict(ct >= 5 * at)}")
        cl, al = med("comet", workload, "p999"), med("apache", workload, "p999")
        if cl and al:
            goal_lines.append(f"- {workload} p99.9 Comet ≤ Apache/10: {cl:,.0f} µs vs "
                              f"{al:,.0f} µs ({cl / al:.3f}×) {verdict(cl * 10 <= al)}")
        for s in systems:
            pair_t, single_t = med(s, workload, "throughput"), med(s, base, "throughput")
            if not pair_t or not single_t:
                continue
            # Rep n of the pair and rep n of the single node ran minutes apart (two broker
            # configurations), so this range is wider than a same-minute pair's.
            spread_note = run_pairs(summary.get((s, workload)), summary.get((s, base)),
                                    "tput_by_rep").replace("run pairs", "rep n against rep n")
            text = (f"- {s} {workload}/{base} throughput (SYNC_MASTER + slave against its own "
                    f"single node): {pair_t / single_t:.2f}×{spread_note}")
            if s == "comet":
                text += f", goal ≥ 0.8× {verdict(pair_t >= 0.8 * single_t)}"
            goal_lines.append(text)
    return "\n".join([
        "Lag is sampled from the master with GET_BROKER_HA_STATUS every `ha_sample_ms` "
        "during each measured run (perf/ha_lag.py); the percentiles pool every sample of the "
        "measured runs, \"p99 per run\" is the range of each run's own p99. Comet: the bytes "
        "its logs hold beyond the slave's durable end (summed over logs) and how long it has "
        "held bytes the slave lacks (the largest over logs). Apache: `diff` of Java's "
        "`HARuntimeInfo` (its commit log's end minus the slave's acknowledged offset); Java "
        "reports no lag in time. Master and slave cores: each process's CPU seconds / wall "
        "seconds during the run.",
        "",
        "\n".join(lines),
        "",
        "Goals of issue 19:",
        "",
        "\n".join(goal_lines) if goal_lines else "(not enough systems or workloads ran)",
    ])


def chart(summary, systems, out_png, workdir):
    gnuplot = subprocess.run(["which", "gnuplot"], capture_output=True, text=True).stdout.strip()
    if not gnuplot:
        return "no chart: gnuplot is not installed"
    data = os.path.join(workdir, "chart.dat")
    with open(data, "w") as handle:
        handle.write("workload " + " ".join(f"{s}_tput {s}_p50 {s}_p99 {s}_p999"
                                            for s in systems) + "\n")
        for workload, _ in WORKLOADS:
            row = [workload]
            for s in systems:
                fig = summary.get((s, workload)) or {}
                values = [(fig.get("throughput") or [None])[0], fig.get("p50"), fig.get("p99"),
                          (fig.get("p999") or [None])[0]]
                row += [str(v) if v else "NaN" for v in values]
            handle.write(" ".join(row) + "\n")
    tput = ", ".join(f"'{data}' using {2 + 4 * i}:xtic(1) title '{s}'"
                     for i, s in enumerate(systems))
    lat = []
    for i, s in enumerate(systems):
        for j, name in enumerate(("p50", "p99", "p99.9")):
            lat.append(f"'{data}' using {3 + 4 * i + j}:xtic(1) title '{s} {name}'")
    script = f"""
set terminal pngcairo size 1400,600 noenhanced
set output '{out_png}'
set multiplot layout 1,2
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set grid ytics
set key top left
set title 'throughput (msgs/s, log scale, median of measured runs)'
plot {tput}
set title 'latency (µs, log scale): p50, p99, p99.9 medians'
plot {", ".join(lat)}
unset multiplot
"""
    script_path = os.path.join(workdir, "chart.gp")
    with open(script_path, "w") as handle:
        handle.write(script)
    result = subprocess.run([gnuplot, script_path], capture_output=True, text=True)
    if result.returncode != 0:
        return f"no chart: gnuplot failed ({result.stderr.strip()[:200]})"
    return None


def report(run_dir, out_prefix, readme, systems):
    raw = os.path.join(run_dir, "raw")
    runs = load_runs(raw)
    fill = {s: r for (s, w), r in runs.items() if w == "W5-fill"}
    runs = {k: v for k, v in runs.items() if k[1] != "W5-fill"}
    failures = read_tsv(os.path.join(run_dir, "failures.tsv"), 4)
    failed_reps = {}
    for system, workload, rep, _why in failures:
        failed_reps.setdefault((system, workload), set()).add(rep)
    summary = {key: summarise(reps, failed_reps.get(key, set()), replicated(key[1]))
               for key, reps in runs.items()}
    rounds = read_tsv(os.path.join(run_dir, "warmup.tsv"), 6)
    verdicts = read_tsv(os.path.join(run_dir, "warmup-verdicts.tsv"), 6)
    java_rows = read_tsv(os.path.join(run_dir, "java.tsv"), 6)
    loads = read_tsv(os.path.join(run_dir, "loadavg.tsv"), 5)
    java = java_summary(java_rows)
    with open(os.path.join(run_dir, "meta.txt")) as handle:
        meta = handle.read().strip()
    warm, capped, warmups = warmup_table(rounds, verdicts, runs, java_rows, loads)
    chart_note = chart(summary, systems, out_prefix + ".png", run_dir)
    failed = sorted({f"{s} {w}" for s, w, _rep, _why in failures})
    status = ("**FAILED**: " + ", ".join(failed) + " (see Failures)" if failed
              else "passed: no measured run had an error")
    cap_note = (f"{capped} of {warmups} warm-ups hit the cap of rounds without converging "
                "(marked below)" if capped else f"all {warmups} warm-ups converged")
    table = results_table(summary, systems)
    ratios = ratio_table(summary, systems)
    goal_lines = goals(summary, java, failures)
    replication = replication_section(summary, raw, systems)
    fill_lines = [f"- {s}: {fmt(reps.get('1', {}).get('throughput_msgs_per_s'))} msgs/s "
                  "(async window 512)" for s, reps in sorted(fill.items())]
    page = [
        f"# Side-by-side sitting of {os.path.basename(out_prefix)}",
        "",
        f"Status: {status}. Warm-up: {cap_note}.",
        "",
        "Written by `perf/run.sh` under the rules in perf/README.md: every broker starts once "
        "per broker configuration and stays up; before every measured run, warm-up rounds of "
        "the same load (not counted) repeat until two consecutive rounds' throughputs differ "
        "by less than the tolerance in the sitting facts; the two systems' runs alternate "
        "(run pair n = run n of each). Figures are medians over the measured runs with their "
        "range and relative spread ((max − min) / median); runs that failed are left out of "
        "them and their workload is marked FAILED. Latencies in µs from "
        "comet-bench's HdrHistograms: send to acknowledgement for W1-W3 and AW, intended "
        "send time to delivery for W4 (open loop), born time to delivery for W5. Broker "
        "cores = broker CPU seconds / wall seconds during the run (from /proc/<pid>/stat; "
        "the master's for a replicated workload); "
        "the bench shares the same cores; idle peer cores is what the other system's broker, "
        "up but unused, took meanwhile.",
        "",
        "Workloads:",
        "",
        *[f"- **{w}**: {text}" for w, text in WORKLOADS],
        "",
        "## comet-bench figures",
        "",
        table,
        "",
        "## Comet / peer",
        "",
        "Ratio of the medians, and the lowest and highest ratio over run pairs.",
        "",
        ratios,
        "",
        *(["## Replication (SYNC_MASTER)", "", replication, ""] if replication else []),
        "## Apache RocketMQ's benchmark producer (rocketmq-example, 64 threads, 1 KiB)",
        "",
        "Send TPS of one 10 s window per run, after windows of warm-up under the same "
        "5% rule; failed sends counted in that window.",
        "",
        java_table(java, systems),
        "",
        "## Goals of issue 26",
        "",
        goal_lines,
        "",
        "## Warm-up evidence",
        "",
        "Each row is the warm-up before one measured run: the throughput of every round, the "
        "change between the last two, and where the measured run landed against the last "
        "round. Errors in warm-up rounds do not fail a workload; errors in measured runs do.",
        "",
        warm,
        "",
        "## Load average",
        "",
        load_table(loads),
        "",
        "## Failures",
        "",
        "\n".join(f"- {s} {w} run {rep}: {why}" for s, w, rep, why in failures)
        if failures else "None: no measured run had an error.",
        "",
        "## Sitting",
        "",
        "```",
        meta,
        "```",
        "",
        *(["W5 backlog fill:", "", *fill_lines, ""] if fill_lines else []),
        f"![chart]({os.path.basename(out_prefix)}.png)" if chart_note is None else chart_note,
        "",
    ]
    with open(out_prefix + ".md", "w") as handle:
        handle.write("\n".join(page))
    if readme and os.path.exists(readme):
        with open(readme) as handle:
            text = handle.read()
        if README_START in text and README_END in text:
            before = text.split(README_START)[0]
            after = text.split(README_END)[1]
            name = os.path.basename(out_prefix)
            block = (f"{README_START}\nFrom `results/{name}.md` (medians of the measured runs "
                     f"of that sitting, warmed). Status: {status}. Warm-up: {cap_note}.\n\n"
                     f"{table}\n\n{ratios}\n\n{goal_lines}\n{README_END}")
            with open(readme, "w") as handle:
                handle.write(before + block + after)


def w4_rate(raw, systems):
    runs = load_runs(raw)
    figures = [median([r.get("throughput_msgs_per_s") for r in runs[(s, "W1")].values()])
               for s in systems if (s, "W1") in runs]
    figures = [f for f in figures if f]
    if not figures:
        return 1000
    return max(100, int(min(figures) / 2))


def main():
    args = sys.argv[1:]
    command = args[0] if args else ""
    if command == "check" and len(args) in (2, 3):
        print(check(args[1], int(args[2]) if len(args) == 3 else 0))
    elif command == "line" and len(args) == 2:
        print(line(args[1]))
    elif command == "delta" and len(args) == 3:
        print(f"{delta_pct(args[1], args[2]):.1f}")
    elif command == "within" and len(args) == 3:
        sys.exit(0 if float(args[1]) < float(args[2]) else 1)
    elif command == "java-windows" and len(args) == 2:
        for tps, failed in java_windows(args[1]):
            print(f"{tps}\t{failed}")
    elif command == "w4-rate" and len(args) >= 2:
        print(w4_rate(args[1], args[2:]))
    elif command == "report" and "--" in args and len(args) >= 4:
        split = args.index("--")
        head, systems = args[1:split], args[split + 1:]
        readme = None
        if len(head) == 4 and head[2] == "--readme":
            readme = head[3]
        elif len(head) != 2:
            sys.exit(__doc__)
        report(head[0], head[1], readme, systems)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()

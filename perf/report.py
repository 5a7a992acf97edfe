#!/usr/bin/env python3
"""Turns one perf/run.sh sitting into a results page (markdown + PNG chart).

  report.py w4-rate RAW SYSTEM...          half the slower system's median W1 throughput
  report.py report RUN_DIR OUT_PREFIX README SYSTEM...

Inputs: RAW/<system>.<workload>.<rep>.json (comet-bench reports) and
RAW/<system>.<workload>-java.<rep>.log (the Java benchmark producer's output).
Figures are medians over the repetitions; ratios are Comet / peer.
"""

import glob
import json
import os
import re
import statistics
import subprocess
import sys

WORKLOADS = [
    ("W1", "1 KiB sync sends, 64 threads, SYNC_FLUSH"),
    ("W2", "1 KiB sync sends, 64 threads, ASYNC_FLUSH"),
    ("AW-S", "1 KiB async window 256, SYNC_FLUSH"),
    ("AW-A", "1 KiB async window 256, ASYNC_FLUSH"),
    ("W3", "128 B batches of 32, 16 threads, SYNC_FLUSH"),
    ("W4", "end-to-end at a fixed rate, SYNC_FLUSH (latency from intended send time)"),
    ("W5", "drain a backlog, one push consumer group"),
]
README_START = "<!-- perf-summary:start -->"
README_END = "<!-- perf-summary:end -->"


def load_runs(raw):
    runs = {}
    for path in glob.glob(os.path.join(raw, "*.json")):
        system, workload, _rep, _ = os.path.basename(path).split(".")
        with open(path) as handle:
            runs.setdefault((system, workload), []).append(json.load(handle))
    return runs


def load_java(raw):
    # 5.x prints "Send TPS: 7274 | Max RT(ms): 1018 | Average RT(ms):   8.373 | Send Failed: 0",
    # older releases the same without the bars.
    pattern = re.compile(r"Send TPS: (\d+)\D+Max RT\(ms\): (\d+)\D+Average RT\(ms\):\s*([\d.]+)"
                         r"\D+Send Failed: (\d+)")
    java = {}
    for path in glob.glob(os.path.join(raw, "*-java.*.log")):
        system, workload, _rep, _ = os.path.basename(path).split(".")
        with open(path, errors="replace") as handle:
            found = pattern.findall(handle.read())
        if found:
            tps, max_rt, avg_rt, failed = found[-1]
            java.setdefault((system, workload[: -len("-java")]), []).append(
                {"tps": float(tps), "max_rt_ms": float(max_rt), "avg_rt_ms": float(avg_rt),
                 "failed": int(failed)})
    return java


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarise(reports):
    def field(name):
        return median([r.get(name) for r in reports])

    def broker_cores():
        return median([(r["cpu"]["watched"] or [{}])[0].get("cpu_cores") for r in reports])

    def broker_us_per_msg():
        values = []
        for r in reports:
            watched = (r["cpu"]["watched"] or [{}])[0].get("cpu_s")
            if watched is not None and r["messages_total"]:
                values.append(watched / r["messages_total"] * 1e6)
        return median(values)

    return {
        "runs": len(reports),
        "throughput": field("throughput_msgs_per_s"),
        "p50": field("latency_us_p50"),
        "p99": field("latency_us_p99"),
        "p999": field("latency_us_p999"),
        "max": field("latency_us_max"),
        "errors": sum(r["errors_total"] + r.get("send_errors_total", 0) for r in reports),
        "missing": sum(r.get("e2e_missing_total", 0) for r in reports),
        "broker_cores": broker_cores(),
        "bench_cores": median([r["cpu"].get("bench_cpu_cores") for r in reports]),
        "broker_us_per_msg": broker_us_per_msg(),
    }


def fmt(value, digits=0):
    if value is None:
        return "–"
    if digits == 0:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def ratio(a, b, digits=2):
    if a is None or b in (None, 0):
        return "–"
    return f"{a / b:.{digits}f}×"


def w4_rate(raw, systems):
    runs = load_runs(raw)
    figures = [summarise(runs[(s, "W1")])["throughput"] for s in systems if (s, "W1") in runs]
    figures = [f for f in figures if f]
    if not figures:
        return 1000
    return max(100, int(min(figures) / 2))


def results_table(summary, systems):
    peers = [s for s in systems if s != "comet"]
    head = ["workload"]
    for s in systems:
        head += [f"{s} msgs/s", f"{s} p50 µs", f"{s} p99 µs", f"{s} p99.9 µs",
                 f"{s} broker cores", f"{s} broker µs CPU/msg"]
    for p in peers:
        head += [f"throughput comet/{p}", f"p99.9 comet/{p}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for workload, _ in WORKLOADS:
        row = [workload]
        present = False
        for s in systems:
            fig = summary.get((s, workload))
            present |= fig is not None
            fig = fig or {}
            row += [fmt(fig.get("throughput")), fmt(fig.get("p50")), fmt(fig.get("p99")),
                    fmt(fig.get("p999")), fmt(fig.get("broker_cores"), 2),
                    fmt(fig.get("broker_us_per_msg"), 1)]
        for p in peers:
            c, q = summary.get(("comet", workload), {}), summary.get((p, workload), {})
            row += [ratio(c.get("throughput"), q.get("throughput")),
                    ratio(c.get("p999"), q.get("p999"), 3)]
        if present:
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def java_table(java, systems):
    lines = ["| workload | system | Send TPS (median) | average RT ms | max RT ms | failed | runs |",
             "|---|---|---|---|---|---|---|"]
    for workload in ("W1", "W2"):
        for s in systems:
            runs = java.get((s, workload))
            if not runs:
                continue
            lines.append(f"| {workload} | {s} | {fmt(median([r['tps'] for r in runs]))} | "
                         f"{fmt(median([r['avg_rt_ms'] for r in runs]), 3)} | "
                         f"{fmt(median([r['max_rt_ms'] for r in runs]))} | "
                         f"{sum(r['failed'] for r in runs)} | {len(runs)} |")
    return "\n".join(lines) if len(lines) > 2 else "(the Java benchmark producer did not run)"


def goals(summary, java):
    def get(system, workload, key):
        return (summary.get((system, workload)) or {}).get(key)

    def verdict(ok):
        return "**met**" if ok else "**not met**"

    lines = []
    for workload, target in (("W1", 5), ("W2", 2)):
        c, a = get("comet", workload, "throughput"), get("apache", workload, "throughput")
        if c and a:
            lines.append(f"- {workload} throughput Comet/Apache ≥ {target}×: {c / a:.2f}× "
                         f"{verdict(c / a >= target)}")
        jc, ja = java.get(("comet", workload)), java.get(("apache", workload))
        if jc and ja:
            rc = median([r["tps"] for r in jc]) / max(1.0, median([r["tps"] for r in ja]))
            lines.append(f"- {workload} with the Java benchmark producer: {rc:.2f}× "
                         f"{verdict(rc >= target)}")
    c, a = get("comet", "W4", "p999"), get("apache", "W4", "p999")
    if c and a:
        lines.append(f"- W4 p99.9 Comet ≤ Apache/10: {c:,.0f} µs vs {a:,.0f} µs "
                     f"({c / a:.3f}×) {verdict(c * 10 <= a)}")
    t, p99 = get("comet", "W1", "throughput"), get("comet", "W1", "p99")
    if t and p99:
        lines.append(f"- absolute: ≥ 100k msgs/s of 1 KiB SYNC_FLUSH sends with p99 < 2 ms: "
                     f"{t:,.0f} msgs/s, p99 {p99:,.0f} µs {verdict(t >= 100_000 and p99 < 2000)}")
    return "\n".join(lines) if lines else "(not enough systems ran to compare)"


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
                row += [str(fig.get(k) or "NaN") for k in ("throughput", "p50", "p99", "p999")]
            handle.write(" ".join(row) + "\n")
    cols = len(systems)
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
set title 'throughput (msgs/s, log scale, median of runs)'
plot {tput}
set title 'latency (µs, log scale): p50, p99, p99.9'
plot {", ".join(lat)}
unset multiplot
"""
    script_path = os.path.join(workdir, "chart.gp")
    with open(script_path, "w") as handle:
        handle.write(script)
    result = subprocess.run([gnuplot, script_path], capture_output=True, text=True)
    if result.returncode != 0:
        return f"no chart: gnuplot failed ({result.stderr.strip()[:200]})"
    del cols
    return None


def report(run_dir, out_prefix, readme, systems):
    raw = os.path.join(run_dir, "raw")
    runs, java = load_runs(raw), load_java(raw)
    summary = {key: summarise(value) for key, value in runs.items()}
    with open(os.path.join(run_dir, "meta.txt")) as handle:
        meta = handle.read().strip()
    chart_note = chart(summary, systems, out_prefix + ".png", run_dir)
    errors = [f"{s} {w}: {fig['errors']} errors" + (f", {fig['missing']} missing" if fig["missing"] else "")
              for (s, w), fig in sorted(summary.items()) if fig["errors"] or fig["missing"]]
    w5 = summary.get(("comet", "W5-fill")) or summary.get(("apache", "W5-fill"))
    table = results_table(summary, systems)
    page = [
        f"# Side-by-side run of {os.path.basename(out_prefix)}",
        "",
        "Written by `perf/run.sh`. Medians over the repetitions; ratios are Comet / peer "
        "(throughput: higher is better for Comet above 1×; p99.9: lower is better below 1×). "
        "Latencies in µs from comet-bench's HdrHistograms: send to acknowledgement for W1-W3 "
        "and AW, intended send time to delivery for W4 (open loop), born time to delivery for "
        "W5. Broker cores = broker CPU seconds / wall seconds during the run (from "
        "/proc/<pid>/stat); the bench shares the same cores.",
        "",
        "Workloads:",
        "",
        *[f"- **{w}**: {text}" for w, text in WORKLOADS],
        "",
        "## comet-bench figures",
        "",
        table,
        "",
        "## Apache RocketMQ's benchmark producer (rocketmq-example, 64 threads, 1 KiB)",
        "",
        java_table(java, systems),
        "",
        "## Goals of issue 7",
        "",
        goals(summary, java),
        "",
        "## Errors",
        "",
        "\n".join(f"- {e}" for e in errors) if errors else "None in any run.",
        "",
        "## Sitting",
        "",
        "```",
        meta,
        f"W5 backlog fill: {fmt((w5 or {}).get('throughput'))} msgs/s (async window 512)",
        "```",
        "",
        f"![chart]({os.path.basename(out_prefix)}.png)" if chart_note is None else chart_note,
        "",
    ]
    with open(out_prefix + ".md", "w") as handle:
        handle.write("\n".join(page))
    if os.path.exists(readme):
        with open(readme) as handle:
            text = handle.read()
        if README_START in text and README_END in text:
            before = text.split(README_START)[0]
            after = text.split(README_END)[1]
            name = os.path.basename(out_prefix)
            block = (f"{README_START}\nFrom `results/{name}.md` (medians of the runs of that "
                     f"sitting):\n\n{table}\n\n{goals(summary, java)}\n{README_END}")
            with open(readme, "w") as handle:
                handle.write(before + block + after)


def main():
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "w4-rate":
        print(w4_rate(sys.argv[2], sys.argv[3:]))
    elif command == "report":
        report(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()

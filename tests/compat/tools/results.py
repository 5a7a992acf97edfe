#!/usr/bin/env python3
"""Writes tests/compat/RESULTS.md from a compatibility run (standard library only).

run.sh calls it at the end of every run that started its own broker (`--against comet` or
`--against apache`):

  results.py --results RESULTS.md --target comet|apache --run-dir DIR --suites java5,go,...
             --date YYYY-MM-DD --commit SHA [--only step,...]

Each suite's stdout is DIR/<suite>.log and its exit status DIR/<suite>.rc. Every suite prints
one `PASS <step> ...` or `FAIL <step>[:] ...` line per step (scenario or check); each becomes
one row. A suite with no log is reported "not run"; one that printed no PASS/FAIL line is
reported as a failure of the whole suite with its exit status.

The file keeps one row per (suite, step) with a result against Comet and one against Apache
RocketMQ, each with the date and commit of the run that produced it: a run replaces its
target's results for the suites it ran and keeps everything else, so a run of a few suites,
or of the reverse suite against Apache, does not erase the rest. With --only (a run of some
steps of the suites) only those steps' results are replaced. Nothing here may fail a run:
run.sh reports an error from this script as a warning.
"""
import argparse
import os
import re
import sys

TARGETS = ("comet", "apache")
COLUMNS = ("suite", "step", "Comet", "Comet run", "Apache RocketMQ", "Apache run")
# Suites in the order run.sh lists them; a suite not listed sorts after these, by name.
SUITE_ORDER = (
    "java5", "java4", "admin5", "admin4", "acl5", "acl4", "ha", "tls5", "go", "python",
    "node-cpp", "node-ons", "rust", "reverse",
)
WHOLE_SUITE = "(whole suite)"
# Longest failure reason kept in a cell (the full line is in the run's log).
REASON_CHARS = 120
LINE = re.compile(r"^(PASS|FAIL) +([^ :]+):?")

HEADER = """# Compatibility results

Written by `tests/compat/run.sh` at the end of each run that starts its own broker
(`--against comet`, `--against apache`); not edited by hand. How the suites run and what each
step checks: [README.md](README.md). A run replaces the results of the suites it ran against
its broker and keeps the others, so each result carries the date and commit of its run.
"not run": the suite was asked for but left no output. Empty: never run against that broker.
"""


def cell(text):
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ").strip()


def read_rows(path):
    """(suite, step) -> {column: value} from an existing results file, in file order."""
    rows = {}
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return rows
    for line in lines:
        if not line.startswith("| ") or line.startswith("| suite |"):
            continue
        # Split on bars not escaped with a backslash.
        parts = [p.strip().replace("\\|", "|") for p in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(parts) != len(COLUMNS):
            continue
        row = dict(zip(COLUMNS, parts))
        rows[(row["suite"], row["step"])] = row
    return rows


def suite_results(run_dir, suite):
    """[(step, result)] of one suite's run."""
    log = os.path.join(run_dir, suite + ".log")
    try:
        with open(log, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return [(WHOLE_SUITE, "not run")]
    results = []
    for line in lines:
        match = LINE.match(line)
        if not match:
            continue
        verdict, step = match.group(1), match.group(2)
        if verdict == "FAIL":
            # `FAIL name (ms): reason` or `FAIL name: reason`: the reason, shortened.
            rest = line[match.end():]
            reason = rest.split("): ", 1)[1] if "): " in rest else rest.lstrip(": ")
            reason = reason.strip()
            if len(reason) > REASON_CHARS:
                reason = reason[:REASON_CHARS - 3] + "..."
            verdict = "FAIL: " + reason if reason else verdict
        results.append((step, verdict))
    if not results:
        try:
            with open(os.path.join(run_dir, suite + ".rc"), encoding="utf-8") as handle:
                status = handle.read().strip() or "unknown"
        except OSError:
            status = "unknown"
        results.append((WHOLE_SUITE, "FAIL: exited %s without a PASS or FAIL line" % status))
    return results


def merge(rows, target, suites, run_dir, date, commit, only=None):
    """Replaces `target`'s results of `suites` in `rows` with this run's; with `only`, just
    the results of those steps."""
    result_column = "Comet" if target == "comet" else "Apache RocketMQ"
    run_column = result_column.split(" ")[0] + " run"
    for key in list(rows):
        if key[0] in suites and (only is None or key[1] in only):
            rows[key][result_column] = ""
            rows[key][run_column] = ""
            if not any(rows[key][c] for c in COLUMNS[2:]):
                del rows[key]
    for suite in suites:
        for step, result in suite_results(run_dir, suite):
            row = rows.setdefault((suite, step), {c: "" for c in COLUMNS})
            row["suite"], row["step"] = suite, step
            row[result_column] = result
            row[run_column] = "%s %s" % (date, commit)
    return rows


def render(rows):
    """The whole results file."""
    order = {suite: index for index, suite in enumerate(SUITE_ORDER)}
    # Stable sort: steps keep their order within a suite.
    keys = sorted(rows, key=lambda key: (order.get(key[0], len(order)), key[0]))
    out = [HEADER, "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for key in keys:
        out.append("| " + " | ".join(cell(rows[key][c]) for c in COLUMNS) + " |")
    return "\n".join(out) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", required=True, help="the results file to update")
    parser.add_argument("--target", required=True, choices=TARGETS)
    parser.add_argument("--run-dir", required=True, help="holds <suite>.log and <suite>.rc")
    parser.add_argument("--suites", required=True, help="comma-separated suite ids run")
    parser.add_argument("--date", required=True)
    parser.add_argument("--commit", required=True)
    parser.add_argument("--only", help="comma-separated steps: replace only their results")
    args = parser.parse_args()
    suites = [s for s in args.suites.split(",") if s]
    only = {s for s in args.only.split(",") if s} if args.only else None
    rows = merge(read_rows(args.results), args.target, suites, args.run_dir, args.date,
                 args.commit, only)
    temporary = args.results + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(render(rows))
    os.replace(temporary, args.results)
    print("compat: results written to %s" % args.results, file=sys.stderr)


if __name__ == "__main__":
    main()

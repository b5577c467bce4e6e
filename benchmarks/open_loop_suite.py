"""Open loop, live and consistency on five testbeds (issue 41): one reproducible run, one summary, per tool kind.

    OMP_NUM_THREADS=1 python benchmarks/open_loop_suite.py [--out /tmp/open-loop-suite] \
        [--testbeds toolshop,bfcl,agentdojo-workspace,agentdojo-slack,agentdojo-travel] [--toolshop-episodes 300] \
        [--bfcl-entries 200] [--agentdojo-policies expert,probing,random] [--agentdojo-probing-rounds 2] \
        [--sessions 30] [--steps 12] [--resamples 2000]

Per testbed, into OUT (a new folder; one workspace, OUT/workspace):
1. collects construction+evaluation recordings from the real environment, mixing policies (toolshop: expert and
   probing, `--toolshop-episodes` each; BFCL: expert and curious on multi-turn entries 0..N-1, `--bfcl-entries`,
   entry i from category i mod 4 of base, miss_func, miss_param, long_context: entry i of every category is one
   question, miss_func's and miss_param's expert paths repeat base's verbatim, so no index is recorded twice;
   AgentDojo: `--agentdojo-policies`, one expert and one random episode per user task, `--agentdojo-probing-rounds`
   probing ones, random capped at 20 steps, `--no-state`), exported as JSONL (OUT/data/TESTBED.jsonl);
2. runs `benchmarks/open_loop.py --split-by task --per-tool` on it (teacher forced and open loop, harness against
   nearest evidence, paired cluster-bootstrap intervals; OUT/open_loop/TESTBED.json);
3. ingests it into dataset TESTBED, splits it by task (`worldsmith split`, train 0.75 / test 0.25, seed 0: the
   split is by trajectory family, which for these testbeds is the task), builds book TESTBED on train, runs
   `worldsmith eval --protocol live --drop-leaked` on one test episode per test task with the expert and the
   probing policy (harness and nearest; a test episode whose trajectory the book holds under another task id is
   left out and counted), and `worldsmith consistency` (harness and nearest, `--sessions` x `--steps`, seed 0);
4. writes OUT/summary.json and OUT/tables.md and prints the tables: per environment, and per environment per tool
   kind (read / write / other: each tool's role in the consistency report's plan of the TESTBED book; "unplanned"
   where the plan names no such tool), turns-weighted exact match of open_loop.py's per-tool rows.

open_loop.py splits by a hash of the task (75/25) and `worldsmith split` by its own seeded hash of the family:
both hold out whole tasks, not the same ones. A step that fails is recorded (its command, exit status and the end
of its error output) in the summary and the tables, and the steps that need it are skipped; the run goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

HERE = Path(__file__).resolve().parent
TESTBEDS = ("toolshop", "bfcl", "agentdojo-workspace", "agentdojo-slack", "agentdojo-travel")
BFCL_CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
LIVE_POLICIES = ("expert", "probing")
METHODS = ("harness", "nearest")
INVARIANTS = ("repeated_reads", "answers_about_id", "stable_existence", "spelling", "write_then_read")
KINDS = ("read", "write", "other", "unplanned")
PROTOCOLS = {"teacher-forced": "TF", "open-loop": "OL"}


class StepFailed(Exception):
    """A command of the suite exited non-zero: its command line, status and the end of its error output."""


class Suite:
    """One run: the OUT folder, its workspace and logs, and every step's outcome."""

    def __init__(self, out: Path, args: argparse.Namespace) -> None:
        self.out, self.args = out, args
        self.workspace = out / "workspace"
        self.env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
        self.steps: dict[str, dict[str, Any]] = {}

    def command(self, name: str, argv: list[str], *, parse_json: bool = True) -> Any:
        """Run argv (stderr to OUT/logs/NAME.log), record its seconds and status; its stdout parsed as JSON."""
        logs = self.out / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        with open(logs / f"{name}.log", "wb") as log:
            done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=log, env=self.env, cwd=HERE.parent)
        seconds = round(time.perf_counter() - started, 1)
        (logs / f"{name}.out").write_bytes(done.stdout)
        self.steps[name] = {"seconds": seconds, "rc": done.returncode}
        print(f"  {name}: {seconds}s" + ("" if done.returncode == 0 else f" FAILED ({done.returncode})"), flush=True)
        if done.returncode != 0:
            tail = (logs / f"{name}.log").read_text(errors="replace").strip().splitlines()[-3:]
            raise StepFailed(f"`{' '.join(argv[1:4])} ...` exited {done.returncode}: {' / '.join(tail)[-600:]}")
        return json.loads(done.stdout) if parse_json else done.stdout.decode()

    def worldsmith(self, name: str, *argv: str) -> Any:
        return self.command(name, [sys.executable, "-m", "worldsmith", *argv, "--workspace", str(self.workspace),
                                   "--json"])


def collect_plan(testbed: str, args: argparse.Namespace) -> list[tuple[str, list[str], int]]:
    """(policy, collect arguments, rounds) per recording policy of the testbed; rounds > 1: that many episodes per
    task (new seeds), counted from an earlier policy's work items (else one per task)."""
    if testbed == "toolshop":
        return [(policy, ["--policy", policy, "--episodes", str(args.toolshop_episodes), "--keep", "all"], 1)
                for policy in ("expert", "probing")]
    if testbed == "bfcl":
        # entry i of every category is one question (miss_func_i and miss_param_i replay base_i's expert path):
        # one category per entry index, rotating, so no entry is on both sides of a task split
        tasks = [f"{BFCL_CATEGORIES[i % len(BFCL_CATEGORIES)]}_{i}" for i in range(args.bfcl_entries)]
        return [(policy, ["--tasks", *tasks, "--policy", policy, "--keep", "all"], 1) for policy in ("expert", "curious")]
    extra = {"random": ["--max-steps", "20"]}
    rounds = {"probing": args.agentdojo_probing_rounds}
    return [(policy, ["--policy", policy, "--keep", "all", "--no-state", *extra.get(policy, [])], rounds.get(policy, 1))
            for policy in args.agentdojo_policies]


def collect(suite: Suite, testbed: str) -> tuple[Path, dict[str, Any]]:
    """Record the testbed under each policy of its plan; one JSONL of all of them."""
    data = suite.out / "data"
    data.mkdir(parents=True, exist_ok=True)
    sizes: dict[str, Any] = {}
    tasks = 0
    for policy, argv, rounds in collect_plan(testbed, suite.args):
        if rounds > 1 and tasks:
            argv += ["--episodes", str(rounds * tasks)]
        dataset = f"{testbed}-{policy}"
        report = suite.worldsmith(f"{testbed}.collect.{policy}", "collect", testbed, *argv, "--dataset", dataset)
        tasks = tasks or report["work_items"]
        path = data / f"{dataset}.jsonl"
        suite.worldsmith(f"{testbed}.export.{policy}", "export", "--dataset", dataset, "--format", "jsonl",
                         "--out", str(path))
        lines = [line for line in path.read_text().splitlines() if line.strip()]
        sizes[policy] = {"episodes": len(lines), "turns": sum(len(json.loads(line)["turns"]) for line in lines),
                         "status": report["status"]}
    combined = data / f"{testbed}.jsonl"
    combined.write_text("".join((data / f"{testbed}-{policy}.jsonl").read_text() for policy in sizes))
    return combined, sizes


def one_per_task(source: Path, target: Path) -> int:
    """The episodes of `source` one per task (the expert's where there is one): what the live protocol plays."""
    chosen: dict[str, dict[str, Any]] = {}
    for line in source.read_text().splitlines():
        if line.strip():
            episode = json.loads(line)
            task = episode.get("task_id") or episode["id"]
            if task not in chosen or (episode.get("metadata") or {}).get("policy") == "expert":
                chosen[task] = episode
    target.write_text("".join(json.dumps(e) + "\n" for e in chosen.values()))
    return len(chosen)


def run_testbed(suite: Suite, testbed: str) -> dict[str, Any]:
    """Every measurement of one testbed; a failed step's error under `errors`, what needed it skipped."""
    result: dict[str, Any] = {"errors": {}}
    args = suite.args

    def attempt(step: str, work: Any) -> Any:
        try:
            return work()
        except StepFailed as failure:
            result["errors"][step] = str(failure)
            return None

    print(f"{testbed}:", flush=True)
    collected = attempt("collect", lambda: collect(suite, testbed))
    if collected is None:
        return result
    data, result["collected"] = collected
    open_loop_out = suite.out / "open_loop" / f"{testbed}.json"
    if attempt("open_loop", lambda: suite.command(f"{testbed}.open_loop", [
            sys.executable, str(HERE / "open_loop.py"), "--split-by", "task", "--per-tool", "--env",
            f"{testbed}={data}", "--resamples", str(args.resamples), "--out", str(open_loop_out)],
            parse_json=False)) is not None:
        result["open_loop"] = json.loads(open_loop_out.read_text())["results"][testbed]
    if attempt("ingest", lambda: suite.worldsmith(f"{testbed}.ingest", "ingest", str(data), "--dataset", testbed)) is None:
        return result
    result["split"] = attempt("split", lambda: suite.worldsmith(
        f"{testbed}.split", "split", "--dataset", testbed, "--ratios", "train=0.75,test=0.25", "--seed", "0"))
    build = attempt("build", lambda: suite.worldsmith(f"{testbed}.build", "build", "--dataset", testbed,
                                                       "--split", "train", "--out", testbed))
    if result["split"] is None or build is None:
        return result
    result["book"] = {key: build.get(key) for key in ("version", "episodes", "rules", "evidence")}
    test = suite.out / "data" / f"{testbed}.test.jsonl"
    live = f"{testbed}-live"
    if attempt("live data", lambda: suite.worldsmith(f"{testbed}.export.test", "export", "--dataset", testbed,
                                                     "--split", "test", "--format", "jsonl", "--out", str(test))):
        result["live_tasks"] = one_per_task(test, suite.out / "data" / f"{live}.jsonl")
        attempt("live data", lambda: suite.worldsmith(f"{testbed}.ingest.live", "ingest",
                                                      str(suite.out / "data" / f"{live}.jsonl"), "--dataset", live))
    if "live data" not in result["errors"]:
        result["live"] = {}
        for policy in LIVE_POLICIES:
            run = f"{testbed}-live-{policy}"
            report = attempt(f"live {policy}", lambda policy=policy, run=run: suite.worldsmith(
                f"{testbed}.live.{policy}", "eval", "--book", testbed, "--dataset", live, "--protocol", "live",
                "--policy", policy, "--methods", ",".join(METHODS), "--resamples", str(args.resamples),
                "--drop-leaked", "--out", run))
            if report is not None:
                result["live"][policy] = live_summary(report, suite.workspace / "runs" / "eval" / run)
    result["consistency"] = {}
    for method in METHODS:
        report = attempt(f"consistency {method}", lambda method=method: suite.worldsmith(
            f"{testbed}.consistency.{method}", "consistency", "--book", testbed, "--method", method,
            "--sessions", str(args.sessions), "--steps", str(args.steps), "--seed", "0"))
        if report is not None:
            result["consistency"][method] = {key: report[key] for key in
                                             ("predictions", "checks", "violations", "invariants", "tools", "plan")}
    return result


def live_summary(report: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """Exact match all and knowable per method, the paired difference, and per tool from the run's records."""
    dropped = (report.get("leakage") or {}).get("dropped") or {}
    out: dict[str, Any] = {"records": report.get("records"), "dropped_leaked": dropped.get("count", 0),
                           "dropped_why": dropped.get("episodes", {})}
    for method in METHODS:
        cells = report["methods"][method]
        out[method] = {key: cells.get(key) for key in ("exact_match", "exact_match_knowable", "novel_share")}
    out["harness - nearest"] = report.get("pairs", {}).get("harness vs nearest", {}).get("exact_match")
    records = pd.read_parquet(run_dir / "records.parquet", columns=["method", "action", "exact_match", "novel"])
    records["tool"] = records["action"].str.extract(r"^([^\s(]+)", expand=False)  # `name {json}` or `name(args)`
    per_tool: dict[str, dict[str, Any]] = defaultdict(dict)
    for (tool, method), rows in records.groupby(["tool", "method"]):
        known = rows[~rows["novel"].astype(bool)]
        per_tool[str(tool)].update({"turns": len(rows), "knowable": len(known), f"{method} all": rows["exact_match"].mean(),
                                    f"{method} knowable": known["exact_match"].mean() if len(known) else None})
    out["per_tool"] = dict(per_tool)
    return out


# --------------------------------------------------------------------------------------------
# Tool kinds and tables
# --------------------------------------------------------------------------------------------

def roles(result: dict[str, Any]) -> dict[str, str]:
    """tool -> read / write / other, from the consistency plan of the testbed's book (harness's, else nearest's)."""
    for method in METHODS:
        report = result.get("consistency", {}).get(method)
        if report:
            return {tool["name"]: tool["role"] for tool in report["plan"]["tools"]}
    return {}


def by_kind(per_tool: dict[str, dict[str, Any]], role: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Per tool kind: turns, knowable turns and each method's turns-weighted exact match on all and knowable turns."""
    sums: dict[str, dict[str, Any]] = {}
    for tool, row in per_tool.items():
        kind = role.get(tool, "unplanned")
        entry = sums.setdefault(kind, {"turns": 0, "knowable": 0, "tools": 0,
                                       **{f"{m} {s}": 0.0 for m in METHODS for s in ("all", "knowable")}})
        entry["turns"] += row["turns"]
        entry["knowable"] += row["knowable"]
        entry["tools"] += 1
        for method in METHODS:
            entry[f"{method} all"] += (row[f"{method} all"] or 0.0) * row["turns"]
            entry[f"{method} knowable"] += (row[f"{method} knowable"] or 0.0) * row["knowable"]
    for entry in sums.values():
        for method in METHODS:
            entry[f"{method} all"] = round(entry[f"{method} all"] / entry["turns"], 4) if entry["turns"] else None
            entry[f"{method} knowable"] = (round(entry[f"{method} knowable"] / entry["knowable"], 4)
                                           if entry["knowable"] else None)
    return sums


def consistency_by_kind(report: dict[str, Any], role: dict[str, str]) -> dict[str, dict[str, int]]:
    """Per tool kind: the checks and violations of every invariant together."""
    out: dict[str, dict[str, int]] = {}
    for tool, invariants in report["tools"].items():
        entry = out.setdefault(role.get(tool, "unplanned"), {"checks": 0, "violations": 0})
        for counts in invariants.values():
            entry["checks"] += counts["checks"]
            entry["violations"] += counts["violations"]
    return out


def kinds(results: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per testbed, per tool kind: open_loop.py's TF and OL rows, the live rows per policy, consistency."""
    out: dict[str, dict[str, Any]] = {}
    for testbed, result in results.items():
        role = roles(result)
        entry: dict[str, Any] = {"roles": role}
        for protocol in PROTOCOLS:
            if "open_loop" in result:
                entry[protocol] = by_kind(result["open_loop"][protocol]["per_tool"], role)
        for policy, live in result.get("live", {}).items():
            entry[f"live {policy}"] = by_kind(live["per_tool"], role)
        for method, report in result.get("consistency", {}).items():
            entry[f"consistency {method}"] = consistency_by_kind(report, role)
        out[testbed] = entry
    return out


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}"


def _mean(cell: dict[str, Any] | None) -> str:
    return "-" if not cell or cell.get("mean") is None else f"{cell['mean']:.3f}"


def _interval(cell: dict[str, Any] | None, key: str = "mean") -> str:
    if not cell or cell.get(key) is None:
        return "-"
    return f"{cell[key]:+.3f} [{cell['low']:+.3f}, {cell['high']:+.3f}]"


def _rate(violations: int, checks: int) -> str:
    return f"{violations / checks:.3f} ({checks})" if checks else "- (0)"


def environment_table(results: dict[str, dict[str, Any]]) -> str:
    lines = ["| env | eval turns | TF exact all / knowable, harness (nearest) | OL exact all / knowable, harness "
             "(nearest) | OL harness - nearest, all [95%] | OL harness - nearest, knowable [95%] | live expert: "
             "harness / nearest all (knowable) | live probing: harness / nearest all (knowable) | consistency "
             "violations harness / nearest (checks) |", "|---|---|---|---|---|---|---|---|---|"]
    for testbed, result in results.items():
        cells = [testbed]
        loop = result.get("open_loop")
        if loop:
            cells.append(str(loop["evaluation"]["turns"]))
            for protocol in PROTOCOLS:
                h, n = loop[protocol]["harness"], loop[protocol]["nearest"]
                cells.append(f"{_mean(h['all'])} / {_mean(h['knowable'])} ({_mean(n['all'])} / {_mean(n['knowable'])})")
            diff = loop["open-loop"]["harness - nearest"]
            cells += [_interval(diff["all"]), _interval(diff["knowable"])]
        else:
            cells += ["-"] * 5
        for policy in LIVE_POLICIES:
            live = result.get("live", {}).get(policy)
            cells.append("-" if live is None else
                         f"{_mean(live['harness']['exact_match'])} / {_mean(live['nearest']['exact_match'])} "
                         f"({_mean(live['harness']['exact_match_knowable'])} / "
                         f"{_mean(live['nearest']['exact_match_knowable'])})")
        consistency = result.get("consistency", {})
        cells.append(" / ".join(_rate(consistency[m]["violations"], consistency[m]["checks"]) if m in consistency
                                else "-" for m in METHODS))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def invariant_table(results: dict[str, dict[str, Any]]) -> str:
    lines = ["| env | method | " + " | ".join(INVARIANTS) + " |", "|---|---|" + "---|" * len(INVARIANTS)]
    for testbed, result in results.items():
        for method, report in result.get("consistency", {}).items():
            cells = [_rate(report["invariants"][i]["violations"], report["invariants"][i]["checks"])
                     for i in INVARIANTS]
            lines.append(f"| {testbed} | {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def kind_table(by_testbed: dict[str, dict[str, Any]]) -> str:
    lines = ["| env | kind | tools | OL turns (knowable) | TF exact all / knowable, harness (nearest) | OL exact all / "
             "knowable, harness (nearest) | live expert+probing turns | live exact all, harness / nearest "
             "(expert; probing) | consistency violations harness / nearest (checks) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for testbed, entry in by_testbed.items():
        present = [k for k in KINDS if any(k in entry.get(part, {}) for part in entry if part != "roles")]
        for kind in present:
            ol = entry.get("open-loop", {}).get(kind)
            cells = [testbed, kind, str(ol["tools"]) if ol else "-",
                     f"{ol['turns']} ({ol['knowable']})" if ol else "-"]
            for protocol in PROTOCOLS:
                row = entry.get(protocol, {}).get(kind)
                cells.append("-" if row is None else f"{_num(row['harness all'])} / {_num(row['harness knowable'])} "
                                                     f"({_num(row['nearest all'])} / {_num(row['nearest knowable'])})")
            live = [entry.get(f"live {p}", {}).get(kind) for p in LIVE_POLICIES]
            cells.append(" + ".join("-" if row is None else str(row["turns"]) for row in live))
            cells.append("; ".join("-" if row is None else f"{_num(row['harness all'])} / {_num(row['nearest all'])}"
                                   for row in live))
            cells.append(" / ".join(_rate(entry[f"consistency {m}"][kind]["violations"],
                                          entry[f"consistency {m}"][kind]["checks"])
                                    if kind in entry.get(f"consistency {m}", {}) else "-" for m in METHODS))
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def sizes_table(results: dict[str, dict[str, Any]]) -> str:
    lines = ["| env | recorded episodes / turns per policy | open_loop.py construction / evaluation episodes | "
             "book (train) episodes / rules | live tasks (leaked, left out) | errors |", "|---|---|---|---|---|---|"]
    for testbed, result in results.items():
        collected = "; ".join(f"{p} {s['episodes']} / {s['turns']}" for p, s in result.get("collected", {}).items())
        loop = result.get("open_loop")
        split = (f"{loop['construction']['episodes']} / {loop['evaluation']['episodes']}" if loop else "-")
        book = result.get("book")
        books = f"{book['episodes']} / {book['rules']}" if book else "-"
        dropped = {live.get("dropped_leaked", 0) for live in result.get("live", {}).values()}
        leaked = f" ({'/'.join(str(d) for d in sorted(dropped))})" if dropped else ""
        errors = "; ".join(f"**{step}**: {message}" for step, message in result["errors"].items()) or "none"
        lines.append(f"| {testbed} | {collected or '-'} | {split} | {books} | {result.get('live_tasks', '-')}{leaked} "
                     f"| {errors.replace('|', '/')} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/open-loop-suite"), help="a new folder")
    parser.add_argument("--testbeds", type=lambda s: [t for t in s.split(",") if t], default=list(TESTBEDS))
    parser.add_argument("--toolshop-episodes", type=int, default=300, help="per policy (expert, probing)")
    parser.add_argument("--bfcl-entries", type=int, default=200,
                        help="BFCL multi-turn entries 0..N-1 (at most 200), entry i of category i mod 4")
    parser.add_argument("--agentdojo-policies", type=lambda s: [p for p in s.split(",") if p],
                        default=["expert", "probing", "random"])
    parser.add_argument("--agentdojo-probing-rounds", type=int, default=2, help="probing episodes per user task")
    parser.add_argument("--sessions", type=int, default=30, help="consistency probe sessions")
    parser.add_argument("--steps", type=int, default=12, help="consistency probe steps per session")
    parser.add_argument("--resamples", type=int, default=2_000, help="bootstrap resamples")
    args = parser.parse_args()
    unknown = [t for t in args.testbeds if t not in TESTBEDS]
    if unknown or "banking" in ",".join(args.testbeds):
        raise SystemExit(f"--testbeds: unknown {unknown}; choose from {', '.join(TESTBEDS)}")
    if args.out.exists() and any(args.out.iterdir()):
        raise SystemExit(f"{args.out}: exists and is not empty; name a new --out folder")
    args.out.mkdir(parents=True, exist_ok=True)
    suite = Suite(args.out, args)
    started = time.perf_counter()
    results = {testbed: run_testbed(suite, testbed) for testbed in args.testbeds}
    by_testbed = kinds(results)
    tables = "\n\n".join([
        "### Data and errors\n\n" + sizes_table(results),
        "### Per environment\n\n" + environment_table(results),
        "### Consistency violation rate per invariant (checks)\n\n" + invariant_table(results),
        "### Per environment per tool kind (turns-weighted exact match)\n\n" + kind_table(by_testbed)])
    wall = round(time.perf_counter() - started, 1)
    summary = {"when": datetime.now(UTC).isoformat(timespec="seconds"),
               "machine": f"{platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}",
               "wall_s": wall, "arguments": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
               "steps": suite.steps, "results": results, "by_kind": by_testbed}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    (args.out / "tables.md").write_text(tables + "\n")
    print(tables)
    print(f"\nwall {wall}s; summary in {args.out / 'summary.json'}")


if __name__ == "__main__":
    main()

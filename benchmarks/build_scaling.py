"""The default `worldsmith build` over a curve of dataset sizes: CPU, wall, peak memory of all its processes and
each stage's seconds and peak memory, for one or more checkouts side by side.

    OMP_NUM_THREADS=1 python benchmarks/build_scaling.py [--sizes 2000 8000] [--repeats 1]
        [--code before=/path/to/old/lib --code after=lib] [--build-args "--workers 2"] [--code-args "after=--workers 1"]
        [--data-dir /tmp/build-scaling] [--out benchmarks/results/build_scaling.json]

Data: toolshop conversations in the OpenAI chat format (`data_samples/make_toolshop.py --conversations N`), each size
ingested once into its own workspace under `--data-dir`. Each build is `python -m worldsmith build --workspace W
--dataset d --out bN --progress FILE` (plus `--build-args`) in its own process with `PYTHONPATH` set to the
`--code` library, the codes interleaved within each repeat (the host is shared: compare codes of one run only). Per
build: CPU seconds of the build and every process it started (`RUSAGE_CHILDREN`), wall seconds, the peak of the
summed resident memory of its process tree (sampled every `--sample-s` from /proc), and per stage (from the
progress events) its wall seconds, the tree's CPU seconds (sampled) and its peak memory while it ran. Printed: the median over repeats per code and
size, the CPU ratio between consecutive sizes and per stage the seconds; written as JSON to `--out`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")


def dataset(size: int, data_dir: Path) -> Path:
    """A workspace holding dataset `d` of `size` toolshop conversations (made and ingested on first use)."""
    workspace = data_dir / f"ws{size}"
    if (workspace / "ready").exists():
        return workspace
    conversations = data_dir / f"conv{size}.openai.jsonl"
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'lib'}{os.pathsep}{REPO}"}
    subprocess.run([sys.executable, str(REPO / "data_samples" / "make_toolshop.py"), "--no-samples", "--conversations",
                    str(size), "--conversations-out", str(conversations)], check=True, env=env)
    shutil.rmtree(workspace, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "worldsmith", "ingest", "--workspace", str(workspace), "--dataset", "d",
                    str(conversations)], check=True, env=env, stdout=subprocess.DEVNULL)
    (workspace / "ready").write_text("", encoding="utf-8")
    return workspace


def tree_usage(root: int) -> tuple[int, float]:
    """(bytes resident, CPU seconds so far) of `root` and every process below it (one pass over /proc); the CPU
    counts the processes `root` has already waited for (its children's times)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            statm = Path(f"/proc/{entry}/statm").read_text().split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
        rss[int(entry)] = int(statm[1]) * PAGE
        # utime, stime (fields 14, 15 of stat: 11, 12 here), and for the root its waited children's (16, 17)
        cpu[int(entry)] = (int(fields[11]) + int(fields[12])
                           + (int(fields[13]) + int(fields[14]) if int(entry) == root else 0)) / TICKS
    total, seconds, todo = 0, 0.0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        seconds += cpu.get(pid, 0.0)
        todo += children.get(pid, [])
    return total, seconds


class MemorySampler(threading.Thread):
    """(time, tree rss, tree CPU seconds) every `every` seconds until stopped."""

    def __init__(self, pid: int, every: float) -> None:
        super().__init__(daemon=True)
        self.pid, self.every = pid, every
        self.samples: list[tuple[float, int, float]] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            self.samples.append((time.time(), *tree_usage(self.pid)))
            self.stopped.wait(self.every)


def stage_rows(progress: Path, samples: list[tuple[float, int, float]]) -> dict[str, dict[str, float]]:
    """Per stage: its seconds (from the build's own events), the tree's CPU seconds (sampled: to `--sample-s`) and
    its peak resident MB while it ran."""
    rows: dict[str, dict[str, float]] = {}
    started: dict[str, float] = {}
    for line in progress.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event["state"] == "started":
            started[event["stage"]] = event["t"]
        elif event["state"] == "finished":
            begin = started.get(event["stage"], event["t"] - event["seconds"])
            during = [(rss, cpu) for t, rss, cpu in samples if begin <= t <= event["t"]]
            before = [cpu for t, _, cpu in samples if t < begin]
            spent = during[-1][1] - (before[-1] if before else 0.0) if during else 0.0
            rows[event["stage"]] = {"seconds": event["seconds"], "cpu_s": round(spent, 2),
                                    "peak_mb": round(max((rss for rss, _ in during), default=0) / 2**20, 1)}
    return rows


def build_once(workspace: Path, lib: str, build_args: list[str], every: float, tag: str) -> dict[str, Any]:
    progress = workspace / f"progress-{tag}.jsonl"
    progress.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": f"{lib}{os.pathsep}{REPO}", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "worldsmith", "build", "--workspace", str(workspace), "--dataset", "d",
               "--out", f"b-{tag}", "--progress", str(progress), *build_args]  # a new name: a new stage cache
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = MemorySampler(process.pid, every)
    sampler.start()
    out, err = process.communicate()
    wall = time.perf_counter() - started
    sampler.stopped.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if process.returncode != 0:
        raise SystemExit(f"build failed ({' '.join(map(shlex.quote, command))}):\n{err[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    peak = max((rss for _, rss, _ in sampler.samples), default=0)
    return {"cpu_s": round(cpu, 2), "wall_s": round(wall, 2), "peak_mb": round(peak / 2**20, 1),
            "stages": stage_rows(progress, sampler.samples), "summary": out.strip().splitlines()[0]}


def median_row(runs: list[dict[str, Any]]) -> dict[str, Any]:
    row: dict[str, Any] = {key: statistics.median(r[key] for r in runs) for key in ("cpu_s", "wall_s", "peak_mb")}
    row["stages"] = {stage: {key: statistics.median(r["stages"][stage][key] for r in runs)
                             for key in ("seconds", "cpu_s", "peak_mb")} for stage in runs[0]["stages"]}
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[1000, 2000, 8000])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--code", action="append", default=None, help="NAME=LIBDIR (default: this checkout's lib)")
    parser.add_argument("--build-args", default="", help="more `worldsmith build` arguments, e.g. '--workers 2'")
    parser.add_argument("--code-args", action="append", default=[],
                        help="NAME=ARGS: more build arguments for one code only (e.g. 'after=--workers 1')")
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/build-scaling"))
    parser.add_argument("--sample-s", type=float, default=0.1, help="how often the memory of the tree is read")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "build_scaling.json")
    args = parser.parse_args(argv)
    codes = dict(item.split("=", 1) for item in (args.code or [f"this={REPO / 'lib'}"]))
    build_args = shlex.split(args.build_args)
    code_args = {name: shlex.split(more) for name, more in (item.split("=", 1) for item in args.code_args)}
    args.data_dir.mkdir(parents=True, exist_ok=True)
    runs: dict[str, dict[int, list[dict[str, Any]]]] = {name: {size: [] for size in args.sizes} for name in codes}
    for size in args.sizes:
        workspace = dataset(size, args.data_dir)
        for repeat in range(args.repeats):
            order = list(codes.items()) if repeat % 2 == 0 else list(reversed(codes.items()))
            for name, lib in order:
                run = build_once(workspace, lib, build_args + code_args.get(name, []), args.sample_s,
                                 f"{name}-{repeat}-{time.time_ns()}")
                runs[name][size].append(run)
                print(f"{name} n={size} #{repeat}: cpu {run['cpu_s']} s, wall {run['wall_s']} s, "
                      f"peak {run['peak_mb']} MB; {run['summary']}", flush=True)
    report: dict[str, Any] = {"command": " ".join(map(shlex.quote, sys.argv)), "build_args": build_args,
                              "code_args": code_args,
                              "host_cpus": os.cpu_count(), "codes": codes, "medians": {}, "runs": runs}
    for name in codes:
        report["medians"][name] = {size: median_row(runs[name][size]) for size in args.sizes}
        print(f"\n{name}: {'n':>7} {'cpu s':>8} {'wall s':>8} {'peak MB':>8} {'cpu ratio':>9}")
        previous = None
        for size in args.sizes:
            row = report["medians"][name][size]
            ratio = f"{row['cpu_s'] / previous:.2f}" if previous else ""
            print(f"{'':>{len(name) + 1}} {size:>7} {row['cpu_s']:>8.1f} {row['wall_s']:>8.1f} {row['peak_mb']:>8.0f} "
                  f"{ratio:>9}")
            previous = row["cpu_s"]
        stages = list(report["medians"][name][args.sizes[-1]]["stages"])
        print(f"{'':>{len(name) + 1}} stage CPU s / wall s (peak MB): " + ", ".join(stages))
        for size in args.sizes:
            cells = report["medians"][name][size]["stages"]
            print(f"{'':>{len(name) + 1}} {size:>7} " + " ".join(
                f"{cells[s]['cpu_s']:.1f}/{cells[s]['seconds']:.1f}({cells[s]['peak_mb']:.0f})" if s in cells else "-"
                for s in stages))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"\nwritten {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

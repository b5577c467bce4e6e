"""Hostile imports (issue 32): how long a bomb, a quadratic row or thousands of broken samples take to reject.

    python benchmarks/import_limits.py [--listed 100000] [--out benchmarks/results/import_limits.json]

Each ingest runs in a fresh child process (seconds of the ingest call, peak RSS as VmHWM):
- an Inspect `.eval` whose sample member inflates to 2 GiB (2.1 MB on disk), and one whose `header.json` does;
- an `.eval` listing `--listed` samples that are not JSON (before: the per-sample fallback reopened the archive
  for each, ~40 h for 100k);
- a native JSONL file of 10,000 episodes with one record nested 1,000 deep in the middle.
In-process parsing times: the AgentWorldBench step parser on a 600 KB row with 150k newlines (the lazy `_STATE`
pattern it replaced is timed on 10k and 20k newlines, enough to show the square law), and the role-prefixed
reader on 150k continuation lines. Prints each number and writes them all as JSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "lib"), str(REPO / "tests")]

from agent_logs import write_inspect_logs  # noqa: E402
from worldsmith.traces.importers import RolePrefixedImporter  # noqa: E402
from worldsmith.traces.importers.agentworldbench import parse_step_prompt  # noqa: E402
from zip_bombs import write_zip  # noqa: E402

_CHILD = r"""
import json, re, sys, time
from pathlib import Path
from worldsmith.workspace import Workspace
started = time.perf_counter()
report = Workspace(sys.argv[2]).ingest([sys.argv[1]], "bench")
seconds = time.perf_counter() - started
peak_kb = int(re.search(r"VmHWM:\s+(\d+)", Path("/proc/self/status").read_text()).group(1))
errors = [f.error for f in report.files if f.error]
print(json.dumps({"seconds": seconds, "episodes": report.episodes, "rejected": report.rejected,
                  "file_error": errors[0] if errors else None, "peak_rss_mb": peak_kb / 1024}))
"""
_OLD_STATE = re.compile(r"\*\*Current State:\*\*\s*(?P<state>.*?)(?=\n\s*\*\*Action:\*\*|$)", re.S)


def ingest_child(path: Path, workspace: Path) -> dict[str, Any]:
    env_path = f"{REPO / 'lib'}"
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), str(workspace)],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": env_path, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def eval_cases(tmp: Path, listed: int) -> dict[str, Path]:
    log = write_inspect_logs(tmp / "logs", formats=("eval",))["eval"]
    with zipfile.ZipFile(log) as source:
        members: list[tuple[str, bytes | int]] = [(i.filename, source.read(i.filename)) for i in source.infolist()]
    bomb = (2 << 30) - 1
    header = json.loads(dict(members)["header.json"])  # type: ignore[arg-type]
    header["eval"]["dataset"]["sample_ids"] = list(range(listed))
    header["eval"]["config"]["epochs"] = 1
    garbage = [(n, json.dumps(header).encode() if n == "header.json" else c) for n, c in members]
    garbage += [(f"samples/{i}_epoch_1.json", b"{") for i in range(listed)]
    return {
        "eval_sample_bomb_2gib": write_zip(
            tmp / "sample.eval", [(n, bomb if n == "samples/add_epoch_1.json" else c) for n, c in members]
        ),
        "eval_header_bomb_2gib": write_zip(
            tmp / "header.eval", [(n, bomb if n == "header.json" else c) for n, c in members]
        ),
        f"eval_{listed}_unparseable_samples": write_zip(tmp / "garbage.eval", garbage),
    }


def native_deep(tmp: Path) -> Path:
    path = tmp / "deep.jsonl"
    with open(path, "w") as handle:
        for i in range(10_000):
            if i == 5_000:
                handle.write('{"id": "deep", "metadata": ' + "[" * 1000 + "]" * 1000 + ', "turns": []}\n')
            turn = {"index": 0, "action": {"name": "look", "arguments": {"i": i}}, "observation": {"text": f"room {i}"}}
            handle.write(json.dumps({"id": f"e{i}", "turns": [turn]}) + "\n")
    return path


def timed(action: Any) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--listed", type=int, default=100_000)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "import_limits.json")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        files = {**eval_cases(tmp, args.listed), "native_10k_with_one_1000_deep": native_deep(tmp)}
        for name, path in files.items():
            results[name] = {"file_mb": round(path.stat().st_size / 2**20, 2), **ingest_child(path, tmp / f"ws-{name}")}
            print(name, json.dumps(results[name]), flush=True)
        row = "**Current State:** a" + "\n" * 150_000 + "b" * 450_000 + "\n**Action:** go"
        results["awb_row_600kb_150k_newlines_s"] = timed(lambda: parse_step_prompt(row))
        for lines in (10_000, 20_000):
            prompt = "**Current State:** a" + "\n" * lines + "b\n**Action:** go"
            action_at = prompt.index("**Action:**")
            results[f"awb_old_state_regex_{lines}_newlines_s"] = timed(
                lambda p=prompt, a=action_at: _OLD_STATE.search(p, 0, a)
            )
        text = tmp / "many.txt"
        text.write_text("User: x\n" + "yyyy\n" * 150_000 + "Action: go\nObservation: ok\n")
        results["role_prefixed_150k_continuation_lines_s"] = timed(lambda: list(RolePrefixedImporter().read(text)))
    for key in (
        "awb_row_600kb_150k_newlines_s",
        "awb_old_state_regex_10000_newlines_s",
        "awb_old_state_regex_20000_newlines_s",
        "role_prefixed_150k_continuation_lines_s",
    ):
        print(f"{key}: {results[key]:.3f}")
    document = {
        "benchmark": "import_limits",
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": platform.platform(),
        "python": platform.python_version(),
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

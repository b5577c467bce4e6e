"""Print the numbers the CLI pipeline produces on the bundled samples, to check that a refactor keeps them: ingest,
split, build and a next-obs evaluation (harness and nearest evidence) of four samples (the tool shop, ALFWorld,
BFCL, TextWorld walkthroughs), and a cross-fitted evaluation of the tool shop.

    python scripts/pipeline_numbers.py --out before.json      # on the old code
    python scripts/pipeline_numbers.py --out after.json       # on the new code
    python scripts/pipeline_numbers.py --compare before.json after.json

It drives the CLI (`python -m worldsmith.cli.main`), whose `--json` output is the stable interface, so the same
script runs against an older checkout (`PYTHONPATH=<checkout>/lib`). Ids, paths, hashes and timings are left
out; every other value (rule counts, metrics with their intervals, record counts, leakage) is kept and compared.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = {"shop": "data_samples/toolshop/expert.jsonl", "alf": "data_samples/collected/alfworld_expert.jsonl",
           "bfcl": "data_samples/collected/bfcl.jsonl", "tw": "data_samples/textworld_walkthroughs.trace2env.jsonl"}
# Fields that differ between two runs of the same code: ids, places, hashes, clocks.
RUN_SPECIFIC = {"created", "directory", "fingerprint", "workspace", "path", "ingest_id", "id", "book_id", "hash",
                "sha256", "code_version", "at", "timestamp", "created_at", "version_id", "started", "finished", "seconds"}
STAMPED_ID = re.compile(r"\d{8}T\d{12}-[0-9a-f]{6}")  # an ingest's id inside a path


def cli(workspace: Path, *args: str) -> Any:
    """One CLI command's `--json` output."""
    command = [sys.executable, "-m", "worldsmith.cli.main", *args, "--workspace", str(workspace), "--json"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def stable(value: Any) -> Any:
    """`value` without run-specific fields or timings."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items()
                if k not in RUN_SPECIFIC and "time" not in k and not k.endswith("_s")}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return STAMPED_ID.sub("<id>", value) if isinstance(value, str) else value


def pipeline_numbers() -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="pipeline-numbers-") as folder:
        workspace = Path(folder)
        for name, sample in SAMPLES.items():
            out[f"ingest_{name}"] = cli(workspace, "ingest", "--dataset", name, sample)
            out[f"split_{name}"] = cli(workspace, "split", "--dataset", name)
        for name in SAMPLES:
            out[f"build_{name}"] = cli(workspace, "build", "--dataset", name, "--split", "train", "--out", name)
            out[f"eval_{name}"] = cli(workspace, "eval", "--book", name, "--dataset", name, "--split", "test",
                                      "--methods", "harness,nearest", "--resamples", "200", "--max-episodes", "6",
                                      "--out", f"run-{name}")
        out["eval_cross_shop"] = cli(workspace, "eval", "--book", "shop", "--dataset", "shop", "--folds", "3",
                                     "--methods", "harness,nearest", "--resamples", "200", "--out", "cross-shop")
    return stable(json.loads(json.dumps(out).replace(folder, "<workspace>")))


def differences(before: Any, after: Any, where: str = "", ignore: frozenset[str] = frozenset()) -> list[str]:
    """Every place the two documents differ, as `path: before vs after` (keys in `ignore` skipped)."""
    if isinstance(before, dict) and isinstance(after, dict):
        found = []
        for key in sorted((set(before) | set(after)) - ignore):
            if key not in before or key not in after:
                found.append(f"{where}.{key}: only {'after' if key in after else 'before'}")
            else:
                found += differences(before[key], after[key], f"{where}.{key}", ignore)
        return found
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [line for i, (b, a) in enumerate(zip(before, after, strict=True))
                for line in differences(b, a, f"{where}[{i}]", ignore)]
    return [] if before == after else [f"{where}: {json.dumps(before)[:100]} vs {json.dumps(after)[:100]}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the numbers here (default: print them)")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"),
                        help="print where two outputs differ; exit 1 when they do")
    parser.add_argument("--ignore", action="append", default=[], metavar="KEY",
                        help="with --compare: skip this key wherever it is (a field whose shape changed on purpose)")
    args = parser.parse_args()
    if args.compare:
        before, after = (json.loads(path.read_text(encoding="utf-8")) for path in args.compare)
        found = differences(before, after, ignore=frozenset(args.ignore))
        print("\n".join(found) or "no differences")
        return 1 if found else 0
    text = json.dumps(pipeline_numbers(), indent=2, sort_keys=True)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

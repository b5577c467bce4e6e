"""Held-out fidelity on redacted against raw toolshop data: does `ingest --redact` cost the simulator anything?

    OMP_NUM_THREADS=1 python benchmarks/redaction_fidelity.py [--episodes 120] [--resamples 2000] [--out FILE]

Toolshop episodes (the expert and the probing policy, `--episodes` of each, collected as `worldsmith collect
toolshop` does: customers with e-mails, phones and names in every user record) are ingested twice into one
workspace: as they are, and with `--redact` (a card number is planted in each task first, so cards are redacted
too). Both are split by task with the same split (the ids are the raw episodes'), a book is built from each
construction part, and the harness answers each evaluation part teacher-forced (`next_obs_records`) and open
loop (`drift_records`). Reported per protocol: exact match raw and redacted, each with its 95% cluster-bootstrap
interval (clusters = episodes), and the paired difference redacted - raw per turn with its interval; the
redacted mean is within the raw interval when redaction costs nothing measurable. Prints a Markdown table and
writes JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fidelity import _interval, _task, split_by_family, write_results  # type: ignore[import-not-found]

from worldsmith.envs.collect import CollectConfig, collect, load_run_episodes
from worldsmith.evals.protocols import Scorer, drift_records, next_obs_records
from worldsmith.sim.harness import Harness
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.traces import Episode, export_episodes
from worldsmith.traces.redaction.detect import luhn_valid
from worldsmith.workspace import RedactionSettings, Workspace

OUT = Path(__file__).resolve().parent / "results" / "redaction_fidelity.json"
PROTOCOLS = {"teacher-forced": next_obs_records, "open-loop": drift_records}


def collected(workspace: Workspace, episodes: int) -> list[Episode]:
    """`episodes` expert and `episodes` probing toolshop episodes, each with a card number in its task."""
    found: list[Episode] = []
    for policy in ("expert", "probing"):
        collect(workspace, f"collect-{policy}", CollectConfig(env="toolshop", policy=policy, episodes=episodes,
                                                              workers=0, keep="all", record_state=False))
        found += load_run_episodes(workspace.root, f"collect-{policy}")
    rng = random.Random(0)
    planted = []
    for episode in found:
        body = "4" + "".join(str(rng.randrange(10)) for _ in range(14))
        card = next(body + digit for digit in "0123456789" if luhn_valid(body + digit))
        planted.append(episode.model_copy(update={"task": f"{episode.task} Card on file: {card}."}))
    return planted


def evaluate(construction: list[Episode], evaluation: list[Episode], name: str) -> dict[str, list[float]]:
    book = build_simulator_book(construction, name=name).book
    return {protocol: [float(record.exact_match or 0.0) for episode in evaluation
                       for record in run(Harness(book), episode, Scorer())]
            for protocol, run in PROTOCOLS.items()}


def measure(episodes: int, resamples: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ws-redaction-") as tmp:
        workspace = Workspace(Path(tmp) / "ws")
        raw_file = Path(tmp) / "toolshop.jsonl"
        export_episodes(collected(workspace, episodes), "jsonl", raw_file)
        workspace.ingest([raw_file], "raw")
        started = time.perf_counter()
        report = workspace.ingest([raw_file], "redacted", redact=RedactionSettings(forget=True))
        redact_s = time.perf_counter() - started
        raw = {e.id: e for e in workspace.dataset("raw").iter_episodes() if e.turns}
        redacted = {e.id: e for e in workspace.dataset("redacted").iter_episodes() if e.turns}
    construction, evaluation = split_by_family(list(raw.values()), key=_task)
    scores = {"raw": evaluate(construction, evaluation, "raw"),
              "redacted": evaluate([redacted[e.id] for e in construction], [redacted[e.id] for e in evaluation],
                                   "redacted")}
    clusters = [e.id for e in evaluation for _ in e.turns]
    result: dict[str, Any] = {
        "episodes": len(raw), "construction": len(construction), "evaluation": len(evaluation),
        "evaluation_turns": len(clusters), "redaction": report.redaction, "redact_ingest_s": round(redact_s, 2)}
    for protocol in PROTOCOLS:
        raw_exact, red_exact = scores["raw"][protocol], scores["redacted"][protocol]
        if len(raw_exact) != len(clusters) or len(red_exact) != len(clusters):
            raise SystemExit(f"{protocol}: {len(raw_exact)} raw and {len(red_exact)} redacted scores for "
                             f"{len(clusters)} turns: the two datasets do not pair turn for turn")
        entry = {"raw": _interval(clusters, raw_exact, resamples),
                 "redacted": _interval(clusters, red_exact, resamples),
                 "redacted - raw": _interval(clusters, [r - w for r, w in zip(red_exact, raw_exact, strict=True)],
                                             resamples)}
        raw_interval = entry["raw"]
        entry["within_raw_interval"] = raw_interval["low"] <= entry["redacted"]["mean"] <= raw_interval["high"]
        result[protocol] = entry
    return result


def table(result: dict[str, Any]) -> str:
    def cell(entry: dict[str, Any], signed: bool = False) -> str:
        form = "+.3f" if signed else ".3f"
        return f"{entry['mean']:{form}} [{entry['low']:{form}}, {entry['high']:{form}}]"

    lines = ["| protocol | turns | raw exact | redacted exact | redacted - raw (paired) | redacted within raw CI |",
             "|---|---|---|---|---|---|"]
    for protocol in PROTOCOLS:
        p = result[protocol]
        lines.append(f"| {protocol} | {result['evaluation_turns']} | {cell(p['raw'])} | {cell(p['redacted'])} "
                     f"| {cell(p['redacted - raw'], True)} | {'yes' if p['within_raw_interval'] else 'no'} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=120, help="episodes of each policy (expert, probing)")
    parser.add_argument("--resamples", type=int, default=2_000)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    result = measure(args.episodes, args.resamples)
    print(json.dumps({k: v for k, v in result.items() if k not in PROTOCOLS}), file=sys.stderr)
    print(table(result))
    write_results(args.out, {"toolshop": result})


if __name__ == "__main__":
    main()

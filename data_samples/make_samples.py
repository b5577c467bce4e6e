"""Regenerate the sample trace bundle in data_samples/ (the traces the workbench shows on first start).

    .venv/bin/pip install "textworld>=1.7"               # part of the `samples` extra
    .venv/bin/pip install --no-deps "bfcl-eval==2026.3.23" "mpmath>=1.3"   # never a plain install: it pulls CUDA torch
    .venv/bin/python data_samples/make_samples.py        # [--shared PATH] [--only textworld bfcl formats]

Everything here is real and deterministic (fixed seeds, stable ids):

* textworld_walkthroughs.trace2env.jsonl: TextWorld games generated locally with `tw-make`
  (fixed seeds), played by their own walkthrough; every step recorded in the Trace2Env episode
  layout (objective, initial observation, then command / observation events with the score delta
  as reward, `done` and the admissible commands).
* bfcl_multi_turn.openai.jsonl: BFCL multi-turn base entries whose ground-truth function calls
  are executed turn by turn against the in-process BFCL backends (bfcl-eval's own
  `execute_multi_turn_func_call`); written as OpenAI chat conversations with tool calls and the
  backends' real results.
* ledger.role_prefixed.txt, terminal.agentworldbench.jsonl: copies of the two format samples in
  the shared data folder.
* collected/<env>.jsonl: expert episodes collected through worldsmith's own environment adapters
  (`worldsmith.envs`: ALFWorld, TextWorld, ScienceWorld, BFCL, the sandboxed shell), exactly as
  `worldsmith collect <env> --tasks ...` records them (native JSONL, with provenance and the
  ground-truth state snapshots kept for evaluation).
* collected/alfworld_expert.jsonl: expert episodes of all shared ALFWorld games (no state), for builds
  validated on games outside the construction set (`--only alfworld_expert`).
* collected/<env>_curious.jsonl: exploratory episodes of the curious policy (`--only curious`; no state):
  revisits, reads after writes and invalid actions, which expert episodes lack.
* agentdojo/<suite>.jsonl: AgentDojo's workspace, slack and travel suites (`--only agentdojo`; needs
  `pip install --no-deps agentdojo==0.1.35` and the `envs` extra): expert and probing episodes, no state.

Nothing at run time needs this script: the generated files are committed.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.metadata
import inspect
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_SHARED = REPO.parent / "shared" / "data" / "formats"

TEXTWORLD_FILE = "textworld_walkthroughs.trace2env.jsonl"
BFCL_FILE = "bfcl_multi_turn.openai.jsonl"
FORMAT_COPIES = {
    "role_prefixed/ledger_trace.txt": "ledger.role_prefixed.txt",
    "agentworldbench/synthetic_terminal.jsonl": "terminal.agentworldbench.jsonl",
}

# (kind, episode id, tw-make arguments after the kind); seeds are fixed so the games are identical on every run.
TEXTWORLD_GAMES: list[tuple[str, str, list[str]]] = [
    (
        "custom",
        "textworld-custom-s1234",
        ["--world-size", "3", "--nb-objects", "5", "--quest-length", "3", "--seed", "1234"],
    ),
    ("tw-coin_collector", "textworld-coin_collector-l5-s42", ["--level", "5", "--seed", "42"]),
    ("tw-treasure_hunter", "textworld-treasure_hunter-l3-s7", ["--level", "3", "--seed", "7"]),
    (
        "tw-cooking",
        "textworld-cooking-r2-s11",
        ["--recipe", "2", "--take", "1", "--go", "6", "--open", "--cut", "--seed", "11"],
    ),
]

# BFCL multi-turn base entries; together they use all eight multi-turn backends.
BFCL_ENTRIES = [
    "multi_turn_base_1",  # GorillaFileSystem
    "multi_turn_base_15",  # GorillaFileSystem + MathAPI
    "multi_turn_base_51",  # MessageAPI + VehicleControlAPI
    "multi_turn_base_102",  # TradingBot + TicketAPI
    "multi_turn_base_151",  # TwitterAPI + TravelAPI
]
BFCL_CATEGORY = "multi_turn_base"
BFCL_MODEL_NAME = "worldsmith_samples_ground_truth"


def _dump_line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(_dump_line(r) for r in records), encoding="utf-8")
    tmp.replace(path)


# --------------------------------------------------------------------------------------------
# TextWorld
# --------------------------------------------------------------------------------------------


def _clean_tw_text(text: str, *, initial: bool = False) -> str:
    """TextWorld feedback without the interpreter chrome around it.

    Removed: the trailing input prompt line (`>` padded with spaces and followed by the status
    bar, e.g. `-= Attic =-0/3`), leading/trailing blank lines and, for the first observation,
    the ASCII-art banner (leading lines with no letter or digit). Everything else is verbatim.
    """
    lines = text.rstrip().split("\n")
    if lines and lines[-1].lstrip().startswith(">"):
        lines.pop()
    if initial:
        while lines and not any(ch.isalnum() for ch in lines[0]):
            lines.pop(0)
    return "\n".join(lines).strip("\n").rstrip()


def _tw_make_executable() -> str:
    candidate = Path(sys.executable).parent / "tw-make"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("tw-make")
    if found is None:
        raise SystemExit("tw-make not found: install the `samples` extra (pip install textworld)")
    return found


def _play_textworld(kind: str, episode_id: str, args: list[str], workdir: Path) -> dict[str, Any]:
    import textworld

    game_file = workdir / f"{episode_id}.z8"
    command = [_tw_make_executable(), kind, *args, "--output", str(game_file), "-f", "--silent"]
    subprocess.run(command, check=True, cwd=workdir, stdout=subprocess.DEVNULL)
    infos = textworld.EnvInfos(
        objective=True,
        admissible_commands=True,
        policy_commands=True,
        score=True,
        max_score=True,
        won=True,
        lost=True,
        moves=True,
        extras=["walkthrough", "uuid"],
    )
    env = textworld.start(str(game_file), request_infos=infos)
    try:
        state = env.reset()
        walkthrough = list(state["extra.walkthrough"])
        events: list[dict[str, Any]] = [
            {"kind": "instruction", "content": state["objective"]},
            {
                "kind": "observation",
                "content": _clean_tw_text(state.feedback, initial=True),
                "info": {"score": int(state["score"]), "admissible_commands": sorted(state["admissible_commands"])},
            },
        ]
        score = int(state["score"])
        done = False
        for command_text in walkthrough:
            if done:
                raise RuntimeError(f"{episode_id}: game ended before the walkthrough did")
            state, new_score, done = env.step(command_text)
            events.append({"kind": "action", "content": command_text})
            events.append(
                {
                    "kind": "observation",
                    "content": _clean_tw_text(state.feedback),
                    "reward": float(new_score - score),
                    "done": bool(done),
                    "info": {"score": int(new_score), "admissible_commands": sorted(state["admissible_commands"])},
                }
            )
            score = int(new_score)
        won = bool(state["won"])
        if not won:
            raise RuntimeError(f"{episode_id}: the walkthrough did not win the game")
        return {
            "episode_id": episode_id,
            "environment_id": f"textworld/{kind.removeprefix('tw-')}",
            "task_id": state["extra.uuid"],
            "reward": float(score),
            "success": won,
            "metadata": {
                "seed": int(args[args.index("--seed") + 1]),
                "generator": "tw-make " + shlex.join([kind, *args]),
                "textworld_version": textworld.__version__,
                "max_score": int(state["max_score"]),
                "policy": "walkthrough",
                "text_cleaning": "trailing prompt/status line and the opening ASCII banner removed",
            },
            "events": events,
        }
    finally:
        env.close()


def make_textworld(out: Path) -> list[dict[str, Any]]:
    records = []
    with tempfile.TemporaryDirectory(prefix="tw-samples-") as tmp:
        for kind, episode_id, args in TEXTWORLD_GAMES:
            records.append(_play_textworld(kind, episode_id, args, Path(tmp)))
    _write_jsonl(out / TEXTWORLD_FILE, records)
    return records


# --------------------------------------------------------------------------------------------
# BFCL
# --------------------------------------------------------------------------------------------


def _load_jsonl(path: Path) -> dict[str, dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return {entry["id"]: entry for entry in map(json.loads, filter(str.strip, handle))}


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def _call_arguments(call: str, methods: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Name and keyword arguments of a ground-truth call string like `mv(source='a', destination='b')`.

    Positional arguments are named from the backend method's signature, as the backend binds them.
    """
    node = ast.parse(call.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a plain function call: {call!r}")
    name = node.func.id
    args = [ast.literal_eval(arg) for arg in node.args]
    kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
    if args:
        bound = inspect.signature(methods[name]).bind_partial(*args, **kwargs)
        kwargs = dict(bound.arguments)
    return name, _jsonable(kwargs)


def _openai_type(schema: Any, mapping: dict[str, str]) -> Any:
    """BFCL's function-doc types ("dict", "float", "tuple", "any") as JSON Schema types."""
    if isinstance(schema, dict):
        out = {key: _openai_type(value, mapping) for key, value in schema.items()}
        if isinstance(schema.get("type"), str):
            out["type"] = mapping.get(schema["type"], schema["type"])
        if "properties" in schema and isinstance(schema["properties"], dict):
            out["properties"] = {k: _openai_type(v, mapping) for k, v in schema["properties"].items()}
        return out
    if isinstance(schema, list):
        return [_openai_type(v, mapping) for v in schema]
    return schema


def make_bfcl(out: Path) -> list[dict[str, Any]]:
    # TradingBot formats timestamps with datetime.fromtimestamp: fix the zone so results are stable.
    os.environ["TZ"] = "UTC"
    time.tzset()
    import bfcl_eval
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call

    version = importlib.metadata.version("bfcl-eval")
    data = Path(bfcl_eval.__file__).parent / "data"
    questions = _load_jsonl(data / f"BFCL_v4_{BFCL_CATEGORY}.json")
    answers = _load_jsonl(data / "possible_answer" / f"BFCL_v4_{BFCL_CATEGORY}.json")
    records = []
    for entry_id in BFCL_ENTRIES:
        entry, ground_truth = questions[entry_id], answers[entry_id]["ground_truth"]
        classes = list(entry["involved_classes"])
        if len(entry["question"]) != len(ground_truth):
            raise RuntimeError(f"{entry_id}: {len(entry['question'])} user turns but {len(ground_truth)} answers")
        tools = []
        excluded = set(entry.get("excluded_function", []))
        for class_name in classes:
            doc_path = data / "multi_turn_func_doc" / MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name]
            for doc in _load_jsonl_list(doc_path):
                if doc["name"] in excluded:
                    continue
                tools.append(
                    {
                        "type": "function",
                        "function": {
                            "name": doc["name"],
                            "description": doc.get("description", ""),
                            "parameters": _openai_type(doc.get("parameters", {}), GORILLA_TO_OPENAPI),
                        },
                    }
                )
        messages: list[dict[str, Any]] = []
        call_number = 0
        for turn_index, (user_messages, calls) in enumerate(zip(entry["question"], ground_truth, strict=True)):
            for message in user_messages:
                messages.append({"role": message["role"], "content": message["content"]})
            # One call at a time, so each result is the backend's answer to that call alone; the
            # backend instances persist across calls and turns (bfcl-eval keys them by model and entry id).
            for call in calls:
                results, instances = execute_multi_turn_func_call(
                    func_call_list=[call],
                    initial_config=entry["initial_config"],
                    involved_classes=classes,
                    model_name=BFCL_MODEL_NAME,
                    test_entry_id=entry_id,
                )
                methods = {
                    name: method
                    for instance in instances.values()
                    for name, method in inspect.getmembers(instance, predicate=inspect.ismethod)
                    if not name.startswith("_")
                }
                name, arguments = _call_arguments(call, methods)
                call_id = f"call_{turn_index}_{call_number}"
                call_number += 1
                messages.append(
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": call_id,
                                "type": "function",
                                "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
                            }
                        ],
                    }
                )
                messages.append({"role": "tool", "tool_call_id": call_id, "name": name, "content": results[0]})
        records.append(
            {
                "id": entry_id,
                "task_id": entry_id,
                "env_id": "bfcl/" + "+".join(sorted(classes)),
                "reward": 1.0,
                "success": True,
                "metadata": {
                    "source": f"bfcl-eval {version} ground truth",
                    "category": BFCL_CATEGORY,
                    "involved_classes": classes,
                    "excluded_function": sorted(excluded),
                    "ground_truth": ground_truth,
                    "licence": "Apache-2.0 (Berkeley Function Calling Leaderboard)",
                },
                "tools": tools,
                "messages": messages,
            }
        )
    _write_jsonl(out / BFCL_FILE, records)
    return records


def _load_jsonl_list(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


# --------------------------------------------------------------------------------------------
# Collected through the environment adapters
# --------------------------------------------------------------------------------------------

COLLECTED_DIR = "collected"
# Small, varied, fast expert episodes per environment (task ids as `worldsmith envs tasks ENV` prints them).
COLLECTED_TASKS: dict[str, list[str]] = {
    "alfworld": [],  # filled from the shared games: the first game of each task type
    "textworld": [
        "custom:nb_objects=5,quest_length=3,world_size=3:seed=1234",
        "coin_collector:level=5:seed=42",
        "treasure_hunter:level=3:seed=7",
        "cooking:cut,go=6,open,recipe=2,take=1:seed=11",
    ],
    "scienceworld": [
        "find-living-thing:0", "lifespan-longest-lived:0", "power-component:0",
        "chemistry-mix-paint-secondary-color:0", "use-thermometer:0", "freeze:0",
    ],
    "bfcl": [
        "multi_turn_base_1", "multi_turn_base_51", "multi_turn_base_102", "multi_turn_base_151",
        "multi_turn_miss_func_0", "multi_turn_miss_param_3",
    ],
    "shell": [],  # every chore
}


ALFWORLD_DIR = "alfworld"
DEFAULT_ALFWORLD = REPO.parent / "shared" / "data" / "alfworld"


def copy_alfworld_games(out: Path, source: Path = DEFAULT_ALFWORLD) -> list[str]:
    """Bundle the first shared game of each task type (game file and ALFRED trajectory, ~150 KB each)."""
    if not source.is_dir():
        raise SystemExit(f"ALFWorld games not found: {source}")
    chosen: dict[str, Path] = {}
    for game in sorted(source.glob("*/*/*/game.tw-pddl")):
        chosen.setdefault(game.parent.parent.name.split("-")[0], game.parent)
    target_root = out / ALFWORLD_DIR
    shutil.rmtree(target_root, ignore_errors=True)
    for folder in chosen.values():
        target = target_root / folder.relative_to(source)
        target.mkdir(parents=True)
        for name in ("game.tw-pddl", "traj_data.json"):
            if (folder / name).exists():
                shutil.copyfile(folder / name, target / name)
    return sorted(str(folder.relative_to(source)) for folder in chosen.values())


def _alfworld_sample_games() -> list[str]:
    from worldsmith.envs import make

    env = make("alfworld")
    try:
        by_type: dict[str, str] = {}
        for task in env.tasks():
            kind = Path(task).parent.name.split("-")[0]
            by_type.setdefault(kind, task)
        return sorted(by_type.values())
    finally:
        env.close()


def make_collected(out: Path, envs: list[str]) -> dict[str, int]:
    from worldsmith.envs.collect import CollectConfig, collect, load_run_episodes
    from worldsmith.traces.exporters import export_episodes
    from worldsmith.workspace import Workspace

    folder = out / COLLECTED_DIR
    folder.mkdir(parents=True, exist_ok=True)
    counts = {}
    with tempfile.TemporaryDirectory(prefix="ws-samples-") as tmp:
        workspace = Workspace(Path(tmp) / "workspace")
        for env in envs:
            tasks = COLLECTED_TASKS[env] or (_alfworld_sample_games() if env == "alfworld" else None)
            report = collect(workspace, env, CollectConfig(env=env, tasks=tasks, workers=2, episode_timeout=600))
            failures = [f for f in report.summary()["failures"]]
            if failures:
                raise RuntimeError(f"{env}: the expert did not win every sample task: {failures}")
            episodes = sorted(load_run_episodes(workspace.root, env), key=lambda e: e.id)
            counts[env] = export_episodes(episodes, "jsonl", folder / f"{env}.jsonl")
    return counts


ALFWORLD_EXPERT = "alfworld_expert.jsonl"


def make_alfworld_expert(out: Path) -> int:
    """Expert episodes of every shared ALFWorld game, ground-truth state left out: enough trajectories
    (36 games, 6 task types) for a worldbook built on some games to be checked on the others."""
    from worldsmith.envs.collect import CollectConfig, collect, load_run_episodes
    from worldsmith.traces.exporters import export_episodes
    from worldsmith.workspace import Workspace

    with tempfile.TemporaryDirectory(prefix="ws-samples-") as tmp:
        workspace = Workspace(Path(tmp) / "workspace")
        report = collect(workspace, "alfworld", CollectConfig(env="alfworld", tasks=None, workers=2,
                                                              episode_timeout=600, record_state=False))
        if report.summary()["failures"]:
            raise RuntimeError(f"alfworld: the expert did not win every game: {report.summary()['failures']}")
        episodes = sorted(load_run_episodes(workspace.root, "alfworld"), key=lambda e: e.id)
        return export_episodes([e.without_state() for e in episodes], "jsonl", out / COLLECTED_DIR / ALFWORLD_EXPERT)


# Exploratory episodes (`--policy curious`): revisits, reads after writes and invalid actions, which
# expert episodes lack. Each entry: task ids (empty: the ALFWorld sample games), step cap, policy options;
# the same settings as the full collections described in README.md, so these episodes are a subset of them.
CURIOUS_SAMPLES: dict[str, tuple[list[str], int | None, dict[str, Any]]] = {
    "alfworld": ([], 40, {}),
    "textworld": (
        [f"{config}:seed={seed}" for config in ("cooking:cut,go=6,open,recipe=2,take=1", "treasure_hunter:level=10")
         for seed in (1, 2, 3)],
        40, {"min_steps": 30},
    ),
    "scienceworld": (["boil:0", "melt:0", "find-living-thing:0", "power-component:0"], 40, {"min_steps": 30}),
    "shell": (
        ["files/rename-txt-to-md", "dirs/make-project-tree", "files/backup-configs", "archives/extract-and-find",
         "csv/count-by-city", "text/replace-host", "files/clean-tmp", "scripts/make-executable"],
        25, {"expert": 0.1},
    ),
    "bfcl": (
        ["multi_turn_base_1", "multi_turn_base_15", "multi_turn_base_51", "multi_turn_base_102",
         "multi_turn_miss_func_0", "multi_turn_miss_func_25", "multi_turn_miss_func_50", "multi_turn_miss_func_75"],
        None, {},
    ),
}


def make_curious(out: Path, envs: list[str]) -> dict[str, int]:
    """`collected/<env>_curious.jsonl`: curious-policy episodes, ground-truth state left out (it would
    make the ALFWorld and ScienceWorld files megabytes)."""
    from worldsmith.envs.collect import CollectConfig, collect, load_run_episodes
    from worldsmith.traces.exporters import export_episodes
    from worldsmith.workspace import Workspace

    counts = {}
    with tempfile.TemporaryDirectory(prefix="ws-samples-") as tmp:
        workspace = Workspace(Path(tmp) / "workspace")
        for env in envs:
            tasks, max_steps, options = CURIOUS_SAMPLES[env]
            config = CollectConfig(env=env, tasks=tasks or _alfworld_sample_games(), policy="curious",
                                   policy_options=options, max_steps=max_steps, workers=2, episode_timeout=600,
                                   record_state=False)
            report = collect(workspace, f"{env}-curious", config)
            broken = [f for f in report.summary()["failures"] if f["status"] not in ("ok", "failed")]
            if broken:
                raise RuntimeError(f"{env}: curious episodes did not run: {broken}")
            episodes = sorted(load_run_episodes(workspace.root, f"{env}-curious"), key=lambda e: e.id)
            counts[env] = export_episodes(episodes, "jsonl", out / COLLECTED_DIR / f"{env}_curious.jsonl")
    return counts


# --------------------------------------------------------------------------------------------
# AgentDojo suites (a folder of their own, left out of the first-start import like toolshop/)
# --------------------------------------------------------------------------------------------

AGENTDOJO_DIR = "agentdojo"
AGENTDOJO_SUITES = ("workspace", "slack", "travel")
AGENTDOJO_TASKS = 14  # evenly spaced user tasks per suite; each played by the expert and by the probing policy


def _spaced(tasks: list[str], count: int) -> list[str]:
    """`count` tasks spread over the whole list (first and last included), in list order."""
    if len(tasks) <= count:
        return list(tasks)
    return [tasks[round(index * (len(tasks) - 1) / (count - 1))] for index in range(count)]


def make_agentdojo(out: Path) -> dict[str, int]:
    """`agentdojo/<suite>.jsonl`: expert (ground truth, utility check passes) and probing episodes (seed 0) of
    evenly spaced user tasks, no ground-truth state (the workspace state alone is ~115 KB a snapshot)."""
    from worldsmith.envs import make
    from worldsmith.envs.collect import CollectConfig, collect, load_run_episodes
    from worldsmith.traces.exporters import export_episodes
    from worldsmith.workspace import Workspace

    folder = out / AGENTDOJO_DIR
    folder.mkdir(parents=True, exist_ok=True)
    counts = {}
    with tempfile.TemporaryDirectory(prefix="ws-samples-") as tmp:
        workspace = Workspace(Path(tmp) / "workspace")
        for suite in AGENTDOJO_SUITES:
            env = f"agentdojo-{suite}"
            tasks = _spaced(make(env).tasks(), AGENTDOJO_TASKS)
            episodes = []
            for policy in ("expert", "probing"):
                run = f"{env}-{policy}"
                report = collect(workspace, run, CollectConfig(env=env, tasks=tasks, policy=policy, workers=0,
                                                               keep="all", record_state=False))
                failures = report.summary()["failures"]
                if policy == "expert" and failures:
                    raise RuntimeError(f"{env}: the ground truth did not pass every sampled task: {failures}")
                if any(f["status"] not in ("ok", "failed") for f in failures):
                    raise RuntimeError(f"{env}: {policy} episodes did not run: {failures}")
                episodes += sorted(load_run_episodes(workspace.root, run), key=lambda e: e.id)
            counts[suite] = export_episodes(episodes, "jsonl", folder / f"{suite}.jsonl")
    return counts


# --------------------------------------------------------------------------------------------
# Format samples
# --------------------------------------------------------------------------------------------


def copy_formats(out: Path, shared: Path) -> list[Path]:
    copied = []
    for source, target in FORMAT_COPIES.items():
        src = shared / source
        if not src.is_file():
            raise SystemExit(f"format sample not found: {src} (pass --shared PATH to the formats folder)")
        shutil.copyfile(src, out / target)
        copied.append(out / target)
    return copied


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--shared",
        type=Path,
        default=DEFAULT_SHARED,
        help=f"folder holding role_prefixed/ and agentworldbench/ format samples (default: {DEFAULT_SHARED})",
    )
    parser.add_argument("--out", type=Path, default=HERE, help="output folder (default: data_samples/)")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=("textworld", "bfcl", "formats", "alfworld", "collected", "alfworld_expert", "curious", "agentdojo"),
        default=["textworld", "bfcl", "formats", "alfworld", "collected", "agentdojo"],
        help="regenerate only these parts",
    )
    parser.add_argument("--envs", nargs="+", choices=sorted(COLLECTED_TASKS), default=sorted(COLLECTED_TASKS),
                        help="environments to collect from (with --only collected or curious)")
    options = parser.parse_args(argv)
    out: Path = options.out
    out.mkdir(parents=True, exist_ok=True)
    if "textworld" in options.only:
        records = make_textworld(out)
        print(
            f"{TEXTWORLD_FILE}: {len(records)} episodes, "
            f"{sum(sum(e['kind'] == 'action' for e in r['events']) for r in records)} steps"
        )
    if "bfcl" in options.only:
        with contextlib.redirect_stdout(sys.stderr):  # some backends print
            records = make_bfcl(out)
        print(
            f"{BFCL_FILE}: {len(records)} conversations, "
            f"{sum(sum(m['role'] == 'tool' for m in r['messages']) for r in records)} tool calls"
        )
    if "alfworld" in options.only:
        for game in copy_alfworld_games(out):
            print(f"{ALFWORLD_DIR}/{game}: copied")
    if "alfworld_expert" in options.only:
        print(f"collected/{ALFWORLD_EXPERT}: {make_alfworld_expert(out)} ALFWorld expert episodes (all shared games)")
    if "collected" in options.only:
        for env, count in make_collected(out, options.envs).items():
            print(f"{COLLECTED_DIR}/{env}.jsonl: {count} expert episodes")
    if "curious" in options.only:
        for env, count in make_curious(out, options.envs).items():
            print(f"{COLLECTED_DIR}/{env}_curious.jsonl: {count} curious-policy episodes")
    if "agentdojo" in options.only:
        for suite, count in make_agentdojo(out).items():
            print(f"{AGENTDOJO_DIR}/{suite}.jsonl: {count} expert and probing episodes")
    if "formats" in options.only:
        for path in copy_formats(out, options.shared):
            print(f"{path.name}: copied")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

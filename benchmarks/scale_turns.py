"""A 10-million-turn workspace: generate it, then time ingest, `traces list`, `ds.query` and the Traces page.

    python benchmarks/scale_turns.py [--turns 10000000] [--workspace /tmp/ws_scale] [--repeats 3]
                                     [--ingest-turns 100000,1000000] [--no-browser]
                                     [--out benchmarks/results/scale_turns.json]

The big dataset is written columnar with pyarrow straight into the storage layout the real ingest
produces (`parts/<ingest_id>.{episodes,turns}.parquet` with `storage.EPISODE_SCHEMA`/`TURN_SCHEMA`
and a manifest listing the parts), one part per million turns as if ten files had been imported;
splits are then assigned with the real `Workspace.split`. Episodes have varied lengths (1..150
turns, mean ~20), six environments, tool-call actions with JSON arguments and JSON observations
of 150-900 characters, rewards and success flags (some unknown). Going through the real ingest
for 10M turns would take ~4 min of CPU on top of generating 4 GB of JSONL; its throughput is
measured instead at `--ingest-turns` sizes (the OpenAI-format generator of benchmarks/ingest.py)
into a fresh dataset, and once more into the 10M dataset (the dedup against what is committed).

Every timing is the median of `--repeats` runs on a fresh `Dataset` (no warm DuckDB connection);
prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "lib"))
sys.path.insert(0, str(REPO / "benchmarks"))

from worldsmith import Workspace  # noqa: E402
from worldsmith.util.atomic import atomic_write_json  # noqa: E402
from worldsmith.workspace import Dataset, EpisodeFilter  # noqa: E402
from worldsmith.workspace.storage import EPISODE_SCHEMA, TURN_SCHEMA  # noqa: E402

DATASET = "big"
TURNS_PER_PART = 1_000_000
ENVIRONMENTS = ["airline", "retail", "alfworld", "webshop", "sciworld", "textcraft"]
TOOLS = ["get_user_details", "search_direct_flight", "get_reservation_details", "cancel_reservation",
         "update_reservation_baggages", "calculate", "list_all_airports", "look", "go_to", "take", "open",
         "search", "click", "buy_now", "think"]
_FILLER_WORDS = ("the reservation flight passenger baggage economy business refund policy item order "
                 "kitchen drawer countertop apple mug shelf product price rating shipping").split()


def _fillers(rng: np.random.Generator, count: int, low: int, high: int) -> pa.Array:
    """`count` distinct prose snippets of `low`..`high` characters (a dictionary the columns index into)."""
    out = []
    for _ in range(count):
        size = int(rng.integers(low, high))
        words: list[str] = []
        while sum(len(w) + 1 for w in words) < size:
            words.append(_FILLER_WORDS[int(rng.integers(len(_FILLER_WORDS)))])
        out.append(" ".join(words))
    return pa.array(out)


def _text(*parts: pa.Array | str) -> pa.Array:
    """Concatenate string arrays and literals element-wise."""
    return pc.binary_join_element_wise(*parts, "")


def _num(values: np.ndarray) -> pa.Array:
    return pc.cast(pa.array(values), pa.string())


def _pick(dictionary: pa.Array, indices: np.ndarray) -> pa.Array:
    return dictionary.take(pa.array(indices))


def generate_part(ingest_id: str, part: int, turns: int, rng: np.random.Generator, source: str
                  ) -> tuple[pa.Table, pa.Table]:
    """One ingest's episodes and turns tables (turns stored contiguously per episode, in order)."""
    lengths: list[int] = []
    total = 0
    while total < turns:
        n = min(int(min(150, max(1, rng.geometric(1 / 20)))), turns - total)
        lengths.append(n)
        total += n
    n_turns = np.array(lengths, dtype=np.int32)
    n_episodes = len(n_turns)
    episode_numbers = np.arange(n_episodes, dtype=np.int64) + part * 10_000_000
    env_index = rng.integers(len(ENVIRONMENTS), size=n_episodes)
    environments = pa.array(ENVIRONMENTS)
    episode_ids = _text(_pick(environments, env_index), "-", _num(episode_numbers))
    reward = np.round(rng.random(n_episodes), 3)
    success = reward > 0.55
    unknown = rng.random(n_episodes) < 0.05  # no outcome recorded
    task_text = _fillers(rng, 64, 80, 300)
    initial_text = _fillers(rng, 64, 150, 600)
    lines = np.arange(1, n_episodes + 1, dtype=np.int64)
    episodes = pa.table({
        "episode_id": episode_ids,
        "env_id": _pick(environments, env_index),
        "task": _text("Task ", _num(episode_numbers), ": ", _pick(task_text, rng.integers(64, size=n_episodes))),
        "task_id": _num(episode_numbers % 5000),
        "n_turns": pa.array(n_turns),
        "reward": pa.array(reward, mask=unknown),
        "success": pa.array(success, mask=unknown),
        "split": pa.nulls(n_episodes, pa.string()),
        "family": _text("family-", _num(episode_numbers % 20000)),
        "initial_observation": _text('{"text":"', _pick(initial_text, rng.integers(64, size=n_episodes)), '"}'),
        "initial_info": pa.nulls(n_episodes, pa.string()),
        "final_context": pa.nulls(n_episodes, pa.string()),
        "metadata": _text('{"model":"agent-', _num(env_index), '"}'),
        "source_format": pa.array(["openai"] * n_episodes),
        "source_path": pa.array([source] * n_episodes),
        "source_line": pa.array(lines),
        "source_pointer": pa.nulls(n_episodes, pa.string()),
        "initial_state": pa.nulls(n_episodes, pa.string()),
        "content_hash": _text(ingest_id, "-", _num(episode_numbers)),
        "ingest_id": pa.array([ingest_id] * n_episodes),
    }, schema=EPISODE_SCHEMA)

    owner = np.repeat(np.arange(n_episodes), n_turns)
    starts = np.repeat(np.cumsum(n_turns) - n_turns, n_turns)
    turn_index = (np.arange(total) - starts).astype(np.int32)
    tool_index = rng.integers(len(TOOLS), size=total)
    arguments = _text('{"id":"', _num(rng.integers(10**6, size=total)), '","amount":', _num(rng.integers(1000, size=total)),
                      ',"user_id":"user_', _num(episode_numbers[owner]), '"}')
    observation_text = _fillers(rng, 256, 100, 800)
    observations = _text('{"flight_number":"HAT', _num(rng.integers(1000, size=total)), '","note":"',
                         _pick(observation_text, rng.integers(256, size=total)), '","price":',
                         _num(rng.integers(90, 900, size=total)), ',"status":"ok"}')
    last = turn_index == n_turns[owner] - 1
    policy = _fillers(rng, 8, 300, 1200)
    context = _text('[["system","', _pick(policy, env_index[owner] % 8), '",null],["user","Task ',
                    _num(episode_numbers[owner]), '",null]]')
    turns_table = pa.table({
        "episode_id": episode_ids.take(pa.array(owner)),
        "turn_index": pa.array(turn_index),
        "action_name": _pick(pa.array(TOOLS), tool_index),
        "action_arguments": arguments,
        "action_raw": arguments,
        "action_call_id": _text("call_", _num(episode_numbers[owner]), "_", _num(turn_index)),
        "action_parse_error": pa.nulls(total, pa.string()),
        "observation": observations,
        "reward": pa.array(np.where(last, reward[owner], 0.0), mask=~last | unknown[owner]),
        "done": pa.array(last),
        "info": pa.nulls(total, pa.string()),
        "context": pc.if_else(pa.array(turn_index == 0), context, pa.scalar(None, pa.string())),
        "prov_source": pa.array([source] * total),
        "prov_line": pa.array(lines[owner]),
        "prov_pointer": _text("/messages/", _num(turn_index * 2 + 2)),
        "prov_hash": _num(rng.integers(2**62, size=total)),
        "state": pa.nulls(total, pa.string()),
    }, schema=TURN_SCHEMA)
    return episodes, turns_table


def write_parts(dataset_path: Path, turns: int, seed: int, tag: str,
                on_part: Callable[[int, pa.Table, pa.Table], None] | None = None) -> None:
    """Write a dataset of `turns` turns at `dataset_path`, part by part in the layout the real ingest commits
    (ingest ids `<date>-<tag><part>`), and its manifest; `on_part(part, episodes, turns)` after each part."""
    (dataset_path / "parts").mkdir(parents=True, exist_ok=True)
    Dataset.create(dataset_path)
    rng = np.random.default_rng(seed)
    manifest = Dataset(dataset_path).manifest
    part = 0
    remaining = turns
    while remaining > 0:
        size = min(TURNS_PER_PART, remaining)
        ingest_id = f"20261203T0000{part:02d}000000-{tag}{part:02d}"
        episodes, turns_table = generate_part(ingest_id, part, size, rng, f"/data/traces/run-{part:02d}.jsonl")
        names = {"episodes": f"parts/{ingest_id}.episodes.parquet", "turns": f"parts/{ingest_id}.turns.parquet"}
        for key, table in (("episodes", episodes), ("turns", turns_table)):
            pq.write_table(table, dataset_path / names[key], compression="lz4", row_group_size=65536)
        manifest["parts"].append({"ingest_id": ingest_id, **names, "n_episodes": episodes.num_rows,
                                  "n_turns": turns_table.num_rows})
        remaining -= size
        part += 1
        if on_part is not None:
            on_part(part, episodes, turns_table)
    Dataset(dataset_path).write_manifest(manifest)


def generate_dataset(root: Path, turns: int, seed: int = 0) -> dict[str, Any]:
    """Write the dataset `big` of `turns` turns into workspace `root`, part by part; returns its stats."""
    dataset_path = root / "datasets" / DATASET
    started = time.perf_counter()

    def report(part: int, episodes: pa.Table, turns_table: pa.Table) -> None:
        print(f"  part {part}: {episodes.num_rows:,} episodes, {turns_table.num_rows:,} turns "
              f"({time.perf_counter() - started:.0f} s)", flush=True)

    write_parts(dataset_path, turns, seed, "bench", report)
    split_started = time.perf_counter()
    Workspace(root).split(DATASET, {"train": 0.8, "validation": 0.1, "test": 0.1})
    return {"seconds": time.perf_counter() - started, "split_seconds": time.perf_counter() - split_started,
            "bytes": sum(f.stat().st_size for f in dataset_path.rglob("*") if f.is_file())}


# ------------------------------------------------------------------------------------------ timing


def median_seconds(action: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    runs, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = action()
        runs.append(time.perf_counter() - started)
    return statistics.median(runs), result


def fresh(root: Path) -> Dataset:
    return Workspace(root).dataset(DATASET)


FILTERS: dict[str, EpisodeFilter] = {
    "none": EpisodeFilter(),
    "env": EpisodeFilter(env_id="retail"),
    "outcome": EpisodeFilter(outcome="success"),
    "split": EpisodeFilter(split="validation"),
    "min_turns": EpisodeFilter(min_turns=60),
    "task_text": EpisodeFilter(task_contains="refund policy"),
    "search": EpisodeFilter(search="webshop-1234"),
    "combined": EpisodeFilter(env_id="airline", outcome="failure", split="train", max_turns=10),
}

QUERIES = {
    "actions_per_env": "SELECT e.env_id, t.action_name, count(*) AS n FROM turns t JOIN episodes e USING (episode_id) "
                       "GROUP BY ALL ORDER BY n DESC LIMIT 20",
    "turns_by_action": "SELECT action_name, count(*) AS n, avg(length(observation)) AS obs_chars FROM turns GROUP BY 1",
    "success_by_env": "SELECT env_id, avg(CASE WHEN success THEN 1 ELSE 0 END) AS rate, avg(n_turns) FROM episodes "
                      "GROUP BY 1 ORDER BY 1",
    "observation_search": "SELECT count(*) FROM turns WHERE observation ILIKE '%HAT123\"%'",
    "one_episode_turns": "SELECT * FROM turns WHERE episode_id = ? ORDER BY turn_index",
}


def time_library(root: Path, repeats: int, probe: str) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def on_fresh(call: Callable[[Dataset], Any]) -> Callable[[], Any]:
        return lambda: call(fresh(root))

    out["stats"], stats = median_seconds(on_fresh(lambda d: d.stats()), repeats)
    out["facets"], _ = median_seconds(on_fresh(lambda d: (d.environments(), d.splits())), repeats)
    for label, where in FILTERS.items():
        count, total = median_seconds(on_fresh(lambda d, w=where: d.count_episodes(w)), repeats)
        first, _ = median_seconds(on_fresh(lambda d, w=where: d.list_episodes(w, limit=50)), repeats)
        deep_offset = max(0, total // 2)
        deep, _ = median_seconds(on_fresh(lambda d, w=where, o=deep_offset: d.list_episodes(w, limit=50, offset=o)),
                                 repeats)
        out[f"filter_{label}"] = {"matches": total, "count": count, "first_page": first, "middle_page": deep}
    for label, sql in QUERIES.items():
        params = [probe] if "?" in sql else []
        out[f"query_{label}"], _ = median_seconds(on_fresh(lambda d, s=sql, p=params: d.query(s, p)), repeats)
    out["episode_header"], _ = median_seconds(on_fresh(lambda d: d.episode_header(probe)), repeats)
    out["turns_page"], _ = median_seconds(on_fresh(lambda d: d.turns_page(probe, limit=50)), repeats)
    out["has_turn"], _ = median_seconds(on_fresh(lambda d: d.has_turn(f"{probe}#0")), repeats)
    out["dataset"] = stats
    return out


def time_cli(root: Path, repeats: int) -> dict[str, float]:
    """`worldsmith traces list --json` per filter, as a user runs it (includes interpreter start-up)."""
    environment = {**os.environ, "WORLDSMITH_WORKSPACE": str(root), "PYTHONPATH": str(REPO / "lib")}
    commands = {
        "none": [], "env": ["--env", "retail"], "outcome": ["--outcome", "success"], "split": ["--split", "validation"],
        "min_turns": ["--min-turns", "60"], "task_text": ["--task", "refund policy"],
        "search": ["--search", "webshop-1234"], "page_1000": ["--offset", "50000"],
    }
    out = {}
    for label, extra in commands.items():
        command = [sys.executable, "-m", "worldsmith", "traces", "list", "--dataset", DATASET, "--json", *extra]

        def run(command: list[str] = command) -> None:
            subprocess.run(command, check=True, env=environment, stdout=subprocess.DEVNULL, cwd=REPO)

        out[label], _ = median_seconds(run, repeats)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import worldsmith.cli.main"], check=True, env=environment)
    out["interpreter_and_imports"] = time.perf_counter() - started
    return out


def time_page_data(root: Path, repeats: int) -> dict[str, float]:
    """What pages/traces.py asks of the library on a first visit (before Streamlit caches any of it)."""
    def first_visit() -> None:
        dataset = fresh(root)
        dataset.stats()
        dataset.environments()
        dataset.splits()
        dataset.reports()
        dataset.count_episodes(EpisodeFilter())
        dataset.list_episodes(EpisodeFilter(), limit=25)

    def filtered() -> None:
        dataset = fresh(root)
        where = EpisodeFilter(env_id="retail", outcome="success")
        dataset.count_episodes(where)
        dataset.list_episodes(where, limit=25, offset=2500)

    return {"first_visit": median_seconds(first_visit, repeats)[0],
            "filtered_page": median_seconds(filtered, repeats)[0]}


def time_browser(root: Path, repeats: int) -> dict[str, Any]:
    """Seconds from navigating to the Traces page until the episode table shows (fresh server each run)."""
    sys.path.insert(0, str(REPO / "tests" / "workbench"))
    from browser_support import CHROMIUM, CHROMIUM_ARGS, streamlit_server
    from playwright.sync_api import sync_playwright

    runs, warm_runs, search_runs = [], [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            for repeat in range(repeats):
                with tempfile.TemporaryDirectory() as logs, \
                        streamlit_server(root, Path(logs) / "server.log", {"OMP_NUM_THREADS": "1"}) as url:
                    for target in (runs, warm_runs):  # first visit (cold caches), then a second tab (cached)
                        page = browser.new_page()
                        started = time.perf_counter()
                        page.goto(f"{url}/traces?dataset={DATASET}")
                        page.get_by_text("Episodes 1–").wait_for(timeout=120_000)
                        page.locator("[data-testid='stDataFrame']:visible").first.wait_for(timeout=120_000)
                        target.append(time.perf_counter() - started)
                        if target is warm_runs:  # a new search in the open page: uncached count and page
                            text = f"retail-{repeat + 2}"
                            expected = fresh(root).count_episodes(EpisodeFilter(search=text))
                            started = time.perf_counter()
                            page.get_by_placeholder("episode id or task").fill(text)
                            page.get_by_placeholder("episode id or task").press("Enter")
                            page.get_by_text(re.compile(rf"Episodes 1–\d+ of {expected:,}$")).wait_for(timeout=120_000)
                            search_runs.append(time.perf_counter() - started)
                        page.close()
        finally:
            browser.close()
    return {"first_visit": statistics.median(runs), "second_visit": statistics.median(warm_runs),
            "search_rerun": statistics.median(search_runs), "runs": runs, "second_runs": warm_runs,
            "search_runs": search_runs}


def time_ingest(root: Path, sizes: list[int]) -> dict[str, Any]:
    """The real ingest path (OpenAI format) into a fresh dataset, then the same-size file into the big one."""
    from ingest import generate

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(dir=root) as scratch:
        for size in sizes:
            source = Path(scratch) / f"openai-{size}.jsonl"
            generate(source, size, seed=size)
            workspace = Workspace(Path(scratch) / f"ws-{size}")
            started = time.perf_counter()
            report = workspace.ingest([source], "fresh")
            seconds = time.perf_counter() - started
            out[f"fresh_{size}"] = {"seconds": seconds, "turns_per_s": report.turns / seconds}
        size = sizes[0]
        source = Path(scratch) / f"openai-{size}-big.jsonl"
        generate(source, size, seed=1000 + fresh(root).revision)  # new content on every run: no duplicates
        real = Workspace(Path(scratch) / f"ws-{size}").dataset("fresh").parts[0]  # the real ingest's layout
        mine = fresh(root).parts[0]
        out["layout_matches_real_ingest"] = all(
            pq.read_schema(Path(scratch) / f"ws-{size}" / "datasets" / "fresh" / real[key]).remove_metadata()
            == pq.read_schema(root / "datasets" / DATASET / mine[key]).remove_metadata()
            for key in ("episodes", "turns"))
        started = time.perf_counter()
        report = Workspace(root).ingest([source], DATASET)
        seconds = time.perf_counter() - started
        out[f"into_big_{size}"] = {"seconds": seconds, "turns_per_s": report.turns / seconds, "turns": report.turns}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=10_000_000)
    parser.add_argument("--workspace", type=Path, default=Path(tempfile.gettempdir()) / "ws_scale")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ingest-turns", default="100000,1000000")
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument("--no-cli", action="store_true")
    parser.add_argument("--only-generate", action="store_true")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "scale_turns.json")
    args = parser.parse_args()

    results: dict[str, Any] = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "turns": args.turns,
                               "repeats": args.repeats, "machine": f"{platform.machine()} {os.cpu_count()} CPUs"}
    if not (args.workspace / "datasets" / DATASET / "manifest.json").exists():
        print(f"generating {args.turns:,} turns in {args.workspace}", flush=True)
        results["generate"] = generate_dataset(args.workspace, args.turns)
    if args.only_generate:
        return
    probe = fresh(args.workspace).list_episodes(EpisodeFilter(), limit=1, offset=fresh(args.workspace).count_episodes() // 2)
    probe_id = str(probe["episode_id"].iloc[0])
    results["library"] = time_library(args.workspace, args.repeats, probe_id)
    print(json.dumps(results["library"], indent=1, default=str), flush=True)
    results["page_data"] = time_page_data(args.workspace, args.repeats)
    print(json.dumps(results["page_data"], indent=1), flush=True)
    if not args.no_cli:
        results["cli"] = time_cli(args.workspace, args.repeats)
        print(json.dumps(results["cli"], indent=1), flush=True)
    if not args.no_browser:
        results["browser"] = time_browser(args.workspace, args.repeats)
        print(json.dumps(results["browser"], indent=1), flush=True)
    sizes = [int(s) for s in args.ingest_turns.split(",") if s]
    if sizes:
        results["ingest"] = time_ingest(args.workspace, sizes)
        print(json.dumps(results["ingest"], indent=1), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(args.out, orjson.loads(orjson.dumps(results, default=str)))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

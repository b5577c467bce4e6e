"""Collect and eval as Ray tasks on a real two-CPU local Ray (one start for the module): the run store
holds what the local paths write, resume skips finished units, failures are accounted as locally."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import fake_envs  # noqa: F401 - registers the `counter` environment (the workers import it from tests/)
from helpers import sample_episodes, split_by_family
from ports import free_port
from worldsmith import Workspace
from worldsmith.envs.collect import CollectConfig, collect, list_tasks, run_dir
from worldsmith.envs.shell import sandbox_available
from worldsmith.evals import EvalConfig, run_eval
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.util.executors import (
    InlineExecutor,
    ProcessExecutor,
    RayExecutor,
    check_ray_address,
    make_executor,
    ray_session,
)
from worldsmith.worldbook import Worldbook

pytestmark = pytest.mark.slow  # starts a local Ray cluster

ray = pytest.importorskip("ray")

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
SANDBOX, WHY_NOT = sandbox_available()
TIMING = {"seconds", "latency_s"}  # fields that measure time: the only ones allowed to differ


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[str]:
    """A local Ray with two CPUs; its workers find the test modules (fake_envs) on PYTHONPATH. Yields its address."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(TESTS), *(p for p in sys.path if p.endswith("/lib"))]
                                               + ([saved] if saved else []))
    assert ray_session("local", num_cpus=2)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def _lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def _untimed(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in TIMING}


def _collect_run(root: Path, dataset: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(results by key without timing, episodes by id) of a collection run's files."""
    folder = run_dir(root, dataset)
    results = {r["key"]: _untimed(r) for r in _lines(folder / "results.jsonl")}
    return results, {e["id"]: e for e in _lines(folder / "episodes.jsonl")}


def test_make_executor_picks_the_backend() -> None:
    assert isinstance(make_executor(0), InlineExecutor) and isinstance(make_executor(1), InlineExecutor)
    assert isinstance(make_executor(2), ProcessExecutor)
    ray_executor = make_executor(0, "local")
    assert isinstance(ray_executor, RayExecutor) and ray_executor.workers is None
    assert make_executor(3, "ray://head:10001").workers == 3


def test_an_address_without_a_ray_fails_at_once_with_the_reason(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    with pytest.raises(ConnectionError, match=f"no Ray cluster answers at ray://127.0.0.1:{port}"):
        check_ray_address(f"ray://127.0.0.1:{port}")
    with pytest.raises(ValueError, match="expected HOST:PORT"):
        check_ray_address("head-without-port")
    command = [sys.executable, "-m", "worldsmith", "collect", "shell", "--tasks", "files/rename-txt-to-md",
               f"--ray=127.0.0.1:{port}", "--dataset", "d", "--workspace", str(tmp_path / "ws"), "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 7 and "no Ray cluster answers" in orjson.loads(done.stdout)["error"]


@pytest.mark.skipif(not SANDBOX, reason=f"no shell sandbox here: {WHY_NOT}")
def test_collect_on_ray_stores_what_local_workers_store_and_resumes(ray_cluster: str, tmp_path: Path) -> None:
    tasks = list_tasks("shell")[:4]
    local = collect(Workspace(tmp_path / "local"), "chores", CollectConfig(env="shell", tasks=tasks, workers=2))
    on_ray = collect(Workspace(tmp_path / "ray"), "chores",
                     CollectConfig(env="shell", tasks=tasks, workers=0, ray_address="local"))
    assert local.counts() == on_ray.counts() == {"ok": 4}
    assert _collect_run(tmp_path / "ray", "chores") == _collect_run(tmp_path / "local", "chores")
    stored = {e.id for e in Workspace(tmp_path / "local").dataset("chores").iter_episodes()}
    assert {e.id for e in Workspace(tmp_path / "ray").dataset("chores").iter_episodes()} == stored
    assert on_ray.ingested == len(stored) == 4

    results = run_dir(tmp_path / "ray", "chores") / "results.jsonl"
    kept = results.read_bytes().splitlines(keepends=True)
    results.write_bytes(b"".join(kept[:2]))  # two items left to do, as after an interrupted run
    resumed = collect(Workspace(tmp_path / "ray"), "chores",
                      CollectConfig(env="shell", tasks=tasks, workers=0, ray_address="local"))
    assert resumed.skipped == 2 and len(resumed.results) == 4 and resumed.duplicates == 4
    assert {r.key for r in resumed.results} == {r.key for r in local.results}
    assert len(_lines(results)) == 4
    again = collect(Workspace(tmp_path / "ray"), "chores",
                    CollectConfig(env="shell", tasks=tasks, workers=0, ray_address="local"))
    assert again.skipped == 4 and len(_lines(results)) == 4


def test_collect_failures_on_ray_are_accounted_as_local_workers_account_them(ray_cluster: str,
                                                                             tmp_path: Path) -> None:
    tasks = ["hang", "crash", "reach-2", "broken", "nope-1", "raise-4"]
    local = collect(Workspace(tmp_path / "local"), "rough",
                    CollectConfig(env="counter", tasks=tasks, workers=2, episode_timeout=3))
    on_ray = collect(Workspace(tmp_path / "ray"), "rough",
                     CollectConfig(env="counter", tasks=tasks, workers=2, episode_timeout=3, ray_address="local"))
    status = {r.task: r.status for r in on_ray.results}
    assert status == {r.task: r.status for r in local.results}
    assert status == {"hang": "timeout", "crash": "crashed", "reach-2": "ok", "broken": "load_error",
                      "nope-1": "unknown_task", "raise-4": "crashed"}
    errors = {r.task: r.error for r in on_ray.results}
    assert errors["hang"] == "no result within 3 s: process killed"
    assert "died" in errors["crash"] and errors["raise-4"] == "RuntimeError: the simulator fell over"
    assert on_ray.ingested == local.ingested == 1


def test_collect_cli_runs_on_a_ray_cluster_address(ray_cluster: str, tmp_path: Path) -> None:
    """`--ray ADDRESS` connects to a running Ray (here the module's) instead of starting one."""
    env = {**os.environ, "WORLDSMITH_ENV_PLUGINS": "fake_envs"}
    command = [sys.executable, "-m", "worldsmith", "collect", "counter", "--tasks", "reach-2", "reach-3", "broken",
               "--ray", ray_cluster, "--dataset", "counted", "--workspace", str(tmp_path / "ws"), "--json"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = orjson.loads(done.stdout)
    assert summary["status"] == {"ok": 2, "load_error": 1} and summary["ingested"] == 2
    assert Workspace(tmp_path / "ws").dataset("counted").stats()["episodes"] == 2


@pytest.fixture(scope="module")
def alfworld() -> tuple[Worldbook, list[Any], list[Any]]:
    built, held = split_by_family(sample_episodes("alfworld_expert"))
    return build_simulator_book(built, name="alfworld").book, built, held


def _eval(root: Path, name: str, alfworld: tuple[Worldbook, list[Any], list[Any]], **settings: Any) -> Any:
    book, built, held = alfworld
    config = EvalConfig(name=name, book="alfworld", dataset="samples", resamples=200, **settings)
    return run_eval(config, root, book=book, episodes=held, construction=built)


def _journal(root: Path, name: str) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    """Each unit's records by (method, episode, protocol): a method runs each episode under both default protocols."""
    units = _lines(root / "runs" / "eval" / name / "records.jsonl")
    journal = {(u["method"], u["episode_id"], u["protocol"]): [{k: v for k, v in _untimed(r).items() if k != "run"}
                                                             for r in u["records"]] for u in units}
    assert len(journal) == len(units)  # no unit hides another
    return journal


def test_eval_on_ray_and_in_processes_records_what_the_local_run_records(ray_cluster: str, tmp_path: Path,
                                                                        alfworld: Any) -> None:
    local = _eval(tmp_path, "local", alfworld)
    pooled = _eval(tmp_path, "pool", alfworld, workers=2)
    on_ray = _eval(tmp_path, "ray", alfworld, ray_address="local")
    units = len(alfworld[2]) * 2 * 2  # two methods, each under both default protocols (drift, next-obs)
    assert local.computed == pooled.computed == on_ray.computed == units
    assert _journal(tmp_path, "ray") == _journal(tmp_path, "pool") == _journal(tmp_path, "local")
    columns = [c for c in local.records.columns if c not in TIMING | {"run"}]
    assert on_ray.records[columns].equals(local.records[columns])
    assert on_ray.report.methods == local.report.methods
    assert on_ray.fingerprint == local.fingerprint  # where units run is not part of what they are

    journal = tmp_path / "runs" / "eval" / "ray" / "records.jsonl"
    journal.write_bytes(b"".join(journal.read_bytes().splitlines(keepends=True)[:5]))
    resumed = _eval(tmp_path, "ray", alfworld, ray_address="local")
    assert (resumed.reused, resumed.computed) == (5, units - 5)
    assert _journal(tmp_path, "ray") == _journal(tmp_path, "local")
    again = _eval(tmp_path, "ray", alfworld, ray_address="local")
    assert (again.reused, again.computed) == (units, 0)


def test_a_cross_fitted_eval_on_ray_records_what_the_local_run_records(ray_cluster: str, tmp_path: Path) -> None:
    pool = sample_episodes("alfworld_expert")
    runs = {}
    for name, where in (("local", {}), ("ray", {"ray_address": "local"})):
        config = EvalConfig(name=name, dataset="samples", folds=2, methods=["harness", "nearest"], resamples=200,
                            **where)
        runs[name] = run_eval(config, tmp_path, episodes=pool)
    assert runs["ray"].computed == runs["local"].computed > 0
    assert _journal(tmp_path, "ray") == _journal(tmp_path, "local")
    assert {r["fold"] for units in _journal(tmp_path, "ray").values() for r in units} == {1, 2}


def test_a_failing_eval_unit_on_ray_stops_the_run_as_locally(ray_cluster: str, tmp_path: Path,
                                                            alfworld: Any) -> None:
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "no-such-architecture"}')
    settings = {"methods": ["nearest", "direct"], "llm": f"tiny:{broken}"}
    failures = {}
    for name, where in (("local", {}), ("ray", {"ray_address": "local"})):
        with pytest.raises(Exception) as raised:  # noqa: PT011 - the point is that both raise the same
            _eval(tmp_path, name, alfworld, **settings, **where)
        progress = orjson.loads((tmp_path / "runs" / "eval" / name / "progress.json").read_bytes())
        failures[name] = (type(raised.value), str(raised.value), progress["status"], progress["error"])
        assert {method for method, _, _ in _journal(tmp_path, name)} <= {"nearest"}  # only finished units kept
    assert failures["ray"] == failures["local"]
    assert failures["local"][2] == "failed" and failures["local"][3].startswith(failures["local"][0].__name__)


def test_eval_cli_takes_ray_and_workers(tmp_path: Path) -> None:
    from worldsmith.cli.main import build_parser

    args = build_parser().parse_args(["eval", "--book", "b", "--dataset", "d", "--out", "r", "--workers", "3",
                                      "--ray=ray://head:10001"])
    assert (args.workers, args.ray) == (3, "ray://head:10001")
    local = build_parser().parse_args(["eval", "--book", "b", "--dataset", "d", "--out", "r", "--ray"])
    assert local.ray == "local"


def test_collect_page_runs_on_ray(ray_cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Collect form's "Run on Ray" (with an empty address: the Ray this process already runs)."""
    from streamlit.testing.v1 import AppTest

    root = tmp_path / "ws"
    monkeypatch.setenv("WORLDSMITH_WORKSPACE", str(root))
    monkeypatch.setenv("WORLDSMITH_SAMPLES", "")
    at = AppTest.from_file(str(REPO / "workbench" / "app.py"), default_timeout=120).run()
    at = at.switch_page(str(REPO / "pages" / "collect.py")).run()
    at.selectbox(key="co_env").set_value("counter").run()
    at.multiselect(key="co_tasks_pick").set_value(["reach-2", "reach-3"])
    at.text_input(key="co_tasks_typed").set_value("broken")
    at.number_input(key="co_episodes").set_value(0)
    at.checkbox(key="co_ray_on").check()
    at.text_input(key="co_dataset").set_value("counted")
    at.button(key="co_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert "2 won of 3" in "\n".join(str(s.value) for s in at.success)
    config = orjson.loads((run_dir(root, "counted") / "config.json").read_bytes())
    assert config["ray_address"] == "local"
    assert Workspace(root).dataset("counted").stats()["episodes"] == 2


def test_explore_rounds_on_ray_play_what_they_play_here(ray_cluster: str, tmp_path: Path) -> None:
    """A round's episodes as Ray tasks (the book travels as JSON): the same episodes, steps and books as in-process."""
    from worldsmith.evals.explore import ExploreConfig, explore

    config = ExploreConfig(env="toolshop", budget=17, rounds=2, strategy="explore",
                           tasks=[f"db=0:task={i}" for i in range(3)])
    here = explore(Workspace(tmp_path / "here"), "explored", config)
    there = explore(Workspace(tmp_path / "ray"), "explored", config.model_copy(update={"ray_address": "local"}))
    assert there.steps == here.steps == 17
    for a, b in zip(here.rounds, there.rounds, strict=True):
        assert (a.episode_ids, a.steps, a.turns, a.rules, a.version) == (b.episode_ids, b.steps, b.turns, b.rules,
                                                                         b.version)
    episodes = {e.id: e.turns for e in Workspace(tmp_path / "here").dataset("explored").iter_episodes()}
    assert {e.id: e.turns for e in Workspace(tmp_path / "ray").dataset("explored").iter_episodes()} == episodes

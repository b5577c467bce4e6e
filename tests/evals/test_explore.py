"""Active collection on real environments (toolshop, a tw-make TextWorld game) at small budgets: exact real-step
budgets, one curve point per round, resume, rule provenance, the CLI's --json."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import orjson
import pytest

from worldsmith.cli.main import main
from worldsmith.envs.collect import CollectConfig, collect
from worldsmith.evals import ExploreConfig, ExploreProgress, HeldOut, explore
from worldsmith.evals.explore import load_explore_report, run_dir
from worldsmith.traces.model import split_turn_id
from worldsmith.workspace import Workspace
from worldsmith.worldbook import WorldbookStore

SHOP_TASKS = [f"db=0:task={i}" for i in range(6)]
SHOP_HELDOUT = [f"db=0:task={i}" for i in range(5000, 5004)]
TW_GAME = "custom:world_size=2,nb_objects=3,quest_length=2:seed=1234"
TW_HELDOUT = "custom:world_size=2,nb_objects=3,quest_length=2:seed=4321"


@pytest.fixture
def shop(tmp_path: Path) -> tuple[Workspace, HeldOut]:
    """A workspace with a held-out set of probing episodes on toolshop tasks the runs never play."""
    workspace = Workspace(tmp_path / "ws")
    collect(workspace, "shop-heldout", CollectConfig(env="toolshop", tasks=SHOP_HELDOUT, policy="probing", workers=0))
    ids = tuple(e.id for e in workspace.dataset("shop-heldout").iter_episodes())
    return workspace, HeldOut(dataset="shop-heldout", episodes=ids)


def _real_steps(workspace: Workspace, dataset: str) -> int:
    return sum(e.metadata["explore"]["real_steps"] for e in workspace.dataset(dataset).iter_episodes())


@pytest.mark.parametrize("strategy", ["explore", "expert", "random", "mix"])
def test_equal_budgets_spend_exactly_that_many_real_steps(shop: tuple[Workspace, HeldOut], strategy: str) -> None:
    workspace, heldout = shop
    events: list[ExploreProgress] = []
    config = ExploreConfig(env="toolshop", budget=23, rounds=3, strategy=strategy, tasks=SHOP_TASKS, seed=1,
                           heldout=heldout)
    report = explore(workspace, f"shop-{strategy}", config, progress=events.append)
    assert [r.steps for r in report.rounds] == [7, 8, 8]  # the cumulative shares 7, 15, 23
    assert report.steps == 23 == _real_steps(workspace, f"shop-{strategy}")
    assert [point["steps"] for point in report.curve()] == [7, 15, 23]
    assert all(point["exact_match"] is not None and point["low"] <= point["exact_match"] <= point["high"]
               for point in report.curve())
    assert [e.finished.round for e in events if e.finished] == [1, 2, 3]
    assert max(e.steps for e in events) == 23 and any(e.episode_id for e in events)
    curve = orjson.loads((run_dir(workspace.root, f"shop-{strategy}") / "curve.json").read_bytes())
    assert len(curve["curve"]) == 3 and curve["strategy"] == strategy
    store = WorldbookStore(workspace.root / "worldbooks")
    assert [v.version for v in store.versions(f"shop-{strategy}")] == [r.version for r in report.rounds]


def test_the_last_episode_is_cut_at_the_budget(shop: tuple[Workspace, HeldOut]) -> None:
    workspace, _ = shop
    report = explore(workspace, "shop-cut", ExploreConfig(env="toolshop", budget=3, rounds=1, strategy="expert",
                                                          tasks=SHOP_TASKS))
    (episode,) = workspace.dataset("shop-cut").iter_episodes()
    assert report.steps == 3 and len(episode.turns) == 3 and episode.metadata["truncated"]
    assert report.rounds[0].exact_match is None  # no held-out set: no score


def test_rounds_resume_and_new_rules_link_to_the_turns_that_taught_them(shop: tuple[Workspace, HeldOut]) -> None:
    workspace, heldout = shop
    config = ExploreConfig(env="toolshop", budget=30, rounds=3, strategy="random", tasks=SHOP_TASKS, heldout=heldout)
    first = explore(workspace, "shop-resume", config)
    rounds_file = run_dir(workspace.root, "shop-resume") / "rounds.jsonl"
    lines = rounds_file.read_bytes().splitlines(keepends=True)
    rounds_file.write_bytes(b"".join(lines[:2]) + lines[2][:20])  # the last round torn, as by a killed run
    again = explore(workspace, "shop-resume", config)
    assert again.resumed == 2 and len(again.rounds) == 3
    assert again.rounds[:2] == first.rounds[:2]
    assert again.rounds[2].episode_ids == first.rounds[2].episode_ids and again.rounds[2].steps == 10
    assert explore(workspace, "shop-resume", config).resumed == 3  # nothing left to do
    report = load_explore_report(workspace.root, "shop-resume")
    assert report is not None and len(report.rounds) == 3

    dataset_turns = {f"{e.id}#{t.index}" for e in workspace.dataset("shop-resume").iter_episodes() for t in e.turns}
    for round_ in first.rounds:
        assert round_.new_rules, f"round {round_.round} changed no rule"
        for change in round_.new_rules:
            assert change.turns and set(change.turns) <= dataset_turns
    assert all(c.new_turns > 0 and split_turn_id(c.turns[0])[0] in first.rounds[0].episode_ids
               for c in first.rounds[0].new_rules if c.kind == "new")

    with pytest.raises(ValueError, match=r"other settings \(budget\)"):
        explore(workspace, "shop-resume", config.model_copy(update={"budget": 40}))
    with pytest.raises(ValueError, match="cannot be the dataset explored into"):
        explore(workspace, "shop-heldout", config)


@pytest.fixture(scope="module")
def games(tmp_path_factory: pytest.TempPathFactory) -> str:
    pytest.importorskip("textworld", reason="textworld is not installed (pip install 'worldsmith[envs]')")
    root = tmp_path_factory.mktemp("tw-games")
    from worldsmith.envs.textworld import TextWorldEnv

    env = TextWorldEnv(games_dir=str(root))
    for task in (TW_GAME, TW_HELDOUT):
        env.game_path(task)
    return str(root)


def test_textworld_rounds_spend_the_budget_and_score_unseen_games(tmp_path: Path, games: str) -> None:
    workspace = Workspace(tmp_path / "ws")
    collect(workspace, "tw-heldout", CollectConfig(env="textworld", tasks=[TW_HELDOUT], policy="curious", workers=0,
                                                   env_kwargs={"games_dir": games}))
    heldout = HeldOut(dataset="tw-heldout", episodes=tuple(e.id for e in workspace.dataset("tw-heldout").iter_episodes()))
    for strategy in ("random", "mix", "explore"):
        config = ExploreConfig(env="textworld", budget=16, rounds=2, strategy=strategy, tasks=[TW_GAME], max_steps=6,
                               heldout=heldout, env_kwargs={"games_dir": games})
        report = explore(workspace, f"tw-{strategy}", config)
        assert [r.total_steps for r in report.rounds] == [8, 16]
        assert _real_steps(workspace, f"tw-{strategy}") == 16
        assert all(r.exact_match is not None and r.heldout_turns > 0 for r in report.rounds)
        assert report.rounds[0].rules > 0 and report.rounds[0].new_rules


def test_explore_strategy_on_textworld(tmp_path: Path, games: str) -> None:
    workspace = Workspace(tmp_path / "ws")
    config = ExploreConfig(env="textworld", budget=12, rounds=2, strategy="explore", tasks=[TW_GAME], max_steps=6,
                           env_kwargs={"games_dir": games})
    report = explore(workspace, "tw-explore", config)
    assert report.steps == 12 == _real_steps(workspace, "tw-explore")
    choices = [c for e in workspace.dataset("tw-explore").iter_episodes() for c in e.metadata["explore"]["choices"]]
    assert len(choices) <= 12 and {"explore", "expert"} <= set(choices)


def test_cli_json_output_parses(shop: tuple[Workspace, HeldOut]) -> None:
    workspace, _ = shop
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["explore", "toolshop", "--book", "cli-book", "--budget", "10", "--rounds", "2", "--strategy",
                     "expert", "--tasks", *SHOP_TASKS[:2], "--held-out", "shop-heldout", "--dataset", "cli-data",
                     "--workspace", str(workspace.root), "--json"])
    assert code == 0
    summary = orjson.loads(out.getvalue())
    assert summary["book"] == "cli-book" and summary["steps"] == 10 and len(summary["curve"]) == 2
    assert summary["heldout"] == "shop-heldout:4 episodes"
    assert summary["rounds_detail"][0]["new_rules"][0]["turns"]

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["explore", "toolshop", "--book", "b", "--budget", "1", "--rounds", "2",
                     "--workspace", str(workspace.root), "--json"])
    assert code != 0 and "cannot be split over 2 rounds" in orjson.loads(out.getvalue())["error"]


def test_policy_options_reach_the_exploring_policy_and_bad_ones_fail_early(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / "ws")
    config = ExploreConfig(env="toolshop", budget=6, rounds=1, strategy="explore", tasks=SHOP_TASKS[:1],
                           policy_options={"max_detour": 1})
    assert explore(workspace, "shop-options", config).steps == 6
    with pytest.raises(ValueError, match="exploring policy: .*no_such_option"):
        explore(workspace, "shop-bad", config.model_copy(update={"policy_options": {"no_such_option": 1}}))
    with pytest.raises(ValueError, match="policy options are for the explore strategy"):
        explore(workspace, "shop-bad", config.model_copy(update={"strategy": "random"}))
    assert not (run_dir(workspace.root, "shop-bad") / "rounds.jsonl").exists()


def test_an_explore_schedule_sets_each_rounds_weight(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / "ws")
    config = ExploreConfig(env="toolshop", budget=24, rounds=2, strategy="explore", tasks=SHOP_TASKS,
                           explore_schedule=[1.0, 0.0])
    report = explore(workspace, "shop-schedule", config)
    assert [r.weight for r in report.rounds] == [1.0, 0.0] and report.steps == 24
    by_id = {e.id: e.metadata["explore"] for e in workspace.dataset("shop-schedule").iter_episodes()}
    first = [c for i in report.rounds[0].episode_ids for c in by_id[i]["choices"]]
    second = [c for i in report.rounds[1].episode_ids for c in by_id[i]["choices"]]
    assert "explore" in first and second and set(second) == {"expert"}
    with pytest.raises(ValueError, match=r"weights in \[0, 1\]"):
        ExploreConfig(env="toolshop", budget=4, explore_schedule=[1.5])


@pytest.mark.integration
def test_an_unloadable_alfworld_game_is_skipped_and_its_budget_spent_on_the_others(tmp_path: Path) -> None:
    """Four ALFWorld games, one of them a broken game file: the run spends its whole budget on the three others,
    and counts the broken one and says why (as `collect` does), on the command line too."""
    pytest.importorskip("alfworld", reason="alfworld is not installed (pip install 'worldsmith[envs]')")
    pytest.importorskip("textworld.envs.pddl", reason="textworld[pddl] is not installed")
    from worldsmith.envs.alfworld import GAME_FILE, default_games_root
    from worldsmith.envs.registry import make

    env = make("alfworld")
    try:
        good = env.tasks()[:3]
    finally:
        env.close()
    if len(good) < 3:
        pytest.skip(f"fewer than 3 ALFWorld games at {default_games_root()}")
    broken = tmp_path / "games" / "val1" / "broken-game" / "trial_1"
    broken.mkdir(parents=True)
    (broken / GAME_FILE).write_text((default_games_root() / good[0] / GAME_FILE).read_text()[:4000])
    tasks = [good[0], str(broken), *good[1:]]  # the broken game second: its first wave holds only it
    workspace = Workspace(tmp_path / "ws")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["explore", "alfworld", "--book", "alf", "--budget", "40", "--rounds", "2", "--strategy",
                     "expert", "--max-steps", "12", "--tasks", *tasks, "--workspace", str(workspace.root), "--json"])
    summary = orjson.loads(out.getvalue())
    assert code == 0 and summary["steps"] == 40 == _real_steps(workspace, "explore-alfworld-alf")
    assert summary["skipped"] == 1 and list(summary["skipped_tasks"]) == [str(broken)]
    assert "cannot load" in summary["skipped_tasks"][str(broken)]
    played = {e.task_id or e.metadata.get("task") for e in workspace.dataset("explore-alfworld-alf").iter_episodes()}
    assert played and str(broken) not in played
    report = load_explore_report(workspace.root, "explore-alfworld-alf")
    assert report is not None and report.skipped_tasks == summary["skipped_tasks"]

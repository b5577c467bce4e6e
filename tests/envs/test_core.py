"""The envs machinery on a tiny in-test environment: recorder, checker, policies, collect, replay."""

from __future__ import annotations

import orjson
import pytest

from fake_envs import CounterEnv
from worldsmith import Workspace
from worldsmith.envs import (
    EnvCheckError,
    EnvUnavailableError,
    ExpertPolicy,
    RandomPolicy,
    ReplayPolicy,
    check_env,
    make,
    make_policy,
    record_episode,
    spec,
)
from worldsmith.envs.collect import CollectConfig, collect, load_run_episodes
from worldsmith.envs.replay import load_actions, replay, replay_episode


def test_record_expert_episode_has_provenance_state_and_success():
    env = CounterEnv()
    episode = record_episode(env, ExpertPolicy(), "reach-3", seed=4)
    assert episode.success is True
    assert [t.action.raw for t in episode.turns] == ["inc", "inc", "inc"]
    assert episode.turns[-1].done is True
    assert episode.initial_state == {"count": 0, "target": 3}
    assert [t.state["count"] for t in episode.turns] == [1, 2, 3]
    assert episode.turns[1].provenance.source == "env:counter"
    assert episode.turns[1].provenance.pointer == "/reach-3/steps/1"
    assert episode.id == "counter-reach-3-expert-s4"
    assert episode.metadata["env"] == {"name": "counter", "kwargs": {}}
    assert episode.task == "count to 3" and episode.task_id == "reach-3"
    # State is evaluation-only: it does not change what the episode "is".
    assert episode.content_hash() == episode.without_state().content_hash()
    assert not episode.without_state().has_state


def test_handover_steps_become_context_not_turns():
    episode = record_episode(CounterEnv(), ExpertPolicy(), "talk-2")
    assert len(episode.turns) == 2
    events = [(e.role, e.content, e.name) for e in episode.turns[1].context]
    assert events == [("assistant", "one done", "handover:respond"), ("user", "go on", None)]
    result = replay_episode(episode, CounterEnv())
    assert result.reproduced is True
    assert [s.action for s in result.steps] == ["inc", "respond one done", "inc"]


def test_max_steps_truncates_and_errors_keep_partial_turns():
    episode = record_episode(CounterEnv(), make_policy("replay", actions=["dec"] * 20), "reach-2", max_steps=5)
    assert len(episode.turns) == 5 and episode.metadata["truncated"] is True and episode.success is False
    failed = record_episode(CounterEnv(), ExpertPolicy(), "raise-3")
    assert len(failed.turns) == 1
    assert failed.success is False
    assert "the simulator fell over" in failed.metadata["error"]


def test_random_policy_is_seeded():
    first = record_episode(CounterEnv(), RandomPolicy(seed=1), "reach-3", max_steps=8)
    second = record_episode(CounterEnv(), RandomPolicy(seed=1), "reach-3", max_steps=8)
    assert [t.action.raw for t in first.turns] == [t.action.raw for t in second.turns]


def test_checker_passes_good_env_and_names_problems():
    check_env(CounterEnv(), "reach-2")

    class Broken(CounterEnv):
        def step(self, action):  # returns a bare tuple with a str reward
            return (Observation(text="x"), "1", 0, False, {})

    from worldsmith.traces import Observation

    with pytest.raises(EnvCheckError, match="reward '1' is not a finite number.*terminated is a int"):
        check_env(Broken(), "reach-2")


def test_make_unknown_and_unavailable():
    with pytest.raises(KeyError, match="unknown environment 'nope'.*known: .*alfworld"):
        make("nope")
    assert isinstance(make("counter"), CounterEnv)
    from dataclasses import replace

    missing = replace(spec("counter"), requires=("no_such_module_xyz",), install_hint="pip install xyz")
    with pytest.raises(EnvUnavailableError, match="needs no_such_module_xyz; pip install xyz"):
        missing.make()


@pytest.mark.parametrize("workers", [0, 2])
def test_collect_keeps_successes_reports_failures_and_resumes(tmp_path, workers):
    workspace = Workspace(tmp_path / "ws")
    config = CollectConfig(env="counter", tasks=["reach-2", "reach-3", "broken", "nope-1", "raise-4"], workers=workers)
    seen = []
    report = collect(workspace, "counted", config, progress=seen.append)
    status = {r.task: r.status for r in report.results}
    assert status == {"reach-2": "ok", "reach-3": "ok", "broken": "load_error", "nope-1": "unknown_task",
                      "raise-4": "crashed"}
    assert report.ingested == 2 and report.wins == 2
    assert seen[-1].done == seen[-1].total == 5
    dataset = workspace.dataset("counted")
    assert dataset.stats()["episodes"] == 2
    assert all(not e.has_state for e in dataset.iter_episodes())
    assert all(e.has_state for e in dataset.iter_episodes(with_state=True))
    assert len(list(load_run_episodes(workspace.root, "counted"))) == 3  # the crashed one is kept for analysis
    again = collect(workspace, "counted", config)
    assert again.skipped == 5 and again.ingested == 0 and again.duplicates == 2
    assert dataset.stats()["episodes"] == 2


def test_collect_survives_hangs_and_dying_workers(tmp_path):
    workspace = Workspace(tmp_path / "ws")
    config = CollectConfig(env="counter", tasks=["hang", "crash", "reach-2"], workers=2, episode_timeout=3)
    report = collect(workspace, "rough", config)
    status = {r.task: r.status for r in report.results}
    assert status == {"hang": "timeout", "crash": "crashed", "reach-2": "ok"}
    assert "exit code 3" in next(r.error for r in report.results if r.task == "crash")
    assert report.ingested == 1


def test_collect_more_episodes_than_tasks_cycles_seeds(tmp_path):
    workspace = Workspace(tmp_path / "ws")
    report = collect(workspace, "d", CollectConfig(env="counter", policy="random", episodes=4, workers=0, seed=7))
    assert [(r.task, r.seed) for r in report.results] == [("reach-2", 7), ("reach-3", 7), ("talk-2", 7), ("reach-2", 8)]
    assert report.ingested + report.duplicates == 4  # "all" is kept for non-expert policies


def test_replay_and_action_files(tmp_path):
    result = replay("counter", "reach-3", ["inc", "jump", "inc", "inc", "inc"])
    assert [s.observation for s in result.steps] == ["count 1", "I don't know how to 'jump'.", "count 2", "count 3"]
    assert result.success is True and result.stopped_early is True
    text = tmp_path / "a.txt"
    text.write_text("inc\n\ninc\n")
    assert load_actions(text) == ["inc", "inc"]
    listed = tmp_path / "a.json"
    listed.write_bytes(orjson.dumps(["inc", {"name": "inc", "arguments": {}}]))
    assert load_actions(listed)[1].name == "inc"
    bad = tmp_path / "b.json"
    bad.write_text('["inc", 3]')
    with pytest.raises(ValueError, match="b.json: action 1 must be text"):
        load_actions(bad)
    assert ReplayPolicy(["inc"]).actions[0].name == "inc"


def test_replay_episode_reports_first_divergence():
    episode = record_episode(CounterEnv(), ExpertPolicy(), "reach-3")
    assert replay_episode(episode, CounterEnv()).reproduced is True
    shifted = replay_episode(episode, CounterEnv(start=1))
    assert shifted.first_divergence == -1 and shifted.reproduced is False
    episode.turns[2].observation.text = "count 99"
    assert replay_episode(episode, CounterEnv()).first_divergence == 2


def test_llm_policy_prompts_with_history_and_admissible_actions():
    from worldsmith.envs import LLMPolicy
    from worldsmith.llm import Completion

    class Answers:
        def __init__(self, texts):
            self.texts, self.seen = list(texts), []

        def chat(self, messages, **params):
            self.seen.append((messages, params))
            return [Completion(text=self.texts.pop(0))]

    llm = Answers(["inc\nand more text", "  inc  ", ""])
    episode = record_episode(CounterEnv(), LLMPolicy(llm), "reach-3")
    assert [t.action.raw for t in episode.turns] == ["inc", "inc"] and episode.metadata["policy"] == "llm"
    messages, params = llm.seen[1]
    assert messages[0]["role"] == "system" and "count to 3" in messages[0]["content"]
    assert [m["role"] for m in messages[1:]] == ["user", "assistant", "user"]
    assert "Valid actions: dec, inc" in messages[-1]["content"] and params["stop"] == ["\n"]
    assert episode.success is False  # the empty third answer ended it at count 2

"""The projection source in a harness over real builds: hand-made episodes, and toolshop episodes collected
in-process (the real env), answered on held-out tasks as the real API answers."""

from __future__ import annotations

import json

from worldsmith.envs import make, make_policy, record_episode
from worldsmith.sim.harness import Harness
from worldsmith.traces.model import Action, Episode, Observation, Turn
from worldsmith.worldbook import BuildConfig, build_worldbook

BOXES = {"bx_1": {"s_1": {"id": "s_1", "size": 3}, "s_2": {"id": "s_2", "size": 4}},
         "bx_2": {"s_3": {"id": "s_3", "size": 5}},
         "bx_3": {"s_4": {"id": "s_4", "size": 6}, "s_5": {"id": "s_5", "size": 1}}}


def _episode(index: int, calls: list[tuple[str, dict[str, object], object]]) -> Episode:
    turns = [Turn(index=i, action=Action(name=name, arguments=arguments),
                  observation=Observation(text=answer if isinstance(answer, str) else json.dumps(answer)))
             for i, (name, arguments, answer) in enumerate(calls)]
    return Episode(id=f"box-{index}", env_id="box", task_id=f"task-{index}", turns=turns,
                   initial_observation=Observation(text="Ready."))


def _box(box: str) -> dict[str, object]:
    return {"box_id": box, "slots": BOXES[box], "color": "red"}


def _harness() -> Harness:
    episodes = []
    for index, box in enumerate(BOXES):
        episodes.append(_episode(2 * index, [("get_box", {"box_id": box}, _box(box))]))
        episodes.append(_episode(2 * index + 1, [("get_box", {"box_id": box}, _box(box)),
                                                 ("list_slots", {"box_id": box}, list(BOXES[box].values()))]))
    return Harness(build_worldbook(episodes, name="box", config=BuildConfig()).book)


def test_a_projection_read_is_answered_from_the_stored_record_with_its_audit() -> None:
    harness = _harness()
    rule = next(r for r in harness.book.tool_rules if r.kind == "projection")
    assert rule.tool == "list_slots" and rule.executable
    harness.start(_episode(99, []))
    answer = harness.predict({"name": "list_slots", "arguments": {"box_id": "bx_3"}})
    assert answer.observation == json.dumps(list(BOXES["bx_3"].values()))
    assert answer.audit.route == "state:projection" and answer.audit.source == "projection"
    assert answer.audit.records[0]["key"] == "box_id=bx_3"
    action = Action(name="list_slots", arguments={"box_id": "bx_9"})  # a box no episode showed: no answer
    proposals, _ = harness.proposals(action, action.name, dict(action.arguments))
    assert not [p for p in proposals if p.source == "projection"]


def _collected(tasks: range) -> list[Episode]:
    env = make("toolshop")
    return [record_episode(env, make_policy("probing", seed=0), f"db=0:task={index}", max_steps=30)
            for index in tasks]


def test_collected_toolshop_projection_reads_answer_held_out_tasks_as_the_real_api() -> None:
    """Toolshop probing runs collected in-process, 40 tasks to build from and 20 held out: every projection
    answer on the held-out tasks is the real API's answer, and there are some of each learned tool."""
    construction, evaluation = _collected(range(40)), _collected(range(40, 60))
    harness = Harness(build_worldbook(construction, name="toolshop", config=BuildConfig()).book)
    rules = {r.tool: r for r in harness.book.tool_rules if r.kind == "projection" and r.executable}
    assert rules, "no supported projection rule learned from the toolshop runs"
    answered: list[tuple[str, str, str]] = []
    for episode in evaluation:
        harness.start(episode.model_copy(update={"turns": []}))
        for turn in episode.turns:
            name, arguments, _ = harness.canonical(turn.action)
            answered += [(name, p.observation, turn.observation.text)
                         for p in harness.proposals(turn.action, name, arguments)[0] if p.source == "projection"]
            harness.observe(turn.action, turn.observation.text)
    assert len(answered) >= 5
    wrong = [(name, said, real) for name, said, real in answered if said != real]
    assert len(wrong) <= 0.05 * len(answered), wrong[:3]

"""SideBySide on a held-out ALFWorld episode: harness, nearest evidence and the tiny model, teacher-forced and open loop."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from sim_support import SAMPLES, TINY

from ports import free_port
from worldsmith.llm import LLM, open_llm
from worldsmith.sim import Prediction, WorldModelBase
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.sim.sidebyside import SideBySide, StepView, state_changes
from worldsmith.traces import Action, Episode, trajectory_family
from worldsmith.worldbook import Worldbook

METHODS = ["harness", "nearest", "direct"]


@pytest.fixture(scope="module")
def split() -> tuple[Worldbook, list[Episode]]:
    """A worldbook built on 3 of every 4 ALFWorld task families; the other families' episodes."""
    episodes = [Episode.model_validate({k: v for k, v in orjson.loads(line).items() if k != "format"})
                for line in (SAMPLES / "alfworld_expert.jsonl").read_bytes().splitlines()]
    families = sorted({trajectory_family(e) for e in episodes})
    held = {f for i, f in enumerate(families) if i % 4 == 0}
    train = [e for e in episodes if trajectory_family(e) not in held]
    return build_simulator_book(train, name="alfworld").book, [e for e in episodes if trajectory_family(e) in held]


@pytest.fixture(scope="module")
def episode(split: tuple[Worldbook, list[Episode]]) -> Episode:
    """The longest held-out episode (it takes, moves and puts objects)."""
    return max(split[1], key=lambda e: (len(e.turns), e.id))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LLM]:
    if not (TINY / "config.json").exists():
        pytest.fail(f"the tiny model is missing at {TINY} (make samples)")
    llm = open_llm(f"tiny:{TINY}", tmp_path_factory.mktemp("ws"), component="sidebyside-test")
    yield llm
    llm.close()


def _runner(book: Worldbook, episode: Episode, llm: LLM, mode: str) -> SideBySide:
    return SideBySide.from_kinds(book, METHODS, llm=llm, episode=episode, mode=mode, max_tokens=24)


def _check_view(view: StepView, episode: Episode) -> None:
    turn = episode.turns[view.index]
    assert view.recorded and view.real == turn.observation.text and view.action_text == turn.action.raw
    for name, step in view.methods.items():
        assert step.error is None and step.committed, (name, step.error)
        assert step.score is not None and step.diff is not None
        assert (step.score.exact == 1.0) == (" ".join(step.observation.split()) == " ".join(view.real.split()))
        assert 0.0 <= step.score.f1 <= 1.0 and 0.0 <= step.score.edit <= 1.0
        said = "".join(s.text for s in step.diff if s.op != "delete")
        real = "".join(s.text for s in step.diff if s.op != "insert")
        assert " ".join(said.split()) == " ".join(step.observation.split())
        assert " ".join(real.split()) == " ".join(view.real.split())


def test_teacher_forcing_restarts_every_method_on_the_real_prefix(split, episode: Episode, tiny: LLM) -> None:
    book, _ = split
    runner = _runner(book, episode, tiny, "teacher")
    assert runner.next_action == episode.turns[0].action and not runner.done
    views = runner.run()
    assert len(views) == len(episode.turns) == runner.position and runner.done and runner.history == views
    for view in views:
        _check_view(view, episode)
        assert view.teacher_forced
    # after the last step each model's history is the real prefix plus its own last prediction
    direct = runner.methods["direct"]
    assert [item.observation for item in direct.history[:-1]] == [t.observation.text for t in episode.turns[:-1]]
    assert direct.history[-1].observation == views[-1].methods["direct"].observation
    summary = runner.summary()
    assert summary["harness"]["steps"] == len(episode.turns)
    # rules over tracked state beat a 2.3M-parameter model prompted with the history
    assert summary["harness"]["f1"] > summary["direct"]["f1"], summary
    assert summary["harness"]["exact"] >= 0.5, summary
    with pytest.raises(ValueError, match="episode ends after"):
        runner.step()


def test_open_loop_carries_each_method_on_from_its_own_predictions(split, episode: Episode, tiny: LLM) -> None:
    book, _ = split
    runner = _runner(book, episode, tiny, "open_loop")
    views = runner.run()
    for view in views:
        _check_view(view, episode)
        assert not view.teacher_forced
    for name in METHODS:
        own = [view.methods[name].observation for view in views]
        assert [item.observation for item in runner.methods[name].history] == own, name
    direct_own = [view.methods["direct"].observation for view in views]
    assert direct_own != [t.observation.text for t in episode.turns]  # so the two modes really differ here


def test_state_panel_shows_what_the_harness_changed(split, episode: Episode, tiny: LLM) -> None:
    book, _ = split
    runner = _runner(book, episode, tiny, "teacher")
    index = next(i for i, t in enumerate(episode.turns) if t.action.name == "take")
    for _ in range(index + 1):
        view = runner.step()
    taken, source = episode.turns[index].action.raw.removeprefix("take ").split(" from ")
    step = view.methods["harness"]
    change = next(c for c in step.changes if c.path == f"world.contents.{source}")
    assert taken in change.removed and taken not in change.after
    assert step.state_after["world"]["contents"][source] == change.after
    assert step.audit is not None and step.audit.route == "fast_path" and step.audit.rules
    assert view.methods["nearest"].changes == []  # nearest evidence keeps no state


def test_typed_action_leaves_the_recording_and_fork_comes_back(split, episode: Episode, tiny: LLM) -> None:
    book, _ = split
    runner = _runner(book, episode, tiny, "teacher")
    first = [runner.step(), runner.step()]
    typed = runner.step("inventory")
    assert not typed.recorded and typed.real is None and typed.action_text == "inventory"
    assert typed.teacher_forced  # started from the real prefix of 2 turns, then off the record
    for step in typed.methods.values():
        assert step.score is None and step.diff is None and step.committed
    assert runner.diverged_at == 2 and not runner.on_record and runner.done
    with pytest.raises(ValueError, match="left the recording at step 2"):
        runner.step()
    after = runner.step("look")  # typed steps go on from each method's own line
    assert not after.teacher_forced and len(runner.methods["direct"].history) == 4

    runner.fork(2)
    assert runner.position == 2 and runner.on_record and runner.history == first
    assert [i.observation for i in runner.methods["harness"].history] == [t.observation.text for t in episode.turns[:2]]
    again = runner.step()
    assert again.recorded and again.index == 2 and again.real == episode.turns[2].observation.text
    with pytest.raises(ValueError, match="choose 0..3"):
        runner.fork(4)


def test_fork_in_open_loop_restarts_on_the_methods_own_observations(split, episode: Episode, tiny: LLM) -> None:
    book, _ = split
    runner = _runner(book, episode, tiny, "open_loop")
    views = [runner.step() for _ in range(4)]
    runner.fork(2)
    for name in METHODS:
        assert [i.observation for i in runner.methods[name].history] == [v.methods[name].observation
                                                                         for v in views[:2]]
    assert runner.step().methods["harness"].observation == views[2].methods["harness"].observation


def test_reset_goes_back_to_the_opening(split, episode: Episode, tiny: LLM) -> None:
    book, _ = split
    runner = _runner(book, episode, tiny, "teacher")
    first = runner.step()
    runner.step("inventory")
    runner.reset()
    assert runner.position == 0 and runner.history == [] and runner.on_record
    assert all(model.history == [] for model in runner.methods.values())
    again = runner.step()
    for name in ("harness", "nearest"):  # deterministic without a model
        assert again.methods[name].observation == first.methods[name].observation


def test_an_opening_without_an_episode_takes_typed_actions(split, episode: Episode) -> None:
    book, _ = split
    runner = SideBySide.from_kinds(book, ["harness", "nearest"], opening=episode.initial_observation.text)
    assert runner.done
    with pytest.raises(ValueError, match="no episode to follow"):
        runner.step()
    take = next(t for t in episode.turns if t.action.name == "take")
    view = runner.step(take.action.raw)
    assert not view.recorded and view.real is None and view.methods["nearest"].score is None
    assert view.methods["harness"].observation == take.observation.text  # a rule's template needs no history
    assert view.methods["harness"].audit.route == "fast_path"


class _Broken(WorldModelBase):
    name = "broken"

    def _predict(self, action: Action) -> Prediction:
        raise RuntimeError("backend exploded")


def test_a_failing_method_keeps_its_column_and_spares_the_others(split, episode: Episode) -> None:
    book, _ = split
    from worldsmith.sim import NearestEvidence

    runner = SideBySide(book, {"broken": _Broken(), "nearest": NearestEvidence(book)}, episode)
    view = runner.step()
    assert view.methods["broken"].error == "RuntimeError: backend exploded" and not view.methods["broken"].committed
    assert view.methods["nearest"].error is None and view.methods["nearest"].score is not None
    assert runner.summary()["broken"]["steps"] == 0


def test_bad_arguments_are_refused(split, episode: Episode) -> None:
    book, _ = split
    from worldsmith.sim import NearestEvidence

    with pytest.raises(ValueError, match="recorded column"):
        SideBySide(book, {"real": NearestEvidence(book)}, episode)
    with pytest.raises(ValueError, match="at least one method"):
        SideBySide(book, {}, episode)
    with pytest.raises(ValueError, match="not both"):
        SideBySide(book, {"n": NearestEvidence(book)}, episode, "opening")
    with pytest.raises(ValueError, match="mode"):
        SideBySide(book, {"n": NearestEvidence(book)}, episode, mode="closed")  # type: ignore[arg-type]


def test_state_changes_list_items_in_and_out() -> None:
    before = {"world": {"contents": {"desk 1": ["mug 1", "pen 2"]}, "location": "desk 1"}, "gone": 1}
    after = {"world": {"contents": {"desk 1": ["pen 2", "book 3"]}, "location": "bed 1"}, "new": {"x": True}}
    changes = {c.path: c for c in state_changes(before, after)}
    assert sorted(changes) == ["gone", "new.x", "world.contents.desk 1", "world.location"]
    assert changes["world.contents.desk 1"].added == ["book 3"] and changes["world.contents.desk 1"].removed == ["mug 1"]
    assert changes["gone"].kind == "removed" and changes["new.x"].kind == "added" and changes["new.x"].after is True
    assert changes["world.location"].before == "desk 1" and changes["world.location"].after == "bed 1"
    assert state_changes(before, before) == []


def test_the_notebook_stepper_steps_on_click(split, episode: Episode, tmp_path: Path) -> None:
    import ipywidgets

    from worldsmith.sim.htmlview import escape_html
    from worldsmith.sim.widgets import stepper

    book, _ = split
    runner = SideBySide.from_kinds(book, ["harness", "nearest"], episode=episode)
    box = stepper(runner)
    assert isinstance(box, ipywidgets.VBox)
    controls, status, output = box.children
    buttons = {b.description: b for b in controls.children if isinstance(b, ipywidgets.Button)}
    text = next(w for w in controls.children if isinstance(w, ipywidgets.Text))
    assert "no step yet" in output.value
    buttons["Step"].click()
    assert runner.position == 1 and escape_html(episode.turns[0].observation.text) in output.value
    assert "step 1 of" in status.value
    text.value = "inventory"
    buttons["Step"].click()
    assert runner.position == 2 and not runner.history[-1].recorded and text.value == ""
    buttons["Step"].click()  # nothing recorded to follow now: said, not raised
    assert runner.position == 2 and "left the recording" in status.value
    buttons["Reset"].click()
    assert runner.position == 0 and "reset" in status.value
    buttons["Step to end"].click()
    assert runner.position == len(episode.turns)


def test_the_stepper_says_what_to_install_without_ipywidgets(split, episode: Episode,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from worldsmith.sim.widgets import stepper

    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    with pytest.raises(ImportError, match="pip install"):
        stepper(SideBySide.from_kinds(split[0], ["nearest"], episode=episode))


def test_a_model_that_fails_is_shown_as_a_fallback_not_scored_as_the_method(split, episode: Episode,
                                                                              tmp_path: Path) -> None:
    book, _ = split
    spec = f"openai:m@http://127.0.0.1:{free_port()}/v1?max_retries=0&timeout=5"
    llm = open_llm(spec, tmp_path, component="sidebyside-test")
    try:
        runner = SideBySide.from_kinds(book, ["nearest", "direct"], llm=llm, episode=episode, max_tokens=8)
        views = runner.run(max_steps=2)
    finally:
        llm.close()
    for view in views:
        direct = view.methods["direct"]
        assert direct.status == "fallback" and direct.score is None and direct.fallback_score is not None
        assert "model call failed" in (direct.fallback_reason or "")
        assert direct.audit is not None and direct.audit.route == "fallback:nearest_evidence"
        assert view.methods["nearest"].status == "ok" and view.methods["nearest"].score is not None
    summary = runner.summary()
    assert summary["direct"]["steps"] == 0 and summary["direct"]["fallbacks"] == 2
    assert summary["nearest"]["steps"] == 2 and summary["nearest"]["fallbacks"] == 0


def test_a_held_out_episode_is_not_leaked(split, episode: Episode) -> None:
    book, _ = split
    runner = SideBySide.from_kinds(book, ["nearest"], episode=episode)
    assert not runner.leaked and runner.leak_notice() is None and runner.excluded_evidence == 0


def test_an_episode_in_the_evidence_is_flagged_and_nearest_skips_its_turns(split) -> None:
    book, _ = split
    from worldsmith.worldbook.leakage import book_episode_ids

    trained = next(e for e in sorted(book_episode_ids(book)))
    source = [Episode.model_validate({k: v for k, v in orjson.loads(line).items() if k != "format"})
              for line in (SAMPLES / "alfworld_expert.jsonl").read_bytes().splitlines()]
    episode = next(e for e in source if e.id == trained)
    own = sum(item.turn_id.startswith(f"{episode.id}#") for item in book.evidence)
    runner = SideBySide.from_kinds(book, ["nearest"], episode=episode)
    assert runner.leaked and runner.excluded_evidence == own > 0
    notice = runner.leak_notice() or ""
    assert episode.id in notice and "leaked" in notice and "in the book's evidence" in notice
    for view in runner.run():
        retrieved = view.methods["nearest"].audit.retrieved  # type: ignore[union-attr]
        assert retrieved and not any(str(item["id"]).startswith(f"{episode.id}#") for item in retrieved)
    # without the exclusion nearest evidence finds the target turn itself
    unguarded = SideBySide.from_kinds(book, ["nearest"], episode=episode, exclude_leaked=False)
    first = unguarded.step().methods["nearest"].audit.retrieved  # type: ignore[union-attr]
    assert unguarded.leaked and any(str(item["id"]).startswith(f"{episode.id}#") for item in first)

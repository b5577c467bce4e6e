"""The word diff at the trace layer: the worldbook's version compare and the simulator's side-by-side share it."""

from __future__ import annotations

from worldsmith import traces
from worldsmith.sim import scoring
from worldsmith.traces.text_diff import DiffSegment, word_diff


def test_a_changed_word_is_the_old_word_deleted_then_the_new_one_inserted() -> None:
    assert word_diff("You open the door.", "You close the door.") == [
        DiffSegment(op="equal", text="You "), DiffSegment(op="delete", text="close "),
        DiffSegment(op="insert", text="open "), DiffSegment(op="equal", text="the door.")]


def test_the_old_import_paths_name_the_same_objects() -> None:
    assert scoring.word_diff is word_diff is traces.word_diff
    assert scoring.DiffSegment is DiffSegment is traces.DiffSegment

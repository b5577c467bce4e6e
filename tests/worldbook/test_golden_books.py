"""Golden books: what the deterministic builder makes of bundled samples, rule by rule, is kept as a file.

Induction and review are restructured from time to time; the book they build must not move unnoticed. Each golden
file holds, for one bundled sample, every rule's id, template, conditions, effects, status, support and provenance,
and the route table of the simulator's book (which the trackers, `sim.sources.scope` among them, decide). The files are written by this test, from
the code, never by hand: after a deliberate change in what the builder makes, rerun it with
`WORLDSMITH_UPDATE_GOLDEN=1` and review the diff of `tests/worldbook/golden/` with the change.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from helpers import sample_episodes
from worldsmith.sim import build_simulator_book

GOLDEN = Path(__file__).parent / "golden"
# ALFWorld (list effects confirmed by later turns), BFCL (JSON results), TextWorld (refusals and scope forms).
SAMPLES = ("alfworld_expert", "bfcl", "textworld")
_RULE_FIELDS = ("id", "action", "template", "outcome", "conditions", "effects", "status", "support", "provenance")


def book_digest(name: str) -> dict[str, Any]:
    """The parts of the book built from sample `name` that induction, review and routing decide, as JSON."""
    book = build_simulator_book(sample_episodes(name), name=name).book
    return {"rules": [{key: value for key, value in rule.model_dump(mode="json").items() if key in _RULE_FIELDS}
                      for rule in book.rules],
            "routes": book.routes.model_dump(mode="json") if book.routes is not None else None}


@pytest.mark.parametrize("name", SAMPLES)
def test_the_book_built_from_a_sample_matches_its_golden_file(name: str) -> None:
    digest = book_digest(name)
    path = GOLDEN / f"{name}.json"
    if os.environ.get("WORLDSMITH_UPDATE_GOLDEN"):
        path.write_text(json.dumps(digest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    golden = json.loads(path.read_text(encoding="utf-8"))
    assert [rule["id"] for rule in digest["rules"]] == [rule["id"] for rule in golden["rules"]]
    for built, kept in zip(digest["rules"], golden["rules"], strict=True):
        assert built == kept, built["id"]
    assert digest["routes"] == golden["routes"]

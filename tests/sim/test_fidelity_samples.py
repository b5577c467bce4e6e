"""The no-model harness against nearest evidence on held-out recordings of the real environments.

The bundled exploratory samples (`data_samples/collected/*_curious.jsonl`, recorded by `worldsmith collect
--policy curious` from ALFWorld, TextWorld, ScienceWorld, the shell and BFCL) revisit places, read after
writes and try invalid actions: where state matters. Each is split by trajectory family; the book is built from
one part (with its route table) and both world models answer the other part's turns from their real prefixes.
"""

from __future__ import annotations

from collections import Counter

import pytest

from helpers import sample_episodes
from worldsmith.evals.protocols import Scorer, next_obs_records
from worldsmith.sim.baselines import NearestEvidence
from worldsmith.sim.harness import Harness
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.worldbook.build import family_folds, trajectory_family


@pytest.mark.parametrize(("sample", "state_route"), [
    ("alfworld_curious", None), ("textworld_curious", "state:map"), ("scienceworld_curious", None),
    ("shell_curious", "state:shell"), ("bfcl_curious", None)])
def test_the_harness_beats_nearest_evidence_on_held_out_exploration(sample: str, state_route: str | None) -> None:
    episodes = sample_episodes(sample)
    folds = family_folds(episodes, 4)
    held = [e for e in episodes if folds[trajectory_family(e)] == 0]
    book = build_simulator_book([e for e in episodes if folds[trajectory_family(e)] != 0], name=sample).book
    assert book.routes is not None and book.routes.turns > 0
    exact: Counter[str] = Counter()
    routes: Counter[str] = Counter()
    for name, model in (("harness", Harness(book)), ("nearest", NearestEvidence(book))):
        for episode in held:
            for record in next_obs_records(model, episode, Scorer()):
                exact[name] += record.exact_match or 0.0
                if name == "harness":
                    routes[record.route or ""] += 1
    assert exact["harness"] > exact["nearest"], (exact, routes)
    assert state_route is None or routes[state_route] > 0, routes  # the map, the file system: state answered

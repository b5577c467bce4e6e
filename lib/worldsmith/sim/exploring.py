"""The exploring policy: real environment steps spent where the worldbook is unsure (active collection).

`ExploringPolicy(book)` plays a real environment like any `worldsmith.envs.policies.Policy` (so
`record_episode` records its episodes). It keeps a `Harness` of the book in step with the real episode
(teacher forcing: every real observation is `observe`d, never predicted), and on an exploring step it asks
`sim.uncertainty.assess` about every candidate action and plays the one with the most expected information.

    policy = ExploringPolicy(book, seed=0, explore=0.5)
    episode = record_episode(env, policy, task, max_steps=60)
    policy.choices        # "expert" / "explore" / "return" per step
    policy.assessments    # the Uncertainty of each played action
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import orjson

from worldsmith.envs.base import Env, as_action
from worldsmith.envs.policies import CuriousPolicy
from worldsmith.envs.probing import HANDOVER, ProbingPolicy
from worldsmith.sim.base import action_line, episode_prefix
from worldsmith.sim.harness import Harness, HarnessConfig
from worldsmith.sim.uncertainty import Uncertainty, assess
from worldsmith.traces.model import Action, Observation
from worldsmith.worldbook.model import Worldbook

__all__ = ["ExploringPolicy"]


def _key(action: Action) -> str:
    """One key per distinct action: a call by its tool and arguments, a command by its text."""
    if isinstance(action.arguments, dict) and action.arguments and set(action.arguments) != {"text"}:
        return action.name + orjson.dumps(action.arguments, option=orjson.OPT_SORT_KEYS).decode()
    return " ".join(action_line(action, command=True).lower().split())


class ExploringPolicy:
    """The expert's path, with detours to the candidate actions the book is least sure of.

    Each step, with probability `explore` (a seeded coin), the policy *explores*: it gathers candidates, the
    environment's admissible actions where it lists them (a seeded sample of at most `max_candidates`), the
    expert's action, and what the curious policy's components (text and shell worlds) or the probing policy's
    (tool-call worlds, whose reset info lists `tools`) would propose now: revisits, reads after writes, re-reads,
    queries that may find nothing, calls that must fail. It plays the candidate of highest `assess` score, each
    score divided by 1 + the times this policy already played that action type in that situation (across
    episodes: the book only learns from them once it is rebuilt), and in text and shell worlds a write (neither a
    read nor a move, as the curious policy tells them; an action made to fail is no write) weighted by
    `write_weight`: a write can spoil the task (eating what the recipe needs), a read or an undone move cannot.
    Left out: a candidate the book predicts ends the episode, and one in a situation signature whose exploring
    step was the last of an earlier episode of this policy (`ended`: it ended that episode, or the step cap did).
    Otherwise it plays the expert's action.

    Why mix with the expert rather than explore freely: most of what the book is unsure of lies in deep states
    (a later room, an order after it was placed), which only an agent making progress reaches. The expert is
    the cheapest progress there is, and environments already have one. So detours are bounded: after
    `max_detour` exploring steps in a row the expert plays; after a detour that moved away from the expert's
    path (its next action no longer admissible) the move is undone first ("return", the curious policy's way
    back) where the way back can be told. The episode ends when the expert has nothing left (or at the
    caller's step cap). `explore=0.0` is the expert alone; `explore=1.0` is pure uncertainty-greedy
    exploration (no expert steps, detour cap or returns).
    """

    name = "explore"
    choice_label = "explore"  # what `choices` records for a step `choose` picked

    def __init__(self, book: Worldbook, *, seed: int | None = None, explore: float = 0.5, max_candidates: int = 48,
                 max_detour: int = 2, draws: int = 3, assess_expert: bool = True, write_weight: float = 0.3,
                 harness_config: HarnessConfig | None = None) -> None:
        """`draws`: tries of each curious / probing component per exploring step; `assess_expert`: also assess the
        expert's actions (their `assessments` entry is None otherwise); `write_weight`: the factor on a text or shell
        write's score (1.0: no caution)."""
        if not 0.0 <= explore <= 1.0:
            raise ValueError(f"explore must be in [0, 1], not {explore}")
        if not 0.0 <= write_weight <= 1.0:
            raise ValueError(f"write_weight must be in [0, 1], not {write_weight}")
        if max_candidates < 1 or max_detour < 1 or draws < 0:
            raise ValueError(f"max_candidates and max_detour must be >= 1 and draws >= 0, not "
                             f"{max_candidates}, {max_detour}, {draws}")
        self.book, self.seed, self.explore = book, seed, explore
        self.max_candidates, self.max_detour, self.draws, self.assess_expert = \
            max_candidates, max_detour, draws, assess_expert
        self.write_weight = write_weight
        self.harness = Harness(book, config=harness_config or HarnessConfig())
        self.tried: Counter[str] = Counter()  # action type x situation signature -> times this policy played it
        self.ended: set[str] = set()  # signatures of exploring steps that were the last of an episode
        self.choices: list[str] = []
        self.assessments: list[Uncertainty | None] = []
        self.candidate_counts: list[int] = []  # per exploring step: how many candidates were assessed
        self._env: Env | None = None
        self._generator: CuriousPolicy | ProbingPolicy | None = None
        self._last: Action | None = None
        self._detour = 0
        self._back: Action | None = None
        self._rng = random.Random(seed)

    # -- protocol -----------------------------------------------------------------------------

    def reset(self, env: Env, observation: Observation, info: dict[str, Any]) -> None:
        if self.choices and self.choices[-1] == "explore" and self.assessments[-1] is not None:
            self.ended.add(self.assessments[-1].signature)  # the last episode stopped right after this detour
        self._env = env
        self._rng = random.Random(None if self.seed is None else f"{self.seed}|{info.get('task')}|{observation.text}")
        calls = isinstance(info.get("tools"), list)
        self._generator = ProbingPolicy(self.seed) if calls else CuriousPolicy(self.seed)
        self._generator.reset(env, observation, info)
        env_id = info.get("env_id")
        self.harness.start(episode_prefix(observation.text, task=info.get("task"),
                                          env_id=str(env_id) if env_id is not None else None))
        self._last, self._detour, self._back = None, 0, None
        self.choices, self.assessments, self.candidate_counts = [], [], []

    def act(self, observation: Observation, info: dict[str, Any]) -> Action | None:
        if self._env is None or self._generator is None:
            raise RuntimeError("reset() the policy before act()")
        self._sync(observation, info)
        expert = self._expert()
        if expert is None:
            return None  # the expert has nothing left: the task is done (or cannot go on)
        if self.explore < 1.0 and self._back is not None:
            back, self._back = self._back, None
            if not self._on_path(expert):
                return self._play(back, "return", assessed=None)
        if self.explore >= 1.0 or (self.explore > 0.0 and self._detour < self.max_detour
                                   and self._rng.random() < self.explore):
            return self._exploring(expert)
        self._detour = 0
        judged = self.assess_expert and not self._handover(expert)
        return self._play(expert, "expert", assessed=assess(self.harness, expert) if judged else None)

    # -- steps --------------------------------------------------------------------------------

    def _sync(self, observation: Observation, info: dict[str, Any]) -> None:
        """The harness and the candidate generator take in what the last action really got."""
        assert self._generator is not None
        if isinstance(self._generator, ProbingPolicy):
            self._generator.observe(observation, info)
        if self._last is not None and info.get("record", True) is not False:  # a hand-over is no recorded turn
            self.harness.observe(self._last, observation.text)
        self._last = None

    def _expert(self) -> Action | None:
        assert self._env is not None
        try:
            action = self._env.expert_action()
        except NotImplementedError:
            return None
        return None if action is None else as_action(action)

    def _handover(self, action: Action) -> bool:
        """A tool world's hand-over to the user (`respond`): no turn of the book, so nothing to learn from."""
        return isinstance(self._generator, ProbingPolicy) and action.name == HANDOVER

    def _on_path(self, expert: Action) -> bool:
        """Whether the expert's action can still be played here (True where the environment lists nothing)."""
        assert self._env is not None
        admissible = self._env.admissible_actions()
        if admissible is None:
            return True
        return _key(expert) in {" ".join(line.lower().split()) for line in admissible}

    def _candidates(self, expert: Action) -> list[tuple[Action, str]]:
        """(action, where it came from), distinct, the expert's first (ties in score go to progress; a hand-over is
        no candidate)."""
        assert self._env is not None and self._generator is not None
        found: dict[str, tuple[Action, str]] = {}
        if not self._handover(expert):  # probe before handing over, not instead of probing
            found[_key(expert)] = (expert, "expert")
        if self.draws:
            for component, actions in self._generator.candidates(self.draws).items():
                for action in actions:
                    found.setdefault(_key(action), (action, component))
        admissible = self._env.admissible_actions() or []
        if len(admissible) > self.max_candidates:
            picked = set(self._rng.sample(range(len(admissible)), self.max_candidates))
            admissible = [line for index, line in enumerate(admissible) if index in picked]
        for line in admissible:
            action = as_action(line)
            found.setdefault(_key(action), (action, "admissible"))
        return list(found.values())

    def choose(self, candidates: list[tuple[Action, str]]) -> tuple[Action, str, Uncertainty | None] | None:
        """The candidate to play (action, where it came from, its assessment), or None for the expert's step: the
        highest score, discounted by how often this situation was tried and for writes (a subclass may choose
        otherwise, e.g. uniformly, and keep the rest of the policy)."""
        best: tuple[float, Uncertainty, Action, str] | None = None
        generator = self._generator
        for action, origin in candidates:
            assessed = assess(self.harness, action)
            if origin != "expert" and self.explore < 1.0 and (assessed.done or assessed.signature in self.ended):
                continue  # the book says this ends the episode (or it ended one): no deeper state after it
            adjusted = assessed.score / (1 + self.tried[assessed.signature])
            if isinstance(generator, CuriousPolicy) and origin not in ("expert", "invalid") \
                    and generator.kind(action) == "write":
                adjusted *= self.write_weight
            if best is None or adjusted > best[0]:
                best = (adjusted, assessed, action, origin)
        return None if best is None else (best[2], best[3], best[1])

    def _exploring(self, expert: Action) -> Action:
        candidates = self._candidates(expert)
        if not candidates:  # only the hand-over is left
            self._detour = 0
            return self._play(expert, "expert", assessed=None)
        chosen = self.choose(candidates)
        if chosen is None:  # every candidate ends the episode, the book says: the expert's step instead
            self._detour = 0
            judged = self.assess_expert and not self._handover(expert)
            return self._play(expert, "expert", assessed=assess(self.harness, expert) if judged else None)
        action, origin, assessed = chosen
        self.candidate_counts.append(len(candidates))
        if origin == "expert":
            self._detour = 0  # the chosen action is the expert's own: progress
        else:
            self._detour += 1
        self._play(action, self.choice_label, assessed=assessed, origin=origin)
        generator = self._generator
        if origin != "expert" and isinstance(generator, CuriousPolicy) and generator.kind(action) == "move":
            self._back = generator.way_back()  # a detour that moved: the way back, should it leave the path
        return action

    def _play(self, action: Action, choice: str, *, assessed: Uncertainty | None, origin: str | None = None) -> Action:
        """Play `action`: the generator is told (as the component that proposed it, else as an expert step)."""
        assert self._generator is not None
        proposers = self._generator.PROPOSERS
        self._generator.took(action, origin if origin is not None and origin in proposers else "expert")
        self._last = action
        self.choices.append(choice)
        self.assessments.append(assessed)
        if assessed is not None:
            self.tried[assessed.signature] += 1
        return action

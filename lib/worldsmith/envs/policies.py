"""Policies: what chooses the next action. The LLM layer and EnvACE implement the same protocol.

A policy sees the environment it acts in (an expert asks it for the gold action; a random
policy asks for the admissible ones) plus the latest observation and info, and returns an
action, or None to stop the episode.
"""

from __future__ import annotations

import posixpath
import random
import re
import shlex
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import orjson

from worldsmith.envs.base import Env, as_action
from worldsmith.traces.actions import action_line
from worldsmith.traces.model import Action, Observation
from worldsmith.util.errors import BadInputError

__all__ = ["CuriousPolicy", "ExpertPolicy", "Policy", "RandomPolicy", "ReplayPolicy", "make_policy", "POLICIES"]


@runtime_checkable
class Policy(Protocol):
    name: str

    def reset(self, env: Env, observation: Observation, info: dict[str, Any]) -> None:
        """A new episode started in `env` with this opening observation."""
        ...

    def act(self, observation: Observation, info: dict[str, Any]) -> Action | None:
        """The next action given the latest observation; None ends the episode."""
        ...


class ExpertPolicy:
    """The environment's own expert: gold path, walkthrough, ground-truth calls, planner."""

    name = "expert"

    def __init__(self) -> None:
        self._env: Env | None = None

    def reset(self, env: Env, observation: Observation, info: dict[str, Any]) -> None:
        self._env = env

    def act(self, observation: Observation, info: dict[str, Any]) -> Action | None:
        if self._env is None:
            raise RuntimeError("reset() the policy before act()")
        return self._env.expert_action()


class RandomPolicy:
    """Uniform over the admissible actions (environments without them cannot use it)."""

    name = "random"

    def __init__(self, seed: int | None = None) -> None:
        self._rng = random.Random(seed)
        self._env: Env | None = None

    def reset(self, env: Env, observation: Observation, info: dict[str, Any]) -> None:
        self._env = env

    def act(self, observation: Observation, info: dict[str, Any]) -> Action | None:
        if self._env is None:
            raise RuntimeError("reset() the policy before act()")
        actions = self._env.admissible_actions()
        if actions is None:
            raise BadInputError(f"environment {self._env.name!r} lists no admissible actions: the random policy needs them")
        return as_action(self._rng.choice(actions)) if actions else None


class ReplayPolicy:
    """Plays a fixed list of actions in order, then stops."""

    name = "replay"

    def __init__(self, actions: Sequence[Action | str | dict[str, Any]]) -> None:
        self.actions = [as_action(action) for action in actions]
        self._position = 0

    def reset(self, env: Env, observation: Observation, info: dict[str, Any]) -> None:
        self._position = 0

    def act(self, observation: Observation, info: dict[str, Any]) -> Action | None:
        if self._position >= len(self.actions):
            return None
        action = self.actions[self._position]
        self._position += 1
        return action


# --------------------------------------------------------------------------------------------
# The curious policy
# --------------------------------------------------------------------------------------------

Kind = Literal["read", "move", "write", "invalid"]
Style = Literal["text", "shell", "call"]

# What an action does is told from its text alone, never from a particular game. Text commands:
# the first word is the verb; anything neither a read nor a move counts as a write.
_TEXT_READS = frozenset({"look", "l", "examine", "x", "inventory", "inv", "i", "read", "check", "describe", "inspect"})
_TEXT_MOVES = frozenset({"go", "walk", "run", "enter", "exit", "leave", "teleport"})
_OPPOSITES = {"north": "south", "east": "west", "northeast": "southwest", "northwest": "southeast", "up": "down",
              "in": "out", "n": "s", "e": "w", "ne": "sw", "nw": "se", "u": "d"}
_OPPOSITES |= {b: a for a, b in _OPPOSITES.items()}
_PREPOSITIONS = frozenset({"from", "in", "into", "on", "onto", "to", "with", "under", "at", "inside", "for"})
_PARTICLES = frozenset({"up", "down", "on", "off", "out", "away", "around"})
# Shell command lines: the first word of each pipeline segment; output redirection is a write.
_SHELL_READS = frozenset({
    "ls", "cat", "pwd", "head", "tail", "less", "more", "wc", "grep", "egrep", "find", "stat", "file", "du", "df",
    "tree", "diff", "cmp", "sort", "uniq", "cut", "awk", "sed", "tr", "nl", "od", "xxd", "which", "type", "whoami",
    "id", "realpath", "readlink", "basename", "dirname", "md5sum", "sha256sum", "column",
})
_SHELL_WRITES = frozenset({
    "touch", "mkdir", "rm", "rmdir", "mv", "cp", "ln", "chmod", "chown", "tee", "truncate", "tar", "gzip", "gunzip",
    "zip", "unzip", "bzip2", "xz", "install", "patch", "dd",
})
_SHELL_MOVES = frozenset({"cd", "pushd", "popd"})
_ARCHIVES = (".gz", ".tgz", ".zip", ".tar", ".bz2", ".xz")
_REDIRECT = re.compile(r"(?<![0-9&<>])>>?(?![&>])\s*([\w./~+-]+)")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_SAFE_WORD = re.compile(r"[\w./~+-]+")
_PROMPT = re.compile(r"[$#] $")
# Tool calls: a read when any word of the name (snake_case or camelCase) is one of these.
_CALL_READS = frozenset({
    "get", "list", "ls", "cat", "check", "display", "view", "find", "search", "show", "read", "retrieve", "pwd",
    "tail", "head", "grep", "wc", "du", "diff", "fetch", "filter", "query", "lookup", "sort",
})
_CALL_MOVES = frozenset({"cd", "chdir", "go", "goto"})
_CALL_TEXT = re.compile(r"\s*[A-Za-z_]\w*\(.*\)\s*", re.DOTALL)
# Invalid actions: names that no environment defines.
_NONSENSE_NOUNS = ("purple unicorn", "flux capacitor", "rubber chicken", "zorkmid")
_NONSENSE_WORDS = ("unicorn", "capacitor", "zorkmid", "quux")
_NONSENSE_COMMANDS = ("xyzzy", "plugh", "frobnicate")


def _is_call(action: Action) -> bool:
    """A tool call (`name(...)` text, or an action object without recorded text), not a command line."""
    return action.raw is None or bool(_CALL_TEXT.fullmatch(action.raw))


def _call(name: str, arguments: dict[str, Any]) -> Action:
    """A tool call action, its text written as Python call syntax like the recorded ones."""
    text = ",".join(f"{key}={value!r}" for key, value in arguments.items())
    return Action(name=name, arguments=arguments, raw=f"{name}({text})")


def _name_words(name: str) -> list[str]:
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower().split("_")


def _text_objects(text: str) -> list[str]:
    """The objects a text command names: `take book 1 from bed 1` -> `book 1`, `bed 1`."""
    words = text.lower().split()[1:]
    while words and words[0] in _PARTICLES:
        words.pop(0)
    objects: list[str] = []
    current: list[str] = []
    for word in [*words, "at"]:
        if word in _PREPOSITIONS:
            if current:
                objects.append(" ".join(current))
            current = []
        else:
            current.append(word)
    return objects


def _verb_phrase(text: str) -> str:
    """The words before the first object: `look at cabinet 1` -> `look at`, `pick up apple` -> `pick up`."""
    words = text.lower().split()
    end = 1
    while end < len(words) and (words[end] in _PARTICLES or words[end] in _PREPOSITIONS):
        end += 1
    return " ".join(words[:end])


def _segments(command: str) -> list[list[str]]:
    """The words of each pipeline or list segment of a command line, quoted text blanked out."""
    return [part.split() for part in re.split(r"\|\|?|;|&&?", _QUOTED.sub("''", command)) if part.split()]


def _shell_kind(command: str) -> Kind:
    segments = _segments(command)
    if not segments:
        return "write"
    firsts = [words[0] for words in segments]
    if len(segments) == 1 and firsts[0] in _SHELL_MOVES:
        return "move"
    in_place = any(words[0] == "sed" and any(w.startswith("-i") for w in words) for words in segments)
    if (in_place or any(f in _SHELL_WRITES for f in firsts) or _redirect_targets(command)
            or any("-delete" in words for words in segments)):
        return "write"
    return "read" if all(f in _SHELL_READS for f in firsts) else "write"


def _redirect_targets(command: str) -> list[str]:
    return [t for t in _REDIRECT.findall(_QUOTED.sub("''", command)) if t != "/dev/null"]


def _sh(word: str) -> str:
    return word if _SAFE_WORD.fullmatch(word) else shlex.quote(word)


def _shell_reads(command: str) -> list[str]:
    """Commands that read back what a shell write changed (`cat f` after `echo x > f`, `ls d` after `mkdir d`)."""
    targets, verb = _redirect_targets(command), None
    if not targets and not any(char in command for char in "$*`;|&"):
        try:
            words = shlex.split(command)
        except ValueError:
            words = []
        if words and (words[0] in _SHELL_WRITES or words[0] == "sed"):
            verb = words[0]
            targets = [w for w in words[1:] if not w.startswith("-")][-1:]
    if not targets:
        return ["ls"]
    target = targets[-1]
    parent = posixpath.dirname(target.rstrip("/"))
    listing = f"ls {_sh(parent)}" if parent else "ls"
    if verb == "mkdir" or target.endswith("/"):
        return [f"ls {_sh(target)}"]
    if verb in ("rm", "rmdir") or target.endswith(_ARCHIVES):
        return [listing]
    return [f"cat {_sh(target)}", listing]


def weighted_order(rng: random.Random, weights: Mapping[str, float]) -> Iterator[str]:
    """The names of positive weight, drawn by weight without replacement: a mixing policy tries its choices in
    this order until one gives an action."""
    available = {name: weight for name, weight in weights.items() if weight > 0}
    while available:
        names = list(available)
        choice = rng.choices(names, weights=[available[n] for n in names])[0]
        yield choice
        del available[choice]


def draw_candidates(propose: Callable[[str], Action | None], components: Sequence[str], draws: int,
                    key: Callable[[Action], str]) -> dict[str, list[Action]]:
    """What each component would offer: `draws` calls of `propose(component)`, distinct actions by `key` in drawn
    order (the curious and probing policies' `candidates`)."""
    out: dict[str, list[Action]] = {}
    for component in components:
        found: dict[str, Action] = {}
        for _ in range(draws):
            action = propose(component)
            if action is not None:
                found.setdefault(key(action), action)
        out[component] = list(found.values())
    return out


class CuriousPolicy:
    """Explores like a curious player: revisits places, re-reads what changed, tries what fails.

    Expert trajectories are short and rarely look at anything twice, so they cannot test whether a
    stateful simulator remembers. Each step draws one component with a seeded RNG (weights are
    the constructor's keyword arguments):

    - `expert`: the environment's expert action, where it has one;
    - `random`: a random admissible action, where the environment lists them;
    - `revisit`: an earlier read of this episode again (look, inventory, examine, ls, cat, a getter
      call), or a round trip to the place before the last move: the inverse direction (north/south,
      east/west, up/down, in/out), `cd -`, `cd(folder='..')`, or an earlier `go to` target, then
      the last move again, so an expert's path stays valid;
    - `read_after_write`: a read of what the latest write changed (after `take X from Y`: examine Y
      or look; after `touch f`, `mkdir d`, `echo x > f`, `mv`, `rm`: `cat f` or `ls`; after a write
      call, the latest read call again);
    - `invalid`: an action that must fail (a verb with a missing object, `cd`/`cat`/`ls` of a
      missing path, a call of an undefined function or with a missing name, a nonsense command).

    A component with nothing to offer is skipped and the others renormalised. Reads, moves and
    writes are told from the action text alone (the `_TEXT_*`, `_SHELL_*` and `_CALL_*` word
    lists), in one of three styles: tool calls (the reset info lists `tools`, or the expert sends
    calls), a shell (the observation ends in a `$ ` prompt) or text commands. The episode ends when
    the expert has nothing left after at least `min_steps` actions, or at the caller's step cap.
    """

    name = "curious"

    def __init__(self, seed: int | None = None, *, expert: float = 0.4, random: float = 0.2, revisit: float = 0.2,
                 read_after_write: float = 0.1, invalid: float = 0.1, min_steps: int = 10) -> None:
        self.weights = {"expert": expert, "random": random, "revisit": revisit,
                        "read_after_write": read_after_write, "invalid": invalid}
        if any(weight < 0 for weight in self.weights.values()) or not sum(self.weights.values()) > 0:
            raise BadInputError(f"curious policy weights must be >= 0 with a positive sum, not {self.weights}")
        self.seed, self.min_steps = seed, min_steps
        self._env: Env | None = None
        self._start_episode()

    def _start_episode(self, opening: str = "") -> None:
        # Reseeded per episode from the seed and the opening: the same task and seed give the same
        # episode, while two tasks played with one seed do not draw the same components in lockstep.
        self._rng = random.Random(None if self.seed is None else f"{self.seed}|{opening}")
        self._style: Style = "text"
        self._has_admissible = False
        self._has_expert = True
        self._history: list[tuple[Action, Kind]] = []
        self._queue: list[Action] = []
        self._pending_write: Action | None = None
        self.choices: list[str] = []  # the component behind each action of the episode (for inspection)

    def reset(self, env: Env, observation: Observation, info: dict[str, Any]) -> None:
        self._env = env
        self._start_episode(f"{info.get('task')}|{observation.text}")
        if isinstance(info.get("tools"), list):
            self._style = "call"
        elif _PROMPT.search(observation.text):
            self._style = "shell"
        self._has_admissible = env.admissible_actions() is not None

    def act(self, observation: Observation, info: dict[str, Any]) -> Action | None:
        if self._env is None:
            raise RuntimeError("reset() the policy before act()")
        if self._queue:  # the way back of a round trip
            return self._took(self._queue.pop(0), "revisit")
        for choice in weighted_order(self._rng, self.weights):
            action = getattr(self, f"_{choice}")()
            if action is not None:
                return self._took(action, choice)
            if choice == "expert" and len(self.choices) >= self.min_steps:
                return None
        return None

    # -- for a policy that mixes these components with its own choices (`sim.exploring`) -------

    PROPOSERS = ("revisit", "read_after_write", "invalid")  # the components `candidates` asks

    def candidates(self, draws: int = 3) -> dict[str, list[Action]]:
        """What each proposing component would offer now, `draws` tries each (distinct actions, in drawn order).

        Draws from this policy's RNG (so a policy asked for candidates plays differently afterwards) but leaves
        its episode bookkeeping as it was; tell it what was really played with `took`."""
        if self._env is None:
            raise RuntimeError("reset() the policy before candidates()")
        queue = list(self._queue)
        out = draw_candidates(lambda component: getattr(self, f"_{component}")(), self.PROPOSERS, draws, self._key)
        self._queue = queue
        return out

    def took(self, action: Action, choice: str) -> Action:
        """Record `action` as played this step (chosen by `choice`, a component name or a caller's label)."""
        return self._took(action, choice)

    def kind(self, action: Action) -> Kind:
        """Whether `action` reads, moves or writes, told from its text in this episode's style."""
        return self._kind(action)

    def way_back(self) -> Action | None:
        """The action that undoes the last move of the episode (a round trip's first half), if it can be told."""
        trip = self._round_trip()
        return trip[0] if trip is not None else None

    def _took(self, action: Action, choice: str) -> Action:
        kind: Kind = "invalid" if choice == "invalid" else self._kind(action)
        self._history.append((action, kind))
        self.choices.append(choice)
        if kind == "write":
            self._pending_write = action
        elif kind == "move" or choice == "read_after_write":  # read once, and only from where it was written
            self._pending_write = None
        return action

    # -- what an action is ------------------------------------------------------------------

    def _kind(self, action: Action) -> Kind:
        if self._style == "call" and _is_call(action):
            words = _name_words(action.name)
            if words[0] in _CALL_MOVES:
                return "move"
            return "read" if any(word in _CALL_READS for word in words) else "write"
        text = action_line(action, command=True).strip()
        if self._style == "shell":
            return _shell_kind(text)
        verb = text.lower().split()[0] if text else ""
        if verb in _TEXT_READS:
            return "read"
        return "move" if verb in _TEXT_MOVES or verb in _OPPOSITES else "write"

    def _key(self, action: Action) -> str:
        if self._style == "call" and _is_call(action):
            return action.name + orjson.dumps(action.arguments, option=orjson.OPT_SORT_KEYS).decode()
        return action_line(action, command=True).strip()

    def _past(self, kind: Kind) -> list[Action]:
        """Distinct earlier actions of a kind, oldest first."""
        seen: dict[str, Action] = {}
        for action, done in self._history:
            if done == kind:
                seen.setdefault(self._key(action), action)
        return list(seen.values())

    def _admissible(self) -> list[str]:
        return (self._env.admissible_actions() or []) if self._has_admissible and self._env is not None else []

    # -- the components -----------------------------------------------------------------------

    def _expert(self) -> Action | None:
        if not self._has_expert or self._env is None:
            return None
        try:
            action = self._env.expert_action()
        except NotImplementedError:
            self._has_expert = False
            return None
        if action is None or action is NotImplemented:
            return None
        action = as_action(action)
        if self._style == "text" and action.raw is not None and _CALL_TEXT.fullmatch(action.raw):
            self._style = "call"
        return action

    def _random(self) -> Action | None:
        """A random admissible action, its verb drawn first (else `connect X to Y` pairs crowd out the rest)."""
        by_verb: dict[str, list[str]] = {}
        for text in self._admissible():
            by_verb.setdefault(text.split()[0] if text.split() else "", []).append(text)
        if not by_verb:
            return None
        return as_action(self._rng.choice(by_verb[self._rng.choice(sorted(by_verb))]))

    def _revisit(self) -> Action | None:
        reads, trip = self._past("read"), self._round_trip()
        if trip is not None and (not reads or self._rng.random() < 0.5):
            back, again = trip
            self._queue.append(again)
            return back
        return self._rng.choice(reads) if reads else None

    def _round_trip(self) -> tuple[Action, Action] | None:
        """Where the last move came from and the way back there, if it can be told."""
        moves = [action for action, kind in self._history if kind == "move"]
        if not moves:
            return None
        last = moves[-1]
        if self._style == "call" and _is_call(last):
            values = list(last.arguments.items()) if isinstance(last.arguments, dict) else []
            if len(values) == 1 and isinstance(values[0][1], str) and values[0][1] not in ("..", "") \
                    and "/" not in values[0][1]:
                return _call(last.name, {values[0][0]: ".."}), last
            return None
        text = action_line(last, command=True).strip()
        if self._style == "shell":
            return (as_action("cd -"), as_action("cd -")) if text.split()[0] == "cd" else None
        words = text.split()
        if words and words[-1].lower() in _OPPOSITES and len(words) <= 2:
            return as_action(" ".join([*words[:-1], _OPPOSITES[words[-1].lower()]])), last
        earlier = next((m for m in reversed(moves[:-1]) if action_line(m, command=True).strip() != text), None)
        return (earlier, last) if earlier is not None else None

    def _read_after_write(self) -> Action | None:
        write = self._pending_write
        if write is None:
            return None
        if self._style == "call":
            reads = [action for action, kind in reversed(self._history) if kind == "read"]
            return reads[0] if reads else None
        if self._style == "shell":
            return as_action(self._rng.choice(_shell_reads(action_line(write, command=True))))
        text = action_line(write, command=True).strip()
        objects = _text_objects(text)
        read_lines = [a for a in self._admissible() if self._kind(as_action(a)) == "read"]
        if read_lines:  # the whole object phrase first (`door to kitchen`), else any one of its objects
            whole = text.lower()[len(_verb_phrase(text)):].strip()
            about = [a for a in read_lines if whole and whole in a.lower()]
            about = about or [a for a in read_lines if any(obj in a.lower() for obj in objects)]
            options = about or [a for a in read_lines if not _text_objects(a)]
        else:
            looked = [action_line(a, command=True) for a in self._past("read")]
            verb = next((_verb_phrase(t) for t in looked if _text_objects(t)), "examine")
            options = [f"{verb} {obj}" for obj in objects] or [t for t in looked if not _text_objects(t)] or ["look"]
        return as_action(self._rng.choice(options)) if options else None

    def _invalid(self) -> Action | None:
        word = self._rng.choice(_NONSENSE_WORDS)
        if self._style == "call":
            named = [a for a, kind in self._history  # reads and moves name things; a write may hand over
                     if kind in ("read", "move") and _is_call(a) and isinstance(a.arguments, dict)
                     and any(isinstance(v, str) for v in a.arguments.values())]
            if named and self._rng.random() < 0.5:
                base = self._rng.choice(named)
                key = next(k for k, v in base.arguments.items() if isinstance(v, str))
                return _call(base.name, {**base.arguments, key: f"no_such_{word}"})
            return _call(self._rng.choice(_NONSENSE_COMMANDS), {})
        if self._style == "shell":
            return as_action(self._rng.choice(
                (f"cd no_such_{word}", f"cat no_such_{word}.txt", f"ls no_such_{word}", *_NONSENSE_COMMANDS)))
        if self._rng.random() < 1 / 3:
            return as_action(self._rng.choice(_NONSENSE_COMMANDS))
        verbs = sorted({_verb_phrase(action_line(a, command=True)) for a, kind in self._history
                        if kind != "invalid" and _text_objects(action_line(a, command=True))}) or ["examine", "take", "open"]
        return as_action(f"{self._rng.choice(verbs)} {self._rng.choice(_NONSENSE_NOUNS)}")


POLICIES = ("expert", "random", "curious", "probing", "replay", "llm")
_WITH_OPTIONS = ("curious", "probing")  # policies whose constructor keywords --policy-arg sets


def make_policy(
    name: str,
    *,
    seed: int | None = None,
    actions: Sequence[Action | str | dict[str, Any]] | None = None,
    model: str | None = None,
    workspace_root: str | None = None,
    options: dict[str, Any] | None = None,
) -> Policy:
    """A policy by name; `llm` needs `model` (a spec) and logs its calls in `workspace_root`'s call log.

    `options` are constructor keywords of the curious and probing policies (their weights,
    `min_steps`, `probes_before_respond`); the other policies take none.
    """
    if options and name not in _WITH_OPTIONS:
        raise BadInputError(f"the {name} policy takes no options (got {', '.join(options)})")
    if name in _WITH_OPTIONS:
        from worldsmith.envs.probing import ProbingPolicy

        factory = CuriousPolicy if name == "curious" else ProbingPolicy
        try:
            return factory(seed, **(options or {}))
        except TypeError as error:  # an unknown option name
            raise BadInputError(f"{name} policy: {error}") from None
    if name == "expert":
        return ExpertPolicy()
    if name == "random":
        return RandomPolicy(seed)
    if name == "replay":
        if actions is None:
            raise BadInputError("the replay policy needs a list of actions")
        return ReplayPolicy(actions)
    if name == "llm":
        if not model:
            raise BadInputError("the llm policy needs a model spec (e.g. tiny:data_samples/models/tiny)")
        from worldsmith.envs.llm_policy import LLMPolicy
        from worldsmith.llm import open_llm

        return LLMPolicy(open_llm(model, workspace_root, component="policy"), seed=seed)
    raise BadInputError(f"unknown policy {name!r} (choose from {', '.join(POLICIES)})")

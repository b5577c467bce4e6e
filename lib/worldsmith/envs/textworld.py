"""TextWorld games generated locally with `tw-make`, behind the `Env` protocol.

Task ids name a game to generate (the grammar is parsed, validated and canonicalised here):

    <kind>[:<options>]:seed=<int>
    options := option(,option)*      option := name=value | flag

    custom:world_size=3,nb_objects=5,quest_length=3:seed=1234
    cooking:recipe=2,take=1,go=6,open,cut:seed=11
    coin_collector:level=5:seed=42
    treasure_hunter:level=3:seed=7
    simple:rewards=dense,goal=brief:seed=3

`kind` is `custom` or a tw-make challenge without its `tw-` prefix; option names are tw-make's
flags with underscores (`--world-size` is `world_size`); `seed` is required because a game
generated without one is a different game every time. A task id may also be the path of an
existing TextWorld game (`.z8` with its `.json` beside it).

Generated games are cached under `games_dir/<textworld version>/<canonical id>/game.z8`: tw-make
writes into a private temporary folder that is then renamed into place, so parallel workers
asking for the same game never see half a game (the loser of a race discards its copy). The same
id and TextWorld version give a byte-identical game on any machine, so the cache is only a speed-up.

Observations are the game's text verbatim except for interpreter chrome: the trailing input
prompt and status bar (`>   -= Kitchen =-4/15`) and, at reset, the ASCII-art banner.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worldsmith.envs.base import (
    EnvBase,
    EnvError,
    EnvUnavailableError,
    InvalidActionError,
    Step,
    TaskLoadError,
    UnknownTaskError,
    as_action,
)
from worldsmith.traces.actions import action_line
from worldsmith.traces.model import Action, Observation
from worldsmith.util.dirs import publish_dir
from worldsmith.util.errors import BadInputError

__all__ = ["DEFAULT_CONFIGS", "KINDS", "GameSpec", "TextWorldEnv", "parse_task"]

GAME_SUFFIXES = (".z8", ".z5", ".z6", ".ulx")
GRAMMAR = "<kind>[:<name=value|flag>,...]:seed=<int>, or the path of a .z8 game with its .json"
_SEED_LIMIT = 2**32  # tw-make seeds numpy's RandomState
_MAX_ROOMS = 100  # z8 games only since TextWorld 1.7 (Glulx support was removed)


@dataclass(frozen=True)
class OptionSpec:
    """One tw-make option: an int (with bounds), a choice, or a flag without a value."""

    kind: str  # "int" | "choice" | "flag" | "word"
    choices: tuple[str, ...] = ()
    low: int | None = None
    high: int | None = None
    required: bool = False

    def check(self, name: str, value: str | None) -> str | None:
        """The canonical value text, or raise ValueError saying what tw-make would accept."""
        if self.kind == "flag":
            if value is not None:
                raise BadInputError(f"option {name!r} is a flag and takes no value (write just {name!r})")
            return None
        if value is None or value == "":
            raise BadInputError(f"option {name!r} needs a value ({self.describe(name)})")
        if self.kind == "choice":
            if value not in self.choices:
                raise BadInputError(f"option {name!r} must be one of {', '.join(self.choices)}, not {value!r}")
            return value
        if self.kind == "word":
            if not re.fullmatch(r"[A-Za-z0-9_-]+", value):
                raise BadInputError(f"option {name!r} must be a plain word, not {value!r}")
            return value
        if not re.fullmatch(r"-?[0-9]+", value):
            raise BadInputError(f"option {name!r} must be an integer, not {value!r}")
        number = int(value)
        if (self.low is not None and number < self.low) or (self.high is not None and number > self.high):
            raise BadInputError(f"option {name!r} must be between {self.low} and {self.high}, not {number}")
        return str(number)

    def describe(self, name: str) -> str:
        if self.kind == "flag":
            return name
        if self.kind == "choice":
            return f"{name}={'|'.join(self.choices)}"
        if self.low is not None and self.high is not None:
            return f"{name}=<{self.low}..{self.high}>"
        return f"{name}=<{'int' if self.kind == 'int' else 'word'}>"


def _ints(*names: str, low: int | None = None) -> dict[str, OptionSpec]:
    return {name: OptionSpec("int", low=low) for name in names}


def _flags(*names: str) -> dict[str, OptionSpec]:
    return {name: OptionSpec("flag") for name in names}


# The options `tw-make <subcommand> --help` lists (TextWorld 1.7), general settings excluded;
# tests/envs/test_textworld.py checks this table against tw-make's own parser.
KINDS: dict[str, tuple[str, dict[str, OptionSpec]]] = {
    "custom": (
        "custom",
        {
            **_ints("world_size", "nb_objects", "nb_parallel_quests", low=0),
            **_ints("quest_length", "quest_breadth", "quest_min_length", "quest_max_length", low=1),
            **_ints("quest_min_breadth", "quest_max_breadth", "quest_min_depth", "quest_max_depth", low=1),
            "theme": OptionSpec("word"),
            **_flags("include_adj", "blend_descriptions", "ambiguous_instructions", "only_last_action",
                     "blend_instructions", "entity_numbering"),
        },
    ),
    "cooking": (
        "tw-cooking",
        {
            **_ints("recipe", "take", "recipe_seed", low=0),
            "go": OptionSpec("choice", choices=("1", "6", "9", "12")),
            "split": OptionSpec("choice", choices=("train", "valid", "test")),
            **_flags("open", "cook", "cut", "drop"),
        },
    ),
    "coin_collector": ("tw-coin_collector", {"level": OptionSpec("int", low=1, high=300, required=True)}),
    "treasure_hunter": ("tw-treasure_hunter", {"level": OptionSpec("int", low=1, high=30, required=True)}),
    "simple": (
        "tw-simple",
        {
            "rewards": OptionSpec("choice", choices=("dense", "balanced", "sparse"), required=True),
            "goal": OptionSpec("choice", choices=("detailed", "brief", "none"), required=True),
            "test": OptionSpec("flag"),
        },
    ),
}

# Game configurations `tasks()` lists (each with every seed): the four kinds at a few sizes.
DEFAULT_CONFIGS: tuple[str, ...] = (
    "custom:world_size=3,nb_objects=5,quest_length=3",
    "custom:world_size=6,nb_objects=12,quest_length=6",
    "cooking:recipe=1,take=1,go=1",
    "cooking:recipe=2,take=1,go=6,open,cut",
    "cooking:recipe=3,take=2,go=9,open,cook,cut",
    "coin_collector:level=5",
    "coin_collector:level=30",
    "treasure_hunter:level=3",
    "treasure_hunter:level=15",
)
DEFAULT_SEEDS: tuple[int, ...] = (1, 2, 3, 4, 5)


@dataclass(frozen=True)
class GameSpec:
    """A parsed task id: what to ask tw-make for."""

    kind: str
    options: tuple[tuple[str, str | None], ...]  # sorted by name
    seed: int

    @property
    def task_id(self) -> str:
        """The canonical id (options sorted): equal games get equal ids and one cache entry."""
        parts = [self.kind]
        if self.options:
            parts.append(",".join(name if value is None else f"{name}={value}" for name, value in self.options))
        parts.append(f"seed={self.seed}")
        return ":".join(parts)

    @property
    def cache_name(self) -> str:
        """A folder name for the cache (no ':' so it is valid on every file system)."""
        return self.task_id.replace(":", "+")

    def tw_make_args(self) -> list[str]:
        args = [KINDS[self.kind][0]]
        for name, value in self.options:
            args.append("--" + name.replace("_", "-"))
            if value is not None:
                args.append(value)
        return [*args, "--seed", str(self.seed)]


def _unknown(task: str, reason: str) -> UnknownTaskError:
    return UnknownTaskError(
        f"unknown TextWorld task {task!r}: {reason}. Task ids look like {GRAMMAR} "
        "(e.g. 'cooking:recipe=2,take=1,go=6,open,cut:seed=11'); TextWorldEnv().tasks() lists defaults"
    )


def _parse_options(task: str, kind: str, text: str) -> tuple[tuple[str, str | None], ...]:
    allowed = KINDS[kind][1]
    parsed: dict[str, str | None] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, has_value, value = item.partition("=")
        name = name.strip().replace("-", "_")
        if name not in allowed:
            valid = ", ".join(spec.describe(option) for option, spec in allowed.items())
            raise _unknown(task, f"{kind} games have no option {name!r} (valid: {valid})")
        if name in parsed:
            raise _unknown(task, f"option {name!r} is given twice")
        try:
            parsed[name] = allowed[name].check(name, value.strip() if has_value else None)
        except ValueError as error:
            raise _unknown(task, str(error)) from None
    missing = [name for name, spec in allowed.items() if spec.required and name not in parsed]
    if missing:
        raise _unknown(task, f"{kind} games need {', '.join(allowed[name].describe(name) for name in missing)}")
    if kind == "coin_collector" and _coin_collector_rooms(int(parsed["level"] or 0)) > _MAX_ROOMS:
        raise _unknown(task, f"coin_collector level {parsed['level']} needs more than {_MAX_ROOMS} rooms, which "
                             "TextWorld >= 1.7 cannot compile (levels 1-150 and 201-233 work)")
    return tuple(sorted(parsed.items()))


def _coin_collector_rooms(level: int) -> int:
    """Rooms of a coin collector level, as `tw_coin_collector.make` computes them."""
    return ((level - 1) // 100 + 1) * ((level - 1) % 100 + 1)


def parse_task(task: str) -> GameSpec:
    """Parse and validate a generated-game task id; raises `UnknownTaskError` saying what is wrong."""
    parts = [part.strip() for part in task.strip().split(":")]
    kind = parts[0].removeprefix("tw-")
    if kind not in KINDS:
        raise _unknown(task, f"no game kind {parts[0]!r} (kinds: {', '.join(KINDS)})")
    if len(parts) not in (2, 3):
        raise _unknown(task, "expected '<kind>:<options>:seed=<int>' or '<kind>:seed=<int>'")
    seed_name, _, seed_text = parts[-1].partition("=")
    if seed_name != "seed" or not re.fullmatch(r"[0-9]+", seed_text) or int(seed_text) >= _SEED_LIMIT:
        raise _unknown(task, f"the last part must be 'seed=<int>' with 0 <= int < 2**32, not {parts[-1]!r}")
    options = _parse_options(task, kind, parts[1]) if len(parts) == 3 else _parse_options(task, kind, "")
    return GameSpec(kind=kind, options=options, seed=int(seed_text))


def _is_game_path(task: str) -> bool:
    return task.lower().endswith(GAME_SUFFIXES) or (("/" in task or os.sep in task) and Path(task).is_file())


def default_games_dir() -> Path:
    """Per-user cache: `$XDG_CACHE_HOME/worldsmith/textworld`, else `~/.cache/worldsmith/textworld`."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "worldsmith" / "textworld"


def _tw_make_command() -> list[str]:
    """tw-make run by this interpreter (it is a script, not a module)."""
    script = Path(sys.executable).parent / "tw-make"
    if not script.is_file():
        found = shutil.which("tw-make")
        if found is None:
            raise EnvUnavailableError("tw-make not found next to this Python or on PATH: pip install textworld")
        script = Path(found)
    return [sys.executable, str(script)]


def _headline(output: list[str]) -> str:
    """The line of tw-make's output that says what went wrong (an argparse error or an exception)."""
    for line in reversed(output):
        if ": error: " in line or re.match(r"\w*(Error|Exception)\b", line):
            return line.strip()
    return output[-1].strip()


# Interpreter chrome: the status bar (`-= Room =-score/moves`, right-aligned) and the input prompt.
_STATUS_BAR = re.compile(r"\s+-= .*=-\s*-?\d+/\d+\s*$")


def clean_feedback(text: str, *, initial: bool = False) -> str:
    """The game's text without the trailing prompt/status line and, at reset, the ASCII banner."""
    lines = text.rstrip().split("\n")
    if lines:
        last = _STATUS_BAR.sub("", lines[-1])
        if last.strip() in ("", ">"):
            lines.pop()
        else:  # a question the game asks on the status line itself ("Are you sure you want to quit?")
            lines[-1] = last.rstrip()
    if initial:
        while lines and not any(ch.isalnum() for ch in lines[0]):
            lines.pop(0)
    return "\n".join(lines).strip("\n").rstrip()


def _kind_of_game_file(metadata: dict[str, Any]) -> str:
    """`cooking` etc. from a tw-make game's uuid (`tw-cooking-...`); `game` when it is not one."""
    uuid = str(metadata.get("uuid") or "")
    for kind, (subcommand, _) in KINDS.items():
        if subcommand != "custom" and uuid.startswith(subcommand + "-"):
            return kind
    return "game"


class TextWorldEnv(EnvBase):
    """TextWorld games from tw-make; the expert is each game's own walkthrough.

    Keyword arguments: `games_dir` (cache of generated games; default per-user cache), `seeds` and
    `configs` (what `tasks()` lists: every config with every seed), `make_timeout` (seconds one
    tw-make run may take). `reset(task, seed=...)` ignores `seed`: the game's seed is in its id
    and TextWorld games play deterministically. In-game `restart` is refused (TextWorld's state
    tracking cannot follow it; call `reset()`), as are commands spanning several lines.
    """

    name = "textworld"

    def __init__(
        self,
        *,
        games_dir: str | None = None,
        seeds: list[int] | None = None,
        configs: list[str] | None = None,
        make_timeout: float = 300.0,
    ) -> None:
        self.games_dir = Path(games_dir).expanduser() if games_dir else default_games_dir()
        self.seeds = list(DEFAULT_SEEDS if seeds is None else seeds)
        self.configs = list(DEFAULT_CONFIGS if configs is None else configs)
        self.make_timeout = float(make_timeout)
        self._env: Any = None
        self._game_file: str | None = None
        self._state: Any = None
        self._walkthrough: list[str] = []
        self._position = 0
        self._score = 0
        self._done = False

    # ------------------------------------------------------------------ tasks and games

    def tasks(self) -> list[str]:
        return [parse_task(f"{config}:seed={seed}").task_id for config in self.configs for seed in self.seeds]

    def game_path(self, task: str) -> str:
        """The game file for `task` (generating and caching it first when needed)."""
        if _is_game_path(task):
            path = Path(task).expanduser()
            if not path.is_file():
                raise UnknownTaskError(f"no TextWorld game file at {task!r}")
            return str(path)
        return str(self._generate(parse_task(task)))

    def _cache_root(self) -> Path:
        import textworld

        return self.games_dir / f"textworld-{textworld.__version__}"

    def _generate(self, game: GameSpec) -> Path:
        """Generate `game` once: into a private temp folder, then renamed into the cache atomically."""
        final = self._cache_root() / game.cache_name
        if (final / "game.z8").is_file() and (final / "game.json").is_file():
            return final / "game.z8"
        final.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".tmp-{game.cache_name[:40]}-", dir=final.parent))
        try:
            self._run_tw_make(game, scratch)
            try:
                publish_dir(scratch, final)  # False: another process cached it first
            except OSError as error:
                reason = f"cannot cache the game at {final}: {error}"
                raise TaskLoadError(f"TextWorld task {game.task_id!r}: {reason}") from error
            if not (final / "game.z8").is_file():
                raise TaskLoadError(f"TextWorld task {game.task_id!r}: {final} holds no game.z8")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return final / "game.z8"

    def _run_tw_make(self, game: GameSpec, scratch: Path) -> None:
        command = [*_tw_make_command(), *game.tw_make_args(), "--output", str(scratch / "game.z8"), "-f", "--silent"]
        try:
            done = subprocess.run(
                command, cwd=scratch, capture_output=True, text=True, timeout=self.make_timeout, check=False,
                env={"OMP_NUM_THREADS": "1", **os.environ},
            )
        except subprocess.TimeoutExpired:
            raise TaskLoadError(f"TextWorld task {game.task_id!r}: tw-make ran over {self.make_timeout:g} s") from None
        produced = (scratch / "game.z8").is_file() and (scratch / "game.json").is_file()
        if done.returncode != 0 or not produced:
            output = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()
            raise TaskLoadError(
                f"TextWorld task {game.task_id!r}: tw-make failed (exit {done.returncode}): {_headline(output)}\n"
                + "\n".join(output)[-3000:]
            )

    # ------------------------------------------------------------------ playing

    def _start(self, game_file: str, task: str) -> None:
        import textworld

        if self._env is not None and self._game_file == game_file:
            return
        self._close_game()
        infos = textworld.EnvInfos(
            objective=True, admissible_commands=True, score=True, max_score=True, won=True, lost=True,
            moves=True, facts=True, extras=["walkthrough", "uuid"],
        )
        if not Path(game_file).with_suffix(".json").is_file():
            raise TaskLoadError(f"TextWorld task {task!r}: {game_file} has no .json beside it (needed for infos)")
        try:
            with warnings.catch_warnings():  # Jericho's own score detection is unused: TextWorld tracks the game
                warnings.filterwarnings("ignore", message=r".*is not fully supported", category=UserWarning)
                self._env = textworld.start(game_file, request_infos=infos)
        except Exception as error:  # noqa: BLE001 - any loader failure is a task that cannot load
            raise TaskLoadError(f"TextWorld task {task!r}: {type(error).__name__}: {error}") from error
        self._game_file = game_file

    def reset(self, task: str | None = None, *, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        if task is None:
            known = self.tasks()
            if not known:
                raise UnknownTaskError("no task given and TextWorldEnv lists none (configs or seeds are empty)")
            task = known[0]
        self._state = None  # a failed reset leaves no episode to step in
        game_file = self.game_path(task)
        self._start(game_file, task)
        try:
            self._state = self._env.reset()
        except Exception as error:  # noqa: BLE001
            raise TaskLoadError(f"TextWorld task {task!r}: {type(error).__name__}: {error}") from error
        self._walkthrough = [str(command) for command in (self._state.get("extra.walkthrough") or [])]
        self._position = 0
        self._score = int(self._state["score"] or 0)
        self._done = False
        info = {
            "task": str(self._state["objective"] or ""),
            "env_id": f"textworld/{self._kind(task)}",
            "game_uuid": str(self._state.get("extra.uuid") or ""),
            **self._step_info(),
        }
        return Observation(text=clean_feedback(self._state.feedback, initial=True)), info

    def _kind(self, task: str) -> str:
        if _is_game_path(task):
            return _kind_of_game_file({"uuid": self._state.get("extra.uuid")})
        return parse_task(task).kind

    def _step_info(self) -> dict[str, Any]:
        state = self._state
        return {
            "score": int(state["score"] or 0),
            "max_score": int(state["max_score"] or 0),
            "won": bool(state["won"]),
            "lost": bool(state["lost"]),
            "moves": int(state["moves"] or 0),
            "admissible_actions": sorted(str(command) for command in state["admissible_commands"] or []),
        }

    def step(self, action: Action | str) -> Step:
        if self._env is None or self._state is None:
            raise EnvError("call reset() before step()")
        if self._done:
            raise EnvError("the game is over; call reset() to play again")
        command = action_line(as_action(action), command=True)
        self._refuse_unplayable(command)
        try:
            self._state, score, done = self._env.step(command)
        except Exception as error:  # noqa: BLE001 - the interpreter failed, not the agent
            self._done = True
            raise EnvError(f"TextWorld failed on {command!r}: {type(error).__name__}: {error}") from error
        self._advance_walkthrough(command)
        reward = float(int(score or 0) - self._score)
        self._score = int(score or 0)
        self._done = bool(done)
        observation = Observation(text=clean_feedback(self._state.feedback))
        return Step(observation, reward, self._done, False, self._step_info())

    @staticmethod
    def _refuse_unplayable(command: str) -> None:
        if "\n" in command or "\r" in command:
            raise InvalidActionError("a TextWorld command is one line (the game would queue the rest)")
        if command.strip().lower().split(" ")[0] == "restart":
            raise InvalidActionError("in-game 'restart' would desynchronise TextWorld's state tracking; use reset()")

    def _advance_walkthrough(self, command: str) -> None:
        """The expert follows the walkthrough; a step that is its next command moves it on."""
        expected = self._walkthrough[self._position] if self._position < len(self._walkthrough) else None
        if expected is not None and " ".join(command.lower().split()) == " ".join(expected.lower().split()):
            self._position += 1

    def admissible_actions(self) -> list[str] | None:
        if self._state is None:
            return None
        return sorted(str(command) for command in self._state["admissible_commands"] or [])

    def expert_action(self) -> Action | None:
        """The walkthrough's next command; None when it is used up or the game is over."""
        if self._state is None or self._done or self._position >= len(self._walkthrough):
            return None
        return as_action(self._walkthrough[self._position])

    def state(self) -> dict[str, Any] | None:
        """TextWorld's tracked facts (sorted) plus score and moves; reading them changes nothing."""
        if self._state is None:
            return None
        return {
            "facts": sorted(str(fact) for fact in self._state["facts"] or []),
            "score": int(self._state["score"] or 0),
            "moves": int(self._state["moves"] or 0),
            "won": bool(self._state["won"]),
            "lost": bool(self._state["lost"]),
        }

    def _close_game(self) -> None:
        if self._env is not None:
            try:
                self._env.close()
            finally:
                self._env = None
                self._game_file = None

    def close(self) -> None:
        self._close_game()
        self._state = None

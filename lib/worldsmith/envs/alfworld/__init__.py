"""ALFWorld text games (the `game.tw-pddl` folders of the ALFWorld release) behind the `Env` protocol.

Games are played with ALFWorld's own machinery: TextWorld's PDDL environment wrapped in ALFWorld's
`AlfredDemangler` and `AlfredInfos`, as `alfworld.agents.environment.alfred_tw_env` builds it.

Task ids are game folders relative to the games root, in the release layout:

    train/pick_heat_then_place_in_recep-Cup-None-Shelf-1/trial_T20190906_230051_015449

`reset` also takes the absolute path of a game folder or of its `game.tw-pddl`. The games root is
the `games` argument, else `$WORLDSMITH_ALFWORLD_GAMES`, else `<checkout>/../shared/data/alfworld`, else the
six games bundled in `data_samples/alfworld` (`worldsmith._resources`; a wheel carries them too).

Observations are the game's text verbatim except for interpreter chrome: the opening
`-= Welcome to TextWorld, ALFRED! =-` banner is dropped (the room and "Your task is to: ..." stay).
The games are deterministic; `seed` only seeds the random choices of ALFWorld's handcoded expert.
Game files are trusted input: TextWorld evaluates the `{...}` expressions of a game's grammar with
Python's `eval`, so only play games from the ALFWorld release or made by its tools.

Experts (`expert=`):
- `combined` (default): an oracle that reads the true PDDL facts and walks straight to the goal
  (find and take the object, heat/cool/clean it, put it / look at it under the lamp); when it
  has no move for a state, or the game keeps returning to the same state, ALFWorld's planner
  (Fast Downward, `replan`) takes over, and ALFWorld's handcoded expert (with the fix below) is
  the last resort when the planner finds no plan in time.
- `oracle`, `planner`: one of those alone (the planner replans at every step, as ALFWorld's
  `AlfredExpert(expert_type="planner")` does).
- `handcoded`: ALFWorld's handcoded expert exactly as `AlfredExpert` uses it (an action that is not
  admissible becomes `look`; it speaks `move X to Y` while these games say `put X in/on Y`, so it
  often circles instead of placing the object).
- `handcoded_fixed`: the same expert speaking its own grammar: it reads the admissible `put X in/on Y`
  as `move X to Y` and its `move X to Y` is played as the `put` command.
"""

from __future__ import annotations

from worldsmith.envs.alfworld.env import EXPERTS, GAME_FILE, GAMES_ENV_VAR, ALFWorldEnv, default_games_root
from worldsmith.envs.alfworld.oracle import TASK_TYPES, Goal, NoPlan, World, oracle_action

__all__ = [
    "EXPERTS",
    "GAME_FILE",
    "GAMES_ENV_VAR",
    "TASK_TYPES",
    "ALFWorldEnv",
    "Goal",
    "NoPlan",
    "World",
    "default_games_root",
    "oracle_action",
]

"""World models by name, registered with `@world_model(...)`, in the manner of `envs.registry`.

One name per simulator: the CLI (`simulate --model`, `serve --method`, `side-by-side --methods`,
`eval --methods`), the evaluation, the side-by-side view and the workbench all list and build
what is registered here, and a built model carries its registered name (`model.name`). Old
names stay accepted as deprecated aliases (`book` -> `worldbook-prompt`, `harness-schema` and
`harness_schema_only` -> `harness-no-book`) so stored sessions, run records and scripts still work.
Modules named in $WORLDSMITH_WORLD_MODEL_PLUGINS (comma-separated) are imported on first lookup, so a
researcher's world model reaches the CLI, the workbench and worker processes as their environments do.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from worldsmith.llm.base import LLM
from worldsmith.sim.base import WorldModel
from worldsmith.util.errors import BadInputError
from worldsmith.util.registry import AlreadyRegisteredError, NotRegisteredError, Registry
from worldsmith.worldbook.model import Worldbook

__all__ = [
    "ENTRY_POINT_GROUP",
    "LLMUse",
    "PLUGINS_VARIABLE",
    "UnknownWorldModelError",
    "WORLD_MODELS",
    "WorldModelFactory",
    "WorldModelSpec",
    "canonical_world_model",
    "make_world_model",
    "needs_llm",
    "takes_llm",
    "world_model",
    "world_model_names",
    "world_model_spec",
    "world_models",
]

# "required": the model baselines; "optional": the harness kinds use one when given; "never": no model.
LLMUse = Literal["required", "optional", "never"]


class WorldModelFactory(Protocol):
    """Builds a world model on a book; `llm` is None for kinds that need none (or were given none)."""

    def __call__(self, book: Worldbook, *, llm: LLM | None = None, **options: Any) -> WorldModel: ...


class UnknownWorldModelError(NotRegisteredError, ValueError):
    """No world model is registered under this name (a ValueError, as the factory's error always was)."""


@dataclass(frozen=True)
class WorldModelSpec:
    """One registered world model: its one name, what it is, whether it uses an LLM, its old names."""

    name: str
    description: str
    factory: WorldModelFactory
    llm: LLMUse = "never"
    aliases: tuple[str, ...] = field(default=())

    def make(self, book: Worldbook, *, llm: LLM | None = None, **options: Any) -> WorldModel:
        if self.llm == "required" and llm is None:
            raise BadInputError(f"world model {self.name!r} needs a model (an LLM spec)")
        model = self.factory(book, llm=llm if self.llm != "never" else None, **options)
        model.name = self.name  # one name everywhere: sessions, audits and reports show the registered name
        return model


def _register_builtins() -> None:
    """Register the built-in world models (kept lazy: they import the harness)."""
    import worldsmith.sim.factory  # noqa: F401  (registers on import)


PLUGINS_VARIABLE = "WORLDSMITH_WORLD_MODEL_PLUGINS"
ENTRY_POINT_GROUP = "worldsmith.world_models"
# The built-ins, then $WORLDSMITH_WORLD_MODEL_PLUGINS modules, then installed `worldsmith.world_models` entry points
# (a WorldModelSpec, or a module using `@world_model`), loaded once, on the first lookup.
def _check(name: str, spec: WorldModelSpec) -> None:
    """Every registration, an entry point's included: a WorldModelSpec under its own name."""
    if not isinstance(spec, WorldModelSpec) or spec.name != name:
        raise ValueError(f"world model {name!r} must be registered as a WorldModelSpec named {name!r}, not {spec!r}")


def _index_aliases() -> None:
    """The deprecated names of every registered model (after each change: an unregistered model's go too)."""
    specs = WORLD_MODELS.as_dict(load=False)
    _ALIASES.clear()
    _ALIASES.update({alias: spec.name for spec in specs.values() for alias in spec.aliases})


_ALIASES: dict[str, str] = {}
WORLD_MODELS: Registry[WorldModelSpec] = Registry(
    "world model", loader=_register_builtins, plugins_variable=PLUGINS_VARIABLE, entry_point_group=ENTRY_POINT_GROUP,
    not_found=UnknownWorldModelError, known_label="choose from", sort_known=False, check=_check,
    on_change=_index_aliases)
_REGISTRY = WORLD_MODELS  # the name tests and older plug-ins use


def _builtins_loaded() -> None:
    """Register the built-in world models, then the plugins, once."""
    WORLD_MODELS.load()


def world_model(name: str, *, description: str, llm: LLMUse = "never", aliases: tuple[str, ...] = (),
                replace: bool = False) -> Callable[[WorldModelFactory], WorldModelFactory]:
    """Register the decorated factory as the world model `name` (refused if the name or an alias is taken)."""

    def decorate(factory: WorldModelFactory) -> WorldModelFactory:
        register_world_model(WorldModelSpec(name, description, factory, llm, tuple(aliases)), replace=replace)
        return factory

    return decorate


def register_world_model(spec: WorldModelSpec, *, replace: bool = False) -> WorldModelSpec:
    registered = WORLD_MODELS.as_dict(load=False)  # the built-ins register through here while they load
    taken = [n for n in (spec.name, *spec.aliases) if n in registered or n in _ALIASES]
    if taken and not replace:
        raise AlreadyRegisteredError(f"world model name {taken[0]!r} is already registered")
    return WORLD_MODELS.register(spec.name, spec, replace=True)  # its aliases are indexed by `_index_aliases`


def world_models() -> dict[str, WorldModelSpec]:
    """All registered world models by name, in registration order (a copy)."""
    return WORLD_MODELS.as_dict()


def world_model_names() -> list[str]:
    """The names the CLI and the workbench offer (aliases excluded)."""
    return list(world_models())


def canonical_world_model(name: str) -> str:
    """The registered name for `name` or one of its deprecated aliases (a DeprecationWarning); other text as it is."""
    _builtins_loaded()
    canonical = _ALIASES.get(name)
    if canonical is None:
        return name
    warnings.warn(f"world model name {name!r} is deprecated: use {canonical!r}", DeprecationWarning, stacklevel=2)
    return canonical


def world_model_spec(name: str) -> WorldModelSpec:
    """The spec registered as `name` (or an alias); UnknownWorldModelError listing the known names."""
    canonical = canonical_world_model(name)
    spec = WORLD_MODELS.get(canonical, None)
    if spec is None:
        raise UnknownWorldModelError(WORLD_MODELS.unknown_message(name))
    return spec


def needs_llm(name: str) -> bool:
    """Whether the world model cannot run without an LLM."""
    return world_model_spec(name).llm == "required"


def takes_llm(name: str) -> bool:
    """Whether the world model uses an LLM (always or when given one)."""
    return world_model_spec(name).llm != "never"


def make_world_model(name: str, book: Worldbook, *, llm: LLM | None = None, **options: Any) -> WorldModel:
    """The world model `name` on `book`; the model baselines need `llm`.

    Options go to the factory (`max_tokens`, `history_chars`, `k`, ...); the model baselines fall
    back to the book's evidence when the model's reply is unusable.
    """
    return world_model_spec(name).make(book, llm=llm, **options)

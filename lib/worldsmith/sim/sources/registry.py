"""The one registry of answer sources (`@answer_source(...)` / `register_source(...)`), in the manner of `@world_model`.

Registration order is the order sources are asked (and their answers listed: routing prefers answers by
their declared rank, whatever that order); each source is built after the sources it `requires`. The
routing tables (`sim.routing.PRIORITY`, `ROUTE_NAMES`, the trusted and per-action sets) are derived from
the answers registered here. The built-in sources register when `worldsmith.sim.sources` is imported;
modules named in $WORLDSMITH_SOURCE_PLUGINS (comma-separated) are imported on first lookup, so a
researcher's source reaches every harness without editing the library.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from worldsmith.sim.sources.base import Answer, SourceContext, SourceFactory, SourceSpec, Stage
from worldsmith.util.registry import AlreadyRegisteredError, Registry

if TYPE_CHECKING:
    from worldsmith.sim.sources.base import AnswerSource

__all__ = [
    "ANSWER_SOURCES",
    "ENTRY_POINT_GROUP",
    "SOURCE_PLUGINS_VARIABLE",
    "answer_source",
    "answers",
    "build_order",
    "build_sources",
    "register_source",
    "routed_answers",
    "routing_order",
    "source_specs",
    "unregister_source",
]

SOURCE_PLUGINS_VARIABLE = "WORLDSMITH_SOURCE_PLUGINS"
ENTRY_POINT_GROUP = "worldsmith.answer_sources"
_DERIVED: dict[str, Any] = {}  # answers and routed answers, derived once per registry change


def _register_builtins() -> None:
    import worldsmith.sim.sources  # noqa: F401  (the built-in sources register on import)


# The built-ins, then $WORLDSMITH_SOURCE_PLUGINS modules, then installed `worldsmith.answer_sources` entry points (a
# SourceSpec, or a module using `@answer_source`), loaded once, on the first lookup.
def _check(name: str, spec: SourceSpec) -> None:
    """Every registration, an entry point's included: a SourceSpec under its name whose answer names are free."""
    if not isinstance(spec, SourceSpec) or spec.name != name:
        raise ValueError(f"answer source {name!r} must be registered as a SourceSpec named {name!r}, not {spec!r}")
    registered = ANSWER_SOURCES.as_dict(load=False)  # the built-ins register through here while they load
    taken = {a.name: s.name for s in registered.values() if s.name != spec.name for a in s.answers}
    clash = [a.name for a in spec.answers if a.name in taken]
    if clash:
        raise ValueError(f"answer name {clash[0]!r} of source {spec.name!r} is already source {taken[clash[0]]!r}'s")


ANSWER_SOURCES: Registry[SourceSpec] = Registry(
    "answer source", loader=_register_builtins, plugins_variable=SOURCE_PLUGINS_VARIABLE,
    entry_point_group=ENTRY_POINT_GROUP, check=_check, on_change=_DERIVED.clear)


def register_source(spec: SourceSpec, *, replace: bool = False) -> SourceSpec:
    """Add a source (refused when its name, or one of its answer names, is taken, unless `replace`)."""
    if spec.name in ANSWER_SOURCES.as_dict(load=False) and not replace:
        raise AlreadyRegisteredError(f"answer source {spec.name!r} is already registered")
    return ANSWER_SOURCES.register(spec.name, spec, replace=True)


def answer_source(name: str, *, answers: tuple[Answer, ...] = (), stage: Stage = "routed",
                  requires: tuple[str, ...] = (), snapshot_key: str | None = None, unseen_actions: bool = True,
                  description: str = "", replace: bool = False) -> Callable[[SourceFactory], SourceFactory]:
    """Register the decorated factory (`SourceContext -> AnswerSource`) as the source `name`."""

    def decorate(factory: SourceFactory) -> SourceFactory:
        register_source(SourceSpec(name, factory, answers, stage, requires, snapshot_key, unseen_actions,
                                   description or (factory.__doc__ or "").strip()), replace=replace)
        return factory

    return decorate


def unregister_source(name: str) -> None:
    """Remove a registered source (a notebook's experiment, a test's plugin); unknown names are ignored."""
    ANSWER_SOURCES.unregister(name)


def source_specs() -> dict[str, SourceSpec]:
    """Every registered source by name, in registration order (a copy); plugins are imported first, once."""
    return ANSWER_SOURCES.as_dict()


def answers() -> dict[str, Answer]:
    """Every answer name of every source, in registration order."""
    specs = source_specs()
    if "answers" not in _DERIVED:
        _DERIVED["answers"] = {answer.name: answer for spec in specs.values() for answer in spec.answers}
    return dict(_DERIVED["answers"])


def routed_answers() -> list[Answer]:
    """The answers routing chooses among, best rank first (ties in registration order)."""
    return list(routing_order().values())


def routing_order() -> dict[str, Answer]:
    """The routed answers by name, best rank first (ties in registration order): what `choose_route` ranks by. Kept
    until the registry changes; do not modify it."""
    if "routed" not in _DERIVED:
        specs = source_specs()
        ranked = [a for spec in specs.values() if spec.stage == "routed" for a in spec.answers]
        _DERIVED["routed"] = {a.name: a for a in sorted(ranked, key=lambda a: a.rank)}
    routed: dict[str, Answer] = _DERIVED["routed"]
    return routed


def build_order(specs: dict[str, SourceSpec]) -> list[SourceSpec]:
    """`specs` with each after what it requires (registration order otherwise); a clear error for a missing or
    circular requirement."""
    done: dict[str, SourceSpec] = {}
    visiting: list[str] = []

    def visit(spec: SourceSpec) -> None:
        if spec.name in done:
            return
        if spec.name in visiting:
            raise ValueError(f"answer sources require each other in a circle: {' -> '.join([*visiting, spec.name])}")
        visiting.append(spec.name)
        for needed in spec.requires:
            if needed not in specs:
                raise ValueError(f"answer source {spec.name!r} requires {needed!r}, which is not registered")
            visit(specs[needed])
        visiting.pop()
        done[spec.name] = spec

    for spec in specs.values():
        visit(spec)
    return list(done.values())


def build_sources(template: SourceContext) -> dict[str, AnswerSource]:
    """Every registered source built on `template` (its `requires` and `built` filled per source), keyed by name in
    registration order."""
    specs = source_specs()
    built: dict[str, AnswerSource] = {}
    for spec in build_order(specs):
        context = SourceContext(template.book, template.evidence, template.config, template.harness, template.rules,
                                template.all_rules, template.formats, spec.requires, built, template.summaries)
        built[spec.name] = spec.factory(context)
    return {name: built[name] for name in specs}

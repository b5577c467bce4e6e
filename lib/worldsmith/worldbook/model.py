"""The worldbook: what a simulator believes about an environment, in a form a person can read and fix.

Action and state schemas, rules (conditions -> ordered effects -> outcome -> observation template)
with a status and provenance back to trace turns, invariants, observation contracts, notes,
demonstrations, what ends an episode (`termination`) and the verbatim evidence they were built from.
Pydantic models, so a worldbook read from disk (or from a person's edit) is validated field by field
with a clear error.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import StrEnum
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from worldsmith.worldbook.route_table import RouteTable
from worldsmith.worldbook.termination import Termination

__all__ = [
    "NAMESPACES",
    "ActionSchema",
    "ActionSpec",
    "ArgumentSpec",
    "Condition",
    "Demonstration",
    "Demotion",
    "Effect",
    "Evidence",
    "Invariant",
    "ListFormat",
    "Note",
    "ObservationContract",
    "Rule",
    "RuleProvenance",
    "RuleStatus",
    "StatePath",
    "StateSchema",
    "Worldbook",
    "escape_key",
    "join_path",
    "unescape_key",
]

NAMESPACES = ("world", "session", "surface", "epistemic")
# world.contents.{arg.source} / world.contents[arg.target] / a concrete key in brackets: world.contents[bed 1],
# world.indicators[MA(20)], world[a\[0\]] (escaped as `escape_key` writes it), world[] (the empty key)
_PATH = re.compile(r"(world|session|surface|epistemic)(\.[A-Za-z0-9_\-\[\]{}*]+|\[(?:\\.|[^\[\]\\])*\])+", re.DOTALL)
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_\-]+")
_ARG_KEY = re.compile(r"arg\.[A-Za-z0-9_]+")  # `[arg.x]` in a path is the value of the action's argument x
_KEY_ESCAPE = re.compile(r"[\\\[\]{}]")
_TURN_ID = re.compile(r"^.+#\d+$")
_STRICT = ConfigDict(extra="forbid")


class RuleStatus(StrEnum):
    """Only supported rules execute; the others are kept for a person to judge."""

    SUPPORTED = "supported"
    TENTATIVE = "tentative"
    CONFLICTED = "conflicted"
    DEPRECATED = "deprecated"


class ArgumentSpec(BaseModel):
    model_config = _STRICT

    name: str = Field(min_length=1)
    type: Literal["string", "number", "integer", "boolean", "object", "array", "any"] = "string"
    required: bool = True
    description: str = ""


class ActionSpec(BaseModel):
    """One canonical action, its aliases and arguments, and how raw text maps onto it."""

    model_config = _STRICT

    name: str = Field(min_length=1)
    aliases: list[str] = Field(default_factory=list)
    arguments: list[ArgumentSpec] = Field(default_factory=list)
    pattern: str | None = Field(default=None, description="Regex with named groups that parses raw action text.")
    examples: list[str] = Field(default_factory=list)
    description: str = ""

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as error:
                raise ValueError(f"pattern does not compile: {error}") from None
        return value


class ActionSchema(BaseModel):
    model_config = _STRICT

    actions: list[ActionSpec] = Field(default_factory=list)

    def get(self, name: str) -> ActionSpec | None:
        return next((a for a in self.actions if a.name == name or name in a.aliases), None)


def escape_key(key: str) -> str:
    """A concrete key (from observed data: any string) as a path step: `.name` when it is a plain word, else
    `[key]` with `\\`, `[`, `]`, `{` and `}` preceded by a backslash, and so is the dot of a key that would
    read as an argument (`arg.x` -> `[arg\\.x]`). `unescape_key` reverses it; a key keeps every character."""
    if _PLAIN_KEY.fullmatch(key):
        return "." + key
    if _ARG_KEY.fullmatch(key):
        return "[" + key.replace(".", "\\.", 1) + "]"
    return "[" + _KEY_ESCAPE.sub(r"\\\g<0>", key) + "]"


def unescape_key(text: str) -> str:
    """The key inside a path's brackets: a backslash makes the character after it literal."""
    return re.sub(r"\\(.)", r"\1", text, flags=re.DOTALL)


def join_path(segments: Sequence[str]) -> str:
    """A state path from its namespace and concrete keys (`["world", "indicators", "MA(20)"]` ->
    `world.indicators[MA(20)]`): the one way observed keys become paths, so every key is representable."""
    head, *rest = segments
    return head + "".join(escape_key(str(segment)) for segment in rest)


def _check_path(value: str) -> str:
    if not _PATH.fullmatch(value):
        raise ValueError(f"state path {value!r} must start with one of {', '.join(NAMESPACES)}, then .name or [key] "
                         "steps (see escape_key)")
    return value


class ListFormat(BaseModel):
    """How an environment writes a list of things ("a book 1, and a pen 1"), so a simulator writes it back alike."""

    model_config = _STRICT

    article: str = "a"  # "a" before every item (ALFWorld), or "a/an" by the item's first letter
    separator: str = ", "
    last_separator: str = ", and "  # before the last of three or more
    pair_separator: str = ", and "  # between the two of a pair
    empty: str = "nothing"
    order: Literal["insertion", "text", "name_number_asc", "name_number_desc"] = "insertion"
    # How items are ordered: as they came, or sorted (by text; by name then trailing number).


StateType = Literal["string", "number", "integer", "boolean", "object", "array", "set", "any"]


class StatePath(BaseModel):
    """A typed state path; `{key}` in a path stands for any key (`world.contents.{key}`)."""

    model_config = _STRICT

    path: str
    type: StateType = "any"
    mutable: bool = True
    description: str = ""
    list_format: ListFormat | None = None
    examples: list[Any] = Field(default_factory=list)

    @field_validator("path")
    @classmethod
    def _valid_path(cls, value: str) -> str:
        return _check_path(value)


class StateSchema(BaseModel):
    model_config = _STRICT

    paths: list[StatePath] = Field(default_factory=list)


class Condition(BaseModel):
    """A test on the state (`path`) or on an action argument (`arg`)."""

    model_config = _STRICT

    path: str | None = None
    arg: str | None = None
    op: Literal["eq", "ne", "in", "not_in", "contains", "not_contains", "exists", "missing", "gt", "lt", "matches"]
    value: Any = None

    @model_validator(mode="after")
    def _one_subject(self) -> Condition:
        if (self.path is None) == (self.arg is None):
            raise ValueError("a condition tests exactly one of 'path' (state) or 'arg' (action argument)")
        if self.path is not None:
            _check_path(self.path)
        return self


class Effect(BaseModel):
    """One state change; values may reference arguments and state as `{arg.name}` / `{world.x}`."""

    model_config = _STRICT

    op: Literal["set", "delete", "increment", "decrement", "append", "remove", "create", "merge"]
    path: str
    value: Any = None

    @field_validator("path")
    @classmethod
    def _valid_path(cls, value: str) -> str:
        return _check_path(value)


def _check_turns(values: list[str]) -> list[str]:
    for value in values:
        if not _TURN_ID.match(value):
            raise ValueError(f"{value!r} is not a turn id (<episode_id>#<index>)")
    return values


def _without_unset(data: dict[str, Any], item: BaseModel, names: tuple[str, ...]) -> dict[str, Any]:
    """The dump without these fields where they are None: they came after books were first written, and a version
    written before them must dump (and hash, in the store) as it did."""
    for name in names:
        if getattr(item, name) is None:
            data.pop(name, None)
    return data


def spread_turns(turns: Sequence[str], cap: int) -> list[str]:
    """At most `cap` of `turns` (ids `episode#turn`), taken round-robin over their episodes in order of first
    appearance, each episode's in its order: a capped list still names as many episodes as it can, so the
    trajectory families a rule's support spans can be read off it (`worldbook.holdout`). Within the cap: all."""
    if len(turns) <= cap:
        return list(turns)
    by_episode: dict[str, list[str]] = {}
    for turn in turns:
        by_episode.setdefault(turn.partition("#")[0], []).append(turn)
    queues = list(by_episode.values())
    out: list[str] = []
    depth = 0
    while len(out) < cap:
        out += [queue[depth] for queue in queues if depth < len(queue)][: cap - len(out)]
        depth += 1
    return out


class RuleProvenance(BaseModel):
    """The trace turns that support and that contradict a rule: the first ones, and how many there were.

    Builders keep at most a cap of turn ids per list (a rule of 5,000 turns would bloat the book); where
    they dropped some, `*_total` says how many there were, so a screen shows the count, not the cap."""

    model_config = _STRICT

    supporting: list[str] = Field(default_factory=list)
    contradicting: list[str] = Field(default_factory=list)
    supporting_total: int | None = Field(default=None, ge=0, description="Supporting turns in all, where "
                                         "`supporting` lists only the first (None: it lists them all).")
    contradicting_total: int | None = Field(default=None, ge=0, description="Contradicting turns in all, where "
                                            "`contradicting` lists only the first (None: it lists them all).")

    @field_validator("supporting", "contradicting")
    @classmethod
    def _valid_turns(cls, value: list[str]) -> list[str]:
        return _check_turns(value)

    @model_validator(mode="after")
    def _totals_cover_the_lists(self) -> RuleProvenance:
        for kind in ("supporting", "contradicting"):
            total = getattr(self, f"{kind}_total")
            if total is not None and total < len(getattr(self, kind)):
                raise ValueError(f"{kind}_total {total} is less than the {len(getattr(self, kind))} turns listed")
        return self

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_unset(handler(self), self, ("supporting_total", "contradicting_total"))

    @classmethod
    def capped(cls, supporting: Sequence[str], contradicting: Sequence[str] = (), *, cap: int) -> RuleProvenance:
        """At most `cap` turns of each list, spread over episodes (`spread_turns`), with the totals where some
        were dropped."""
        return cls(supporting=spread_turns(supporting, cap), contradicting=spread_turns(contradicting, cap),
                   supporting_total=len(supporting) if len(supporting) > cap else None,
                   contradicting_total=len(contradicting) if len(contradicting) > cap else None)

    def count(self, kind: Literal["supporting", "contradicting"]) -> int:
        """How many turns of `kind` there were, listed or not."""
        total = self.supporting_total if kind == "supporting" else self.contradicting_total
        return total if total is not None else len(self.supporting if kind == "supporting" else self.contradicting)


class Rule(BaseModel):
    model_config = _STRICT

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.:\-]+$")
    action: str = Field(min_length=1)
    conditions: list[Condition] = Field(default_factory=list)
    effects: list[Effect] = Field(default_factory=list)
    outcome: str = Field(default="success", description="'success' or 'failure:<kind>'.")
    template: str = Field(default="", description="Observation text with {arg.x} / {world.y} slots.")
    priority: int = 0
    scope: str | None = None
    status: RuleStatus = RuleStatus.TENTATIVE
    confidence: float = Field(default=0.0, ge=0.0, le=1.0)
    support: int = Field(default=0, ge=0)
    counterexamples: list[str] = Field(default_factory=list)
    provenance: RuleProvenance = Field(default_factory=RuleProvenance)
    description: str = ""

    @field_validator("outcome")
    @classmethod
    def _outcome(cls, value: str) -> str:
        if value != "success" and not re.match(r"^failure(:[A-Za-z0-9_\-]+)?$", value):
            raise ValueError(f"outcome must be 'success' or 'failure:<kind>', not {value!r}")
        return value

    @field_validator("counterexamples")
    @classmethod
    def _valid_counterexamples(cls, value: list[str]) -> list[str]:
        return _check_turns(value)

    @property
    def executable(self) -> bool:
        return self.status == RuleStatus.SUPPORTED


class Invariant(BaseModel):
    model_config = _STRICT

    id: str = Field(min_length=1)
    description: str
    conditions: list[Condition] = Field(default_factory=list)


class ObservationContract(BaseModel):
    """What an action's observations look like: a template, required fields, examples."""

    model_config = _STRICT

    action: str
    template: str = ""
    required_fields: list[str] = Field(default_factory=list)
    examples: list[str] = Field(default_factory=list)


class Note(BaseModel):
    """Conventions, formats, constraints and facts that are not rules."""

    model_config = _STRICT

    id: str = Field(min_length=1)
    kind: Literal["convention", "format", "constraint", "fact", "other"] = "other"
    text: str
    provenance: list[str] = Field(default_factory=list)

    @field_validator("provenance")
    @classmethod
    def _valid_turns(cls, value: list[str]) -> list[str]:
        return _check_turns(value)


class Demonstration(BaseModel):
    model_config = _STRICT

    action: str
    turn_id: str
    outcome: str = "success"
    action_text: str
    observation: str

    @field_validator("turn_id")
    @classmethod
    def _valid_turn(cls, value: str) -> str:
        return _check_turns([value])[0]


class Evidence(BaseModel):
    """One aligned transition, verbatim: what the rules are checked against."""

    model_config = _STRICT

    turn_id: str
    action: str
    arguments: Any = Field(default_factory=dict)
    action_text: str
    observation: str
    outcome: str | None = None
    done: bool | None = Field(default=None, description="Whether the episode ended with this turn (None: unrecorded).")

    @field_validator("turn_id")
    @classmethod
    def _valid_turn(cls, value: str) -> str:
        return _check_turns([value])[0]

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_unset(handler(self), self, ("done",))


class Demotion(BaseModel):
    """A rule its review found supported that the build does not let execute, and why (`worldbook.holdout`)."""

    model_config = _STRICT

    rule: str = Field(description="The rule's id (a tool rule's among `tool_rules`).")
    kind: Literal["rule", "tool_rule"] = "rule"
    reasons: list[str] = Field(min_length=1)
    families: int = Field(ge=0, description="Trajectory families its supporting turns come from.")
    held_out_answered: int | None = Field(default=None, ge=0, description="Held-out turns of the route stage's "
                                          "cross-fitting it answered (None: not measured, no route table).")
    held_out_exact: int | None = Field(default=None, ge=0, description="Of those, answers equal to the recording.")
    literals: list[str] = Field(default_factory=list, description="Values its template states that one family's "
                                                                  "observations alone showed.")

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class Worldbook(BaseModel):
    """Everything a worldbook version holds (the manifest lives beside it, in the store)."""

    model_config = _STRICT

    name: str = Field(min_length=1)
    env_id: str | None = None
    action_schema: ActionSchema = Field(default_factory=ActionSchema)
    state_schema: StateSchema = Field(default_factory=StateSchema)
    rules: list[Rule] = Field(default_factory=list)
    invariants: list[Invariant] = Field(default_factory=list)
    contracts: list[ObservationContract] = Field(default_factory=list)
    notes: list[Note] = Field(default_factory=list)
    demonstrations: list[Demonstration] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)
    routes: RouteTable | None = Field(
        default=None, description="Which answer source beat nearest evidence per action, held out (`worldbook.route_table`).")
    termination: Termination | None = Field(
        default=None, description="The features that end an episode, learned from evidence (worldbook.termination).")
    tool_rules: list[ToolRule] = Field(
        default_factory=list, description="What tool-API calls do to the records they select (worldbook.toolrules).")
    demotions: list[Demotion] = Field(
        default_factory=list, description="Rules reviewed as supported that did not hold out, and why "
                                          "(worldbook.holdout); they are tentative in `rules` / `tool_rules`.")

    @model_validator(mode="after")
    def _unique_ids(self) -> Worldbook:
        for kind, items in (("rule", self.rules), ("note", self.notes), ("invariant", self.invariants),
                            ("tool rule", self.tool_rules)):
            seen: set[str] = set()
            for item in items:
                if item.id in seen:
                    raise ValueError(f"two {kind}s have the id {item.id!r}")
                seen.add(item.id)
        return self

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = _without_unset(handler(self), self, ("termination", "routes"))
        for name in ("tool_rules", "demotions"):  # a book without them dumps (and hashes) as books written before
            if not getattr(self, name):
                data.pop(name, None)
        return data

    def canonical(self) -> Worldbook:
        """The same worldbook with items in stored order (by id / turn id): order carries no meaning,
        `Rule.priority` does. Two canonical worldbooks are equal when their files are."""
        return self.model_copy(update={
            "rules": sorted(self.rules, key=lambda r: r.id),
            "notes": sorted(self.notes, key=lambda n: n.id),
            "invariants": list(self.invariants),
            "demonstrations": sorted(self.demonstrations, key=lambda d: (d.action, d.turn_id)),
            "evidence": sorted(self.evidence, key=lambda e: e.turn_id),
            "tool_rules": sorted(self.tool_rules, key=lambda r: r.id),
        })

    def rule(self, rule_id: str) -> Rule:
        found = next((rule for rule in self.rules if rule.id == rule_id), None)
        if found is None:
            raise KeyError(f"no rule {rule_id!r} in worldbook {self.name!r}")
        return found

    def supported_rules(self, action: str | None = None) -> list[Rule]:
        return [r for r in self.rules if r.executable and (action is None or r.action == action)]


from worldsmith.worldbook.toolrules import ToolRule  # noqa: E402  (it builds on RuleStatus and RuleProvenance above)

Worldbook.model_rebuild()

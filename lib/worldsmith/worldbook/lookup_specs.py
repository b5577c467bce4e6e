"""The look-up rules' data (a query's matches and answer form; a precondition's test; a projection read), held in
`ToolRule.query` / `ToolRule.precondition` / `ToolRule.projection`: pydantic models with no dependency on the learners (`worldbook.queries`,
`worldbook.preconditions`), so the tool-rule model can hold them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from worldsmith.worldbook.model import RuleStatus

__all__ = ["Form", "Match", "Mode", "Precondition", "Projection", "QueryRule", "Shape", "Test"]

Mode = Literal["exact", "ci", "contains"]
Form = Literal["bare", "json", "field", "field_list", "list", "records"]
Shape = Literal["value", "values", "keys", "members"]
Test = Literal["unknown", "invalid_form", "arg_not_in", "not_member", "not_in_values", "less_than"]


class Match(BaseModel):
    """One argument compared with one attribute path of the records."""

    model_config = ConfigDict(extra="forbid")

    argument: str
    path: list[str]
    mode: Mode = "exact"


class QueryRule(BaseModel):
    """A learned query (see the module doc)."""

    model_config = ConfigDict(extra="forbid")

    action: str
    kind: str = Field(description="The record kind searched (its id key in the entity store).")
    matches: list[Match]
    form: Form
    key: str | None = Field(default=None, description="The answer's field, for `field` / `field_list` forms.")
    fields: list[str] | None = Field(default=None, description="The keys of each answered record (`records` form).")
    wrapper: dict[str, Any] | None = Field(default=None, description="The small object around the field.")
    layout: tuple[str, str, bool] | None = None
    order: Literal["insertion", "id"] = "insertion"
    empty: str | None = Field(default=None, description="The answer when nothing matches, {arg.x} slotted.")
    status: RuleStatus = RuleStatus.TENTATIVE
    support: int = 0
    contradicting: int = 0
    empty_support: int = 0
    empty_contradicting: int = 0
    supporting_turns: list[str] = Field(default_factory=list)
    contradicting_turns: list[str] = Field(default_factory=list)


class Precondition(BaseModel):
    """A learned precondition (see the module doc)."""

    model_config = ConfigDict(extra="forbid")

    action: str
    test: Test
    argument: str = Field(description="The argument whose value selects the record (or is tested itself).")
    via: str | None = Field(default=None, description="A field of that record naming the record tested (one hop).")
    kind: str | None = Field(default=None, description="The kind of record the argument selects (one hop on, the "
                                                       "record tested is of kind `via`).")
    path: list[str] = Field(default_factory=list, description="The record's field tested.")
    values: list[Any] = Field(default_factory=list, description="Values seen on success (or id forms known).")
    other: str | None = Field(default=None, description="The argument compared with the field (less_than, "
                                                        "not_member).")
    template: str = Field(description="The error text, {arg.x} slotted.")
    status: RuleStatus = RuleStatus.TENTATIVE
    support: int = 0
    contradicting: int = 0
    supporting_turns: list[str] = Field(default_factory=list)
    contradicting_turns: list[str] = Field(default_factory=list)

    def describe(self) -> str:
        subject = f"{self.argument}" + (f".{self.via}" if self.via else "")
        field = ".".join(self.path)
        return {"unknown": f"{subject} names no known {self.kind}",
                "invalid_form": f"{subject} is not of the form of a {self.kind}",
                "arg_not_in": f"{self.argument} not in {self.values}",
                "not_member": f"{self.other} not among {subject}'s {field}",
                "not_in_values": f"{subject}'s {field} not in {self.values}",
                "less_than": f"{subject}'s {field} < {self.other}"}[self.test]


class Projection(BaseModel):
    """A read answered with a part of the record an argument selects (`worldbook.projections`): the record whose
    id key `key` equals the argument `argument`, its field at `path`, and how that field is shown (`shape`):

    - `value`: the field as it is (a list or an object);
    - `values`: an object field's values as a list (each item cut to `fields` when the tool shows fewer keys);
    - `keys`: an object field's keys as a list;
    - `members`: a list field of child ids, kept in the parent's order, each child (the record whose id key is
      `child`) kept when its fields match the `filters` arguments the call gives (a call naming an unknown child
      is not answered, unless a filter's value is one no record of the child's kind could hold:
      `projections.FieldValues`)."""

    model_config = ConfigDict(extra="forbid")

    action: str
    argument: str = Field(description="The argument whose value is the selected record's id.")
    key: str = Field(description="The selected record's id key (its own identifier field).")
    path: list[str] = Field(description="The record's field the answer shows.")
    shape: Shape
    fields: list[str] | None = Field(default=None, description="`values`: the keys of each item shown.")
    child: str | None = Field(default=None, description="`members`: the child records' id key.")
    filters: list[Match] = Field(default_factory=list, description="`members`: arguments compared with child fields.")
    layout: tuple[str, str, bool] | None = None
    unsure_after: list[str] = Field(default_factory=list, description="Tools that change the record in ways the "
                                    "evidence does not tell: after one names it, it is not answered from until shown.")
    status: RuleStatus = RuleStatus.TENTATIVE
    support: int = 0
    contradicting: int = 0
    supporting_turns: list[str] = Field(default_factory=list)
    contradicting_turns: list[str] = Field(default_factory=list)

    def describe(self) -> str:
        field = ".".join(self.path)
        shown = {"value": f"its {field}", "values": f"the values of its {field}", "keys": f"the keys of its {field}",
                 "members": f"the {self.child} ids of its {field}"}[self.shape]
        if self.fields:
            shown += f" ({', '.join(self.fields)})"
        if self.filters:
            shown += " whose " + ", ".join(f"{'.'.join(m.path)} ~ {m.argument} ({m.mode})" for m in self.filters)
        after = f"; unknown after {', '.join(self.unsure_after)}" if self.unsure_after else ""
        return f"the {self.key} record named by {self.argument}: {shown}{after}"

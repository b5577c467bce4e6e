"""Tool rules: what a tool-API call does to the records it selects, as data a person can read and fix.

A `ToolRule` belongs to one tool (`cancel_pending_order`) and one kind:

- `write` (this module's learner, `worldbook.writes`): the argument that selects the record the call acts on
  (`selector`: argument `order_id` == the record's `order_id`), the field changes it makes (`changes`: status
  set to "cancelled", `cancel_reason` copied from the argument `reason`, a refund appended to
  `payment_history`) and how the call answers (`response`: the updated record in the tool's own JSON layout,
  some of its fields, or a fixed text);
- `effect` (also `worldbook.writes`): what a call does to *another* record than the one it answers with or
  selects, the one an argument names (`add_card(user_id)` inserts the card its answer shows into the user's
  `payment_methods`, `remove_payment_method(user_id, payment_method_id)` deletes that entry, `place_order(user_id)`
  appends the new order's id to the user's `orders`): `selector` names that record, `changes` its field changes
  (they may read the call's answer), `conditions` the answer forms on which it acts (a refusal changes nothing);
- `query`, `precondition`, `empty`, `projection` (helper kinds built on the same model: an id found by matching
  arguments against records, a learned error text, an empty result, a part of the selected record).

Each rule and each change carries its status (only supported rules execute), support, the turns that
contradict it and provenance (turn ids), like `Rule`. Paths into a record are dotted keys (`address.city`);
a key holding a dot or a bracket is written in brackets as state paths are (`escape_key`).
"""

from __future__ import annotations

import re
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from worldsmith.worldbook.lookup_specs import Precondition, Projection, QueryRule
from worldsmith.worldbook.model import RuleProvenance, RuleStatus, _check_turns

__all__ = [
    "CHANGE_OPS",
    "FieldChange",
    "ResponseKind",
    "ResponseSpec",
    "Selector",
    "ANSWER",
    "TOOL_RULE_KINDS",
    "ToolRule",
    "ToolRuleKind",
]

_STRICT = ConfigDict(extra="forbid")
ToolRuleKind = Literal["write", "effect", "query", "precondition", "empty", "projection"]
TOOL_RULE_KINDS: tuple[str, ...] = get_args(ToolRuleKind)
ResponseKind = Literal["record", "fields", "text"]
# How a field's new value comes (`FieldChange.op`), in the order the learner prefers them when several explain
# the same values (an argument copied says more than a constant that happened to equal it).
CHANGE_OPS = ("copy", "add", "sub", "sum", "append", "remove", "move", "upsert", "sorted_arg", "object", "keep", "field",
              "set")
ChangeOp = Literal["copy", "add", "sub", "sum", "append", "remove", "move", "upsert", "sorted_arg", "object", "keep",
                   "field", "set"]
ANSWER = "answer"  # the `source` of a change that reads the call's answer (append its record's id)
_PATH = re.compile(r"(?:[^.\[\]\\]+|\[(?:\\.|[^\[\]\\])*\])(?:\.[^.\[\]\\]+|\[(?:\\.|[^\[\]\\])*\])*", re.DOTALL)


class FieldChange(BaseModel):
    """One field's new value as a function of the call's arguments and the record before the call.

    - `set`: the constant `value`; `copy`: the argument `argument`; `field`: the record's field at `source`
      (before the call); `keep`: the field unchanged;
    - `add` / `sub`: the field's number plus / minus the numeric argument `argument`;
    - `sum`: the sum of a number over the list items `argument` names (`source` `items.price`: the `price` of
      the items of `items`; a refund of the returned items);
    - `object`: a new object, each of its keys built by one of `fields` (an address from address1, city, zip);
    - `append`: the list with one entry added: the argument `argument`'s value, else an object built by
      `fields` (a payment-history line: a constant type, the amount from a prior field, a method argument),
      else (`source` "answer") the id of the record the call answered with (a new order's id);
    - `remove`: the list without the items the argument `argument` names (an item, or its id / a list of ids),
      or the object without the entries it names (by key, or by the id their value holds);
    - `upsert`: the object with the records the call's answer shows set under their ids (a new card added, a
      gift card's new balance), other entries kept;
    - `move`: the items of the list at `source` that `argument` names (items moved to a return list);
    - `sorted_arg`: the argument `argument`'s list, sorted.
    """

    model_config = _STRICT

    path: str = Field(min_length=1, description="The field in the record (dotted keys), or a key of an entry.")
    op: ChangeOp
    argument: str | None = None
    value: Any = None
    source: str | None = Field(default=None, description="For field / move / sum: the record path read before the call.")
    fields: list[FieldChange] = Field(default_factory=list, description="For object / append: how each key is built.")
    status: RuleStatus = RuleStatus.TENTATIVE
    support: int = Field(default=0, ge=0, description="Turns where the relation held.")
    checked: int = Field(default=0, ge=0, description="Turns where it could be checked.")

    @field_validator("path", "source")
    @classmethod
    def _valid_path(cls, value: str | None) -> str | None:
        if value is not None and not _PATH.fullmatch(value):
            raise ValueError(f"{value!r} is not a record path (dotted keys, [key] for a key with a dot or bracket)")
        return value

    @model_validator(mode="after")
    def _operands(self) -> FieldChange:
        needs_argument = {"copy", "add", "sub", "sum", "remove", "move", "sorted_arg"}
        if self.op in needs_argument and not self.argument:
            raise ValueError(f"a {self.op!r} change names the argument it uses")
        if self.op in ("field", "move", "sum") and not self.source:
            raise ValueError(f"a {self.op!r} change names the record path it reads (source)")
        if self.op == "object" and not self.fields:
            raise ValueError("an 'object' change says how each of its keys is built (fields)")
        if self.op == "append" and not self.argument and not self.fields and self.source != ANSWER:
            raise ValueError("an 'append' change names its entry: an argument, fields to build it, or the answer")
        if self.support > self.checked:
            raise ValueError(f"support {self.support} exceeds the {self.checked} turns checked")
        return self


class Selector(BaseModel):
    """Which record a call acts on: the one whose `key` equals the call's argument `argument`."""

    model_config = _STRICT

    argument: str = Field(min_length=1)
    key: str = Field(min_length=1, description="The record's identifier field (`order_id`, `id`).")
    support: int = Field(default=0, ge=0)


class ResponseSpec(BaseModel):
    """How the call answers: the updated record, some fields, or a fixed text; and its JSON layout.

    - `record`: the record after the changes, its keys in the record's order (new keys where `keys` puts them);
    - `fields`: an object of `keys` in that order, each the updated record's field, or (for a key the record
      does not have) built by the change in `fields` of that path (an `order_id` copied from the argument);
    - `text`: the constant `text`, its `{arg.name}` slots filled from the arguments (`Ticket {arg.ticket_id} closed.`).
    """

    model_config = _STRICT

    kind: ResponseKind
    keys: list[str] = Field(default_factory=list)
    fields: list[FieldChange] = Field(default_factory=list)
    text: str | None = None
    item_separator: str = ", "
    key_separator: str = ": "
    ensure_ascii: bool = False

    @model_validator(mode="after")
    def _complete(self) -> ResponseSpec:
        if self.kind == "text" and self.text is None:
            raise ValueError("a 'text' response holds its text")
        if self.kind == "fields" and not self.keys:
            raise ValueError("a 'fields' response lists its keys")
        return self


class ToolRule(BaseModel):
    """One learned behaviour of one tool (see the module doc); only supported rules execute."""

    model_config = _STRICT

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.:\-]+$")
    tool: str = Field(min_length=1)
    kind: ToolRuleKind
    selector: Selector | None = None
    changes: list[FieldChange] = Field(default_factory=list)
    response: ResponseSpec | None = None
    template: str = Field(default="", description="For text answers with slots ({arg.x}); kinds that render text.")
    conditions: list[dict[str, Any]] = Field(default_factory=list, description="For kinds that test arguments or "
                                             "records before answering (preconditions).")
    status: RuleStatus = RuleStatus.TENTATIVE
    support: int = Field(default=0, ge=0)
    counterexamples: list[str] = Field(default_factory=list)
    provenance: RuleProvenance = Field(default_factory=RuleProvenance)
    description: str = ""
    query: QueryRule | None = Field(default=None, description="For query / empty: the look-up (worldbook.queries).")
    precondition: Precondition | None = Field(default=None, description="For precondition: the test "
                                              "(worldbook.preconditions).")
    projection: Projection | None = Field(default=None, description="For projection: the part of the selected "
                                          "record answered (worldbook.projections).")

    @field_validator("counterexamples")
    @classmethod
    def _valid_counterexamples(cls, value: list[str]) -> list[str]:
        return _check_turns(value)

    @model_validator(mode="after")
    def _write_shape(self) -> ToolRule:
        if self.kind == "write" and (self.selector is None or self.response is None):
            raise ValueError("a write rule names its selector and its response")
        if self.kind == "effect" and (self.selector is None or not self.changes):
            raise ValueError("an effect rule names the record it changes (selector) and its changes")
        if self.kind in ("query", "empty") and self.query is None:
            raise ValueError(f"a {self.kind} rule holds its look-up (query)")
        if self.kind == "precondition" and self.precondition is None:
            raise ValueError("a precondition rule holds its test (precondition)")
        if self.kind == "projection" and self.projection is None:
            raise ValueError("a projection rule holds what it answers (projection)")
        return self

    @property
    def executable(self) -> bool:
        return self.status == RuleStatus.SUPPORTED

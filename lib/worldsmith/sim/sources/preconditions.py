"""The `precondition` source: a tool's learned error, when its test holds on the call and the records it selects.

Supported preconditions (`worldbook.preconditions`) are checked in their learned order against the records the
call's arguments select now (the book's entity store under what the episode showed); the first that holds
answers with its error text, the arguments slotted, before any write effect applies. A test that needs a record
the episode cannot know stays silent, so the other sources answer. A test of an argument against the few values
successes showed (`arg_not_in`) answers as `precondition_enum`: a held-out task may use a valid value the
construction episodes never did (BFCL's `displayCarStatus(option="doors")`), so only a held-out record trusts it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from worldsmith.sim.sources.base import CandidateAnswer
from worldsmith.worldbook.lookup_specs import Precondition
from worldsmith.worldbook.preconditions import check, failure_text, selections
from worldsmith.worldbook.record_store import EpisodeRecords, RecordStore
from worldsmith.worldbook.toolrules import ToolRule

__all__ = ["PreconditionSource"]


class PreconditionSource:
    """Learned errors over the selected records and the arguments (module doc)."""

    def __init__(self, rules: Sequence[ToolRule], store: RecordStore) -> None:
        """From the executable tool rules of kind `precondition`, in their order."""
        self.rules: dict[str, list[Precondition]] = defaultdict(list)
        self.ids: dict[int, str] = {}
        for rule in rules:
            if rule.kind == "precondition" and rule.executable and rule.precondition is not None:
                self.rules[rule.tool].append(rule.precondition)
                self.ids[id(rule.precondition)] = rule.id
        self.selects = {action: {r.argument: r.kind for r in items if r.kind is not None}
                        for action, items in self.rules.items()}
        self.view = EpisodeRecords(store)
        self.reset()

    def reset(self, opening: str = "") -> None:
        self.view.reset()

    def observe(self, name: str, arguments: Mapping[str, Any], observation: str) -> None:
        self.view.observe(arguments, observation)

    def propose(self, name: str, arguments: Mapping[str, Any], line: str = "") -> list[CandidateAnswer]:
        rules = self.rules.get(name)
        if not rules:
            return []
        selected = selections(arguments, self.view, self.selects.get(name, {}))
        for rule in rules:
            if check(rule, arguments, selected, self.view):
                text = failure_text(rule, arguments)
                if text is not None:
                    source = "precondition_enum" if rule.test == "arg_not_in" else "precondition"
                    kind, record = selected.get((rule.argument, rule.via), (None, None))
                    read = [{"key": [kind, str(record.get(kind, arguments.get(rule.argument)))], "before": record,
                             "after": record}] if record is not None and kind is not None else []
                    return [CandidateAnswer(source, text, outcome="failure:precondition", form=rule.template,
                                     rule=self.ids.get(id(rule)), records=read,
                                     notes=[f"precondition of {name!r}: {rule.describe()} "
                                            f"(held on {rule.support} failing calls, no success)"])]
        return []

    def snapshot(self) -> dict[str, Any]:
        return {"preconditions": {action: [r.describe() for r in items] for action, items in self.rules.items()}}


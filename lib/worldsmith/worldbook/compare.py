"""Any two versions side by side: which rules' templates changed, word by word.

    for change in template_changes(store.load("alf", "v0003-…"), store.load("alf", "v0007-…")):
        change.rule_id, [(s.op, s.text) for s in change.segments]   # equal / delete (old words) / insert (new)

`diff_worldbooks` says which fields changed; a template is prose, so here it is compared on words
(`traces.text_diff.word_diff`, difflib over words) and a page can show deletions and insertions inline.
Added rules are all insertion, removed ones all deletion.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from worldsmith.traces.text_diff import DiffSegment, word_diff
from worldsmith.worldbook.model import Worldbook

__all__ = ["TemplateChange", "template_changes"]


@dataclass(frozen=True)
class TemplateChange:
    rule_id: str
    action: str
    kind: Literal["added", "removed", "changed"]
    segments: list[DiffSegment]

    def text(self) -> str:
        """`[-old-]{+new+}` markup, for a terminal."""
        marks = {"equal": "{}", "delete": "[-{}-]", "insert": "{{+{}+}}"}
        return "".join(marks[s.op].format(s.text.rstrip()) + (" " if s.text != s.text.rstrip() else "")
                       for s in self.segments).strip()


def template_changes(old: Worldbook, new: Worldbook) -> list[TemplateChange]:
    """The rules whose template differs between `old` and `new` (added and removed ones too), by rule id."""
    before = {r.id: r for r in old.rules}
    after = {r.id: r for r in new.rules}
    out = []
    for rule_id in sorted(before.keys() | after.keys()):
        a, b = before.get(rule_id), after.get(rule_id)
        if a is None and b is not None:
            out.append(TemplateChange(rule_id, b.action, "added", [DiffSegment(op="insert", text=b.template)]))
        elif b is None and a is not None:
            out.append(TemplateChange(rule_id, a.action, "removed", [DiffSegment(op="delete", text=a.template)]))
        elif a is not None and b is not None and a.template != b.template:
            out.append(TemplateChange(rule_id, b.action, "changed", word_diff(b.template, a.template)))
    return out

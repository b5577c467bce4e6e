"""Curating tool rules by hand: the edit ops a page or notebook applies, and the one line a person reads them by.

    store.patch(name, Patch(base=version, ops=[drop_change_op(rule, "status")], message="..."))
    describe_tool_rule(rule)          # what a call selects, changes and answers, in one scannable line

One namespace (`from worldsmith.worldbook import curation`) because the two always travel together: a curator
reads a rule's text, then edits it.
"""

from worldsmith.worldbook.tool_rule_edits import (
    TEMPLATED_KINDS,
    change_status_op,
    drop_change_op,
    template_op,
    tool_rule_status_op,
)
from worldsmith.worldbook.tool_rule_text import (
    describe_change,
    describe_response,
    describe_selector,
    describe_tool_rule,
)

__all__ = [
    "TEMPLATED_KINDS",
    "change_status_op",
    "describe_change",
    "describe_response",
    "describe_selector",
    "describe_tool_rule",
    "drop_change_op",
    "template_op",
    "tool_rule_status_op",
]

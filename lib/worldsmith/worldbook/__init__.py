"""Worldbooks: the schemas, rules and evidence a simulator runs on, stored as immutable, diffable versions.

    from worldsmith.worldbook import WorldbookStore, Patch, PatchOp
    store = WorldbookStore(workspace.root / "worldbooks")
    book = store.load("alfworld")
    store.patch("alfworld", Patch(base=store.head("alfworld"),
                                  ops=[PatchOp(op="update_rule", id="take-1", fields={"status": "conflicted"})]))
"""

from worldsmith.worldbook.model import (
    NAMESPACES,
    ActionSchema,
    ActionSpec,
    ArgumentSpec,
    Condition,
    Demonstration,
    Effect,
    Evidence,
    Invariant,
    Note,
    ObservationContract,
    Rule,
    RuleProvenance,
    RuleStatus,
    StatePath,
    StateSchema,
    Worldbook,
)
from worldsmith.worldbook.store import (
    Patch,
    PatchConflictError,
    PatchOp,
    VersionInfo,
    WorldbookError,
    WorldbookStore,
    apply_ops,
    diff_worldbooks,
    iter_rule_turns,
)

__all__ = [
    "NAMESPACES",
    "ActionSchema",
    "ActionSpec",
    "ArgumentSpec",
    "Condition",
    "Demonstration",
    "Effect",
    "Evidence",
    "Invariant",
    "Note",
    "ObservationContract",
    "Patch",
    "PatchConflictError",
    "PatchOp",
    "Rule",
    "RuleProvenance",
    "RuleStatus",
    "StatePath",
    "StateSchema",
    "VersionInfo",
    "Worldbook",
    "WorldbookError",
    "WorldbookStore",
    "apply_ops",
    "diff_worldbooks",
    "iter_rule_turns",
]

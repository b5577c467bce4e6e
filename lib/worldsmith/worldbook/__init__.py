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
from worldsmith.worldbook.model_stages import (
    StageReport,
    compare_stage_outputs,
    model_extract,
    model_notes,
    model_rules,
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
from worldsmith.worldbook.templates import (
    TemplateConfig,
    evidence_from_episodes,
    induce_template_rules,
    render_template,
    text_arguments,
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
    "StageReport",
    "StateSchema",
    "TemplateConfig",
    "VersionInfo",
    "Worldbook",
    "WorldbookError",
    "WorldbookStore",
    "apply_ops",
    "compare_stage_outputs",
    "diff_worldbooks",
    "evidence_from_episodes",
    "induce_template_rules",
    "iter_rule_turns",
    "model_extract",
    "model_notes",
    "model_rules",
    "render_template",
    "text_arguments",
]

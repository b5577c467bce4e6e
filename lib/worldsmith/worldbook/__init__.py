"""Worldbooks: the schemas, rules and evidence a simulator runs on, stored as immutable, diffable versions.

    from worldsmith.worldbook import WorldbookStore, Patch, PatchOp
    store = WorldbookStore.of_workspace(workspace)
    book = store.load("alfworld")
    store.patch("alfworld", Patch(base=store.head("alfworld"),
                                  ops=[PatchOp(op="update_rule", id="take-1", fields={"status": "conflicted"})]))

Exported: the book and its parts (`Worldbook`, `Rule`, `ToolRule`, `Condition`, `Effect`, `Evidence`, ...), the
versioned store and its patches (`WorldbookStore`, `Patch`, `PatchOp`, `diff_worldbooks`), building
(`build_worldbook`, `BuildConfig`, `build_dataset`), checking and proposing edits (`check_rule`,
`evidence_regressions`, `propose_patches`, `template_changes`), what a book was built from (`LeakageReport`) and search (`WorldbookIndex`, `index_folder`).
Namespaces: `build_jobs` (builds as background jobs), `curation` (tool-rule edit ops and their text), `interop`
(Trace2Env packages, version export/import). Everything else (the build stages, induction, replay internals)
is imported from its module, e.g. `worldsmith.worldbook.rule_replay`.
"""

from worldsmith.worldbook import build_jobs, curation, interop
from worldsmith.worldbook.build import BuildConfig, BuildResult, build_dataset, build_worldbook
from worldsmith.worldbook.compare import template_changes
from worldsmith.worldbook.index import SEARCH_KINDS, DenseUnavailableError, WorldbookIndex, index_folder
from worldsmith.worldbook.leakage_report import LeakageReport
from worldsmith.worldbook.model import (
    NAMESPACES,
    Condition,
    Effect,
    Evidence,
    Note,
    Rule,
    RuleProvenance,
    RuleStatus,
    StatePath,
    StateSchema,
    Worldbook,
)
from worldsmith.worldbook.proposal_forms import HeldOutEffect
from worldsmith.worldbook.proposals import Proposal, propose_patches
from worldsmith.worldbook.rule_guard import evidence_regressions
from worldsmith.worldbook.rule_replay import RuleReplay, check_rule
from worldsmith.worldbook.store import (
    Patch,
    PatchConflictError,
    PatchOp,
    WorldbookError,
    WorldbookNotFound,
    WorldbookStore,
    diff_worldbooks,
)
from worldsmith.worldbook.toolrules import TOOL_RULE_KINDS, FieldChange, ToolRule

__all__ = [
    "NAMESPACES",
    "SEARCH_KINDS",
    "TOOL_RULE_KINDS",
    "BuildConfig",
    "BuildResult",
    "Condition",
    "DenseUnavailableError",
    "Effect",
    "Evidence",
    "FieldChange",
    "HeldOutEffect",
    "LeakageReport",
    "Note",
    "Patch",
    "PatchConflictError",
    "PatchOp",
    "Proposal",
    "Rule",
    "RuleProvenance",
    "RuleReplay",
    "RuleStatus",
    "StatePath",
    "StateSchema",
    "ToolRule",
    "Worldbook",
    "WorldbookError",
    "WorldbookIndex",
    "WorldbookNotFound",
    "WorldbookStore",
    "build_dataset",
    "build_jobs",
    "build_worldbook",
    "check_rule",
    "curation",
    "diff_worldbooks",
    "evidence_regressions",
    "index_folder",
    "interop",
    "propose_patches",
    "template_changes",
]

"""The worldbook's construction stages, in order: what `build_worldbook` runs.

    align -> extract -> rules -> review -> schema -> contracts -> notes -> demonstrations -> termination -> tools ->
    compile

Each is a `BookStage`: a name, the artifacts it reads, the one it makes and its type (what the stage cache checks a
stored output against), and the function that computes it. The rules and notes stages can run on a model
(`BuildConfig.llm`): every call then goes through the model layer (cached and logged), unusable output falls back to
the deterministic stage, and the stage report compares the two. `compile` assembles the book from the others (and a
`routes` artifact when a stage added by `sim` made one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from worldsmith.worldbook.engine import literal_value
from worldsmith.worldbook.facts import extract_facts, learn_list_format
from worldsmith.worldbook.holdout import apply_holdout
from worldsmith.worldbook.induce import InducedRules, InductionConfig, episode_of, induce_candidates
from worldsmith.worldbook.model import (
    ActionSchema,
    Demonstration,
    Effect,
    Evidence,
    Note,
    ObservationContract,
    Rule,
    StateSchema,
    Worldbook,
    join_path,
)
from worldsmith.worldbook.pipeline import Artifacts, BuildContext, stage_names
from worldsmith.worldbook.route_table import RouteTable
from worldsmith.worldbook.rule_replay import ReviewConfig, review_rules
from worldsmith.worldbook.schema import (
    induce_action_schema,
    induce_contracts,
    induce_notes,
    induce_state_schema,
    pick_demonstrations,
)
from worldsmith.worldbook.stages import Extraction
from worldsmith.worldbook.templates import evidence_from_episodes
from worldsmith.worldbook.termination import Termination, learn_termination
from worldsmith.worldbook.toolrules import ToolRule
from worldsmith.worldbook.writes import learn_tool_rules

__all__ = ["BOOK_STAGES", "STAGES", "BookStage", "CandidateRules", "deterministic_extract", "induction_config",
           "review_config"]


@dataclass(frozen=True)
class BookStage:
    """A stage of `worldbook.pipeline`: `compute(artifacts, context)` makes `output` from `inputs`."""

    name: str
    inputs: tuple[str, ...]
    output: str
    output_type: Any
    compute: Callable[[Artifacts, BuildContext], Any]
    options: dict[str, Any] = field(default_factory=dict)
    transient: bool = False  # the output is not kept in memory once made when no later stage reads it

    def settings(self) -> dict[str, Any]:
        return dict(self.options)

    def run(self, artifacts: Artifacts, context: BuildContext) -> Any:
        return self.compute(artifacts, context)


class CandidateRules(InducedRules):
    """The rules stage's output: the rules to review (`rules`: the model's drafts with the deterministic rules they
    did not replace, or the deterministic ones) and, when a model drafted, the deterministic candidates (`induced`);
    `origins` are the deterministic candidates' origin turns."""

    induced: list[Rule] | None = None

    @property
    def deterministic(self) -> InducedRules:
        return InducedRules(rules=self.induced if self.induced is not None else self.rules, origins=self.origins)


def induction_config(config: Any) -> InductionConfig:
    return InductionConfig(max_free_slots=config.max_free_slots, max_forms_per_action=config.max_forms_per_action,
                           min_confirmations=config.min_confirmations)


def review_config(config: Any) -> ReviewConfig:
    return ReviewConfig(min_support=config.min_support, min_share=config.min_share,
                        max_counterexample_share=config.max_counterexample_share)


def deterministic_extract(evidence: Sequence[Evidence]) -> list[Extraction]:
    """Per transition: canonical action, outcome, the facts its observation shows, the candidate state changes
    (facts that differ from what the episode showed before) and what stays ambiguous."""
    out: list[Extraction] = []
    known: dict[tuple[str, tuple[str, ...]], Any] = {}
    for item in evidence:
        arguments = item.arguments if isinstance(item.arguments, dict) else {}
        facts = extract_facts(item.action, arguments, item.observation)
        episode = episode_of(item.turn_id)
        changes, ambiguities = [], []
        for fact in facts:
            key = (episode, tuple(fact.path))
            if known.get(key, _UNSEEN) != fact.value:
                changes.append(Effect(op="set", path=join_path(fact.path), value=literal_value(fact.value)))
            known[key] = fact.value
            if fact.kind == "list" and len(fact.path) == 2 and arguments:
                ambiguities.append(f"a list with no owner among the arguments, kept as {'.'.join(fact.path)}")
        if not item.observation.strip():
            ambiguities.append("empty observation")
        out.append(Extraction(turn_id=item.turn_id, action=item.action, arguments=arguments,
                              outcome=item.outcome or "success", facts=facts, changes=changes,
                              ambiguities=ambiguities))
    return out


_UNSEEN = object()


def _model(context: BuildContext, stage: str) -> tuple[Any, Any] | None:
    """(the tracked model, the model-stages module) when `stage` runs on a model, else None."""
    config = context.config
    if not config.llm or stage not in config.model_stages:
        return None
    if "llm" not in context.shared:
        from worldsmith.llm.tracked import open_llm
        from worldsmith.worldbook import model_stages

        context.shared["llm"] = (open_llm(config.llm, context.workspace_root, component="build"), model_stages)
    return context.shared["llm"]


def _align(artifacts: Artifacts, _context: BuildContext) -> list[Evidence]:
    return evidence_from_episodes(artifacts["episodes"])  # cheaper to redo than to read back per episode


def _extract(artifacts: Artifacts, context: BuildContext) -> list[Extraction]:
    """Per episode (the evidence holds one transition per turn, episode after episode): an update extracts only the
    new episodes."""
    episodes, evidence = artifacts["episodes"], artifacts["evidence"]
    starts = [0]
    for episode in episodes:
        starts.append(starts[-1] + len(episode.turns))
    if starts[-1] != len(evidence):
        raise ValueError(f"the evidence has {len(evidence)} transitions, the episodes {starts[-1]} turns")
    model = _model(context, "extract")
    stage_report = model[1].StageReport(stage="extract") if model is not None else None

    def extract(index: int, _episode: Any) -> list[Extraction]:
        items = evidence[starts[index]:starts[index + 1]]
        if model is None:
            return deterministic_extract(items)
        llm, stages_module = model  # the model reads each transition; what it gets wrong falls back
        return stages_module.model_extract(items, llm, fallback=deterministic_extract, report=stage_report)

    extractions = context.per_episode("extract", episodes, Extraction, extract)
    context.report("extract")["facts"] = sum(len(x.facts) for x in extractions)
    if stage_report is not None:
        context.report("extract")["model"] = stage_report.to_json()
    return extractions


def _rules(artifacts: Artifacts, context: BuildContext) -> CandidateRules:
    evidence: list[Evidence] = artifacts["evidence"]
    induced = induce_candidates(evidence, induction_config(context.config))
    model = _model(context, "rules")
    if model is None:
        return CandidateRules(rules=induced.rules, origins=induced.origins)
    llm, stages_module = model
    report = stages_module.StageReport(stage="rules")
    by_action: dict[str, list[Evidence]] = {}
    for item in evidence:
        by_action.setdefault(item.action, []).append(item)
    drafted: list[Rule] = []
    for action, items in sorted(by_action.items()):
        drafted += stages_module.model_rules(
            action, items, llm, report=report,
            fallback=lambda a, _items: [r for r in induced.rules if r.action == a])
    context.report("rules")["model"] = report.to_json()
    context.report("rules")["compared_with_deterministic"] = stages_module.compare_stage_outputs(induced.rules,
                                                                                                 drafted)
    known = {r.id for r in drafted}
    return CandidateRules(rules=drafted + [r for r in induced.rules if r.id not in known], origins=induced.origins,
                          induced=induced.rules)


def _review(artifacts: Artifacts, context: BuildContext) -> list[Rule]:
    evidence: list[Evidence] = artifacts["evidence"]
    formats = {"*": learn_list_format(item.observation for item in evidence)}
    return review_rules(artifacts["rules"].rules, evidence, review_config(context.config), formats=formats)


def _schema(artifacts: Artifacts, _context: BuildContext) -> tuple[ActionSchema, StateSchema]:
    evidence = artifacts["evidence"]
    return induce_action_schema(evidence), induce_state_schema(evidence, artifacts["reviewed"])


def _contracts(artifacts: Artifacts, _context: BuildContext) -> list[ObservationContract]:
    return induce_contracts(artifacts["evidence"], artifacts["reviewed"])


def _notes(artifacts: Artifacts, context: BuildContext) -> list[Note]:
    evidence = artifacts["evidence"]
    deterministic = induce_notes(evidence, artifacts["reviewed"])
    model = _model(context, "notes")
    if model is None:
        return deterministic
    llm, stages_module = model
    report = stages_module.StageReport(stage="notes")
    drafted = stages_module.model_notes(evidence, llm, report=report, fallback=lambda _e: deterministic)
    context.report("notes")["model"] = report.to_json()
    known = {n.id for n in drafted}
    return drafted + [n for n in deterministic if n.id not in known]


def _demonstrations(artifacts: Artifacts, context: BuildContext) -> list[Demonstration]:
    return pick_demonstrations(artifacts["evidence"], artifacts["reviewed"], context.config.demonstrations_per_action)


def _termination(artifacts: Artifacts, _context: BuildContext) -> Termination | None:
    return learn_termination(artifacts["evidence"])


def _tools(artifacts: Artifacts, context: BuildContext) -> list[ToolRule]:
    """Tool-API rules: write effects, queries, preconditions, empty answers (look-ups judge the entity store's
    completeness by the trajectory families, i.e. tasks, that showed each record)."""
    from worldsmith.worldbook.build import trajectory_family  # build.py orchestrates these stages

    families = {e.id: trajectory_family(e) for e in artifacts["episodes"]}
    return learn_tool_rules(artifacts["evidence"], context.config, families=families)


def _compile(artifacts: Artifacts, context: BuildContext) -> Worldbook:
    """The book, with every reviewed-supported rule that does not hold out made tentative (`worldbook.holdout`:
    family span, one-family literals, the route stage's held-out exactness), the demotions listed in the book."""
    from worldsmith.worldbook.build import trajectory_family  # build.py orchestrates these stages

    episodes = artifacts["episodes"]
    env_ids = sorted({e.env_id for e in episodes if e.env_id})
    env_id = context.env_id or (env_ids[0] if len(env_ids) == 1 else None)
    action_schema, state_schema = artifacts["schema"]
    routes: RouteTable | None = artifacts.get("routes")
    rules, tool_rules, demotions = apply_holdout(artifacts["reviewed"], artifacts["tool_rules"], artifacts["evidence"],
                                                 {e.id: trajectory_family(e) for e in episodes}, routes)
    return Worldbook(name=context.name, env_id=env_id, action_schema=action_schema,
                     state_schema=state_schema, rules=rules, contracts=artifacts["contracts"],
                     notes=artifacts["notes"], demonstrations=artifacts["demonstrations"],
                     evidence=artifacts["evidence"], routes=routes, termination=artifacts["termination"],
                     tool_rules=tool_rules, demotions=demotions).canonical()


BOOK_STAGES: tuple[BookStage, ...] = (
    BookStage("align", ("episodes",), "evidence", list[Evidence], _align),
    BookStage("extract", ("evidence",), "extractions", list[Extraction], _extract, transient=True),
    BookStage("rules", ("evidence",), "rules", CandidateRules, _rules),
    BookStage("review", ("evidence", "rules"), "reviewed", list[Rule], _review),
    BookStage("schema", ("evidence", "reviewed"), "schema", tuple[ActionSchema, StateSchema], _schema),
    BookStage("contracts", ("evidence", "reviewed"), "contracts", list[ObservationContract], _contracts),
    BookStage("notes", ("evidence", "reviewed"), "notes", list[Note], _notes),
    BookStage("demonstrations", ("evidence", "reviewed"), "demonstrations", list[Demonstration], _demonstrations),
    BookStage("termination", ("evidence",), "termination", Termination | None, _termination),
    BookStage("tools", ("episodes", "evidence"), "tool_rules", list[ToolRule], _tools),
    BookStage("compile", ("episodes", "schema", "reviewed", "contracts", "notes", "demonstrations", "evidence",
                          "termination", "tool_rules", "routes?"), "book", None, _compile),
)
STAGES: tuple[str, ...] = stage_names(BOOK_STAGES)

"""Evaluation: how faithful a simulator is, with honest intervals and costs.

    from worldsmith.evals import EvalConfig, run_eval
    run = run_eval(EvalConfig(name="alf", book="alfworld", dataset="alfworld", split="test",
                              methods=["harness", "nearest"], protocol="next-obs"), workspace)
    run.report.pairs["harness vs nearest"]["exact_match"].mean_diff   # with its interval (.low, .high, .n)
    RunStore(workspace.root).run("alf").read_report()                  # the same `EvalReport`, read back

Protocols (next-observation, open-loop drift, world-to-real), text metrics and an LLM judge, the
paired bootstrap over episodes, per-turn novelty (exact match on the knowable turns), leakage control, the run store (config, records, report, plots,
progress), the construction-size curve and AgentWorldBench interop.
"""

from worldsmith.evals.agentworldbench import (
    AWBRow,
    predict_rows,
    read_rows,
    row_episode,
    score_rows,
    write_rows,
)
from worldsmith.evals.bootstrap import (
    SMALL_SAMPLE,
    Interval,
    bootstrap_mean,
    bootstrap_ratio,
    pair_name,
    small_sample_note,
    summarize,
)
from worldsmith.evals.curves import DEFAULT_SIZES, CurveResult, ablation_methods, construction_size_curve
from worldsmith.evals.heldout import (
    FlippedTurn,
    HeldOut,
    HeldOutDelta,
    MetricDelta,
    TurnScore,
    VersionScores,
    check_heldout,
    edited_actions,
    heldout_delta,
    load_heldout,
    score_version,
)
from worldsmith.evals.judge import (
    DIMENSIONS,
    FAMILIES,
    Judge,
    JudgeVerdict,
    judge_family,
    judge_messages,
    judge_total,
    open_judge,
    parse_verdict,
)
from worldsmith.evals.leakage import LeakageError, book_episode_ids, check_leakage, evidence_families
from worldsmith.evals.metrics import (
    METRICS,
    edit_similarity,
    exact_match,
    flatten_json,
    json_f1,
    metric_scores,
    token_f1,
    word_tokens,
)
from worldsmith.evals.misses import miss_groups, paired_miss_differences, why_missed
from worldsmith.evals.novelty import NoveltyIndex, text_values, vocabulary
from worldsmith.evals.proposal_effects import ProposalReport, fidelity_line, propose_with_effect
from worldsmith.evals.proposal_jobs import (
    ProposalJobError,
    ProposalJobStatus,
    ProposalLaunch,
    launch_proposal,
    list_proposals,
    proposal_status,
)
from worldsmith.evals.protocols import (
    ABLATIONS,
    PROTOCOLS,
    UsageMeter,
    drift_records,
    first_divergence,
    make_method,
    method_kind,
    needs_llm,
    next_obs_records,
    w2r_record,
)
from worldsmith.evals.records import RECORD_COLUMNS, Journal, records_frame, write_records
from worldsmith.evals.report import NOVELTY_METRICS, REPORT_METRICS, build_report, write_report
from worldsmith.evals.report_model import EvalReport, MetricCell, PairCell, ScopeBlock
from worldsmith.evals.run import EvalConfig, EvalRun, RunConflictError, run_eval, run_folder
from worldsmith.evals.runstore import RunFileError, RunFolder, RunProgress, RunStore

__all__ = [
    "ABLATIONS",
    "AWBRow",
    "CurveResult",
    "DEFAULT_SIZES",
    "DIMENSIONS",
    "EvalConfig",
    "EvalReport",
    "EvalRun",
    "FAMILIES",
    "FlippedTurn",
    "HeldOut",
    "HeldOutDelta",
    "Interval",
    "Journal",
    "Judge",
    "JudgeVerdict",
    "LeakageError",
    "METRICS",
    "MetricCell",
    "MetricDelta",
    "NOVELTY_METRICS",
    "NoveltyIndex",
    "PROTOCOLS",
    "PairCell",
    "ProposalReport",
    "RECORD_COLUMNS",
    "REPORT_METRICS",
    "RunConflictError",
    "RunFileError",
    "RunFolder",
    "RunProgress",
    "RunStore",
    "ScopeBlock",
    "TurnScore",
    "UsageMeter",
    "VersionScores",
    "ablation_methods",
    "book_episode_ids",
    "SMALL_SAMPLE",
    "small_sample_note",
    "bootstrap_mean",
    "bootstrap_ratio",
    "build_report",
    "check_heldout",
    "check_leakage",
    "construction_size_curve",
    "drift_records",
    "edit_similarity",
    "edited_actions",
    "evidence_families",
    "exact_match",
    "fidelity_line",
    "first_divergence",
    "flatten_json",
    "heldout_delta",
    "json_f1",
    "judge_family",
    "judge_messages",
    "judge_total",
    "load_heldout",
    "make_method",
    "method_kind",
    "needs_llm",
    "next_obs_records",
    "open_judge",
    "pair_name",
    "parse_verdict",
    "predict_rows",
    "propose_with_effect",
    "read_rows",
    "records_frame",
    "row_episode",
    "run_eval",
    "run_folder",
    "metric_scores",
    "score_rows",
    "score_version",
    "summarize",
    "text_values",
    "token_f1",
    "vocabulary",
    "w2r_record",
    "word_tokens",
    "write_records",
    "write_report",
    "write_rows",
    "miss_groups",
    "paired_miss_differences",
    "why_missed",
    "ProposalJobError",
    "ProposalJobStatus",
    "ProposalLaunch",
    "launch_proposal",
    "list_proposals",
    "proposal_status",
]

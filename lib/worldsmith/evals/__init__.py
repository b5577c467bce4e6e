"""Evaluation: how faithful a simulator is, with honest intervals and costs.

    from worldsmith.evals import EvalConfig, run_eval
    run = run_eval(EvalConfig(name="alf", book="alfworld", dataset="alfworld", split="test",
                              methods=["harness", "nearest"], protocol="next-obs"), workspace)
    run.report.pairs["harness vs nearest"]["exact_match"].mean_diff   # with its interval (.low, .high, .n)
    EvalRunStore(workspace.root).run("alf").read_report()                  # the same `EvalReport`, read back

Protocols (next-observation, open-loop drift, world-to-real), text metrics and an LLM judge, the
paired bootstrap over episodes, per-turn novelty (exact match on the knowable turns), leakage control, the run store (config, records, report, plots,
progress), the construction-size curve and AgentWorldBench interop.

Exported: running (`EvalConfig`, `run_eval`, `metric`, `metric_names`), the report (`EvalReport`, `MetricCell`,
`PairCell`, `ScopeBlock`, `small_sample_note`), the run store (`EvalRunStore`, `RunFolder`, `RunProgress`) and its records (`EvalRecord`),
held-out deltas (`HeldOut`, `HeldOutDelta`), proposals with their effect (`ProposalReport`,
`propose_with_effect`), active collection (`explore`, `ExploreConfig`, `ExploreReport`) and
`construction_size_curve`. Namespaces: `consistency` (open-loop probes of the invariants every stateful API obeys:
`check_consistency`, `ConsistencyReport`), `heldout` (scoring book versions on held-out turns), `proposal_jobs`
(proposals as background jobs), `misses` and `clusters` (why predictions missed), `envmatch` (which
environments a book simulates), `judge` (the LLM judge), `plots` (the report's figures). Protocols, bootstrap
(`Interval`), the records' journal and AgentWorldBench rows: import from their modules.
"""

from worldsmith.evals import clusters, consistency, envmatch, heldout, judge, misses, plots, proposal_jobs
from worldsmith.evals.bootstrap import SMALL_SAMPLE, small_sample_note
from worldsmith.evals.curves import construction_size_curve
from worldsmith.evals.eval_records import EvalRecord
from worldsmith.evals.eval_runs import EvalRunStore, RunFileError, RunFolder, RunProgress, read_json_file
from worldsmith.evals.explore import (
    STRATEGIES,
    ExploreConfig,
    ExploreProgress,
    ExploreReport,
    explore,
    load_explore_report,
)
from worldsmith.evals.heldout import HeldOut, HeldOutDelta
from worldsmith.evals.metrics import METRICS, metric, metric_names
from worldsmith.evals.proposal_effects import ProposalReport, fidelity_line, propose_with_effect
from worldsmith.evals.report_model import EvalReport, MetricCell, PairCell, ScopeBlock
from worldsmith.evals.run import EvalConfig, EvalRun, RunConflictError, run_eval
from worldsmith.worldbook.leakage import LeakageError

__all__ = [
    "METRICS",
    "SMALL_SAMPLE",
    "STRATEGIES",
    "EvalConfig",
    "EvalRecord",
    "EvalReport",
    "EvalRun",
    "EvalRunStore",
    "ExploreConfig",
    "ExploreProgress",
    "ExploreReport",
    "HeldOut",
    "HeldOutDelta",
    "LeakageError",
    "MetricCell",
    "PairCell",
    "ProposalReport",
    "RunConflictError",
    "RunFileError",
    "RunFolder",
    "RunProgress",
    "ScopeBlock",
    "clusters",
    "consistency",
    "construction_size_curve",
    "envmatch",
    "explore",
    "fidelity_line",
    "heldout",
    "judge",
    "load_explore_report",
    "metric",
    "metric_names",
    "misses",
    "plots",
    "proposal_jobs",
    "propose_with_effect",
    "read_json_file",
    "run_eval",
    "small_sample_note",
]

"""`EvalReport`: report.json read back as a typed model (what `run_eval` returns and the run store reads).

The JSON on disk stays the contract (`report.build_report` writes it as a plain dict, byte for byte as
before); these models only validate and type what readers use. Every model allows unknown keys and
gives optional fields a default, so reports written by older or newer code still load:
`report.model_dump(mode="json", exclude_unset=True)` gives back the dict that was read, but for `leakage`:
a `worldbook.LeakageReport`, whose reader upgrades a report stored before its version 2 (it dumps as version 2).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from worldsmith.evals.run_provenance import eval_provenance
from worldsmith.llm.provenance import NumberProvenance
from worldsmith.worldbook.leakage_report import LeakageReport

__all__ = [
    "BootstrapSettings",
    "CostRow",
    "EvalReport",
    "FidelityPoint",
    "FoldSummary",
    "JudgeStats",
    "MethodModel",
    "MetricCell",
    "PairCell",
    "ProtocolBlock",
    "ScopeBlock",
    "W2RMethod",
    "W2RPolicy",
]


class _Open(BaseModel):
    """Unknown keys are kept (an older or newer report still loads and dumps back unchanged)."""

    model_config = ConfigDict(extra="allow")


class MetricCell(_Open):
    """A metric's mean over records with its bootstrap interval, the records and trajectories behind it."""

    mean: float | None = None
    low: float | None = None
    high: float | None = None
    n: int | None = None
    trajectories: int | None = None  # absent in reports written before trajectories were counted


class PairCell(_Open):
    """A pair's mean paired difference (A - B) with its interval."""

    mean_diff: float | None = None
    low: float | None = None
    high: float | None = None
    n: int | None = None
    trajectories: int | None = None


class ScopeBlock(_Open):
    """Per method and metric, and per pair and metric: the pooled results, or one environment's, or seen/unseen."""

    methods: dict[str, dict[str, MetricCell]] = Field(default_factory=dict)
    pairs: dict[str, dict[str, PairCell]] = Field(default_factory=dict)


class FidelityPoint(MetricCell):
    """fidelity@t of a drift run at step `t`."""

    t: int


class FoldSummary(_Open):
    """One fold of a cross-fitted run: its book, what it was built from and evaluated on."""

    fold: int
    book: str | None = None
    book_version: str | None = None
    construction_episodes: int | None = None
    episodes: int | None = None
    families: int | None = None
    leakage_ok: bool = False


class CostRow(_Open):
    """A method's mean cost per record."""

    model_calls: float | None = None
    prompt_tokens: float | None = None
    completion_tokens: float | None = None
    latency_s: float | None = None
    cost_usd: float | None = None


class JudgeStats(_Open):
    records: int = 0
    valid: int = 0
    invalid: int = 0


class MethodModel(_Open):
    """The model a method used: its spec or "none", what it was trained on (where its folder says), and whether the
    run recorded it (False: a run made before reports named each method's model, read back by the rule of its time)."""

    model: str = "none"
    trained_on: str | None = None
    recorded: bool = True


def _legacy_model_use(method: str) -> bool:
    """Whether a run made before per-method models were recorded gave `method` its model: every model method and
    every harness kind (the harness then ran a model's tool loop under its plain name)."""
    from worldsmith.evals.protocols import needs_llm  # on use: the report model stays light to import

    try:
        return method.startswith("harness") or needs_llm(method)
    except ValueError:  # a plug-in no longer registered: its name alone does not say
        return False


class BootstrapSettings(_Open):
    """How the intervals were made (absent in older reports: their configuration says)."""

    resamples: int | None = None
    seed: int | None = None
    confidence: float | None = None


class W2RMethod(_Open):
    """A method's world-to-real success under one policy, and its consistency with the real success."""

    w2r: float | None = None
    w2r_low: float | None = None
    w2r_high: float | None = None
    consistency: float | None = None
    consistency_low: float | None = None
    consistency_high: float | None = None
    n: int | None = None
    trajectories: int | None = None
    sim_steps: float | None = None


class W2RPolicy(W2RMethod):
    """One policy: its real success, every method's numbers, and the first method's at the top level (flat shape)."""

    real: float | None = None
    real_low: float | None = None
    real_high: float | None = None
    method: str | None = None
    methods: dict[str, W2RMethod] = Field(default_factory=dict)

    def by_method(self) -> dict[str, W2RMethod]:
        """Every method's numbers; a flat entry (one method at the top level, no `methods`) as its one method."""
        return self.methods or {self.method or "": self}


class ProtocolBlock(ScopeBlock):
    """What a report says about one protocol's records: the pooled `methods` and `pairs` with the scopes, counts,
    costs and the protocol's own sections (drift and live: fidelity@t, divergence, done agreement; W2R: `w2r`)."""

    metrics: list[str] = Field(default_factory=list)
    per_env: dict[str, ScopeBlock] = Field(default_factory=dict)
    seen_unseen: dict[str, ScopeBlock] = Field(default_factory=dict)
    counts: dict[str, int] = Field(default_factory=dict)
    episodes: int = 0
    errors: dict[str, int] = Field(default_factory=dict)
    cost: dict[str, CostRow] = Field(default_factory=dict)
    fidelity_metric: str | None = None
    fidelity_at_t: dict[str, list[FidelityPoint]] = Field(default_factory=dict)
    first_divergence: dict[str, dict[str, int | None]] = Field(default_factory=dict)
    done_agreement: dict[str, MetricCell] = Field(default_factory=dict)
    w2r: dict[str, W2RPolicy] = Field(default_factory=dict)
    judge_stats: JudgeStats | None = None
    failures: dict[str, str | None] = Field(default_factory=dict, description="Per method, the failure analysis's "
                                            "lead sentence (`evals.misses.miss_headline`: novel turns first).")
    provenance: dict[str, NumberProvenance] = Field(default_factory=dict, description="Per method, what produced its "
                                                    "numbers (absent in reports written before it was recorded).")


class EvalReport(ProtocolBlock):
    """report.json of an evaluation run: the primary protocol's block at the top level (a run of one protocol, or
    the open-loop one of several), every protocol's in `by_protocol` when the run has several."""

    run: str = ""
    protocol: str = ""
    protocols: list[str] = Field(default_factory=list, description="The run's protocols, primary first (absent "
                                 "in a run of one protocol).")
    by_protocol: dict[str, ProtocolBlock] = Field(default_factory=dict)
    fingerprint: str = ""
    config: dict[str, Any] = Field(default_factory=dict)
    judge: str | None = None
    leakage: LeakageReport = Field(default_factory=LeakageReport)  # read by its own versioned reader
    seeds: dict[str, Any] = Field(default_factory=dict)
    bootstrap: BootstrapSettings = Field(default_factory=BootstrapSettings)
    created: str | None = None
    plots: dict[str, list[str]] = Field(default_factory=dict)
    judge_usage: dict[str, int] | None = None
    folds: list[FoldSummary] = Field(default_factory=list)
    excluded: dict[str, int] = Field(default_factory=dict, description="Episodes left out before the run, by why "
                                     "(`dialogue_only`: no tool turn to predict).")
    models: dict[str, MethodModel] = Field(default_factory=dict, description="Per method the model it used "
                                           "(absent in reports written before it was recorded).")

    def method_models(self) -> dict[str, MethodModel]:
        """Per method the model it used; for an older report, inferred from its configuration (`recorded` False)."""
        if self.models:
            return self.models
        spec = self.config.get("llm_spec") or self.config.get("llm")
        methods = list(self.counts) or list(self.config.get("methods") or [])
        return {method: MethodModel(model=spec, recorded=False) if spec and _legacy_model_use(method)
                else MethodModel(recorded=False) for method in methods}

    def provenance_of(self, method: str, protocol: str | None = None) -> NumberProvenance:
        """What produced `method`'s numbers under `protocol` (default the primary); for an older report, inferred from
        its configuration and counts (`recorded` False), fields it does not say "unknown"."""
        block = self.block(protocol)
        if method in block.provenance:
            return block.provenance[method]
        used = self.method_models().get(method)
        return eval_provenance(self.run, self.config, method, protocol or self.protocol,
                               model=used.model if used is not None else None,
                               trained_on=used.trained_on if used is not None else None,
                               n=block.counts.get(method), episodes=block.episodes or None, recorded=False)

    def protocol_names(self) -> list[str]:
        """The run's protocols, primary first (a run of one protocol: that one)."""
        return self.protocols or ([self.protocol] if self.protocol else [])

    def for_protocol(self, protocol: str) -> EvalReport:
        """The report as a run of `protocol` alone would read: its block at the top level (KeyError: no such
        protocol in the run)."""
        if protocol == self.protocol:
            return self
        block = self.by_protocol[protocol]
        return self.model_copy(update={**{name: getattr(block, name) for name in ProtocolBlock.model_fields},
                                       "protocol": protocol})

    def block(self, protocol: str | None = None) -> ProtocolBlock:
        """One protocol's block (default the primary's); an empty one when the run has no such protocol."""
        if protocol is None or protocol == self.protocol:
            return self
        return self.by_protocol.get(protocol) or ProtocolBlock()

    def scope(self, env_id: str | None = None, split: str | None = None) -> ScopeBlock:
        """The pooled results, one environment's (`per_env`) or seen/unseen tasks' (`split`); empty when absent."""
        if env_id is not None:
            return self.per_env.get(env_id) or ScopeBlock()
        if split is not None:
            return self.seen_unseen.get(split) or ScopeBlock()
        return ScopeBlock(methods=self.methods, pairs=self.pairs)

    def to_json(self) -> dict[str, Any]:
        """The report as read or written (report.json's dict): unset defaults are left out."""
        return self.model_dump(mode="json", exclude_unset=True)

"""`EvalConfig`: what an evaluation run is, validated, and the part of it that changes records (the fingerprint).

Kept apart from `run` so the unit workers and the run store can name the configuration without the runner.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from worldsmith.evals.protocols import DEFAULT_PROTOCOLS, PROTOCOL_ORDER, Protocol, method_kind, needs_llm
from worldsmith.util.names import check_name

__all__ = ["POLICY_CHOICES", "EvalConfig"]

# The policies of W2R and live: the environment package's (`envs.policies.make_policy`) but replay, and the
# exploring policy (`sim.exploring`), which reads the book.
POLICY_CHOICES = ("expert", "random", "probing", "curious", "exploring", "llm")

# Fields that do not change any record: left out of the fingerprint, so a rerun with other bootstrap
# settings (or under a copy's name) reuses the records.
_NOT_FINGERPRINTED = frozenset({"name", "resamples", "confidence", "workers", "ray_address"})


class EvalConfig(BaseModel):
    """What an evaluation run is: book, episodes, methods, protocol, models, seeds and bootstrap settings."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Run name: the folder under <workspace>/runs/eval/.")
    book: str | None = Field(default=None, description="Worldbook name in the workspace store (with folds: only the "
                                                       "name of the fold books, default the dataset's).")
    book_version: str | None = Field(default=None, description="Version (default: HEAD when the run starts).")
    folds: int = Field(default=0, ge=0, description="Cross-fit: K >= 2 folds by trajectory family, each evaluated "
                                                     "with a book built from the others (0: one stored book).")
    drop_leaked: bool = Field(default=False, description="Leave leaked episodes out of the evaluation set (the report "
                                                         "names them and why) instead of refusing the run.")
    dataset: str = Field(description="Dataset of the held-out episodes.")
    split: str | None = Field(default=None, description="Split of the dataset to evaluate on (default: all).")
    env: str | None = Field(default=None, description="Only episodes whose env id starts with this (e.g. alfworld).")
    episodes: list[str] | None = Field(default=None, description="Only these episode ids.")
    max_episodes: int | None = Field(default=None, ge=1, description="At most this many episodes (sorted by id).")
    max_turns: int | None = Field(default=None, ge=1, description="Score at most this many turns per episode.")
    methods: list[str] = Field(default_factory=lambda: ["harness", "nearest"], min_length=1)
    protocols: list[Protocol] | None = Field(
        default=None, description="The protocols, each scored on every (method, episode) and reported apart; open "
                                  "loop first (default: drift and next-obs, open loop and teacher forced).")
    protocol: Protocol | None = Field(
        default=None, description="One protocol alone (the older way to choose it); once validated, the primary "
                                  "(first) of `protocols`.")
    llm: str | None = Field(default=None, description="Model spec of the model-backed methods.")
    judge: str | None = Field(default=None, description="Model spec of the LLM judge (none: no judge).")
    policy: str = Field(default="expert", description="W2R and live policy: one of POLICY_CHOICES (llm: on --llm).")
    max_steps: int = Field(default=50, ge=1, description="W2R, live: the policy's step limit in simulation and for "
                                                         "real.")
    real_env: str | None = Field(default=None, description="W2R, live: registry name of the real environment "
                                                           "(default: from each episode's metadata / env id).")
    divergence_metric: Literal["exact_match", "token_f1"] = "exact_match"
    divergence_threshold: float = Field(default=1.0, gt=0.0, le=1.0,
                                        description="Drift: a turn diverges when the metric is below this.")
    max_tokens: int = Field(default=256, ge=1)
    resamples: int = Field(default=10_000, ge=100)
    confidence: float = Field(default=0.95, gt=0.5, lt=1.0)
    seed: int = 0
    workers: int = Field(default=0, ge=0, description="Units at once: a local process pool when >= 2 (0, 1: in "
                                                       "this process); with ray_address at most this many Ray tasks "
                                                       "(0: the cluster's CPUs).")
    ray_address: str | None = Field(default=None, description="Run the units as Ray tasks: 'local' starts a Ray on "
                                                               "this machine, else a cluster address "
                                                               "(ray://head:10001 or head:6379).")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_name(value, "run")

    @field_validator("methods")
    @classmethod
    def _methods(cls, value: list[str]) -> list[str]:
        for method in value:
            method_kind(method)
        if len(set(value)) != len(value):
            raise ValueError(f"methods repeat: {value}")
        return value

    @model_validator(mode="after")
    def _protocols(self) -> EvalConfig:
        chosen = self.protocols or ([self.protocol] if self.protocol else list(DEFAULT_PROTOCOLS))
        if len(set(chosen)) != len(chosen):
            raise ValueError(f"protocols repeat: {chosen}")
        if self.protocol and self.protocol not in chosen:
            raise ValueError(f"protocol {self.protocol!r} is not among protocols {chosen}: set one of them")
        self.protocols = sorted(chosen, key=PROTOCOL_ORDER.index)
        self.protocol = self.protocols[0]
        return self

    @property
    def primary(self) -> Protocol:
        """The protocol the report leads with: open loop where the run has it."""
        return (self.protocols or [self.protocol or DEFAULT_PROTOCOLS[0]])[0]

    @model_validator(mode="after")
    def _book(self) -> EvalConfig:
        if self.folds == 1:
            raise ValueError("folds: 0 (a stored book) or at least 2 (cross-fitted books)")
        if not self.folds and not self.book:
            raise ValueError("set book (--book NAME), or cross-fit with folds >= 2 (--folds K)")
        if self.folds and self.book_version:
            raise ValueError("book_version names a stored book: a cross-fitted run builds its own")
        return self

    @model_validator(mode="after")
    def _models(self) -> EvalConfig:
        needing = [m for m in self.methods if needs_llm(m)]
        if needing and not self.llm:
            raise ValueError(f"methods {', '.join(needing)} need a model: set llm (--llm SPEC)")
        if self.policy not in POLICY_CHOICES:
            raise ValueError(f"policy {self.policy!r}: choose {', '.join(POLICY_CHOICES)}")
        if self.policy == "llm" and {"w2r", "live"} & set(self.protocols or ()) and not self.llm:
            raise ValueError("the llm policy needs a model: set llm (--llm SPEC)")
        return self

    def fingerprinted(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump(mode="json").items() if k not in _NOT_FINGERPRINTED}

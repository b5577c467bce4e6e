"""The agent route as an answer source (`model`, stage "model"): a model with a brief and a bounded tool loop.

It runs only when routing chose no answer and no rule rendered one, and only with a model attached to the harness
(`sim.agent.run_agent`); never for an action the book has never seen. The audit records its calls, tokens and
tool calls whether or not it ends in a valid submission; without one, the fallback stage answers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from worldsmith.sim.sources.base import Answer, AnswerSource, CandidateAnswer, SourceContext, Step
from worldsmith.sim.sources.registry import answer_source

if TYPE_CHECKING:
    from worldsmith.sim.harness import Harness

__all__ = ["ModelSource"]


class ModelSource:
    """The harness's model, asked through the agent's tool loop."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness

    def reset(self, opening: str) -> None:
        """The agent reads the harness's history itself."""

    def observe(self, step: Step, observation: str) -> None:
        """The agent reads the harness's history itself."""

    def propose(self, step: Step) -> list[CandidateAnswer]:
        if self.harness.llm is None or step.audit is None:
            return []
        from worldsmith.sim.agent import run_agent  # the agent imports the harness's types

        submitted = run_agent(self.harness, step.action, step.name, step.arguments, step.audit)
        if submitted is None:
            return []
        return [CandidateAnswer("model", submitted.observation, outcome=submitted.outcome, effects=list(submitted.effects))]

    def snapshot(self) -> dict[str, Any]:
        return {}


@answer_source("model", stage="model", unseen_actions=False,
               answers=(Answer("model", route="agent", fix_turns=False),))
def _model(context: SourceContext) -> AnswerSource:
    """The attached model, through the agent route."""
    return ModelSource(context.harness)

"""Structured output against a real backend that really writes malformed JSON: the shipped tiny model.

The tiny model (hf backend, no guided decoding) cannot produce a valid object; the repair loop
must show it its output and the errors, give up after the bounded retries, and raise a typed
error that carries what the model said. (Guided decoding on vLLM: tests/llm/test_vllm.py.)
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from worldsmith.llm import StructuredOutputError, TrackedLLM, chat_structured, default_model_spec, make_llm
from worldsmith.llm.calllog import CallLog


class Verdict(BaseModel):
    valid: bool
    reason: str
    confidence: float


@pytest.mark.integration
def test_tiny_model_output_is_repaired_then_rejected_with_a_typed_error(tmp_path) -> None:
    spec = default_model_spec()
    if spec is None:
        pytest.fail("the bundled tiny model is missing: run data_samples/make_tiny_model.py")
    log = CallLog(tmp_path / "calls.sqlite")
    llm = TrackedLLM(make_llm(spec), log=log, run="structured", component="judge")
    with pytest.raises(StructuredOutputError, match="no valid Verdict after 3 attempts") as caught:
        chat_structured(llm, [{"role": "user", "content": "Is 'open fridge' valid here? Answer in JSON."}], Verdict,
                        retries=2, max_tokens=24)
    assert caught.value.errors and caught.value.last_output.strip()
    calls = log.calls(run="structured")
    assert len(calls) == 3  # the first try and two repairs, each a real model call
    repair_prompt = calls[0].messages[-1]["content"]  # newest first: the last repair
    assert "not valid" in repair_prompt and '"confidence"' in repair_prompt
    llm.close()

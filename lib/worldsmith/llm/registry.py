"""LLM backends by kind (`tiny:`, `hf:`, `vllm:`, `openai:`), registered like importers and environments.

A backend names its factory as text (`"module:function"`), so parsing or listing specs never
imports torch or vllm; `make_llm` imports the factory when a model is opened. A researcher's own
backend registers with `register_backend(BackendSpec(...))` and is then accepted in every spec,
listed by `worldsmith llm models` and offered by the workbench.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from worldsmith.llm.base import LLM
from worldsmith.util.registry import NotRegisteredError, Registry

if TYPE_CHECKING:
    from worldsmith.llm.spec import ModelSpec

__all__ = ["BACKENDS", "ENTRY_POINT_GROUP", "BackendSpec", "UnknownBackendError", "backend", "backends",
           "register_backend"]


@dataclass(frozen=True)
class BackendSpec:
    """One backend: its spec prefix, where its factory lives, the package it needs, how its model is named."""

    kind: str
    entry_point: str  # "module:function"; the function takes a ModelSpec and returns an LLM
    package: str  # the Python package it needs (what `worldsmith llm models` checks)
    example: str  # how a spec of this kind is written, for error messages
    local_folder: bool = False  # the model is a local folder: checked when parsed, made absolute when resolved
    base_url: bool = False  # the spec may end in @BASE_URL (an OpenAI-compatible server)

    def available(self) -> bool:
        return importlib.util.find_spec(self.package) is not None

    def factory(self) -> Callable[[ModelSpec], LLM]:
        module_name, _, attribute = self.entry_point.partition(":")
        return getattr(importlib.import_module(module_name), attribute)


class UnknownBackendError(NotRegisteredError, ValueError):
    """No backend is registered under this spec prefix (a ValueError, as the lookup's error always was)."""


ENTRY_POINT_GROUP = "worldsmith.llm_backends"
# Every backend by kind; an installed package's `worldsmith.llm_backends` entry point (a BackendSpec, or a module
# that calls `register_backend`) is loaded on the first lookup.
def _check(kind: str, spec: BackendSpec) -> None:
    """Every registration, an entry point's included: a BackendSpec under its kind, a lower-case identifier."""
    if not isinstance(spec, BackendSpec) or spec.kind != kind:
        raise ValueError(f"backend {kind!r} must be registered as a BackendSpec of kind {kind!r}, not {spec!r}")
    if kind.lower() != kind or not kind.isidentifier():
        raise ValueError(f"backend kind {kind!r} must be a lower-case identifier (it is a spec prefix)")


BACKENDS: Registry[BackendSpec] = Registry("backend", entry_point_group=ENTRY_POINT_GROUP,
                                           not_found=UnknownBackendError, known_label="choose from", check=_check)
_REGISTRY = BACKENDS  # the name tests and older plug-ins use


def register_backend(spec: BackendSpec, *, replace: bool = False) -> BackendSpec:
    """Add a backend under its kind (lower case); a taken kind is refused unless `replace`."""
    return BACKENDS.register(spec.kind, spec, replace=replace)


def backends() -> dict[str, BackendSpec]:
    """All registered backends by kind, in registration order (a copy)."""
    return BACKENDS.as_dict()


def backend(kind: str) -> BackendSpec:
    """The backend registered as `kind`; UnknownBackendError (a ValueError) naming the registered ones."""
    return BACKENDS.get(kind)


for _spec in (
    BackendSpec("tiny", "worldsmith.llm.hf:from_spec", "transformers", "tiny:PATH", local_folder=True),
    BackendSpec("hf", "worldsmith.llm.hf:from_spec", "transformers", "hf:PATH", local_folder=True),
    BackendSpec("vllm", "worldsmith.llm.vllm_backend:from_spec", "vllm", "vllm:PATH_OR_NAME"),
    BackendSpec("openai", "worldsmith.llm.openai_backend:from_spec", "openai", "openai:MODEL@BASE_URL", base_url=True),
):
    register_backend(_spec)

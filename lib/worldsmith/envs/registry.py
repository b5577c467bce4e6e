"""Named environment specs and `make()`, in the manner of Gymnasium's registry.

A spec names its entry point as text (`"module:Class"`) so listing environments never imports
heavy packages (TextWorld, the ScienceWorld JVM bridge), and a worker process can rebuild the
same environment from the spec's name and keyword arguments alone.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field
from typing import Any

from worldsmith.envs.base import Env, EnvUnavailableError
from worldsmith.util.registry import NotRegisteredError, Registry

__all__ = ["ENTRY_POINT_GROUP", "ENVS", "EnvSpec", "UnknownEnvError", "available", "make", "register", "registry",
           "spec"]


class UnknownEnvError(NotRegisteredError):
    """No environment is registered under this name (a KeyError, as it always was)."""


@dataclass(frozen=True)
class EnvSpec:
    """How to build one environment and what to expect of it."""

    name: str
    entry_point: str
    description: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    max_steps: int = 50
    deterministic: bool = True
    requires: tuple[str, ...] = ()
    install_hint: str = ""
    parallel: bool = True  # several instances may run in separate processes at once

    def missing(self) -> list[str]:
        """Modules this environment needs that are not installed."""
        return [module for module in self.requires if importlib.util.find_spec(module) is None]

    def make(self, **kwargs: Any) -> Env:
        missing = self.missing()
        if missing:
            hint = f"; {self.install_hint}" if self.install_hint else ""
            raise EnvUnavailableError(f"environment {self.name!r} needs {', '.join(missing)}{hint}")
        module_name, _, attribute = self.entry_point.partition(":")
        factory = getattr(importlib.import_module(module_name), attribute)
        return factory(**{**self.kwargs, **kwargs})


PLUGINS_VARIABLE = "WORLDSMITH_ENV_PLUGINS"
ENTRY_POINT_GROUP = "worldsmith.envs"
# How a researcher's own environment reaches the CLI, the workbench and worker processes: a module named in
# $WORLDSMITH_ENV_PLUGINS (comma-separated) or an installed package's `worldsmith.envs` entry point (an EnvSpec, or
# a module that calls `register`), loaded on the first lookup.
ENVS: Registry[EnvSpec] = Registry("environment", plugins_variable=PLUGINS_VARIABLE,
                                   entry_point_group=ENTRY_POINT_GROUP, not_found=UnknownEnvError)


def register(env_spec: EnvSpec, *, replace: bool = False) -> EnvSpec:
    """Add an environment under its name (a ValueError if the name is taken, unless `replace`)."""
    return ENVS.register(env_spec.name, env_spec, replace=replace)


def registry() -> dict[str, EnvSpec]:
    """All registered specs by name (a copy)."""
    return ENVS.as_dict()


def spec(name: str) -> EnvSpec:
    """The spec registered as `name`; UnknownEnvError (a KeyError) naming the known ones and close matches."""
    return ENVS.get(name)


def make(name: str, **kwargs: Any) -> Env:
    """Build the environment registered as `name`; keyword arguments override the spec's."""
    return spec(name).make(**kwargs)


def available(name: str) -> bool:
    return not spec(name).missing()

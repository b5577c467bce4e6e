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
from worldsmith.util.plugins import import_plugins

__all__ = ["EnvSpec", "UnknownEnvError", "available", "make", "register", "registry", "spec"]


class UnknownEnvError(KeyError):
    """No environment is registered under this name."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown environment"


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


_REGISTRY: dict[str, EnvSpec] = {}
PLUGINS_VARIABLE = "WORLDSMITH_ENV_PLUGINS"


def _load_plugins() -> None:
    """Import the modules named in $WORLDSMITH_ENV_PLUGINS (comma-separated): they register their envs.

    How a researcher's own environment reaches the CLI, the workbench and worker processes.
    """
    import_plugins(PLUGINS_VARIABLE)


def register(env_spec: EnvSpec, *, replace: bool = False) -> EnvSpec:
    if env_spec.name in _REGISTRY and not replace:
        raise ValueError(f"environment {env_spec.name!r} is already registered")
    _REGISTRY[env_spec.name] = env_spec
    return env_spec


def registry() -> dict[str, EnvSpec]:
    """All registered specs by name (a copy)."""
    _load_plugins()
    return dict(_REGISTRY)


def spec(name: str) -> EnvSpec:
    _load_plugins()
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise UnknownEnvError(f"unknown environment {name!r} (known: {known})") from None


def make(name: str, **kwargs: Any) -> Env:
    """Build the environment registered as `name`; keyword arguments override the spec's."""
    return spec(name).make(**kwargs)


def available(name: str) -> bool:
    return not spec(name).missing()

"""Real environments behind one protocol, policies that act in them, and a recorder of episodes.

    from worldsmith.envs import make, record_episode, ExpertPolicy
    env = make("textworld")
    episode = record_episode(env, ExpertPolicy(), env.tasks()[0])

Adapters import their environment package only when built, so listing the registry is cheap
and a missing package is a clear `EnvUnavailableError` naming what to install.

Exported: the protocol (`Env`, `EnvBase`, `Step`), the registry (`make`, `register`, `spec`, `registry`,
`check_env`), policies (`POLICIES`, `make_policy`, the policy classes) and recording (`EpisodeRecorder`,
`record_episode`). Namespace: `collect` (collection runs into a workspace dataset: `collect.collect`,
`collect.CollectConfig`, ...). The environments themselves (`envs.alfworld`, `envs.bfcl`, `envs.agentdojo`, `envs.mcp`, ...) register on import.
"""

from worldsmith.envs import collect
from worldsmith.envs.base import (
    Env,
    EnvBase,
    EnvError,
    EnvUnavailableError,
    InvalidActionError,
    Step,
    TaskLoadError,
    UnknownTaskError,
    action_text,
    as_action,
)
from worldsmith.envs.checker import EnvCheckError, check_env
from worldsmith.envs.llm_policy import LLMPolicy
from worldsmith.envs.policies import (
    POLICIES,
    CuriousPolicy,
    ExpertPolicy,
    Policy,
    RandomPolicy,
    ReplayPolicy,
    make_policy,
)
from worldsmith.envs.probing import ProbingPolicy
from worldsmith.envs.recorder import EpisodeRecorder, episode_id_for, record_episode
from worldsmith.envs.registry import EnvSpec, UnknownEnvError, available, make, register, registry, spec

_ENV_PACKAGES = "pip install 'worldsmith[envs]' (or: make envs)"

register(EnvSpec(
    name="alfworld",
    entry_point="worldsmith.envs.alfworld:ALFWorldEnv",
    description="ALFWorld text games (game.tw-pddl folders of the ALFWorld release); combined experts",
    max_steps=50,
    requires=("alfworld", "textworld"),
    install_hint=_ENV_PACKAGES,
))
register(EnvSpec(
    name="textworld",
    entry_point="worldsmith.envs.textworld:TextWorldEnv",
    description="TextWorld games generated locally with tw-make (custom, cooking, coin collector, treasure hunter)",
    max_steps=100,
    requires=("textworld",),
    install_hint=_ENV_PACKAGES,
))
register(EnvSpec(
    name="scienceworld",
    entry_point="worldsmith.envs.scienceworld:ScienceWorldEnv",
    description="ScienceWorld tasks and variations (needs Java); gold action sequences",
    max_steps=300,
    requires=("scienceworld",),
    install_hint=_ENV_PACKAGES + "; ScienceWorld also needs Java 1.8+ on PATH",
))
register(EnvSpec(
    name="bfcl",
    entry_point="worldsmith.envs.bfcl:BFCLEnv",
    description="BFCL v4 multi-turn function calling on bfcl-eval's in-process backends; ground-truth calls",
    max_steps=100,
    requires=("bfcl_eval", "mpmath"),
    install_hint="pip install --no-deps bfcl-eval mpmath (never a plain install: it pulls a CUDA torch)",
))
for _suite in ("workspace", "slack", "travel"):
    register(EnvSpec(
        name=f"agentdojo-{_suite}",
        entry_point="worldsmith.envs.agentdojo:AgentDojoEnv",
        description=f"AgentDojo's {_suite} tool suite (v1.2.2 user tasks) on its real tools and state; ground-truth "
                    "calls, the task's own utility check",
        kwargs={"suite": _suite},
        max_steps=40,
        requires=("agentdojo", "deepdiff"),
        install_hint="pip install --no-deps agentdojo==0.1.35, then pip install 'worldsmith[envs]' (or: make install)",
    ))
del _suite
register(EnvSpec(
    name="mcp",
    entry_point="worldsmith.envs.mcp:McpEnv",
    description="Any MCP server: a command (stdio) or a URL (streamable HTTP), tasks from a JSON/JSONL file, an "
                "optional reset command per episode; one MCP session per episode",
    max_steps=30,
    deterministic=False,
    requires=("mcp",),
    parallel=False,  # episodes share the server's state (and the file a reset command restores): one at a time
    install_hint="pip install 'worldsmith[serve]' (the official MCP SDK)",
))
register(EnvSpec(
    name="shell",
    entry_point="worldsmith.envs.shell:ShellEnv",
    description="A real bash in a sandbox (fresh home, no network, resource limits); scripted chores with checkers",
    max_steps=30,
))
register(EnvSpec(
    name="toolshop",
    entry_point="worldsmith.envs.toolshop:ToolshopEnv",
    description="A stateful customer-service tool API (users, orders, products, tickets) on a seeded database; "
                "20,000 customer goals per seed, an expert that finds, reads, then writes",
    max_steps=40,
))

__all__ = [
    "POLICIES",
    "CuriousPolicy",
    "Env",
    "EnvBase",
    "EnvCheckError",
    "EnvError",
    "EnvSpec",
    "EnvUnavailableError",
    "EpisodeRecorder",
    "ExpertPolicy",
    "InvalidActionError",
    "LLMPolicy",
    "Policy",
    "ProbingPolicy",
    "RandomPolicy",
    "ReplayPolicy",
    "Step",
    "TaskLoadError",
    "UnknownEnvError",
    "UnknownTaskError",
    "action_text",
    "as_action",
    "available",
    "check_env",
    "collect",
    "episode_id_for",
    "make",
    "make_policy",
    "record_episode",
    "register",
    "registry",
    "spec",
]

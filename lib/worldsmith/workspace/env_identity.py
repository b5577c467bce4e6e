"""Which environment an imported chat log belongs to when it names none and declares no tool schemas.

Such a log's environment can only be read off what it does: the tools it calls and the system prompt its
conversations open with. A train file and a test file of one API call different subsets of its tools, so an id
derived from the called tools alone (`tool_set_env_id`) splits one API in two; a worldbook is built per
environment, so the test file would then be evaluated against no book at all. Here a file joins the environment of
the workspace (or of a file imported before it) that it matches:

- its tools: most of the smaller of the two tool sets is shared (the overlap coefficient, `shared / min(|file|,
  |env|)`, at least `TOOLS_OVERLAP`): the file's tools are a subset of the environment's, or a near one, or the
  file calls nearly all of the environment's tools (a superset, or a near one); the same whichever file came first;
- its system prompt: similar to one of the environment's (word-set Jaccard >= `PROMPT_SIMILAR`) when both have
  one; a side without any leaves the tools to decide. The same prompt (>= `PROMPT_SAME`) asks less of the tools:
  half the smaller set shared (`TOOLS_OVERLAP_SAME_PROMPT`), since two files of one API may each call tools the
  other never does.

One match: the file joins it. Several: the choice is the user's (the import report lists them, the CLI and the
Traces page ask); meanwhile the file keeps an id of its own. None: a new id, from its tools.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import orjson

from worldsmith.traces.import_report import EnvCandidate, EnvDecision
from worldsmith.workspace.dataset import MANIFEST, Dataset

__all__ = [
    "PROMPT_SAME",
    "PROMPT_SIMILAR",
    "TOOLS_OVERLAP",
    "TOOLS_OVERLAP_SAME_PROMPT",
    "EnvChoice",
    "EnvProfile",
    "choose_environment",
    "declared_tool_names",
    "system_prompt",
    "tool_set_env_id",
    "workspace_profiles",
]

TOOLS_OVERLAP = 0.75  # shared tools / the smaller tool set, for a file to join an environment
TOOLS_OVERLAP_SAME_PROMPT = 0.5  # the same, when the system prompts are the same
PROMPT_SIMILAR = 0.5  # word-set Jaccard of two system prompts of one environment (templated parts vary)
PROMPT_SAME = 0.9  # ... and of the same prompt (a date or a name filled in)
_PROMPTS_KEPT = 50  # distinct system prompts counted per profile
_PROMPTS_COMPARED = 10  # the commonest of them compared pairwise
_SAMPLED_EPISODES = 200  # episodes per environment of the workspace read for their system prompt
_WORD = re.compile(r"\w+")


def tool_set_env_id(tool_names: Iterable[str]) -> str:
    """A stable environment id for traces that name none, from the tools they call: the same tool set gives
    the same id (`tools-get_user-update_user`; long sets are cut and keep a digest of the whole set)."""
    names = sorted({name for name in tool_names if name})
    if not names:
        return "tools-none"
    joined = "-".join(names)
    if len(joined) <= 48:
        return f"tools-{joined}"
    digest = hashlib.blake2b("\x1f".join(names).encode(), digest_size=4).hexdigest()
    return f"tools-{joined[:40].rstrip('-')}-{len(names)}-{digest}"


def declared_tool_names(metadata: Any) -> list[str]:
    """The names of the tools a chat log declares (sorted, unique): its OpenAI `tools` list (`{"type": "function",
    "function": {"name": ...}}`, or bare `{"name": ...}` schemas) and legacy `functions` list, as the importer
    keeps them in the episode's metadata (a dict, or its JSON text). Empty when it declares none."""
    if isinstance(metadata, (str, bytes)):
        try:
            metadata = orjson.loads(metadata)
        except orjson.JSONDecodeError:
            return []
    if not isinstance(metadata, dict):
        return []
    names: set[str] = set()
    for key in ("tools", "functions"):
        schemas = metadata.get(key)
        for schema in schemas if isinstance(schemas, list) else []:
            if not isinstance(schema, dict):
                continue
            inner = schema.get("function")
            name = (inner if isinstance(inner, dict) else schema).get("name")
            if isinstance(name, str) and name:
                names.add(name)
    return sorted(names)


def system_prompt(context: Any) -> str | None:
    """The system message a turn's context opens with (stored as `[[role, content, name], ...]` JSON text)."""
    if isinstance(context, (str, bytes)):
        try:
            context = orjson.loads(context)
        except orjson.JSONDecodeError:
            return None
    for event in context if isinstance(context, list) else []:
        if isinstance(event, list) and len(event) >= 2 and event[0] == "system" and isinstance(event[1], str):
            return event[1].strip() or None
    return None


@dataclass(slots=True)
class EnvProfile:
    """What an environment's episodes do: the tools they call or declare, the system prompts they open with."""

    env: str
    tools: set[str] = field(default_factory=set)
    prompts: Counter[str] = field(default_factory=Counter)
    episodes: int = 0

    def add_prompt(self, prompt: str | None, count: int = 1) -> None:
        if prompt and (prompt in self.prompts or len(self.prompts) < _PROMPTS_KEPT):
            self.prompts[prompt] += count

    def merge(self, other: EnvProfile) -> None:
        self.tools |= other.tools
        for prompt, count in other.prompts.items():
            self.add_prompt(prompt, count)
        self.episodes += other.episodes

    def prompt_words(self) -> list[set[str]]:
        return [set(_WORD.findall(p.lower())) for p, _ in self.prompts.most_common(_PROMPTS_COMPARED)]


def prompt_similarity(a: EnvProfile, b: EnvProfile) -> float | None:
    """The best word-set Jaccard between the commonest system prompts of `a` and `b`; None when either has none."""
    left, right = a.prompt_words(), b.prompt_words()
    if not left or not right:
        return None
    return max((len(x & y) / len(x | y) if x | y else 1.0) for x in left for y in right)


def compare(file: EnvProfile, env: EnvProfile) -> EnvCandidate:
    """How `file` relates to `env`: shared tools, the relation of the tool sets, prompt similarity, and whether it
    is a match (see the module docstring)."""
    shared = len(file.tools & env.tools)
    known = shared / len(file.tools) if file.tools else 0.0
    covered = shared / len(env.tools) if env.tools else 0.0
    similarity = prompt_similarity(file, env)
    if not file.tools:
        relation = "no tool calls"
        matches = similarity is not None and similarity >= PROMPT_SIMILAR
    else:
        if file.tools == env.tools:
            relation = "same tools"
        elif known == 1.0:
            relation = "subset"
        elif covered == 1.0:
            relation = "superset"
        elif known >= TOOLS_OVERLAP:
            relation = "near subset"
        elif covered >= TOOLS_OVERLAP:
            relation = "near superset"
        else:
            relation = "overlap" if shared else "disjoint"
        overlap = max(known, covered)  # shared / the smaller set
        enough = shared >= min(2, len(file.tools), len(env.tools))  # one common tool (`think`) is no evidence
        matches = enough and (
            (overlap >= TOOLS_OVERLAP and (similarity is None or similarity >= PROMPT_SIMILAR))
            or (overlap >= TOOLS_OVERLAP_SAME_PROMPT and similarity is not None and similarity >= PROMPT_SAME)
        )
    return EnvCandidate(env=env.env, relation=relation, shared_tools=shared, file_tools=len(file.tools),
                        env_tools=len(env.tools),
                        prompt_similarity=None if similarity is None else round(similarity, 3), matches=matches)


@dataclass(slots=True)
class EnvChoice:
    """The environment a file's episodes get, and why."""

    env: str
    decision: EnvDecision  # "ambiguous": kept apart until the user chooses
    reason: str
    candidates: list[EnvCandidate]


def describe(candidate: EnvCandidate) -> str:
    """`toolshop (tools: near subset, 7 shared of the file's 8 and its 13; system prompt similarity 0.97)`."""
    tools = (f"tools: {candidate.relation}, {candidate.shared_tools} shared of the file's {candidate.file_tools} and "
             f"its {candidate.env_tools}" if candidate.file_tools else "no tool calls")
    prompt = ("no system prompt to compare" if candidate.prompt_similarity is None
              else f"system prompt similarity {candidate.prompt_similarity:.2f}")
    return f"{candidate.env} ({tools}; {prompt})"


def choose_environment(file: EnvProfile, profiles: Iterable[EnvProfile]) -> EnvChoice:
    """The environment `file` joins among `profiles` (see the module docstring); `file.env` is its own id, used when
    it joins none (made distinct from an environment it does not match that happens to call the same tools)."""
    ranked = sorted((compare(file, p) for p in profiles),
                    key=lambda c: (c.matches, c.shared_tools, c.prompt_similarity or 0.0), reverse=True)
    ranked = [c for c in ranked if c.shared_tools or c.matches]
    matches = [c for c in ranked if c.matches]
    if len(matches) == 1:
        return EnvChoice(matches[0].env, "joined", f"joined {describe(matches[0])}", matches)
    own = file.env
    if any(c.env == own for c in ranked):  # the same tool set, but not a match (another system prompt)
        own = f"{own}-{hashlib.blake2b(''.join(sorted(file.prompts)).encode(), digest_size=3).hexdigest()}"
    if matches:
        listed = "; ".join(describe(c) for c in matches)
        return EnvChoice(own, "ambiguous", f"matches {len(matches)} environments ({listed}): kept as {own} until you "
                         "choose one (worldsmith traces relabel DATASET --env CHOSEN --from " + own + ")", matches)
    closest = f" (closest: {describe(ranked[0])})" if ranked else ""
    return EnvChoice(own, "new", "no environment of the workspace shares its tools and system prompt" + closest,
                     ranked[:1])


def workspace_profiles(datasets_dir: Path) -> dict[str, EnvProfile]:
    """Every environment of the workspace's datasets: the tools its episodes call or declare and the system prompts
    of up to `_SAMPLED_EPISODES` of them per dataset."""
    profiles: dict[str, EnvProfile] = {}
    if not datasets_dir.is_dir():
        return profiles
    for folder in sorted(datasets_dir.iterdir()):
        if not (folder / MANIFEST).is_file():
            continue
        try:
            for env, profile in _dataset_profiles(Dataset(folder)).items():
                profiles.setdefault(env, EnvProfile(env)).merge(profile)
        except (duckdb.Error, OSError):  # a dataset that cannot be read has nothing to offer
            continue
    return profiles


def _dataset_profiles(dataset: Dataset) -> dict[str, EnvProfile]:
    conn = dataset.connect()
    profiles: dict[str, EnvProfile] = {}

    def profile(env: str) -> EnvProfile:
        return profiles.setdefault(env, EnvProfile(env))

    for env, count in conn.execute("SELECT env_id, count(*) FROM raw_episodes WHERE env_id IS NOT NULL "
                                   "GROUP BY 1").fetchall():
        profile(env).episodes = int(count)
    for env, tool in conn.execute("SELECT DISTINCT e.env_id, t.action_name FROM raw_turns t JOIN raw_episodes e "
                                  "USING (episode_id) WHERE e.env_id IS NOT NULL AND t.action_name IS NOT NULL"
                                  ).fetchall():
        profile(env).tools.add(tool)
    for env, metadata in conn.execute(
            "SELECT env_id, metadata FROM raw_episodes WHERE env_id IS NOT NULL AND (metadata LIKE '%\"tools\"%' OR "
            "metadata LIKE '%\"functions\"%') QUALIFY row_number() OVER (PARTITION BY env_id) <= 20").fetchall():
        profile(env).tools.update(declared_tool_names(metadata))
    for env, context in conn.execute(
            "SELECT e.env_id, t.context FROM raw_turns t JOIN raw_episodes e USING (episode_id) "
            "WHERE e.env_id IS NOT NULL AND t.turn_index = 0 "
            f"QUALIFY row_number() OVER (PARTITION BY e.env_id) <= {_SAMPLED_EPISODES}").fetchall():
        profile(env).add_prompt(system_prompt(context))
    return profiles

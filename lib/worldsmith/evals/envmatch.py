"""Which of a dataset's environments a worldbook simulates: matched by the actions (tools) they share.

A worldbook is built and evaluated per environment id, and an id derived on import can differ
between two files of one API (`workspace.ingest.tool_set_env_id`). So when a dataset holds no
episode of the book's environment, the ids are not the last word: the environment whose turns
call the actions the book knows (its action schema, rules and tool rules) is the one the book
was meant for, and the message says how to make the ids agree (`worldsmith traces relabel`), or
that no environment of the dataset is the book's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from pydantic import BaseModel, Field

from worldsmith.traces.model import Episode
from worldsmith.workspace import Dataset
from worldsmith.workspace.layout import env_family
from worldsmith.worldbook.model import Worldbook

__all__ = ["COMPATIBLE_SHARE", "EnvMatch", "EnvironmentFit", "book_actions", "construction_actions", "env_matches",
           "match_dataset", "match_episodes"]

COMPATIBLE_SHARE = 0.5  # an environment is the book's when the book knows the actions of at least half its turns


def env_matches(env_id: str | None, wanted: str | None) -> bool:
    """Whether an episode of `env_id` belongs to environment `wanted` as evaluation selects it (`evals.inputs.in_env`):
    any episode when `wanted` is empty, else the same id, the same family (`alfworld` for `alfworld/pick`) or a
    prefix."""
    if not wanted:
        return True
    env = env_id or ""
    return env_family(env) == wanted or env.startswith(wanted)


def book_actions(book: Worldbook) -> set[str]:
    """Every action name `book` knows: its action schema (names and aliases), its rules' and its tool rules' tools."""
    names = {spec.name for spec in book.action_schema.actions}
    names.update(alias for spec in book.action_schema.actions for alias in spec.aliases)
    names.update(rule.action for rule in book.rules)
    names.update(rule.tool for rule in book.tool_rules)
    return {name for name in names if name}


def construction_actions(book: Worldbook) -> set[str]:
    """The actions of the data `book` was built from: those it knows (`book_actions`) and those of its evidence.
    An evaluated turn whose action is not among them is an unseen action: nothing taught the book its answer."""
    return book_actions(book) | {item.action for item in book.evidence if item.action}


class EnvironmentFit(BaseModel):
    """How well one of a dataset's environments fits a book."""

    env: str | None = Field(description="The environment id (None: the episodes that name none).")
    episodes: int = Field(description="Its episodes with at least one turn.")
    turns: int
    known: list[str] = Field(description="Its actions the book knows.")
    unknown: list[str] = Field(description="Its actions the book does not know.")
    share: float = Field(description="Fraction of its turns whose action the book knows.")

    @property
    def label(self) -> str:
        return self.env or "(no environment)"

    @property
    def compatible(self) -> bool:
        return self.turns > 0 and self.share >= COMPATIBLE_SHARE


class EnvMatch(BaseModel):
    """A book against a dataset's environments (best fitting first)."""

    book: str
    book_env: str | None
    dataset: str
    book_actions: list[str]
    environments: list[EnvironmentFit]

    def mismatch(self) -> str | None:
        """`problem()` where the selection holds episodes with turns, of other environments only; None where it holds
        none at all (then the empty selection itself, a split or filter, is the cause to report)."""
        return self.problem() if any(fit.episodes for fit in self.environments) else None

    @property
    def own(self) -> list[EnvironmentFit]:
        """The dataset's environments that are the book's by id (all of them for a book of no environment)."""
        return [fit for fit in self.environments if env_matches(fit.env, self.book_env)]

    @property
    def best(self) -> EnvironmentFit | None:
        """The compatible environment sharing most of the book's actions, None when none is compatible."""
        return next((fit for fit in self.environments if fit.compatible), None)

    @property
    def suggested_env(self) -> str | None:
        """The environment to evaluate the book on in this dataset: the book's own when present, else the best
        compatible one, else None."""
        own = [fit for fit in self.own if fit.episodes]
        if own:
            return self.book_env or (own[0].env if len(own) == 1 else None)
        best = self.best
        return best.env if best is not None else None

    def problem(self) -> str | None:
        """None when the dataset holds episodes of the book's environment; else why not, and the fix."""
        if any(fit.episodes for fit in self.own):
            return None
        held = ", ".join(f"{fit.label} ({fit.episodes} episodes)" for fit in self.environments) or "none with turns"
        head = (f"dataset {self.dataset!r} has no episodes of environment {self.book_env!r}, the one worldbook "
                f"{self.book!r} simulates (its environments: {held})")
        best = self.best
        if best is None:
            closest = self.environments[0] if self.environments else None
            shared = (f"; the closest, {closest.label}, calls actions the book knows in {closest.share:.0%} of its "
                      "turns" if closest is not None else "")
            return (f"{head}{shared}. None of them calls the book's actions: choose the dataset the book was built "
                    "from, or build a worldbook from this one")
        source = "--from-unnamed" if best.env is None else f"--from {best.env}"
        unknown = f"; {len(best.unknown)} of its actions are new to the book" if best.unknown else ""
        return (f"{head}. Its environment {best.label} calls the book's actions ({len(best.known)} shared, "
                f"{best.share:.0%} of its turns{unknown}): the same API under another id. Relabel it: "
                f"`worldsmith traces relabel {self.dataset} --env {self.book_env} {source}` (or Relabel on the "
                f"Traces page), or evaluate on environment {best.label!r}")


def _fits(book: Worldbook, counts: dict[str | None, tuple[int, Counter[str]]]) -> list[EnvironmentFit]:
    known_names = book_actions(book)
    fits = []
    for env, (episodes, actions) in counts.items():
        turns = sum(actions.values())
        known = sorted(a for a in actions if a in known_names)
        fits.append(EnvironmentFit(
            env=env, episodes=episodes, turns=turns, known=known,
            unknown=sorted(a for a in actions if a not in known_names),
            share=sum(actions[a] for a in known) / turns if turns else 0.0))
    fits.sort(key=lambda fit: (-fit.share, -fit.turns, fit.env or ""))
    return fits


def match_episodes(book: Worldbook, episodes: Iterable[Episode], dataset: str) -> EnvMatch:
    """`book` against the environments of `episodes` (those with turns), for a dataset named `dataset`."""
    counts: dict[str | None, tuple[int, Counter[str]]] = {}
    for episode in episodes:
        if not episode.turns:
            continue
        n, actions = counts.get(episode.env_id, (0, Counter()))
        actions.update(turn.action.name for turn in episode.turns)
        counts[episode.env_id] = (n + 1, actions)
    return EnvMatch(book=book.name, book_env=book.env_id, dataset=dataset, book_actions=sorted(book_actions(book)),
                    environments=_fits(book, counts))


def match_dataset(book: Worldbook, dataset: Dataset) -> EnvMatch:
    """`book` against the environments of `dataset`, counted in DuckDB (no episode is loaded)."""
    conn = dataset.connect()
    counts: dict[str | None, tuple[int, Counter[str]]] = {}
    for env, episodes in conn.execute("SELECT env_id, count(*) FROM raw_episodes WHERE n_turns > 0 GROUP BY 1").fetchall():
        counts[env] = (int(episodes), Counter())
    rows = conn.execute("SELECT e.env_id, t.action_name, count(*) FROM raw_turns t JOIN raw_episodes e "
                        "USING (episode_id) GROUP BY 1, 2").fetchall()
    for env, action, n in rows:
        counts.setdefault(env, (0, Counter()))[1][action or ""] += int(n)
    return EnvMatch(book=book.name, book_env=book.env_id, dataset=dataset.name, book_actions=sorted(book_actions(book)),
                    environments=_fits(book, counts))

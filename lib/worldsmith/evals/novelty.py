"""Per-turn novelty: does a recorded observation show values no simulator could know without the initial state?

    index = NoveltyIndex(book_evidence_texts)             # once per run: the book's vocabulary
    index.novel_values("You arrive at loc 22.", ["go to bed 1"])   # e.g. ["loc 22", "22"]: shown by neither

A turn is *novel* when its observation shows a value that appears neither earlier in its episode
(the task, the opening observation, earlier actions, context and observations, and the action of
the turn itself: what a simulator is given) nor in the worldbook's evidence; and a room's first
description in the episode is novel (its header, a room not shown before: the room's initial state).
Exact match on the other, *knowable* turns is the honest denominator: a miss on a novel turn may be
no fault of the simulator.

That is the *teacher-forced* definition (`next-obs`: the simulator is given the real prefix). Open loop
(`drift`, `live`: the simulator runs on its own answers, as under an agent) it never sees a real
observation after the opening, so `NoveltyIndex.episode(..., open_loop=True)` knows only the task, the
opening observation and the episode's own actions (each turn's action, and the actions before it) besides
the book: a value shown only by an earlier real observation is knowable teacher-forced but novel open
loop, and so is every room but the opening's (its description is the room's initial state, which the
simulator was never shown). Context events (e.g. earlier user messages) are not given either.

What the evidence makes known depends on the kind of value. An *entity* value (one holding a digit:
an id, a count, ALFWorld's per-trial `loc 22`; or a name the evidence's actions give as an argument:
`red apple`, `notes.txt`, `Boston`) belongs to one initial state: another episode's entities are
another world's. It is known from the evidence only where every evidence episode that made the same
call was answered showing it (a shared backing store, as in service APIs; episodes that disagree make
it per-episode): so the first inventory, a recipe read or a container opened for the first time show
novel values even when other games held the same things. Any other value (the environment's own
words: "carrying", "revealing", "not found") is known when the evidence shows it anywhere.

Values are the content tokens that identify things, lower-cased, from a deliberately simple tokenizer:

- a *token* is a run of letters, digits and `_`, with inner `. - / : @ '` (`3.14`, `drwxr-xr-x`, `file.txt`);
- a text is cut into *runs* at punctuation, line breaks and stop-words (`STOP_WORDS`); a run of at most
  `MAX_WORDS` tokens is a value (`loc 22`, `new york`); a longer run is prose and adds no value itself;
- every token holding a digit is a value on its own (`22`, `hat136`, `2024-05-20`);
- a quoted string (`"..."` or `'...'`) and, in a JSON observation, every string and number leaf (keys
  are schema, not values) is one value when it has at most `MAX_WORDS` tokens (outer stop-words
  dropped), else its runs and numbers are.

What is known is indexed the same way, as every n-gram of at most `MAX_WORDS` tokens that neither
starts nor ends with a stop-word, punctuation ignored: a value is known when it is one of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import orjson

from worldsmith.sim.base import action_line
from worldsmith.sim.retrieval import action_arguments
from worldsmith.sim.trackers import ROOM_PATTERNS, PlaceTracker
from worldsmith.traces.model import Episode, parse_json_text
from worldsmith.worldbook.induce import episode_of
from worldsmith.worldbook.model import Worldbook

__all__ = ["MAX_NOVEL_VALUES", "MAX_WORDS", "STOP_WORDS", "NoveltyIndex", "call_key", "text_values", "vocabulary"]

MAX_WORDS = 4  # a longer run of words is prose, not a name
MAX_NOVEL_VALUES = 10  # novel values kept per record (the flag counts them all)
STOP_WORDS = frozenset("""
a an the and or but nor so yet if then else of to in on at by for with from into onto upon about as than that this
these those there here it its is are was were be been being am do does did done have has had having i you he she we
they me him her us them my your his our their not no yes can could will would shall should may might must just also
very too only all any some each every both either neither other such what which who whom whose when where why how
while up down out over under off again once after before through during between against within without across
behind near since until via
""".split())

# The room an observation describes by its header (shell prompts are not rooms: `cd` names them).
_ROOMS = PlaceTracker(patterns=ROOM_PATTERNS)
_PIECE = re.compile(r"\w+(?:[.\-/:@']\w+)*|[^\w\s]+|\n")
_QUOTED = re.compile(r"(?<!\w)([\"'])([^\"'\n]{1,200}?)\1(?!\w)")


def _pieces(text: str) -> Iterator[str | None]:
    """The lower-cased tokens of a text, None for each break (punctuation, line break)."""
    for piece in _PIECE.findall(text.lower()):
        yield piece if piece[0].isalnum() or piece[0] == "_" else None


def _tokens(text: str) -> list[str]:
    return [piece for piece in _pieces(text) if piece is not None]


def _runs(text: str) -> Iterator[list[str]]:
    """Maximal runs of non-stop-word tokens between breaks."""
    run: list[str] = []
    for piece in _pieces(text):
        if piece is not None and piece not in STOP_WORDS:
            run.append(piece)
            continue
        if run:
            yield run
        run = []
    if run:
        yield run


def _prose_values(text: str) -> Iterator[str]:
    for run in _runs(text):
        if len(run) <= MAX_WORDS:
            yield " ".join(run)
        yield from (token for token in run if any(c.isdigit() for c in token))


def _phrase_values(text: str) -> Iterator[str]:
    """A quoted string or JSON leaf: one value when short, else its runs and numbers."""
    tokens = _tokens(text)
    while tokens and tokens[0] in STOP_WORDS:
        tokens.pop(0)
    while tokens and tokens[-1] in STOP_WORDS:
        tokens.pop()
    if len(tokens) <= MAX_WORDS:
        yield from ([" ".join(tokens)] if tokens else [])
    else:
        yield from _prose_values(text)


def _leaves(value: Any, keys: bool = False) -> Iterator[str]:
    """A JSON value's string and number leaves in document order, each after its key with `keys`."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from ([str(key)] if keys else [])
            yield from _leaves(item, keys)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item, keys)
    elif isinstance(value, str):
        yield value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield orjson.dumps(value).decode()


def text_values(text: str) -> list[str]:
    """The values an observation shows, in order, without repeats."""
    data = parse_json_text(text)
    if data is not None:
        found = [v for leaf in _leaves(data) for v in _phrase_values(leaf)]
    else:
        found = [v for match in _QUOTED.finditer(text) for v in _phrase_values(match.group(2))]
        found += _prose_values(text)
    return list(dict.fromkeys(found))


def vocabulary(text: str) -> set[str]:
    """Every n-gram (n <= MAX_WORDS, not starting or ending with a stop-word) a text shows, punctuation ignored
    (a JSON text: its keys and leaves in order, so escapes leave no trace)."""
    data = parse_json_text(text)
    tokens = _tokens(" ".join(_leaves(data, keys=True)) if data is not None else text)
    out = set()
    for i, first in enumerate(tokens):
        if first in STOP_WORDS:
            continue
        for j in range(i, min(i + MAX_WORDS, len(tokens))):
            if tokens[j] not in STOP_WORDS:
                out.add(" ".join(tokens[i:j + 1]))
    return out


def call_key(name: str, arguments: Any) -> str:
    """One call as a key: the action name and its named arguments as evidence stores them (`action_arguments`)."""
    return name + " " + orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS).decode()


def _numbered(value: str) -> bool:
    return any(c.isdigit() for c in value)


class NoveltyIndex:
    """The vocabulary of a worldbook's evidence, built once; novelty of observations against it and a prefix.

    `answers` gives, per call (`call_key`), each evidence episode's answers to it; an entity value (one
    holding a digit, or in the vocabulary of a short argument in `entities`) is known from the evidence
    only when every one of those episodes was shown it so (`by_call`). Other values are known when the
    evidence shows them anywhere.
    """

    def __init__(self, book_evidence_texts: Iterable[str],
                 answers: Mapping[str, Iterable[Iterable[str]]] | None = None,
                 entities: Iterable[str] = ()) -> None:
        seen: dict[str, set[str]] = {}

        def words(text: str) -> set[str]:
            if text not in seen:
                seen[text] = vocabulary(text)
            return seen[text]

        self.vocabulary: set[str] = set()
        for text in set(book_evidence_texts):
            self.vocabulary |= words(text)
        self.by_call: dict[str, set[str]] = {}
        for key, episodes in (answers or {}).items():
            shown = [set().union(*(words(text) for text in texts)) for texts in episodes]
            self.by_call[key] = set.intersection(*shown) if shown else set()
        self.entities: set[str] = set()
        for value in set(entities):
            if len(_tokens(value)) <= MAX_WORDS:
                self.entities |= vocabulary(value)

    @classmethod
    def for_book(cls, book: Worldbook) -> NoveltyIndex:
        """The index of a book's evidence: its observations and action texts, each call's answers per
        episode, and the arguments its actions give."""
        answers: dict[str, dict[str, list[str]]] = {}
        entities: list[str] = []
        for item in book.evidence:
            answers.setdefault(call_key(item.action, item.arguments), {}).setdefault(
                episode_of(item.turn_id), []).append(item.observation)
            if isinstance(item.arguments, dict):
                entities += [value for value in item.arguments.values() if isinstance(value, str)]
        return cls([text for item in book.evidence for text in (item.observation, item.action_text)],
                   {key: list(by_episode.values()) for key, by_episode in answers.items()}, entities)

    def novel_values(self, observation: str, known_texts: Iterable[str] = (), call: str | None = None) -> list[str]:
        """The values of `observation` in neither the book's evidence nor `known_texts` (`call`: its `call_key`)."""
        known: set[str] = set()
        for text in known_texts:
            known |= vocabulary(text)
        return self._novel(observation, known, call)

    def _novel(self, observation: str, known: set[str], call: str | None) -> list[str]:
        answered = self.by_call.get(call or "", set())
        return [v for v in text_values(observation) if v not in known
                and (v not in answered if self._entity(v) else v not in self.vocabulary)]

    def _entity(self, value: str) -> bool:
        return _numbered(value) or value in self.entities

    def episode(self, episode: Episode, turns: int | None = None, *, open_loop: bool = False) -> list[list[str]]:
        """Per turn (the first `turns`), the novel values of its observation given the real prefix before it
        (teacher forcing), or with `open_loop` given only the task, the opening and the episode's actions.

        A room the episode has not shown before (its header, `-= Kitchen =-`, `This room is called the
        kitchen.`) is novel too: what a first visit describes is that room's initial state, even when every
        word of it is in the book's evidence from other games. Open loop only the opening has shown one."""
        known: set[str] = set()
        opening = episode.initial_observation.text if episode.initial_observation else ""
        rooms = {room for room in (_ROOMS.place_of(opening),) if room}
        for text in (episode.task, opening):
            known |= vocabulary(text or "")
        out = []
        for turn in episode.turns[:turns]:
            given = (action_line(turn.action),) if open_loop else \
                (*(event.content for event in turn.context), action_line(turn.action))
            for text in given:
                known |= vocabulary(text)
            call = call_key(turn.action.name, action_arguments(turn.action))
            values = self._novel(turn.observation.text, known, call)
            room = _ROOMS.place_of(turn.observation.text)
            if room is not None and room not in rooms:
                values.insert(0, f"room {room}")
                if not open_loop:
                    rooms.add(room)
            out.append(values)
            if not open_loop:
                known |= vocabulary(turn.observation.text)
        return out

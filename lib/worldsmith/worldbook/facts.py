"""Facts an observation shows, read without a model: enumerations, properties and JSON tool results.

The deterministic builder learns state from what observations reveal. Three readers cover the
common shapes of agent environments:

- an **enumeration** after a cue ("On the bed 1, you see a book 1, and a pen 1.", "You are carrying:
  a fried tomato.", "In it, you see nothing.") is the contents of the entity the sentence names
  (`world.contents[bed 1]`), or of the action's argument the observation mentions ("In it, ..."), or,
  when the action has no argument, a collection named after the action (`world.inventory`);
- a **property** sentence "The fridge 1 is open." is `world.status[fridge 1] = "open"`;
- a **JSON object** (a tool result) is one fact per top-level key (`world.current_working_directory`).

`ListFormat` remembers how a list is written (article, separators, the word for an empty list) so a
simulator can write it back the same way.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict

from worldsmith.worldbook.model import ListFormat
from worldsmith.worldbook.stages import Fact
from worldsmith.worldbook.summaries import EpisodeSummaries

__all__ = [
    "CONTENTS",
    "STATUS",
    "FoundList",
    "extract_facts",
    "find_lists",
    "find_properties",
    "learn_list_format",
    "parse_json_object",
    "parse_list_items",
    "render_list",
    "sort_key",
    "whole_word_spans",
]

CONTENTS = "contents"  # world.contents[<entity>]: what an entity holds or shows
STATUS = "status"  # world.status[<entity>]: a one-word property ("open", "closed", "on")

# Cues after which an observation enumerates things; the enumeration runs to the end of the sentence.
_CUE = re.compile(r"(?P<cue>\byou (?:can )?see:?|\byou are carrying:?|\bcarrying:|\bcontains?:?|\bcontaining)\s+",
                  re.IGNORECASE)
# A negated enumeration says the list is empty: "You are not carrying anything." / "You don't see anything."
_NEGATED = re.compile(r"\byou (?:(?:are not|aren't) carrying|(?:do not|don't) see) (?P<none>anything)\b", re.IGNORECASE)
_ARTICLE = re.compile(r"^(an?|the|some)\s+(.+)$", re.IGNORECASE)
_EMPTY_WORDS = ("nothing", "nothing at all", "no items", "none")
# "The fridge 1 is open." (the entity may be a template slot, "The {arg.object} is open.")
_PROPERTY = re.compile(r"(?:^|(?<=[.!?]\s))The (?P<entity>(?:\{[^{}\n]*\}|[^.!?\n{}]){1,60}?) is (?P<value>[A-Za-z]+)\.")
_PRONOUN = re.compile(r"\b(it|them|this|that|here)\b", re.IGNORECASE)
_LIST_SEPARATOR = re.compile(r"(,\s+and\s+|\s+and\s+|,\s+)")
_SENTENCE_END = re.compile(r"\.(?:\s|$)|\n|$")


def _word_character(character: str) -> bool:
    return character.isalnum() or character == "_"  # what `\w` matches in a str pattern


def whole_word_spans(text: str, value: str) -> list[tuple[int, int]]:
    r"""Where `value` occurs in `text` as a whole word, left to right and not overlapping: what
    `re.finditer(rf"(?<!\w){re.escape(value)}(?!\w)", text)` finds, without compiling a pattern per value."""
    spans: list[tuple[int, int]] = []
    if not value:
        return spans
    at = text.find(value)
    while at != -1:
        end = at + len(value)
        if (at == 0 or not _word_character(text[at - 1])) and (end == len(text) or not _word_character(text[end])):
            spans.append((at, end))
            at = text.find(value, end)
        else:
            at = text.find(value, at + 1)
    return spans


class FoundList(BaseModel):
    """An enumeration inside an observation: where it is and what it lists."""

    model_config = ConfigDict(extra="forbid")

    start: int
    end: int
    text: str
    items: list[str]
    sentence_prefix: str  # the sentence up to the cue, to tell whose list it is


def parse_list_items(text: str) -> tuple[list[str], dict[str, str]] | None:
    """Items of "a X, a Y, and an Z" (articles stripped) and the separators seen; None if not a list."""
    body = text.strip()
    if body.lower() in _EMPTY_WORDS:
        return [], {"empty": body}
    parts = _LIST_SEPARATOR.split(body)
    items: list[str] = []
    seps: dict[str, str] = {}
    for index, part in enumerate(parts[::2]):
        match = _ARTICLE.match(part.strip())
        if not match or not match.group(2).strip():
            return None
        items.append(match.group(2).strip())
        seps.setdefault("article_" + match.group(1).lower(), match.group(2)[:1])
        if index:
            seps["last" if index == len(parts) // 2 else "sep"] = parts[2 * index - 1]
    return items, seps


def find_lists(observation: str) -> list[FoundList]:
    """Every cued enumeration in the observation, left to right."""
    found: list[FoundList] = []
    for cue in _CUE.finditer(observation):
        start = cue.end()
        end_match = _SENTENCE_END.search(observation, start)
        end = end_match.start() if end_match else len(observation)
        text = observation[start:end]
        parsed = parse_list_items(text)
        if parsed is None:
            continue
        sentence_start = max(observation.rfind(". ", 0, cue.start()) + 2, observation.rfind("\n", 0, cue.start()) + 1, 0)
        found.append(FoundList(start=start, end=end, text=text, items=parsed[0],
                               sentence_prefix=observation[sentence_start:cue.start()]))
    for negated in _NEGATED.finditer(observation):
        sentence_start = max(observation.rfind(". ", 0, negated.start()) + 2,
                             observation.rfind("\n", 0, negated.start()) + 1, 0)
        found.append(FoundList(start=negated.start("none"), end=negated.end("none"), text=negated.group("none"),
                               items=[], sentence_prefix=observation[sentence_start:negated.start()]))
    return sorted(found, key=lambda item: item.start)


def find_properties(observation: str) -> list[tuple[str, str, int, int]]:
    """(entity, value, start, end of the value) for every "The X is Y." sentence."""
    return [(m.group("entity"), m.group("value"), m.start("value"), m.end("value"))
            for m in _PROPERTY.finditer(observation)]


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The observation as a JSON object, or None when it is not one."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        value = orjson.loads(stripped)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _scalar_values(arguments: Mapping[str, Any]) -> list[str]:
    return sorted((str(v) for v in arguments.values() if isinstance(v, (str, int, float)) and not isinstance(v, bool)
                   and len(str(v)) >= 2), key=len, reverse=True)


def list_owner(found: FoundList, observation: str, arguments: Mapping[str, Any]) -> str | None:
    """The entity whose contents a list shows: an argument named in its sentence, else (for "In it, ...")
    an argument named elsewhere in the observation; None for a collection of the action itself."""
    values = _scalar_values(arguments)
    for value in values:
        if whole_word_spans(found.sentence_prefix, value):
            return value
    if _PRONOUN.search(found.sentence_prefix) or found.sentence_prefix.strip():
        for value in values:
            if whole_word_spans(observation, value):
                return value
    return None


def action_collection(action: str) -> str:
    """The state key of a list an argument-less action shows ("inventory" -> world.inventory)."""
    return re.sub(r"[^A-Za-z0-9_]+", "_", action.strip().lower()).strip("_") or "items"


def extract_facts(action: str, arguments: Mapping[str, Any], observation: str) -> list[Fact]:
    """Everything this observation shows about the state, as facts with concrete paths."""
    data = parse_json_object(observation)
    if data is not None:
        if set(data) == {"error"}:
            return []
        return [Fact(path=["world", str(key)], value=value, kind="json") for key, value in data.items()]
    facts: list[Fact] = []
    for found in find_lists(observation):
        owner = list_owner(found, observation, arguments)
        path = ["world", CONTENTS, owner] if owner is not None else ["world", action_collection(action)]
        facts.append(Fact(path=path, value=found.items, kind="list"))
    for entity, value, _, _ in find_properties(observation):
        facts.append(Fact(path=["world", STATUS, entity], value=value.lower() if value.islower() else value))
    return facts


def _name_number(item: str, descending: bool) -> tuple[str, int]:
    match = re.match(r"^(.*?)(\d+)$", item)
    if not match:
        return (item, 0)
    return (match.group(1), -int(match.group(2)) if descending else int(match.group(2)))


def sort_key(order: str) -> Any:
    """The sort key of a list order, or None for insertion order."""
    if order == "text":
        return lambda item: str(item)
    if order in ("name_number_asc", "name_number_desc"):
        return lambda item: _name_number(str(item), order.endswith("desc"))
    return None


def _learn_order(lists: list[list[str]], min_lists: int = 5) -> str:
    """The sorted order every observed list of two or more items follows, if there is one."""
    lists = [items for items in lists if len(items) >= 2]
    if len(lists) < min_lists:
        return "insertion"
    for order in ("text", "name_number_desc", "name_number_asc"):
        key = sort_key(order)
        if all(items == sorted(items, key=key) for items in lists):
            return order
    return "insertion"


_WrittenList = tuple[tuple[str, ...], tuple[tuple[str, str], ...]]


def written_lists(observation: str) -> tuple[_WrittenList, ...]:
    """The lists an observation writes, parsed: (items, the separators seen) each, left to right (what
    `learn_list_format` counts of one observation)."""
    out = []
    for found in find_lists(observation):
        parsed = parse_list_items(found.text)
        if parsed is not None:
            out.append((tuple(parsed[0]), tuple(parsed[1].items())))
    return tuple(out)


def learn_list_format(observations: Iterable[str], *, summaries: EpisodeSummaries | None = None) -> ListFormat:
    """The most common way these observations write lists (defaults where they show none). `summaries`: each
    observation's lists read once (`written_lists`) for every learner that is given them (the cross-fit folds learn
    formats from the same observations several times each)."""
    separators: Counter[str] = Counter()
    last: Counter[str] = Counter()
    pair: Counter[str] = Counter()
    empty: Counter[str] = Counter()
    a_before_vowel = an_before_vowel = 0
    seen_lists: list[list[str]] = []
    for observation in observations:
        shown = written_lists(observation) if summaries is None else \
            summaries.of_text("lists", observation, written_lists)
        for written, separators_seen in shown:
            items, seps = list(written), dict(separators_seen)
            seen_lists.append(items)
            if "empty" in seps:
                empty[seps["empty"]] += 1
            if "sep" in seps:
                separators[seps["sep"]] += 1
            if "last" in seps:
                (pair if len(items) == 2 else last)[seps["last"]] += 1
            for article_key, first_letter in seps.items():
                if article_key.startswith("article_") and first_letter.lower() in "aeiou":
                    if article_key == "article_a":
                        a_before_vowel += 1
                    elif article_key == "article_an":
                        an_before_vowel += 1
    default = ListFormat()
    return ListFormat(
        article="a/an" if an_before_vowel > a_before_vowel else "a",
        separator=separators.most_common(1)[0][0] if separators else default.separator,
        last_separator=last.most_common(1)[0][0] if last else (pair.most_common(1)[0][0] if pair else default.last_separator),
        pair_separator=pair.most_common(1)[0][0] if pair else (last.most_common(1)[0][0] if last else default.pair_separator),
        empty=empty.most_common(1)[0][0] if empty else default.empty,
        order=_learn_order(seen_lists),  # type: ignore[arg-type]
    )


def render_list(items: Iterable[Any], fmt: ListFormat) -> str:
    """Items written the way the environment writes them."""
    names = [str(item) for item in items]
    if not names:
        return fmt.empty
    def with_article(name: str) -> str:
        article = "an" if fmt.article == "a/an" and name[:1].lower() in "aeiou" else "a"
        return f"{article} {name}"
    words = [with_article(name) for name in names]
    if len(words) == 1:
        return words[0]
    if len(words) == 2:
        return words[0] + fmt.pair_separator + words[1]
    return fmt.separator.join(words[:-1]) + fmt.last_separator + words[-1]

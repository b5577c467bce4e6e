"""One matching rule for the index, the scan and the per-episode filter: every term a case-insensitive substring.

The index (FTS5 trigram), the scan without it (DuckDB `regexp_matches`) and `Dataset.turns_page`'s filter must give
the same turns for every query: words, pieces of words, prefixes, phrases, mixed case, punctuation, Unicode case
pairs, 1-2 character terms, several terms, no hit.
"""

from __future__ import annotations

import contextlib
import random
import re
import sqlite3
from pathlib import Path

import pytest

from helpers import airline_conversation, write_json
from worldsmith import Workspace
from worldsmith.traces.model import Action, Episode, Observation, Turn
from worldsmith.workspace import Dataset, search_turns, update_index
from worldsmith.workspace.search import INDEX_FILE, scan_turns
from worldsmith.workspace.textmatch import Term, fold, fold_map, glob, parse_query, regex

# Case pairs Python and FTS5 fold differently or only one way (Kelvin sign, long s, final sigma, dotted I, sharp s),
# accents, CJK, an emoji, identifiers and JSON as agents write them.
UNICODE = ["Café CAFÉ naïve NAÏVE", "ΣΟΦΌΣ σοφός Σίσυφος", "Temperature 300\u212a (kelvin) and 5 K",
           "ſtop ſign, STOP", "İstanbul istanbul ISTANBUL", "Straße STRASSE strasse", "東京タワー 🙂 ok",
           "getUserId(user_4242) -> {\"status\": \"ok\"}", "µs and μs", "a  b\ttab\nnew line"]


def _episodes() -> list[Episode]:
    episodes = []
    for n, text in enumerate(UNICODE):
        episodes.append(Episode(id=f"u-{n}", env_id="shop", task=f"task {n}", turns=[
            Turn(index=0, action=Action(name="read_note", arguments={"note": text, "n": n}),
                 observation=Observation(text=f"Note {n}: {text}")),
            Turn(index=1, action=Action(name="think", raw=text.upper()), observation=Observation(text="Mugs: 2."))]))
    return episodes


@pytest.fixture
def dataset(workspace: Workspace, tmp_path: Path) -> Dataset:
    conversations = [airline_conversation(task, float(trial), user_id=f"user_{task}_{trial}")
                     for task in range(6) for trial in range(2)]
    workspace.ingest([write_json(tmp_path / "airline.json", conversations)], "mix")
    workspace.add_episodes("mix", _episodes())
    return workspace.dataset("mix")


def _queries(dataset: Dataset) -> list[str]:
    """Words of the data and pieces of them (mixed case, prefixes with `*`), phrases, punctuation, Unicode, short
    terms, pairs of terms and terms found nowhere."""
    rng = random.Random(7)
    texts = [t for t in dataset.query("SELECT observation || ' ' || action_name || ' ' || coalesce(action_raw, '') "
                                      "|| ' ' || coalesce(action_arguments, '') AS t FROM turns")["t"].tolist()]
    words = sorted({w for text in texts for w in re.findall(r"\S+", text)})
    queries = list(words)
    for word in rng.sample(words, min(60, len(words))):
        start = rng.randrange(len(word))
        piece = word[start:start + rng.randint(1, 6)]
        queries += [piece, piece.swapcase(), piece[:3] + "*", word.upper()]
    for text in rng.sample(texts, 25):
        start = rng.randrange(max(1, len(text) - 12))
        queries.append('"' + text[start:start + rng.randint(4, 14)].replace('"', "") + '"')
    queries += ["mu*", "MU", "u", "é", "É", "k", "\u212a", "s", "ſ", "ς", "σ", "Σ", "ß", "SS", "İ", "i̇", "🙂", "タ",
                "東京", "µ", "μs", "_", "{", '"status"', '"\\"ok\\""', "->", "a  b", '"a  b"', '"tab\nnew"', "\t",
                "getuserid", "GetUser", "user_4", "kelvin 300", "flight HAT136", "HAT136 zebra", "zzzqx", "qq*",
                "mugs: 2.", '"Mugs: 2."', "straße", "STRASSE", "café naïve", "ΣΟΦΌΣ", "σοφόσ", "*", '""', "a b c"]
    pairs = [f"{rng.choice(words)} {rng.choice(queries)}" for _ in range(40)]
    return queries + pairs


def _index_hits(dataset: Dataset, query: str) -> set[str]:
    result = search_turns(dataset, query, limit=100_000, refresh=False)
    assert result.used_index or not parse_query(query)
    return {h.turn_id for h in result.hits}


def _scan_hits(dataset: Dataset, query: str) -> set[str]:
    return {h.turn_id for h in scan_turns(dataset, parse_query(query), limit=100_000)}


def _filter_hits(dataset: Dataset, query: str) -> set[str]:
    ids = dataset.query("SELECT DISTINCT episode_id FROM turns")["episode_id"].tolist()
    return {t.id for e in ids for t in dataset.turns_page(e, limit=1_000, search=query)} if parse_query(query) else set()


def test_index_scan_and_episode_filter_give_the_same_hits(dataset: Dataset) -> None:
    queries = _queries(dataset)
    assert len(queries) > 400
    found = 0
    for query in queries:
        indexed = _index_hits(dataset, query)
        assert indexed == _scan_hits(dataset, query), query
        assert indexed == _filter_hits(dataset, query), query
        found += bool(indexed)
    assert found > 300  # most queries hit something: the equality is not between empty sets


def test_the_rule_is_a_case_insensitive_substring(dataset: Dataset) -> None:
    """The rule itself, on hand-picked cases (equal sets alone would pass with both sides equally wrong)."""
    assert _index_hits(dataset, "userid") == {"u-7#0", "u-7#1"}  # inside getUserId, any case
    assert _index_hits(dataset, "\u212a") == _index_hits(dataset, "K") >= {"u-2#0", "u-2#1"}  # Kelvin sign is a k
    assert _index_hits(dataset, "sign") == _index_hits(dataset, "SIGN") == {"u-3#0", "u-3#1"}
    assert _index_hits(dataset, '"a  b"') == {"u-9#0", "u-9#1"} and not _index_hits(dataset, '"a b tab"')
    assert _index_hits(dataset, "mug*") == _index_hits(dataset, "mug") == _index_hits(dataset, "UGS")
    assert _index_hits(dataset, "café naïve") == {"u-0#0", "u-0#1"} and _index_hits(dataset, "zzzqx") == set()
    assert _index_hits(dataset, "ΣΟΦΌΣ") == {"u-1#0", "u-1#1"}  # σ, ς and Σ fold alike


def test_an_old_word_index_is_not_used_until_rebuilt(dataset: Dataset) -> None:
    path = dataset.path / INDEX_FILE
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("DROP TABLE meta")  # what an index of the word rule looks like
        conn.commit()
    scanned = search_turns(dataset, "userid")  # a search does not start a rebuild: the scan answers
    assert not scanned.used_index and {h.turn_id for h in scanned.hits} == _scan_hits(dataset, "userid")
    assert update_index(dataset).rows == 56  # an ingest or `traces index` rebuilds it
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT value FROM meta").fetchone() == ("substring-trigram-1",)
    assert search_turns(dataset, "userid").used_index


def test_fold_map_is_fts5s_over_the_whole_bmp() -> None:
    """The scans fold through `fold_map`, read from SQLite for the characters Python knows cases of: check every
    character of the Basic Multilingual Plane against FTS5's trigram tokenizer itself."""
    chars = [chr(c) for c in range(1, 0x10000) if not 0xD800 <= c <= 0xDFFF]
    with contextlib.closing(sqlite3.connect(":memory:")) as conn:
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize = 'trigram')")
        conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
        conn.executemany("INSERT INTO t (rowid, x) VALUES (?, ?)", [(ord(c), f"0{c}0") for c in chars])
        fts5 = {chr(doc): term[1] for term, doc in conn.execute("SELECT term, doc FROM v")}
    assert len(fts5) == len(chars)
    assert {c: f for c, f in fts5.items() if c != f} == {c: f for c, f in fold_map().items() if ord(c) < 0x10000}
    assert fold("İSTANBUL Straße") == "İstanbul straße"  # one character for one: no "i̇", no "ss"


def test_patterns_escape_what_they_must() -> None:
    assert glob(Term("a*?[")) == "*[aA][*][?][[]*"
    assert regex(Term(".")) == "\\x{2e}" and regex(Term("k")) == "[\\x{6b}\\x{4b}\\x{212a}]"
    assert parse_query('mug "on the shelf" take* "" ** "a"*') == [Term("mug"), Term("on the shelf"), Term("take"),
                                                                  Term("a")]

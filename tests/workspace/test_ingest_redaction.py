"""`ingest --redact` on the real toolshop recordings with planted card numbers and a planted person: no e-mail,
phone, card or name of a customer survives into the dataset, the quarantine, a book built from it or an answer
the book gives, and an entity keyed by its e-mail is still one entity."""

from __future__ import annotations

import random
import re
import stat
from pathlib import Path
from typing import Any

import orjson
import pytest

from worldsmith.cli.main import main
from worldsmith.evals.protocols import Scorer, next_obs_records
from worldsmith.sim.harness import Harness
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.traces.redaction import Redactor
from worldsmith.traces.redaction.detect import luhn_valid
from worldsmith.util.errors import BusyError
from worldsmith.workspace import DatasetRedaction, RedactionSettings, Workspace

TOOLSHOP = Path(__file__).resolve().parents[2] / "data_samples" / "toolshop"
SECRET = b"r" * 32
PLANTED_PERSON = ("Philippa", "Quarrington", "philippa.q@quarrington-labs.io", "+44 20 7946 0958")


def luhn_card(rng: random.Random) -> str:
    body = "4" + "".join(str(rng.randrange(10)) for _ in range(14))
    number = next(body + d for d in "0123456789" if luhn_valid(body + d))
    return " ".join(number[i:i + 4] for i in range(0, 16, 4))


def plant(source: Path, target: Path, rng: random.Random) -> list[str]:
    """The toolshop recordings with a card number in each task and in each user record, and a system prompt
    naming a planted person; the cards planted."""
    cards = []
    lines = []
    first, last, email, phone = PLANTED_PERSON
    for line in source.read_text().splitlines():
        episode = orjson.loads(line)
        card = luhn_card(rng)
        cards.append(card)
        episode["task"] = f"{episode['task']} My card is {card}."
        episode["metadata"] = {**episode.get("metadata", {}),
                               "system": f"You serve {first} {last} ({email}, {phone}) and others."}
        for turn in episode["turns"]:
            if turn["action"]["name"] == "get_user":
                record = orjson.loads(turn["observation"]["text"])
                record["card_number"] = card.replace(" ", "")
                turn["observation"]["text"] = orjson.dumps(record).decode()
        lines.append(orjson.dumps(episode).decode())
    lines.append('{"format": "worldsmith.episode/v1", "id": "broken", "turns": "mail ' + email + '"}')
    target.write_text("\n".join(lines) + "\n")
    return cards


def customers(path: Path) -> list[dict[str, Any]]:
    """Every user record the recordings show."""
    found = {}
    for line in path.read_text().splitlines():
        turns = orjson.loads(line).get("turns")
        for turn in turns if isinstance(turns, list) else []:
            text = turn["observation"]["text"]
            if turn["action"]["name"] == "get_user" and text.startswith("{"):
                record = orjson.loads(text)
                found[record["email"]] = record
    return list(found.values())


def planted_values(raw: Path, cards: list[str]) -> list[re.Pattern[str]]:
    """Patterns that must find nothing in redacted text: each e-mail, phone (as written and as bare digits),
    card (grouped and bare) and name word."""
    first, last, email, phone = PLANTED_PERSON
    values = [email, phone, "2079460958"] + cards + [c.replace(" ", "") for c in cards]
    names = {first, last}
    for record in customers(raw):
        values += [record["email"], record["phone"], re.sub(r"\D", "", record["phone"])[1:]]
        names |= {record["name"]["first"], record["name"]["last"]}
    return [re.compile(re.escape(v), re.IGNORECASE) for v in values] + [
        re.compile(rf"\b{re.escape(n)}\b") for n in names]


def leaks(text: str, patterns: list[re.Pattern[str]]) -> list[str]:
    return [p.pattern for p in patterns if p.search(text)]


@pytest.fixture(scope="module")
def redacted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("redact")
    raw = tmp / "expert.planted.jsonl"
    cards = plant(TOOLSHOP / "expert.jsonl", raw, random.Random(7))
    mapping = tmp / "keys" / "toolshop.json"
    Redactor(SECRET).save(mapping)  # a fixed secret: the same pseudonyms on every run
    workspace = Workspace(tmp / "ws")
    report = workspace.ingest([raw], "shop", redact=RedactionSettings(mapping=mapping))
    return {"workspace": workspace, "raw": raw, "cards": cards, "mapping": mapping, "report": report,
            "patterns": planted_values(raw, cards)}


def test_nothing_planted_survives_in_the_dataset_or_the_quarantine(redacted: dict[str, Any]) -> None:
    report, workspace = redacted["report"], redacted["workspace"]
    assert report.committed and report.episodes == 30 and report.rejected == 1
    kinds = report.redaction["kinds"]
    assert kinds["card"]["replaced"] >= 60 and kinds["email"]["replaced"] > 60 and kinds["phone"]["replaced"] > 30
    words = {w.casefold() for r in customers(redacted["raw"]) for w in (r["name"]["first"], r["name"]["last"])}
    assert kinds["name"]["values"] >= len(words) + 2
    episodes = list(workspace.dataset("shop").iter_episodes())
    assert len(episodes) == 30 and sum(len(e.turns) for e in episodes) == report.turns
    for episode in episodes:
        assert leaks(episode.model_dump_json(), redacted["patterns"]) == [], episode.id
    quarantine = Path(report.quarantine_path).read_text()
    assert "broken" in quarantine and leaks(quarantine, redacted["patterns"]) == []


def test_an_entity_keyed_by_its_email_is_still_one_entity(redacted: dict[str, Any]) -> None:
    checked = 0
    for episode in redacted["workspace"].dataset("shop").iter_episodes():
        asked = [t.action.arguments["email"] for t in episode.turns if t.action.name == "find_user_id_by_email"]
        users = [orjson.loads(t.observation.text) for t in episode.turns if t.action.name == "get_user"]
        if asked and users:
            assert asked[0] == users[0]["email"] and asked[0] in (episode.task or "")
            assert re.fullmatch(r"\+1-5\d\d-\d{3}-\d{4}", users[0]["phone"])  # the format kept
            assert luhn_valid(users[0]["card_number"]) and len(users[0]["card_number"]) == 16
            checked += 1
    assert checked >= 10


def test_the_mapping_is_kept_apart_and_a_second_import_reuses_it(redacted: dict[str, Any], tmp_path: Path) -> None:
    mapping = redacted["mapping"]
    assert stat.S_IMODE(mapping.stat().st_mode) == 0o600
    kept = Redactor.load(mapping)
    assert redacted["cards"][0].replace(" ", "") in kept.mapping["card"]
    probing = tmp_path / "probing.jsonl"
    probing.write_text((TOOLSHOP / "probing.jsonl").read_text())
    workspace: Workspace = redacted["workspace"]
    report = workspace.ingest([probing], "shop-probing", redact=RedactionSettings(mapping=mapping))
    assert report.committed
    again = Redactor.load(mapping)
    shared = [r["email"] for r in customers(probing) if r["email"] in kept.mapping["email"]]
    assert shared and all(again.mapping["email"][e] == kept.mapping["email"][e] for e in shared)
    texts = "".join(e.model_dump_json() for e in workspace.dataset("shop-probing").iter_episodes())
    assert all(kept.mapping["email"][e] in texts for e in shared)


def test_forget_keeps_no_mapping_and_a_mapping_inside_the_datasets_is_refused(tmp_path: Path,
                                                                              capsys: pytest.CaptureFixture[str]
                                                                              ) -> None:
    root = tmp_path / "ws"
    source = str(TOOLSHOP / "expert.jsonl")
    assert main(["ingest", source, "--dataset", "shop", "--redact", "--redact-forget", "--json",
                 "--workspace", str(root)]) == 0
    summary = orjson.loads(capsys.readouterr().out)
    assert summary["redaction"]["mapping"] is None and summary["redaction"]["kinds"]["email"]["replaced"] > 0
    assert not (root / "redaction").exists()
    inside = root / "datasets" / "shop" / "map.json"
    assert main(["ingest", source, "--dataset", "shop", "--redact", "--redact-mapping", str(inside),
                 "--workspace", str(root)]) != 0
    assert "kept apart from the datasets" in capsys.readouterr().err and not inside.exists()
    assert main(["ingest", source, "--dataset", "plain", "--redact-forget", "--workspace", str(root)]) != 0


@pytest.mark.slow
def test_a_book_built_from_redacted_data_and_its_answers_hold_nothing_planted(redacted: dict[str, Any]) -> None:
    workspace: Workspace = redacted["workspace"]
    episodes = list(workspace.dataset("shop").iter_episodes())
    book = build_simulator_book(episodes[:24], name="shop").book
    assert book.rules
    assert leaks(book.model_dump_json(), redacted["patterns"]) == []
    answers = [record.prediction or "" for episode in episodes[24:]
               for record in next_obs_records(Harness(book), episode, Scorer())]
    assert any(answers) and leaks("\n".join(answers), redacted["patterns"]) == []
    kept = {p.resolve() for p in workspace.root.rglob("*") if p.is_file() and "redaction" not in p.parts}
    for path in kept:  # nothing in the workspace but the mapping (kept apart, outside it here) shows a value
        if path.suffix in (".json", ".jsonl", ".txt"):
            assert leaks(path.read_text(errors="replace"), redacted["patterns"]) == [], path


def test_one_holder_of_a_mapping_at_a_time(tmp_path: Path) -> None:
    settings = RedactionSettings()
    with DatasetRedaction(tmp_path, "shop", settings) as first:
        first.redactor.redact_text("mail ada@corp.org")
        first.keep()
        with pytest.raises(BusyError) as busy:
            DatasetRedaction(tmp_path, "shop", settings, timeout=0.1).__enter__()
        assert "holds its mapping" in str(busy.value)
    with DatasetRedaction(tmp_path, "shop", settings) as second:  # released: the next holder loads what was kept
        assert "ada@corp.org" in second.redactor.mapping["email"]

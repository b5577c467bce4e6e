"""Redaction: planted e-mails, phones, cards and names never survive; pseudonyms are one-to-one, keep each
value's shape, and are the same for a value wherever (and however) it is written."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import orjson
import pytest

from worldsmith.traces import Action, Episode, Observation, Turn
from worldsmith.traces.redaction import Redactor
from worldsmith.traces.redaction.detect import luhn_valid
from worldsmith.util.errors import BadInputError

SECRET = b"s" * 32
EMAIL = re.compile(r"^[a-z0-9._+\-]+@[a-z0-9\-]+(\.[a-z0-9\-]+)+$")
CARD = "4539 1488 0343 6467"  # Luhn-valid
PLANTED = ["ada.lovelace@analytical.org", "+1 (415) 867-5309", "415-867-5309", CARD, "Ada", "Lovelace"]
TEXT = (f"Hi Ada, this is support. We have ada.lovelace@analytical.org and +1 (415) 867-5309 on file; "
        f"card {CARD} expires 02/29. Ada Lovelace, order #O29129 of 2026-10-18, total 288.18, zip 83702.")


def digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def test_planted_values_do_not_survive_and_the_rest_is_untouched() -> None:
    redactor = Redactor(SECRET)
    out = redactor.redact_text(TEXT)
    assert out is not None
    for value in PLANTED:
        assert value not in out
    for kept in ("#O29129", "2026-10-18", "288.18", "83702", "02/29", "support"):
        assert kept in out
    assert {kind: c["replaced"] for kind, c in redactor.summary().items()} == {
        "email": 1, "phone": 1, "card": 1, "name": 3}


def test_pseudonyms_keep_the_shape() -> None:
    redactor = Redactor(SECRET)
    out = redactor.redact_text("a@b.io; (212) 736-5000; 5500-0000-0000-0004; 378282246310005; Dear Grace Hopper")
    assert out is not None
    email, phone, card, amex, greeting = out.split("; ")
    assert EMAIL.match(email) and email.endswith(".example")  # an unknown domain maps under the reserved TLD
    assert re.fullmatch(r"\(2\d\d\) \d{3}-\d{4}", phone) and phone != "(212) 736-5000"
    assert re.fullmatch(r"5\d{3}-\d{4}-\d{4}-\d{4}", card) and luhn_valid(digits(card))
    assert len(amex) == 15 and amex[0] == "3" and luhn_valid(amex) and amex != "378282246310005"
    first, last = greeting.split()[1:]
    assert first.istitle() and last.istitle() and "Hopper" not in greeting


def test_one_value_one_pseudonym_everywhere_and_in_every_written_form() -> None:
    redactor = Redactor(SECRET)
    a = redactor.redact_text("call +1 415 867 5309 or mail Ada.Lovelace@Analytical.org")
    b = redactor.redact_text('{"phone": "(415) 867-5309", "email": "ada.lovelace@analytical.org"}')
    c = redactor.redact_value({"contact": {"email": "ada.lovelace@analytical.org", "phone": "415.867.5309"}})
    assert a is not None and b is not None
    mapped = redactor.mapping["email"]["ada.lovelace@analytical.org"]
    assert mapped in a and mapped in b and c["contact"]["email"] == mapped
    national = redactor.mapping["phone"]["+14158675309"][2:]
    assert digits(a).count(national) == 1 and national in digits(b) and digits(c["contact"]["phone"]) == national
    assert len(redactor.mapping["email"]) == 1 and len(redactor.mapping["phone"]) == 1


def test_distinct_values_get_distinct_pseudonyms() -> None:
    redactor = Redactor(SECRET)
    emails = [f"user{i}@corp{i % 7}.com" for i in range(400)]
    names = [f"Dear Xq{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}{chr(97 + i // 676)}" for i in range(300)]
    for value in emails:
        redactor.redact_text(value)
    for value in names:
        redactor.redact_value({"first_name": value.split()[1]})
    assert len(set(redactor.mapping["email"].values())) == 400
    assert len({v.casefold() for v in redactor.mapping["name"].values()}) == len(redactor.mapping["name"]) == 300


def test_the_same_secret_gives_the_same_pseudonyms_and_another_does_not() -> None:
    first, again, other = Redactor(SECRET), Redactor(SECRET), Redactor(b"t" * 32)
    assert first.redact_text(TEXT) == again.redact_text(TEXT) != other.redact_text(TEXT)


def test_pseudonyms_of_emails_phones_and_cards_are_left_alone_when_met_again() -> None:
    redactor = Redactor(SECRET)
    once = redactor.redact_text("ada.lovelace@analytical.org, +1 (415) 867-5309, " + CARD)
    assert redactor.redact_text(once) == once
    assert redactor.summary()["email"]["values"] == 1


def test_structured_fields_name_people_and_product_names_stay() -> None:
    redactor = Redactor(SECRET)
    record = {"user": {"name": {"first": "Mateo", "last": "Quispe"}, "email": "m@x.org"},
              "customer": {"name": "Zoltan Kertesz"}, "first_name": "yuki", "attendees": ["Ilse Brandt", "b@c.de"],
              "items": [{"name": "Cutting Board", "product_id": "P-4730"}], "phone": "555 0199 12"}
    out = redactor.redact_value(record)
    text = orjson.dumps(out).decode()
    for value in ("Mateo", "Quispe", "Zoltan", "Kertesz", "yuki", "Ilse", "Brandt", "m@x.org", "555 0199 12"):
        assert value not in text
    assert out["items"][0]["name"] == "Cutting Board" and out["first_name"].islower()
    # a name learnt from a field is then replaced in free text too, in its case
    assert redactor.redact_text("MATEO QUISPE called; Mateo said hi") == (
        f"{out['user']['name']['first'].upper()} {out['user']['name']['last'].upper()} called; "
        f"{out['user']['name']['first']} said hi")


def test_json_text_keeps_its_layout_and_escapes() -> None:
    redactor = Redactor(SECRET)
    text = '{\n  "to": "ada@corp.org",\n  "body": "Hello Ada Lovelace,\\nsee you"\n}'
    out = redactor.redact_text(text)
    assert out is not None and out.startswith('{\n  "to": "') and "\\nsee you" in out
    value = orjson.loads(out)
    assert "ada@corp.org" not in out and "Ada" not in value["body"] and value["body"].endswith(",\nsee you")
    keyed = redactor.redact_text('{"ada@corp.org": {"n": 1}}')  # a key is redacted like any string
    assert keyed is not None and "ada@corp.org" not in keyed and orjson.loads(keyed) == {
        redactor.mapping["email"]["ada@corp.org"]: {"n": 1}}


def test_no_false_alarms_on_ordinary_tool_data() -> None:
    redactor = Redactor(SECRET)
    texts = ["placed 2026-10-18T10:11:12Z", "price 288.18, qty 3", "id cu_4ae568 item 71047760", "ts 1733600000",
             "ip 192.168.1.10", "ISBN 978-3-16-148410-0", "version 1.2.3.4", "Smart Watch (case 44mm)",
             "The flight from San Francisco International to Los Angeles", "Will you ship it? May I ask?"]
    for text in texts:
        assert redactor.redact_text(text) == text


def test_an_episode_is_redacted_in_every_recorded_text() -> None:
    episode = Episode(
        id="e1", env_id="shop", task="Hello, this is Ada. Mail ada@corp.org",
        turns=[Turn(index=0, action=Action(name="get_user", arguments={"email": "ada@corp.org"}),
                    observation=Observation(text='{"name": {"first": "Ada", "last": "Lovelace"}, "card": '
                                                 '4539148803436467}'))],
        metadata={"system": "You help Ada Lovelace."})
    redactor = Redactor(SECRET)
    out = redactor.redact_episode(episode)
    text = out.model_dump_json()
    for value in ("ada@corp.org", "Ada", "Lovelace", "4539148803436467"):
        assert value not in text
    email = redactor.mapping["email"]["ada@corp.org"]
    assert out.turns[0].action.arguments == {"email": email} and email in (out.task or "")
    assert out.id == "e1" and out.turns[0].action.name == "get_user"


def test_the_mapping_is_saved_owner_only_and_loads_back(tmp_path: Path) -> None:
    redactor = Redactor(SECRET)
    first = redactor.redact_text(TEXT)
    path = tmp_path / "map.json"
    redactor.save(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    loaded = Redactor.load(path)
    assert loaded.mapping == redactor.mapping and loaded.redact_text(TEXT) == first
    path.write_text('{"format": "other"}')
    with pytest.raises(BadInputError) as error:
        Redactor.load(path)
    assert str(path) in str(error.value) and "not a redaction mapping" in str(error.value)


def test_an_address_made_of_a_known_name_takes_the_names_pseudonyms() -> None:
    redactor = Redactor(SECRET)
    out = redactor.redact_value({"name": {"first": "Kofi", "last": "Mensah"}, "email": "kofi.mensah43@shop.org",
                                 "backup": "sales@shop.org"})
    first, last = out["name"]["first"].lower(), out["name"]["last"].lower()
    assert out["email"].startswith(f"{first}.{last}43@") and out["email"].endswith(".example")
    assert not out["backup"].startswith("sales") and out["backup"].split("@")[1] == out["email"].split("@")[1]
    assert redactor.redact_text("No such order, Kofi") == f"No such order, {out['name']['first']}"

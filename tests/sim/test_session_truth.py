"""The session's answers are its state (issue 41, items 2-4): entities the logs never showed, existence that does not
flip, no answer about another entity, on a book built from the real toolshop recordings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worldsmith.sim.harness import Harness
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.sim.sources.records import RecordTracker
from worldsmith.sim.sources.unseen import UnseenEntities, mentions, slot_id
from worldsmith.traces import Episode
from worldsmith.worldbook.model import Evidence, Worldbook
from worldsmith.worldbook.record_store import RecordStore, learn_selectors

TOOLSHOP = Path(__file__).resolve().parents[2] / "data_samples" / "toolshop"


@pytest.fixture(scope="module")
def book() -> Worldbook:
    episodes = [Episode.model_validate({k: v for k, v in json.loads(line).items() if k != "format"})
                for name in ("expert", "probing") for line in (TOOLSHOP / f"{name}.jsonl").read_text().splitlines()]
    return build_simulator_book(episodes, name="toolshop").book


def _unshown(book: Worldbook, *candidates: str) -> str:
    """The first candidate id no evidence turn mentions."""
    return next(c for c in candidates if not any(mentions(item.observation, c) or mentions(item.action_text, c)
                                                 for item in book.evidence))


def _play(harness: Harness, name: str, **arguments: object) -> tuple[str, str | None]:
    prediction = harness.predict({"name": name, "arguments": arguments})
    harness.commit()
    return prediction.observation, prediction.audit.source


def test_an_order_the_logs_never_showed_is_about_itself_stays_so_and_takes_writes(book: Worldbook) -> None:
    order = _unshown(book, "#O00017", "#O00117", "#O01017")
    harness = Harness(book)
    harness.start(f"Hello, my order {order} never arrived.")  # the task names it: an order that exists
    first, source = _play(harness, "get_order", order_id=order)
    record = json.loads(first)
    assert source == "record_invented" and record["order_id"] == order
    stored = {json.dumps(json.loads(item.observation), sort_keys=True) for item in book.evidence
              if item.observation.startswith("{")}
    borrowed = {**record, "order_id": None}
    assert all(json.dumps({**json.loads(s), "order_id": None}, sort_keys=True) != json.dumps(borrowed, sort_keys=True)
               for s in stored)  # not another order's record with the id swapped
    status, _ = _play(harness, "get_order_status", order_id=order)  # another tool, the same invented order
    assert json.loads(status) == {"order_id": order, "status": record["status"]}
    assert _play(harness, "get_order", order_id=order)[0] == first  # the same on re-read
    written, _ = _play(harness, "modify_order_address", order_id=order, line1="1 Elm St", line2="", city="Reno",
                       state="NV", zip="89501")
    after = json.loads(_play(harness, "get_order", order_id=order)[0])
    if written.startswith("{"):  # the write answered the changed record: the next read agrees with it
        assert after == json.loads(written) and after["shipping_address"]["line1"] == "1 Elm St"
    else:  # refused (a learned precondition): nothing changed
        assert after == record


def test_an_id_answered_absent_stays_absent_and_ids_answered_about_stay(book: Worldbook) -> None:
    harness = Harness(book)
    tracker = harness.source("records").tracker
    form = tracker.unseen.absent_form("get_order")
    assert form is not None and "{id}" in form  # learned from the probing recordings' unknown ids
    ghost = _unshown(book, "#O99999", "#O99990", "#O99909")
    harness.start("Hello.")
    harness.observe({"name": "get_order", "arguments": {"order_id": ghost}}, form.replace("{id}", ghost))
    _play(harness, "search_products", query="lamp")
    answer, source = _play(harness, "get_order_status", order_id=ghost)
    assert source == "record_absent" and ghost in answer and not answer.startswith("{")
    assert _play(harness, "get_order", order_id=ghost) == (form.replace("{id}", ghost), "record_absent")


def test_the_existence_of_an_unlisted_id_follows_the_evidence_rates(book: Worldbook) -> None:
    tracker = Harness(book).source("records").tracker
    unseen = tracker.unseen
    ghost = _unshown(book, "#O99999", "#O99990")
    listed = unseen.exists("get_order", "order_id", ghost, [f"my order {ghost}"])
    unlisted = unseen.exists("get_order", "order_id", ghost, ["Hello."])
    assert listed.situation == "listed" and listed.exists
    assert unlisted.situation == "unlisted" and unlisted.rate is not None
    assert unlisted.exists == (unlisted.rate >= 0.5)  # the probing recordings' made-up ids were not found
    assert ghost in unlisted.note(ghost)


def test_an_answer_about_another_entity_is_vetoed(book: Worldbook) -> None:
    tracker = Harness(book).source("records").tracker
    user = next(item for item in book.evidence if item.action == "get_user" and item.observation.startswith("{"))
    other = json.loads(user.observation)["user_id"]
    assert tracker.veto("get_user", {"user_id": "cu_000000"}, user.observation) == (
        f"it answers about user_id={other!r}, not the 'cu_000000' asked")
    assert tracker.veto("get_user", {"user_id": other}, user.observation) is None


def test_ids_are_slotted_and_found_as_whole_tokens_only() -> None:
    assert slot_id("Error: order #O12 not found ({#O12})", "#O12") == "Error: order {id} not found ({{{id}}})"
    assert slot_id("user no not found", "no") == "user {id} not found"
    assert slot_id("does not add up", "no") == "does not add up"
    assert mentions("orders: #O12, #O123", "#O12") and not mentions("#O123", "#O12")
    assert not mentions("cu_12ab", "12ab") and mentions("id 12ab.", "12ab")


def test_a_customer_the_logs_never_showed_is_found_by_what_they_said_and_is_one_world(book: Worldbook) -> None:
    email = "zed.quux77@example.com"
    assert not any(email in item.observation for item in book.evidence)
    harness = Harness(book)
    harness.start(f"Hi, I am Zed, email {email}; my order never arrived.")
    found, source = _play(harness, "find_user_id_by_email", email=email)
    assert source == "query_invented"
    user_id = json.loads(found) if found.startswith('"') else found
    assert _play(harness, "find_user_id_by_email", email="not.told@example.com") == (
        "Error: user not found", "query_empty")  # a value nobody told the session: the learned empty answer
    user = json.loads(_play(harness, "get_user", user_id=user_id)[0])
    assert user["user_id"] == user_id and user["email"] == email  # the user found by that email has it
    assert _play(harness, "find_user_id_by_email", email=email)[0] == found  # found again, the same user
    for order_id in user["orders"][:2]:  # the orders it lists exist, and name it as their user
        order = json.loads(_play(harness, "get_order", order_id=order_id)[0])
        assert order["order_id"] == order_id and order["user_id"] == user_id


def test_a_read_repeated_at_once_agrees_and_a_changing_action_is_not_assumed_to(book: Worldbook) -> None:
    from worldsmith.sim.sources.memory import repeatable_actions

    repeatable = repeatable_actions(book.evidence)  # what the probing recordings repeated at once, answered alike
    assert "find_user_id_by_email" in repeatable and "add_card" not in repeatable
    harness = Harness(book)
    harness.start("Hello.")
    first = _play(harness, "find_user_id_by_email", email="someone.else@example.com")
    assert _play(harness, "find_user_id_by_email", email="someone.else@example.com") == (first[0], "repeat")


def test_an_entity_named_by_a_call_that_does_not_select_it_keeps_its_existence(book: Worldbook) -> None:
    harness = Harness(book)
    ghost = _unshown(book, "cu_13085a", "cu_13085b")
    harness.start("Hello.")
    absent, source = _play(harness, "get_user", user_id=ghost)
    assert source == "record_absent"  # the probing recordings' unlisted ids were not found
    assert _play(harness, "get_user_payment_methods", user_id=ghost) == (absent, "record_absent")  # nor is it here
    harness.start("Hello.")
    listed, _ = _play(harness, "get_user_payment_methods", user_id=ghost)
    assert listed.startswith("[")  # data about it was answered (nearest evidence's list): it exists from now on
    assert json.loads(_play(harness, "get_user", user_id=ghost)[0])["user_id"] == ghost


def _invoice_evidence(*, unknown_ids: bool) -> list[Evidence]:
    """Calls of `get_invoice(token, invoice_id)`: a good token shows the record, a bad one is refused for the token;
    `unknown_ids`: the evidence also holds calls of ids no answer showed (with a good token)."""
    record = json.dumps({"invoice_id": "i1", "total": 12})
    calls = [("e1", "t1", "i1", record), ("e1", "bad", "i1", '{"error": "Invalid token"}'), ("e1", "t1", "i1", record),
             ("e2", "t1", "i1", record), ("e2", "worse", "i1", '{"error": "Invalid token"}'), ("e2", "t1", "i1", record),
             ("e3", "t1", "i1", record), ("e3", "t1", "i1", record),
             *[("e3", "bad", f"nn{n}", '{"error": "Invalid token"}') for n in range(3)],  # unknown ids, bad token
             *[("e4", "t1", "i1", record)] * 6]
    if unknown_ids:
        calls += [("e1", "t1", "zz9", '{"error": "Invoice not found"}'),
                  ("e2", "t1", "qq7", '{"error": "Invoice not found"}')]
    return [Evidence(turn_id=f"{episode}#{index}", action="get_invoice",
                     arguments={"token": token, "invoice_id": ident}, observation=observation,
                     action_text=f'get_invoice {{"token": "{token}", "invoice_id": "{ident}"}}')
            for index, (episode, token, ident, observation) in enumerate(calls)]


@pytest.mark.parametrize("unknown_ids", [True, False])
def test_a_refusal_about_another_argument_says_nothing_of_existence(unknown_ids: bool) -> None:
    evidence = _invoice_evidence(unknown_ids=unknown_ids)
    selectors = learn_selectors(evidence)
    assert selectors["get_invoice"] == ("invoice_id", "invoice_id")
    unseen = UnseenEntities(evidence, selectors, RecordStore.from_evidence(evidence), {"get_invoice"})
    # the refusal is never learned as the absent form: only calls whose token some answered call had vote
    assert unseen.absent_answer("get_invoice", "x") == ('{"error": "Invoice not found"}' if unknown_ids else None)
    assert not unseen.says_absent("get_invoice", "i1", '{"error": "Invalid token"}')
    assert unseen.says_absent("get_invoice", "i1", '{"error": "Invoice not found"}')
    assert not unseen.says_absent("get_invoice", "i1", json.dumps({"invoice_id": "i1", "total": 12}))


def test_a_read_that_wraps_its_record_answers_the_sessions_record_in_its_wrapper() -> None:
    """`get_invoice` answers `{"invoice": {...}}`: the session's record is read back through the wrapper, whatever
    other argument the call gives, and an answer that it does not exist is refused (existence does not flip)."""
    shown = {"invoice_id": "i9", "total": 40}
    evidence = [Evidence(turn_id=f"e{n}#0", action="get_invoice", arguments={"token": "t1", "invoice_id": f"i{n}"},
                         observation=json.dumps({"invoice": {"invoice_id": f"i{n}", "total": n}}),
                         action_text=f'get_invoice {{"token": "t1", "invoice_id": "i{n}"}}') for n in range(6)]
    tracker = RecordTracker(evidence)
    assert tracker.wraps == {"get_invoice": "invoice"} and "get_invoice" in tracker.reads
    tracker.observe("get_invoice", {"token": "t1", "invoice_id": "i9"}, json.dumps({"invoice": shown}))
    answers = tracker.propose("get_invoice", {"token": "t2", "invoice_id": "i9"})
    assert [json.loads(answer.observation) for answer in answers] == [{"invoice": shown}]
    assert tracker.veto("get_invoice", {"token": "t2", "invoice_id": "i9"}, '{"error": "Invoice not found"}')

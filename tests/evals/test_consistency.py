"""The consistency checker: each invariant caught on a tiny world model that breaks exactly that one, none on a
consistent one; end to end on real books (toolshop, BFCL) with the harness and nearest evidence; the CLI's --json."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from helpers import tool_log
from worldsmith.cli.main import main
from worldsmith.evals.consistency import ConsistencyConfig, check_consistency
from worldsmith.evals.consistency_checks import answers_about, same_answer, shows_record, spellings
from worldsmith.evals.consistency_plan import perturb_id, plan_probes
from worldsmith.evals.consistency_report import INVARIANTS, ConsistencyReport, read_report
from worldsmith.sim.base import Audit, Prediction, WorldModelBase
from worldsmith.traces import Episode
from worldsmith.traces.model import Action
from worldsmith.worldbook import Worldbook, WorldbookStore, build_worldbook

REPO = Path(__file__).resolve().parents[2]
TOOLSHOP = REPO / "data_samples" / "toolshop"
BFCL = REPO / "data_samples" / "collected" / "bfcl.jsonl"

# ------------------------------------------------------------------------------------------- a tiny order API

ORDERS = {f"#O{n}": {"order_id": f"#O{n}", "status": "pending", "total": n} for n in (1001, 1002, 1003, 1004)}


def _order(ident: str, **changes: Any) -> dict[str, Any]:
    return {**ORDERS[ident], **changes}


def _tiny_book() -> Worldbook:
    """Recorded episodes of get_order (a read) and cancel_order (a write the next read agrees with)."""
    episodes = []
    for ident in ORDERS:
        episodes.append([
            ("get_order", {"order_id": ident}, _order(ident)),
            ("cancel_order", {"order_id": ident, "reason": "no longer needed"}, _order(ident, status="cancelled")),
            ("get_order", {"order_id": ident}, _order(ident, status="cancelled")),
        ])
    episodes.append([("get_order", {"order_id": "#O9999"}, "Error: order #O9999 not found")])
    return Worldbook(name="tiny", evidence=tool_log(episodes))


class OrderAPI(WorldModelBase):
    """A consistent order API: the recorded orders, cancels that stick, "not found" for any other id; every
    spelling of a call read the same (an OpenAI tool call too)."""

    name = "fake-consistent"

    def _on_start(self) -> None:
        self.orders = {ident: dict(record) for ident, record in ORDERS.items()}

    def predict(self, action: Action | str | dict[str, Any]) -> Prediction:
        if isinstance(action, dict) and isinstance(action.get("function"), dict):
            call = action["function"]
            action = {"name": call["name"], "arguments": json.loads(call["arguments"])}
        elif isinstance(action, str) and " {" in action:
            name, _, arguments = action.partition(" ")
            action = {"name": name, "arguments": json.loads(arguments)}
        return super().predict(action)

    def _answer(self, action: Action) -> tuple[str, dict[str, dict[str, Any]]]:
        """The answer and the orders after the call."""
        ident = str(action.arguments.get("order_id"))
        orders = {key: dict(value) for key, value in self.orders.items()}
        if ident not in orders:
            return f"Error: order {ident} not found", orders
        if action.name == "cancel_order":
            orders[ident]["status"] = "cancelled"
        return json.dumps(orders[ident]), orders

    def _predict(self, action: Action) -> Prediction:
        observation, orders = self._answer(action)
        self._after = orders
        return Prediction(observation=observation, outcome="success", audit=Audit(route="fake"))

    def _on_commit(self, action: Action, prediction: Prediction) -> None:
        self.orders = self._after


class RepeatedReadDrifts(OrderAPI):
    """Breaks invariant 1: a read repeated at once answers a different record text."""

    def _predict(self, action: Action) -> Prediction:
        prediction = super()._predict(action)
        last = self.history[-1].action if self.history else None
        if last is not None and last.name == action.name and last.arguments == action.arguments \
                and prediction.observation.startswith("{"):
            prediction.observation = json.dumps({**json.loads(prediction.observation), "note": "again"})
        return prediction


class AnswersAnotherEntity(OrderAPI):
    """Breaks invariant 2: an id it does not know is answered with another order's record."""

    def _answer(self, action: Action) -> tuple[str, dict[str, dict[str, Any]]]:
        ident = str(action.arguments.get("order_id"))
        if ident not in self.orders and action.name == "get_order":
            return json.dumps(next(iter(self.orders.values()))), self.orders
        return super()._answer(action)


class ExistenceFlips(OrderAPI):
    """Breaks invariant 3: an id it does not know is "not found" the first time, a record once asked before."""

    def _answer(self, action: Action) -> tuple[str, dict[str, dict[str, Any]]]:
        ident = str(action.arguments.get("order_id"))
        if ident in self.orders or action.name != "get_order":
            return super()._answer(action)
        last = self.history[-1] if self.history else None
        if last is not None and last.action.name == action.name and last.action.arguments == action.arguments:
            return last.observation, self.orders  # a repeat at once answers the same
        asked = any(item.action.arguments.get("order_id") == action.arguments.get("order_id") for item in self.history)
        if asked:
            return json.dumps({"order_id": ident, "status": "pending", "total": 0}), self.orders
        return f"Error: order {ident} not found", self.orders


class SpellingMatters(OrderAPI):
    """Breaks invariant 4: a call given as text is not understood."""

    def predict(self, action: Action | str | dict[str, Any]) -> Prediction:
        if isinstance(action, str):
            prediction = Prediction(observation="Error: unknown command", outcome="failure:invalid_action",
                                    audit=Audit(route="fake"))
            self._pending = (Action(name="", arguments={}, raw=action), prediction)
            return prediction
        return super().predict(action)


class WriteForgotten(OrderAPI):
    """Breaks invariant 5: a cancel answers the cancelled order but the store keeps it pending."""

    def _on_commit(self, action: Action, prediction: Prediction) -> None:
        if action.name != "cancel_order":
            super()._on_commit(action, prediction)


CONFIG = ConsistencyConfig(method="fake", sessions=12, steps=12, seed=3)


def _check(model: type[OrderAPI]) -> ConsistencyReport:
    return check_consistency(_tiny_book(), CONFIG, factory=model)


def test_the_tiny_books_plan_reads_writes_and_unseen_ids() -> None:
    plan = plan_probes(_tiny_book(), seed=0)
    assert plan.tools["get_order"].role == "read" and plan.tools["cancel_order"].role == "write"
    assert plan.tools["get_order"].id_argument == "order_id" and plan.tools["get_order"].answers_about_id
    assert set(plan.seen_ids["order_id"]) == {*ORDERS, "#O9999"}
    unseen = plan.unseen_ids["order_id"]
    assert unseen and all(i.startswith("#O") and len(i) == 6 and i not in plan.seen_ids["order_id"] for i in unseen)
    assert ("cancel_order", "get_order") in plan.pairs and "status" in plan.pairs[("cancel_order", "get_order")].fields


def test_a_consistent_api_breaks_no_invariant_and_every_invariant_is_checked() -> None:
    report = _check(OrderAPI)
    assert report.violations == 0 and not report.examples
    assert all(report.invariants[name].checks > 0 for name in INVARIANTS), report.invariants


@pytest.mark.parametrize(("model", "broken"), [
    (RepeatedReadDrifts, "repeated_reads"),
    (AnswersAnotherEntity, "answers_about_id"),
    (ExistenceFlips, "stable_existence"),
    (SpellingMatters, "spelling"),
    (WriteForgotten, "write_then_read"),
])
def test_each_broken_invariant_is_caught_and_only_it(model: type[OrderAPI], broken: str) -> None:
    report = _check(model)
    found = {name for name, tally in report.invariants.items() if tally.violations}
    assert found == {broken}
    example = next(e for e in report.examples if e.invariant == broken)
    assert example.calls and len(example.answers) == len(example.calls)


def test_a_factory_without_predict_aside_is_asked_from_a_fresh_start() -> None:
    class NoAside:  # only the protocol: start / predict / commit
        name = "bare"

        def __init__(self) -> None:
            self.inner = SpellingMatters()

        def start(self, prefix: Any, initial_state: Any = None) -> None:
            self.inner.start(prefix, initial_state)

        def predict(self, action: Any) -> Prediction:
            return self.inner.predict(action)

        def commit(self) -> None:
            self.inner.commit()

    report = check_consistency(_tiny_book(), ConsistencyConfig(method="bare", sessions=3, steps=6), factory=NoAside)
    assert report.invariants["spelling"].violations == report.invariants["spelling"].checks > 0


def test_the_checks_themselves() -> None:
    assert same_answer(' {"a": 1}\n', '{"a": 1}') and not same_answer('{"a": 1}', '{"a": 2}')
    assert answers_about('{"order_id": "#O1", "status": "x"}', "order_id", "#O1") is True
    assert answers_about('{"order_id": "#O2"}', "order_id", "#O1") is False
    assert answers_about("Error: order #O1 not found", "order_id", "#O1") is None
    assert shows_record('[{"id": 3}]') and not shows_record('{"error": "no"}') and not shows_record("[]")
    forms = spellings("get_order", {"order_id": "#O1"})
    assert forms["text"] == 'get_order {"order_id": "#O1"}' and forms["mcp"] == {"name": "get_order",
                                                                                  "arguments": {"order_id": "#O1"}}
    assert json.loads(forms["openai"]["function"]["arguments"]) == {"order_id": "#O1"}


def test_perturbed_ids_keep_their_shape() -> None:
    rng = random.Random(0)
    charset = {"digit": "0123456789", "lower": "abcdef", "upper": "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}
    for seen in ("cu_4ae568", "#O29129", "pm_card_4349", "P-1751"):
        made = perturb_id(seen, rng, {seen}, charset)
        assert made != seen and len(made) == len(seen)
        cut = max(i + 1 for i, c in enumerate(seen) if not c.isalnum())
        assert made[:cut] == seen[:cut]
    number = perturb_id(12446, rng, set(), charset)
    assert isinstance(number, int) and len(str(number)) == 5


def test_the_report_is_deterministic_and_round_trips(tmp_path: Path) -> None:
    first, again = _check(WriteForgotten), _check(WriteForgotten)
    assert first.model_dump() == again.model_dump()
    stored = first.save(tmp_path)
    assert stored == tmp_path / "consistency.json" and read_report(tmp_path).model_dump() == first.model_dump()


# --------------------------------------------------------------------------------------------- real books


def _episodes(path: Path) -> list[Episode]:
    return [Episode.model_validate({k: v for k, v in orjson.loads(line).items() if k != "format"})
            for line in path.read_bytes().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def toolshop_book() -> Worldbook:
    episodes = _episodes(TOOLSHOP / "expert.jsonl") + _episodes(TOOLSHOP / "probing.jsonl")
    return build_worldbook(episodes, name="toolshop").book


@pytest.fixture(scope="module")
def bfcl_book() -> Worldbook:
    return build_worldbook(_episodes(BFCL), name="bfcl").book


def _assert_counts_add_up(report: ConsistencyReport, config: ConsistencyConfig) -> None:
    assert set(report.invariants) == set(INVARIANTS)
    for name, tally in report.invariants.items():
        assert 0 <= tally.violations <= tally.checks
        assert tally.rate == (round(tally.violations / tally.checks, 4) if tally.checks else None)
        per_tool = [tools[name] for tools in report.tools.values()]
        assert sum(t.checks for t in per_tool) == tally.checks and sum(t.violations for t in per_tool) == \
            tally.violations
    assert report.checks == sum(t.checks for t in report.invariants.values())
    assert report.sessions == config.sessions and report.seed == config.seed and report.method == config.method
    for example in report.examples:
        assert report.tools[example.tool][example.invariant].violations > 0
        assert example.session < config.sessions and example.step < config.steps
        assert all(len(answer) <= 300 for answer in example.answers)
    kept: dict[tuple[str, str], int] = {}
    for example in report.examples:
        kept[(example.invariant, example.tool)] = kept.get((example.invariant, example.tool), 0) + 1
    assert all(count <= config.max_examples for count in kept.values())
    assert report.predictions >= 4 * report.invariants["spelling"].checks  # each call, four spellings


@pytest.mark.slow
@pytest.mark.parametrize("method", ["harness", "nearest"])
def test_toolshop_end_to_end(toolshop_book: Worldbook, method: str, tmp_path: Path) -> None:
    config = ConsistencyConfig(method=method, sessions=6, steps=10, seed=1)
    report = check_consistency(toolshop_book, config, book_version="v-test", run_dir=tmp_path)
    _assert_counts_add_up(report, config)
    roles = {tool["name"]: tool["role"] for tool in report.plan["tools"]}
    assert {"read", "write"} <= set(roles.values())  # the book's tools, classified from its rules and turns
    assert report.invariants["answers_about_id"].checks > 0 and report.invariants["spelling"].checks > 0
    assert report.plan["unseen_ids"] and all(n > 0 for n in report.plan["unseen_ids"].values())
    assert read_report(tmp_path).book_version == "v-test"


@pytest.mark.slow
def test_bfcl_end_to_end(bfcl_book: Worldbook) -> None:
    config = ConsistencyConfig(method="harness", sessions=4, steps=10, seed=0)
    report = check_consistency(bfcl_book, config)
    _assert_counts_add_up(report, config)
    assert report.invariants["spelling"].checks > 0 and report.book == "bfcl"


def test_cli_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    WorldbookStore(tmp_path / "worldbooks").save(_tiny_book())
    out = tmp_path / "report.json"
    code = main(["consistency", "--book", "tiny", "--method", "nearest", "--sessions", "3", "--steps", "6",
                 "--seed", "2", "--workspace", str(tmp_path), "--out", str(out), "--json"])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["book"] == "tiny" and printed["method"] == "nearest" and printed["seed"] == 2
    assert printed["book_version"] == WorldbookStore(tmp_path / "worldbooks").head("tiny")
    assert set(printed["invariants"]) == set(INVARIANTS) and printed["stored"] == str(out)
    assert read_report(out).model_dump(mode="json") == {k: v for k, v in printed.items() if k != "stored"}
    source = printed["provenance"]  # what produced the rates: method, model, the book probed, n checks, the command
    assert source["method"] == "nearest" and source["model"] == "none" and source["n"] == printed["checks"]
    assert source["unit"] == "checks" and source["dataset"] == "worldbook tiny" and source["recorded"]
    assert source["dataset_digest"] == printed["book_version"] and "3 probe sessions" in source["split"]
    assert "worldsmith consistency --book tiny" in source["command"] and "--seed 2" in source["command"]
    old = read_report(out).model_copy(update={"provenance": None})  # a report stored before it was recorded
    assert not old.source().recorded and old.source().fields()["model"] == "unknown"
    assert old.source().n == printed["checks"]
    assert main(["consistency", "--book", "tiny", "--sessions", "2", "--steps", "4", "--workspace",
                 str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert "get_order" in table and "violations/checks" in table
    assert main(["consistency", "--book", "missing", "--workspace", str(tmp_path), "--json"]) == 4

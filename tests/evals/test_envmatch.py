"""Books matched to a dataset's environments by the actions they share, and the message that names the fix
when a dataset holds no episode of the book's environment (held-out sets and evaluation runs say it)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from helpers import toolshop_files
from worldsmith import Workspace
from worldsmith.evals.config import EvalConfig
from worldsmith.evals.envmatch import book_actions, env_matches, match_dataset
from worldsmith.evals.heldout import HeldOut, check_heldout
from worldsmith.evals.run import run_eval
from worldsmith.worldbook.model import ActionSchema, ActionSpec, Worldbook

TOOLS = ["find_user_id_by_email", "find_user_id_by_name_zip", "get_user", "get_order", "search_orders",
         "get_order_status", "get_product", "search_products", "get_user_payment_methods", "place_order",
         "cancel_order", "modify_user_address"]


def book(env: str | None, tools: list[str] = TOOLS) -> Worldbook:
    return Worldbook(name="shop", env_id=env, action_schema=ActionSchema(actions=[ActionSpec(name=t) for t in tools]))


@pytest.fixture
def split_shop(workspace: Workspace, tmp_path: Path) -> tuple[Workspace, str, str]:
    """Dataset `shop`: the toolshop train and test transcripts without schemas under two ids (the test file's
    given on import: derived, it would join the train file's environment)."""
    train, test = toolshop_files(tmp_path, declared=False)
    train_env, test_env = workspace.ingest([train], "shop").files[0].derived_env, "test-file-api"
    workspace.ingest([test], "shop", env=test_env)
    assert train_env and train_env != test_env
    return workspace, train_env, test_env


def test_env_matches_by_id_family_or_prefix() -> None:
    assert env_matches("alfworld/pick", "alfworld") and env_matches("x", None) and env_matches(None, "")
    assert not env_matches(None, "alfworld") and not env_matches("tools-a", "tools-b")
    assert book_actions(book(None, ["a", "b"])) == {"a", "b"}


def test_a_dataset_of_another_id_but_the_same_api_is_found_and_the_fix_named(
        split_shop: tuple[Workspace, str, str]) -> None:
    workspace, train_env, test_env = split_shop
    dataset = workspace.dataset("shop")
    matched = match_dataset(book(train_env), dataset)
    assert matched.problem() is None and matched.suggested_env == train_env  # its own environment is there

    other = match_dataset(book("toolshop"), dataset)  # a book of the same API under a third id
    assert {fit.env for fit in other.environments} == {train_env, test_env}
    assert all(fit.compatible for fit in other.environments) and other.suggested_env == other.best.env
    problem = other.problem()
    assert problem is not None and "has no episodes of environment 'toolshop'" in problem
    assert f"worldsmith traces relabel shop --env toolshop --from {other.best.env}" in problem

    stranger = match_dataset(book("airline", ["book_flight", "get_reservation"]), dataset)
    assert stranger.best is None and stranger.suggested_env is None
    assert "None of them calls the book's actions" in (stranger.problem() or "")


def test_held_out_and_evaluation_refusals_say_why_and_how_to_fix(split_shop: tuple[Workspace, str, str]) -> None:
    workspace, train_env, test_env = split_shop
    test_ids = tuple(e.id for e in workspace.dataset("shop").iter_episodes() if e.env_id == test_env)
    with pytest.raises(ValueError, match=f"relabel shop --env {train_env} --from {test_env}"):
        check_heldout(book(train_env), HeldOut(dataset="shop", episodes=test_ids[:3], env=train_env), workspace)
    config = EvalConfig(name="shop-eval", book="shop", dataset="shop", env="toolshop", methods=["harness"], max_episodes=2)
    with pytest.raises(ValueError, match="Relabel it: `worldsmith traces relabel shop --env toolshop"):
        run_eval(config, workspace=workspace, book=book("toolshop"))
    workspace.relabel("shop", train_env, only=[test_env])  # the fix: now the held-out set is the book's
    check_heldout(book(train_env), HeldOut(dataset="shop", episodes=test_ids[:3], env=train_env), workspace)


def test_book_match_on_the_command_line(split_shop: tuple[Workspace, str, str],
                                        capsys: pytest.CaptureFixture[str]) -> None:
    from worldsmith.cli.main import main
    from worldsmith.worldbook import WorldbookStore

    workspace, train_env, test_env = split_shop
    store = WorldbookStore(workspace.root / "worldbooks")
    store.save(book(train_env))
    root = ["--workspace", str(workspace.root)]
    assert main(["book", "match", "shop", "--dataset", "shop", *root, "--json"]) == 0
    out = orjson.loads(capsys.readouterr().out)
    assert out["suggested_env"] == train_env and out["problem"] is None
    assert {fit["env"] for fit in out["environments"]} == {train_env, test_env}
    store.save(book("toolshop"), parent=store.head("shop"))
    assert main(["book", "match", "shop", "--dataset", "shop", *root]) == 1
    text = capsys.readouterr().out
    assert "of turns known" in text and "worldsmith traces relabel shop --env toolshop" in text


def test_an_empty_selection_is_no_environment_mismatch(split_shop: tuple[Workspace, str, str]) -> None:
    """A split or filter that selects nothing is reported as itself, not as a dataset of another environment."""
    from worldsmith.evals.envmatch import match_episodes

    workspace, train_env, test_env = split_shop
    other = match_episodes(book(train_env), workspace.dataset("shop").iter_episodes(), "shop")
    assert other.mismatch() is None  # its own environment is there
    elsewhere = match_episodes(book("airline", TOOLS), workspace.dataset("shop").iter_episodes(), "shop")
    assert elsewhere.mismatch() == elsewhere.problem() is not None  # only other environments: name the fix
    empty = match_episodes(book(train_env), iter(()), "shop")
    assert empty.problem() is not None and empty.mismatch() is None
    with pytest.raises(ValueError, match="split 'nosuch'"):
        run_eval(EvalConfig(name="empty", book="shop", dataset="shop", split="nosuch", env=train_env, methods=["nearest"]),
                 workspace=workspace, book=book(train_env))

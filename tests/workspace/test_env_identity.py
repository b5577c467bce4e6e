"""Environment identity of imported chat logs: one API gives one id (from the declared tool schemas) whatever
tools each file happens to call; the called tools only when no schema is declared; and a dataset's episodes
can be relabelled afterwards, keeping everything else (rows, content hashes, splits) as it was."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from helpers import TOOLSHOP_CONVERSATIONS as CONVERSATIONS
from helpers import toolshop_files
from worldsmith import Workspace
from worldsmith.cli.main import main
from worldsmith.workspace import declared_tool_names, tool_set_env_id


def test_declared_tool_names_read_openai_and_bare_schemas() -> None:
    tools = [{"type": "function", "function": {"name": "get_user", "parameters": {}}}, {"name": "cancel_order"},
             {"type": "function", "function": {"name": "get_user"}}, "junk", {"function": {}}]
    assert declared_tool_names({"tools": tools}) == ["cancel_order", "get_user"]
    assert declared_tool_names(orjson.dumps({"functions": [{"name": "legacy"}]}).decode()) == ["legacy"]
    assert declared_tool_names(None) == declared_tool_names("not json") == declared_tool_names({"tools": 3}) == []


def test_train_and_test_files_of_one_api_get_one_environment(workspace: Workspace, tmp_path: Path) -> None:
    train, test = toolshop_files(tmp_path)
    first = workspace.ingest([train], "shop")
    second = workspace.ingest([test], "shop_test")  # another dataset, another ingest: the same id all the same
    schema_names = [t["function"]["name"] for t in json.loads(CONVERSATIONS.open().readline())["tools"]]
    expected = tool_set_env_id(schema_names)
    assert [f.derived_env for f in (*first.files, *second.files)] == [expected, expected]
    assert {f.derived_from for f in (*first.files, *second.files)} == {"declared tools"}
    assert workspace.dataset("shop").environments() == workspace.dataset("shop_test").environments() == [expected]
    assert second.summary()["files"][0]["derived_from"] == "declared tools"


def test_without_schemas_the_called_tools_decide_and_a_relabel_joins_them(workspace: Workspace,
                                                                          tmp_path: Path) -> None:
    train, test = toolshop_files(tmp_path, declared=False)
    report = workspace.ingest([train, test], "shop")
    train_env, test_env = (f.derived_env for f in report.files)
    assert train_env != test_env and {f.derived_from for f in report.files} == {"called tools"}
    dataset = workspace.dataset("shop")
    workspace.split("shop")
    splits, hashes, revision = dataset.split_assignments(), dataset.content_hashes(), dataset.revision
    episodes = {e.id: e for e in dataset.iter_episodes()}

    with pytest.raises(ValueError, match="has no episodes of environment nope"):
        workspace.relabel("shop", "toolshop", only=["nope"])
    with pytest.raises(ValueError, match="environment id is empty"):
        workspace.relabel("shop", "  ")
    result = workspace.relabel("shop", train_env, only=[test_env])
    assert result.episodes == sum(1 for e in episodes.values() if e.env_id == test_env) > 0
    assert result.before == {test_env: result.episodes} and result.revision == revision + 1 and result.parts == 1
    assert dataset.environments() == [train_env]
    relabelled = {e.id: e for e in dataset.iter_episodes()}
    assert {i: e.model_copy(update={"env_id": None}) for i, e in relabelled.items()} == {
        i: e.model_copy(update={"env_id": None}) for i, e in episodes.items()}  # nothing else moved
    assert dataset.split_assignments() == splits and dataset.content_hashes() == hashes
    assert set(dataset.list_episodes(limit=100)["env_id"]) == {train_env}
    assert dataset.manifest["relabels"][0]["before"] == {test_env: result.episodes}
    again = workspace.relabel("shop", train_env)  # already so: nothing is rewritten
    assert again.episodes == 0 and again.revision == result.revision
    assert workspace.ingest([test], "shop").duplicates == result.episodes  # the same content: still deduplicated


def test_relabel_on_the_command_line(workspace: Workspace, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     ledger_file: Path) -> None:
    train, _ = toolshop_files(tmp_path)
    workspace.ingest([train, ledger_file], "mixed")  # the ledger episode names no environment
    root = ["--workspace", str(workspace.root)]
    assert main(["traces", "relabel", "mixed", "--env", "ledger", "--from-unnamed", *root, "--json"]) == 0
    out = orjson.loads(capsys.readouterr().out)
    assert out["episodes"] == 1 and out["before"] == {"": 1} and out["env"] == "ledger"
    assert main(["traces", "relabel", "mixed", "--env", "shop", *root]) == 0
    assert "episodes now have environment shop" in capsys.readouterr().out
    assert workspace.dataset("mixed").environments() == ["shop"]
    assert main(["traces", "relabel", "mixed", "--env", "x", "--from", "gone", *root]) == 2
    assert "has no episodes of environment gone" in capsys.readouterr().err

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

SAMPLES = Path(__file__).resolve().parents[2] / "data_samples"


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


def test_without_schemas_train_and_test_files_of_one_api_get_one_environment(workspace: Workspace,
                                                                             tmp_path: Path) -> None:
    """Issue 46: the two files call different tools (each some the other never does); their system prompt and most
    of the smaller tool set agree, so the second joins the first's environment, in either order, in one ingest or
    two, in one dataset or two; the report says which it joined and why."""
    train, test = toolshop_files(tmp_path, declared=False)
    report = workspace.ingest([train, test], "shop")
    first, second = report.files
    assert first.env_decision == "new" and first.derived_from == "called tools"
    assert second.env_decision == "joined" and second.derived_from == "matched environment"
    assert second.derived_env == first.derived_env and workspace.dataset("shop").environments() == [first.derived_env]
    assert second.env_reason.startswith(f"joined {first.derived_env} (tools: ")
    assert "system prompt similarity 1.00" in second.env_reason
    (candidate,) = second.env_candidates
    assert candidate.matches and candidate.shared_tools < min(candidate.file_tools, candidate.env_tools)  # neither a subset
    summary = report.summary()["files"][1]
    assert summary["env_decision"] == "joined" and summary["env_candidates"][0]["env"] == first.derived_env

    other = Workspace(tmp_path / "other")
    other.ingest([test], "shop_test")  # the test file first, the train file later into another dataset
    later = other.ingest([train], "shop_train").files[0]
    assert later.env_decision == "joined" and later.derived_env == other.dataset("shop_test").environments()[0]
    assert other.dataset("shop_train").environments() == other.dataset("shop_test").environments()


def test_a_file_joins_an_environment_named_by_earlier_logs(workspace: Workspace, tmp_path: Path) -> None:
    train, test = toolshop_files(tmp_path, declared=False)
    workspace.ingest([train], "shop", env="toolshop")  # the env chosen on import
    (joined,) = workspace.ingest([test], "shop_test").files
    assert joined.env_decision == "joined" and joined.derived_env == "toolshop"
    assert workspace.dataset("shop_test").environments() == ["toolshop"]


def _suite_halves(tmp_path: Path) -> list[Path]:
    """The bundled AgentDojo episodes of three suites (three APIs) as OpenAI chat logs without environment or tool
    schemas, each suite cut into two files."""
    source = Workspace(tmp_path / "source")
    files = []
    for suite in ("slack", "travel", "workspace"):
        source.ingest([SAMPLES / "agentdojo" / f"{suite}.jsonl"], suite)
        exported = tmp_path / f"{suite}.openai.jsonl"
        source.export(suite, "openai", exported)
        rows = [json.loads(line) for line in exported.read_text().splitlines()]
        for row in rows:
            row.pop("env_id", None), row.pop("environment_id", None), row.pop("tools", None)
        for half, part in (("a", rows[: len(rows) // 2]), ("b", rows[len(rows) // 2:])):
            path = tmp_path / f"{suite}-{half}.jsonl"
            path.write_text("".join(json.dumps(r) + "\n" for r in part))
            files.append(path)
    return files


def test_different_apis_stay_apart_and_each_apis_halves_join(workspace: Workspace, tmp_path: Path) -> None:
    report = workspace.ingest(_suite_halves(tmp_path), "agentdojo")
    envs = [f.derived_env for f in report.files]
    assert [f.env_decision for f in report.files] == ["new", "joined"] * 3
    assert envs[0] == envs[1] and envs[2] == envs[3] and envs[4] == envs[5] and len(set(envs)) == 3
    assert len(workspace.dataset("agentdojo").environments()) == 3


def _with_prompt(path: Path, prompt: str) -> Path:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        row["messages"][0] = {"role": "system", "content": prompt}
    out = path.with_name(f"other-prompt-{path.name}")
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def test_the_same_tools_under_another_system_prompt_are_another_environment(workspace: Workspace,
                                                                            tmp_path: Path) -> None:
    train, _ = toolshop_files(tmp_path, declared=False)
    (first,) = workspace.ingest([train], "shop").files
    other = _with_prompt(train, "You are the booking agent of a ferry line: sell crossings and refund them.")
    (second,) = workspace.ingest([other], "ferry").files
    assert second.env_decision == "new" and second.derived_env != first.derived_env
    assert second.derived_env.startswith(first.derived_env)  # the same tools, told apart by a suffix
    assert "closest: " in second.env_reason and "system prompt similarity 0." in second.env_reason


def test_a_file_matching_two_environments_keeps_its_own_and_the_user_chooses(workspace: Workspace, tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str],
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    train, test = toolshop_files(tmp_path, declared=False)
    workspace.ingest([train], "shop_a", env="shop-a")
    workspace.ingest([train], "shop_b", env="shop-b")
    root = ["--workspace", str(workspace.root)]
    assert main(["ingest", str(test), "--dataset", "shop_test", *root, "--json"]) == 0
    (file,) = orjson.loads(capsys.readouterr().out)["files"]
    assert file["env_decision"] == "ambiguous" and file["derived_env"] not in ("shop-a", "shop-b")
    assert sorted(c["env"] for c in file["env_candidates"]) == ["shop-a", "shop-b"]
    assert "matches 2 environments" in file["env_reason"] and "traces relabel" in file["env_reason"]
    assert workspace.dataset("shop_test").environments() == [file["derived_env"]]

    monkeypatch.setattr("sys.stdin.isatty", lambda: True)  # at a terminal the command asks
    answers = iter(["2"])
    monkeypatch.setattr("builtins.input", lambda prompt: next(answers))
    assert main(["ingest", str(test), "--dataset", "shop_test2", *root]) == 0
    out = capsys.readouterr().out
    # shop-a, shop-b, and the file kept apart just before
    assert "matches 3 environments; which one does it join?" in out and "episodes now have environment" in out
    second = next(line.split(". ", 1)[1] for line in out.splitlines() if line.startswith("  2. "))
    assert workspace.dataset("shop_test2").environments() == [second]


def test_relabel_joins_what_an_import_kept_apart(workspace: Workspace, tmp_path: Path) -> None:
    train, test = toolshop_files(tmp_path, declared=False)
    report = workspace.ingest([train], "shop")
    report_test = workspace.ingest([test], "shop", env="shop-test")
    train_env, test_env = report.files[0].derived_env, "shop-test"
    assert report_test.files[0].derived_env is None
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
    # the same content: still deduplicated after the relabel
    assert workspace.ingest([test], "shop", env=test_env).duplicates == result.episodes


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


def test_the_matching_rule_on_tool_sets_and_prompts() -> None:
    from collections import Counter

    from worldsmith.workspace.env_identity import EnvProfile, choose_environment, compare

    policy = " ".join(f"rule{i} applies to bookings of kind{i}." for i in range(30))  # a policy, as prompts hold
    prompt = "You are the support agent of Acme Air. Today is {day} May; the customer is {name}. " + policy
    api = EnvProfile("api", tools={f"t{i}" for i in range(8)},
                     prompts=Counter({prompt.format(day=1, name="Ann"): 3}))

    def file(tools: set[str], day: int = 2, text: str | None = None) -> EnvProfile:
        return EnvProfile("file", tools=tools, prompts=Counter({text or prompt.format(day=day, name="Bo"): 1}))

    assert compare(file({f"t{i}" for i in range(13)}), api).relation == "superset"  # 8 of 13: calls all of its
    assert compare(file({f"t{i}" for i in range(13)}), api).matches
    assert compare(file({"t0", "t1", "t2", "x"}), api).relation == "near subset"
    assert compare(file({"t0", "t1", "t2", "x"}), api).matches
    overlap = compare(file({*(f"t{i}" for i in range(5)), "x", "y", "z"}), api)  # 5 of 8 shared each way
    assert overlap.relation == "overlap" and overlap.matches  # enough, under the same prompt
    other_prompt = file({*(f"t{i}" for i in range(5)), "x", "y", "z"}, text="You sell ferry crossings.")
    assert not compare(other_prompt, api).matches
    assert not compare(file({"t0", "x", "y"}), EnvProfile("small", tools={"t0", "z", "w"})).matches  # one common tool
    assert compare(EnvProfile("file", tools={"t0", "t1"}), EnvProfile("bare", tools={"t0", "t1", "t2"})).matches

    twin = EnvProfile("api-copy", tools=set(api.tools), prompts=Counter(api.prompts))
    choice = choose_environment(file({"t0", "t1", "t2"}), [api, twin])
    assert choice.decision == "ambiguous" and {c.env for c in choice.candidates} == {"api", "api-copy"}
    assert choose_environment(file({"t0", "t1", "t2"}), [api]).env == "api"
    assert choose_environment(file({"q", "r"}), [api]).decision == "new"

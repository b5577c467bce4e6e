"""Import fuzzing (issue 32): hand-made hostile corpora for every importer, each ingested in a forked child under
a 1 GiB address-space limit and a 5 s alarm (`fuzz_runner.py`), so a bomb, a deep record, a long line, a bad
encoding or a huge id must be rejected (or taken) within those limits, with the good records of its file kept
and no temp files left. The limits are guards: a case over one is killed and fails here by name.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from agent_logs import otlp_document, record_agent_spans, write_inspect_logs
from zip_bombs import write_zip

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "data_samples"
RUNNER = Path(__file__).with_name("fuzz_runner.py")
MEMORY = 1 << 30  # what a case may add to the child's address space
WALL_S = 5
GIB2 = (2 << 30) - 1
DEEP_UNPARSEABLE = b"[" * 100_000 + b"]" * 100_000  # past every parser's nesting limit
TEXT_FORMATS = ("native", "openai", "agentworldbench", "trace2env", "otel")


def _lines(path: Path, count: int) -> list[bytes]:
    return path.read_bytes().splitlines()[:count]


def _base_lines(tmp: Path) -> dict[str, list[bytes]]:
    otel = orjson.dumps(otlp_document(record_agent_spans("genai")))
    return {
        "native": _lines(SAMPLES / "collected" / "shell.jsonl", 3),
        "openai": _lines(SAMPLES / "bfcl_multi_turn.openai.jsonl", 2),
        "agentworldbench": _lines(SAMPLES / "terminal.agentworldbench.jsonl", 3),
        "trace2env": _lines(SAMPLES / "textworld_walkthroughs.trace2env.jsonl", 2),
        "otel": [otel],
        "role_prefixed": _lines(SAMPLES / "ledger.role_prefixed.txt", 6),
    }


def _huge_id(line: bytes) -> bytes:
    record = orjson.loads(line)
    key = next((k for k in ("id", "episode_id", "task_id") if k in record), "id")
    record[key] = "i" * (5 << 20)
    return orjson.dumps(record)


def _awb_quadratic() -> bytes:
    """A 600 KB row whose state holds 150k newlines (the lazy `_STATE` pattern took 45 s on such a row)."""
    prompt = "**Current State:** a" + "\n" * 150_000 + "b" * 450_000 + "\n**Action:** go"
    tagged = "<predicted_observation>" * 2000 + "done"
    return orjson.dumps(
        {
            "task": "quad",
            "id": 1,
            "prompt": [prompt],
            "response": [tagged],
            "turn_idx": 0,
            "total_turns": 1,
            "current_prompt": prompt,
        }
    )


def _text_cases(base: dict[str, list[bytes]]) -> dict[str, tuple[str, bytes, dict[str, str]]]:
    """name -> (format, file bytes, environment) for the line-based formats."""
    cases: dict[str, tuple[str, bytes, dict[str, str]]] = {}
    for fmt in TEXT_FORMATS:
        good = base[fmt]
        deep_record = b'{"id": "deep", "v": ' + b"[" * 500 + b"]" * 500 + b"}"
        long_record = b'{"id": "long", "pad": "' + b"x" * (16 << 20) + b'"}'
        variants = {
            "base": (good, {}),
            "deep": ([good[0], DEEP_UNPARSEABLE, deep_record, *good[1:]], {}),
            "long-line-capped": ([good[0], long_record, *good[1:]], {"WORLDSMITH_IMPORT_MAX_RECORD_BYTES": "1048576"}),
            "long-line": ([good[0], long_record, *good[1:]], {}),
            "bad-utf8": ([good[0], b'{"id": "\xff\xfe\xc3\x28", "x": "caf\xe9"}', *good[1:]], {}),
            "huge-id": ([*good, _huge_id(good[0])], {}),
        }
        if fmt == "agentworldbench":
            variants["quadratic-row"] = ([*good, _awb_quadratic()], {})
        for variant, (lines, env) in variants.items():
            cases[f"{fmt}-{variant}"] = (fmt, b"\n".join(lines) + b"\n", env)
    good = base["role_prefixed"]
    cases["role_prefixed-base"] = ("role_prefixed", b"\n".join(good) + b"\n", {})
    long_line = b"User: " + b"y" * (16 << 20)
    cases["role_prefixed-long-line"] = ("role_prefixed", b"\n".join([*good, long_line]) + b"\n", {})
    cases["role_prefixed-long-line-capped"] = (
        "role_prefixed",
        b"\n".join([*good, long_line]) + b"\n",
        {"WORLDSMITH_IMPORT_MAX_RECORD_BYTES": "1048576"},
    )
    many = b"User: x\n" + b"yyyy\n" * 150_000 + b"Action: go\nObservation: ok"  # string += per line was quadratic
    cases["role_prefixed-many-lines"] = ("role_prefixed", b"\n".join([*good, many]) + b"\n", {})
    cases["role_prefixed-bad-utf8"] = ("role_prefixed", b"\n".join([*good, b"User: caf\xe9 \xff\xfe"]) + b"\n", {})
    cases["role_prefixed-nul"] = ("role_prefixed", b"\n".join(good) + b"\n\x00\x00binary", {})
    return cases


def _inspect_cases(eval_log: Path, tmp: Path) -> dict[str, tuple[str, Path, dict[str, str]]]:
    with zipfile.ZipFile(eval_log) as source:
        members = [(info.filename, source.read(info.filename)) for info in source.infolist()]

    def variant(
        name: str,
        change: Callable[[list[tuple[str, bytes | int]]], list[tuple[str, bytes | int]]],
        env: dict[str, str] | None = None,
    ) -> None:
        path = write_zip(tmp / f"{name}.eval", change(list(members)))
        cases[f"inspect-{name}"] = ("inspect", path, env or {})

    def replace(member: str, content: bytes | int) -> Callable[[list[Any]], list[Any]]:
        return lambda items: [(n, content if n == member else c) for n, c in items]

    def listed_garbage(items: list[Any]) -> list[Any]:
        header = json.loads(dict(items)["header.json"])
        header["eval"]["dataset"]["sample_ids"] = list(range(20_000))
        header["eval"]["config"]["epochs"] = 1
        kept = [(n, json.dumps(header).encode() if n == "header.json" else c) for n, c in items]
        return kept + [(f"samples/{i}_epoch_1.json", b"{") for i in range(20_000)]

    def epochs_claimed(items: list[Any]) -> list[Any]:
        header = json.loads(dict(items)["header.json"])
        header["eval"]["config"]["epochs"] = 10**9  # ids x epochs must never be enumerated
        return [(n, json.dumps(header).encode() if n == "header.json" else c) for n, c in items]

    cases: dict[str, tuple[str, Path, dict[str, str]]] = {}
    variant("base", lambda items: items)
    variant("epochs-claimed", epochs_claimed)
    variant("sample-bomb", replace("samples/add_epoch_1.json", GIB2))
    variant("header-bomb", replace("header.json", GIB2))
    variant(
        "archive-over-cap",
        replace("samples/add_epoch_1.json", GIB2),
        {"WORLDSMITH_IMPORT_MAX_ARCHIVE_BYTES": str(1 << 30)},
    )
    variant(
        "many-members",
        lambda items: items + [(f"junk/{i}", b"") for i in range(300)],
        {"WORLDSMITH_IMPORT_MAX_MEMBERS": "200"},
    )
    variant("deep-sample", replace("samples/miss_epoch_2.json", DEEP_UNPARSEABLE))
    variant("listed-garbage", listed_garbage)
    garbage = tmp / "garbage.eval"
    garbage.write_bytes(b"PK\x03\x04" + bytes(range(256)) * 64)
    cases["inspect-garbage"] = ("inspect", garbage, {})
    return cases


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("fuzz")
    cases: list[dict[str, Any]] = []
    for name, (fmt, content, env) in _text_cases(_base_lines(tmp)).items():
        path = tmp / f"{name}.data"
        path.write_bytes(content)
        cases.append({"name": name, "path": str(path), "format": fmt, "env": env})
    logs = write_inspect_logs(tmp / "inspect", formats=("eval",))
    for name, (fmt, path, env) in _inspect_cases(logs["eval"], tmp).items():
        cases.append({"name": name, "path": str(path), "format": fmt, "env": env})
    for case in cases:
        case.update(workspace=str(tmp / "ws" / case["name"]), memory=MEMORY, wall=WALL_S)
    (tmp / "cases.json").write_bytes(orjson.dumps(cases))
    subprocess.run(
        [sys.executable, str(RUNNER), str(tmp / "cases.json"), str(tmp / "results.json")],
        check=True,
        timeout=600,
        env={**_env(), "OMP_NUM_THREADS": "1", "ARROW_DEFAULT_MEMORY_POOL": "system"},
    )
    for case in cases:  # the corpora are large (16 MB lines): kept only as long as needed
        Path(case["path"]).unlink()
    return dict(orjson.loads((tmp / "results.json").read_bytes()))


def _env() -> dict[str, str]:
    import os

    return {key: value for key, value in os.environ.items() if not key.startswith("WORLDSMITH_IMPORT_")}


def held(result: dict[str, Any]) -> dict[str, Any]:
    """The case's summary, once it is known to have stayed within its limits and left nothing behind."""
    assert result.get("signal") is None, f"killed by {result['signal']} (limits: {WALL_S} s, +{MEMORY} bytes)"
    assert result.get("exit") == 0 and "crash" not in result, result.get("crash")
    assert result["max_rss"] < MEMORY, result["max_rss"]
    assert result["leftovers"] == []
    summary: dict[str, Any] = result["summary"]
    errors = " ".join(str(f.get("error") or "") for f in summary["files"]) + str(summary["rejects"])
    assert "MemoryError" not in errors and "RecursionError" not in errors and "importer failed" not in errors
    return summary


def file_error(summary: dict[str, Any]) -> str:
    return str(summary["files"][0].get("error") or "")


TEXT_VARIANTS = ("deep", "long-line-capped", "long-line", "bad-utf8", "huge-id")


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_hostile_lines_cost_only_themselves(results: dict[str, Any], fmt: str) -> None:
    base = held(results[f"{fmt}-base"])
    assert base["episodes"] >= 1 and base["rejected"] == 0
    for variant in TEXT_VARIANTS:
        summary = held(results[f"{fmt}-{variant}"])
        assert not file_error(summary), (variant, file_error(summary))
        assert summary["episodes"] >= base["episodes"], variant  # the good records are all kept
        if variant in ("deep", "long-line-capped", "bad-utf8"):
            assert summary["rejected"] >= 1, variant
    deep = held(results[f"{fmt}-deep"])
    assert any("nested" in reject["reason"] for reject in deep["rejects"]), deep["rejects"]
    capped = held(results[f"{fmt}-long-line-capped"])
    assert any("over the 1048576-byte limit" in reject["reason"] for reject in capped["rejects"])


def test_a_quadratic_agentworldbench_row_is_read_within_the_limit(results: dict[str, Any]) -> None:
    summary = held(results["agentworldbench-quadratic-row"])
    assert summary["episodes"] == held(results["agentworldbench-base"])["episodes"] + 1


@pytest.mark.parametrize("variant", ["long-line", "long-line-capped", "bad-utf8", "nul", "many-lines"])
def test_role_prefixed_text_survives_hostile_lines(results: dict[str, Any], variant: str) -> None:
    base = held(results["role_prefixed-base"])
    summary = held(results[f"role_prefixed-{variant}"])
    assert summary["episodes"] >= base["episodes"] and not file_error(summary)
    if variant == "long-line-capped":
        assert any("over the 1048576-byte limit" in reject["reason"] for reject in summary["rejects"])
    if variant == "bad-utf8":
        assert any("not UTF-8" in reject["reason"] for reject in summary["rejects"])


def test_an_eval_sample_bomb_is_rejected_alone_unread(results: dict[str, Any]) -> None:
    base = held(results["inspect-base"])
    summary = held(results["inspect-sample-bomb"])
    assert summary["episodes"] == base["episodes"] - 1 == 3 and summary["rejected"] == 1
    [reject] = summary["rejects"]
    assert reject["pointer"] == "samples/add_epoch_1.json"
    assert f"{GIB2} bytes decompressed, over the cap" in reject["reason"] and "not read" in reject["reason"]


@pytest.mark.parametrize(
    ("variant", "message"),
    [
        ("header-bomb", f"header.json: {GIB2} bytes decompressed, over the cap"),
        ("archive-over-cap", "declares 2147"),
        ("many-members", "members, over the cap of 200 (WORLDSMITH_IMPORT_MAX_MEMBERS)"),
        ("garbage", "not a readable Inspect AI log"),
    ],
)
def test_an_archive_over_a_cap_is_a_clear_file_error(results: dict[str, Any], variant: str, message: str) -> None:
    summary = held(results[f"inspect-{variant}"])
    assert message in file_error(summary) and not summary["committed"]


def test_a_header_claiming_a_billion_epochs_reads_the_samples_there_are(results: dict[str, Any]) -> None:
    summary = held(results["inspect-epochs-claimed"])
    assert summary["episodes"] == held(results["inspect-base"])["episodes"] == 4 and summary["rejected"] == 0


def test_a_deep_eval_sample_is_rejected_alone(results: dict[str, Any]) -> None:
    summary = held(results["inspect-deep-sample"])
    assert summary["episodes"] == 3 and summary["rejected"] == 1
    assert "samples/miss_epoch_2.json" == summary["rejects"][0]["pointer"]


def test_twenty_thousand_unparseable_listed_samples_are_each_rejected_within_the_limit(
    results: dict[str, Any],
) -> None:
    summary = held(results["inspect-listed-garbage"])
    assert summary["rejected"] == 20_000 and summary["episodes"] == 0
    assert "unreadable sample '0' epoch 1: not JSON" in summary["rejects"][0]["reason"]

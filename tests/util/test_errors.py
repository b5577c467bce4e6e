"""`worldsmith.util.errors`: the kinds, their exit codes, `where` in the message, and the old bases kept."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from filelock import FileLock

import worldsmith
import worldsmith.worldbook.store as store_module
from worldsmith.envs import EnvUnavailableError, UnknownEnvError, UnknownTaskError
from worldsmith.envs.base import EnvError
from worldsmith.evals.run import RunConflictError
from worldsmith.llm.base import BackendUnavailableError, LLMError
from worldsmith.sim.registry import UnknownWorldModelError
from worldsmith.sim.session import SessionError, SessionNotFoundError, StaleSessionError
from worldsmith.traces import TraceFormatError
from worldsmith.util import InvalidName, check_name, read_user_bytes, read_user_text
from worldsmith.util.errors import (
    EXIT_CODES,
    BadInputError,
    BusyError,
    ConflictError,
    MissingFileError,
    NotFoundError,
    UnavailableError,
    WorldsmithError,
    user_path,
    user_path_error,
)
from worldsmith.util.executors import RayUnavailableError
from worldsmith.workspace import DatasetNotFound, EpisodeNotFound, Workspace
from worldsmith.worldbook import PatchConflictError, Worldbook, WorldbookError, WorldbookNotFound, WorldbookStore
from worldsmith.worldbook.build_jobs import BuildRunningError


def test_each_kind_has_its_own_exit_code_and_the_builtin_base_callers_caught() -> None:
    assert EXIT_CODES == {"error": 1, "bad_input": 3, "not_found": 4, "conflict": 5, "busy": 6, "unavailable": 7}
    assert issubclass(BadInputError, ValueError) and issubclass(NotFoundError, LookupError)
    for kind in (BadInputError, NotFoundError, ConflictError, BusyError, UnavailableError):
        assert issubclass(kind, WorldsmithError) and kind.exit_code not in (0, 1, 2)


def test_where_leads_the_one_line_message_and_survives_pickling() -> None:
    error = BadInputError("must be at least 1, not 0", where="eval.yaml: seeds")
    assert str(error) == "eval.yaml: seeds: must be at least 1, not 0" and error.where == "eval.yaml: seeds"
    assert error.to_json() == {"error": str(error), "kind": "bad_input", "where": "eval.yaml: seeds"}
    copy = pickle.loads(pickle.dumps(error))
    assert str(copy) == str(error) and copy.where == error.where and isinstance(copy, ValueError)
    assert str(WorldsmithError("plain")) == "plain" and WorldsmithError("plain").where is None


@pytest.mark.parametrize(("cls", "kind", "bases"), [
    (TraceFormatError, BadInputError, (ValueError,)),
    (InvalidName, BadInputError, (ValueError,)),
    (WorldbookError, BadInputError, (ValueError,)),
    (WorldbookNotFound, NotFoundError, (WorldbookError, LookupError)),
    (PatchConflictError, ConflictError, (WorldbookError, ValueError)),
    (RunConflictError, ConflictError, (ValueError,)),
    (DatasetNotFound, NotFoundError, (LookupError,)),
    (EpisodeNotFound, NotFoundError, (KeyError,)),
    (UnknownEnvError, NotFoundError, (KeyError,)),
    (UnknownTaskError, NotFoundError, (EnvError, LookupError)),
    (UnknownWorldModelError, NotFoundError, (ValueError,)),
    (SessionNotFoundError, NotFoundError, (SessionError, LookupError)),
    (StaleSessionError, ConflictError, (SessionError, RuntimeError)),
    (BuildRunningError, BusyError, (ValueError,)),
    (EnvUnavailableError, UnavailableError, (EnvError, RuntimeError)),
    (BackendUnavailableError, UnavailableError, (LLMError, RuntimeError)),
    (RayUnavailableError, UnavailableError, (ConnectionError, OSError)),
    (MissingFileError, NotFoundError, (FileNotFoundError, OSError)),
])
def test_existing_errors_have_a_kind_and_keep_their_bases(cls: type, kind: type, bases: tuple[type, ...]) -> None:
    assert issubclass(cls, kind) and all(issubclass(cls, base) for base in bases)
    assert cls.exit_code == kind.exit_code  # the kind wins over a base's (e.g. WorldbookError's bad input)


def test_a_trace_format_error_names_its_file_once() -> None:
    error = TraceFormatError("runs/a.json", "binary data")
    assert str(error) == "runs/a.json: binary data" and error.where == "runs/a.json"


def test_a_key_error_kind_prints_its_message_without_quotes() -> None:
    assert str(UnknownEnvError("no environment 'x'")) == "no environment 'x'"
    assert str(EpisodeNotFound("episode 'e1' not in dataset 'd'")) == "episode 'e1' not in dataset 'd'"


def test_library_calls_raise_the_kind_naming_the_thing(tmp_path: Path) -> None:
    with pytest.raises(InvalidName, match="dataset name '../x'"):
        check_name("../x", "dataset")
    with pytest.raises(DatasetNotFound, match="no dataset 'nope'"):
        Workspace(tmp_path / "ws").dataset("nope")
    with pytest.raises(WorldbookNotFound, match="no worldbook 'book'"):
        WorldbookStore(tmp_path / "books").head("book")


def test_user_path_errors_name_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.txt"
    with pytest.raises(NotFoundError, match=r"--tasks-file .*nope\.txt: no such file or folder") as caught:
        read_user_text(missing, "--tasks-file")
    assert caught.value.where == f"--tasks-file {missing}" and isinstance(caught.value.__cause__, FileNotFoundError)
    with pytest.raises(BadInputError, match=str(tmp_path)):
        read_user_bytes(tmp_path)  # a folder where a file was expected
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"caf\xe9\n")
    with pytest.raises(BadInputError, match=r"latin\.txt: not UTF-8 text \(byte 3\)"):
        read_user_text(latin)
    denied = user_path_error("/etc/shadow", PermissionError(13, "Permission denied"))
    assert isinstance(denied, BadInputError) and str(denied) == "/etc/shadow: permission denied"


def test_the_front_door_exports_the_kinds() -> None:
    assert worldsmith.WorldsmithError is WorldsmithError and worldsmith.NotFoundError is NotFoundError
    assert {"WorldsmithError", "BadInputError", "NotFoundError", "ConflictError", "BusyError",
            "UnavailableError"} <= set(worldsmith.__all__)


def test_a_held_worldbook_lock_is_busy_not_a_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = WorldbookStore(tmp_path / "books")
    first = store.save(Worldbook(name="doors"), author="test")
    monkeypatch.setattr(store_module, "LOCK_TIMEOUT_S", 0.2)
    with FileLock(tmp_path / "books" / "doors" / ".lock"):  # another writer holds it
        with pytest.raises(BusyError, match="another writer has held worldbook 'doors'") as caught:
            store.save(Worldbook(name="doors"), parent=first.version, author="test")
    assert caught.value.where == str(tmp_path / "books" / "doors" / ".lock") and caught.value.exit_code == 6
    assert store.save(Worldbook(name="doors"), parent=first.version, author="test").parent == first.version


def test_user_path_blames_only_the_os_errors_of_its_block(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match=r"^--rows .*rows\.jsonl: no such file or folder$"):
        with user_path(tmp_path / "rows.jsonl", "--rows"):
            (tmp_path / "rows.jsonl").read_bytes()
    with pytest.raises(RuntimeError, match="a bug"), user_path(tmp_path, "--rows"):
        raise RuntimeError("a bug")

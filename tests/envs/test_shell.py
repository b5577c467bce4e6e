"""Sandboxed shell: chores, terminal rendering, replay, and attempts to break out of the sandbox."""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from pathlib import Path

import pytest

from worldsmith.envs import (
    EnvUnavailableError,
    ExpertPolicy,
    ReplayPolicy,
    UnknownTaskError,
    check_env,
    make,
    record_episode,
    spec,
)
from worldsmith.envs.shell import ShellEnv, sandbox_available
from worldsmith.envs.shell import sandbox as shell_sandbox
from worldsmith.envs.shell import sandbox_processes as shell_processes
from worldsmith.envs.shell_tasks import CHORES, SandboxView
from worldsmith.traces.model import Action

REPO = Path(__file__).resolve().parents[2]
AVAILABLE, WHY_NOT = sandbox_available()


def require_sandbox() -> None:
    """Skip where bubblewrap is missing or cannot build a sandbox (the environment refuses to run there)."""
    if not AVAILABLE:
        pytest.skip(f"no shell sandbox here: {WHY_NOT}")


SMALL_LIMITS = {"timeout_s": 1.0, "file_mb": 1, "memory_mb": 256, "max_procs": 32, "max_output_bytes": 2000}


@pytest.fixture
def env():
    require_sandbox()
    environment = make("shell")
    yield environment
    environment.close()


@pytest.fixture
def tight():
    """Small limits so the limit tests are quick and bounded."""
    require_sandbox()
    environment = make("shell", **SMALL_LIMITS)
    environment.reset("text/count-errors")
    yield environment
    environment.close()


def run(environment: ShellEnv, command: str) -> tuple[str, dict]:
    """A command's output (the text between the echoed command and the next prompt) and its info."""
    step = environment.step(command)
    text = step.observation.text
    head, _, rest = text.partition("\n")
    assert command.split("\n")[0] in head
    return rest.rsplit("agent@sandbox:", 1)[0], step.info


# ---------------------------------------------------------------- chores and protocol


def test_registry_and_chore_catalogue() -> None:
    assert spec("shell").max_steps == 30
    assert len(CHORES) >= 12
    for chore_id, chore in CHORES.items():
        assert re.fullmatch(r"[a-z]+/[a-z0-9-]+", chore_id), chore_id
        assert chore.instruction and chore.gold


@pytest.mark.integration
def test_check_env(env: ShellEnv) -> None:
    check_env(env, "files/rename-txt-to-md")


@pytest.mark.integration
def test_expert_solves_every_chore_and_checkers_start_false(env: ShellEnv) -> None:
    for task in env.tasks():
        episode = record_episode(env, ExpertPolicy(), task, max_steps=30)
        assert episode.success is True, (task, episode.metadata)
        assert episode.initial_info["won"] is False
        assert [turn.info["won"] for turn in episode.turns] == [False] * (len(episode.turns) - 1) + [True]
        assert episode.turns[-1].done and episode.turns[-1].reward == 1.0
        assert env.expert_action() is None


@pytest.mark.integration
def test_replay_reproduces_observations(env: ShellEnv) -> None:
    task = "archives/extract-and-find"
    episode = record_episode(env, ExpertPolicy(), task)
    actions = ["ls -la", "echo $$ $HOSTNAME; id", *[turn.action for turn in episode.turns]]
    first = record_episode(env, ReplayPolicy(actions), task)
    second = record_episode(env, ReplayPolicy([turn.action for turn in first.turns]), task)
    assert first.success and second.success
    assert second.initial_observation == first.initial_observation
    assert [turn.observation.text for turn in second.turns] == [turn.observation.text for turn in first.turns]
    assert [turn.state for turn in second.turns] == [turn.state for turn in first.turns]
    listing = first.turns[0].observation.text
    assert "Jan  1  2024 ." in listing and "Jan  1  2024 .." in listing and "bundle.tar.gz" in listing
    assert "2 sandbox\nuid=1000(agent) gid=1000(agent)" in first.turns[1].observation.text


@pytest.mark.integration
def test_unknown_task(env: ShellEnv) -> None:
    with pytest.raises(UnknownTaskError, match=r"no/such-chore.*tasks\(\)"):
        env.reset("no/such-chore")


@pytest.mark.integration
def test_invalid_commands_are_answered_by_bash(env: ShellEnv) -> None:
    env.reset("text/count-errors")
    output, info = run(env, "xyzzy plugh")
    assert output == "bash: xyzzy: command not found\n" and info["exit_code"] == 127
    output, info = run(env, 'echo "unterminated')
    assert "unexpected EOF while looking for matching" in output and info["exit_code"] == 2
    output, info = run(env, "cd nowhere")
    assert output == "bash: cd: nowhere: No such file or directory\n" and info["exit_code"] == 1
    output, _ = run(env, "echo $?")
    assert output == "1\n"  # $? is the previous command's status, as in a terminal


@pytest.mark.integration
def test_terminal_rendering_and_persistent_shell(env: ShellEnv) -> None:
    observation, info = env.reset("files/rename-txt-to-md")
    assert observation.text == f"Task: {info['task']}\nagent@sandbox:~$ "
    step = env.step("mkdir -p docs/a && cd docs && GREETING=hello")
    assert step.observation.text == "agent@sandbox:~$ mkdir -p docs/a && cd docs && GREETING=hello\nagent@sandbox:~/docs$ "
    assert step.info["cwd"] == "/home/agent/docs" and step.info["exit_code"] == 0 and step.info["won"] is False
    assert env.step("printf '%s' $GREETING").observation.text == "agent@sandbox:~/docs$ printf '%s' $GREETING\nhelloagent@sandbox:~/docs$ "
    text = env.step("for i in 1 2; do\n  echo $i >&2\ndone").observation.text
    assert text == "agent@sandbox:~/docs$ for i in 1 2; do\n>   echo $i >&2\n> done\n1\n2\nagent@sandbox:~/docs$ "
    assert env.step("cd /usr/bin").observation.text.endswith("agent@sandbox:/usr/bin$ ")
    tool_call = Action(name="bash", arguments={"command": "cd && pwd"}, raw='{"command": "cd && pwd"}')
    assert env.step(tool_call).observation.text == "agent@sandbox:/usr/bin$ cd && pwd\n/home/agent\nagent@sandbox:~$ "
    text = env.step("exit 3").observation.text
    assert "[the shell exited with status 3; a new shell was started in ~]" in text
    output, info = run(env, "echo ${GREETING:-gone}")
    assert output == "gone\n" and info["cwd"] == "/home/agent"


@pytest.mark.integration
def test_a_shell_outlives_the_thread_that_reset_it(env: ShellEnv) -> None:
    """Streamlit reruns a page in a new thread each time: the Play page resets in one, steps in the next."""
    opened = threading.Thread(target=env.reset, args=("files/rename-txt-to-md",))
    opened.start()
    opened.join()
    time.sleep(0.2)  # a sandbox tied to the dead thread would be gone by now
    output, info = run(env, "echo still here")
    assert output == "still here\n" and info["exit_code"] == 0


@pytest.mark.integration
def test_state_is_a_snapshot_and_links_are_not_followed(env: ShellEnv) -> None:
    env.reset("files/private-secret")
    env.step("ln -s /etc/passwd link; mkdir sub; printf abc > sub/f; chmod 640 sub/f")
    before = env.state()
    assert before is not None and env.state() == before  # reading changes nothing
    entries = {entry["path"]: entry for entry in before["files"]}
    assert entries["link"] == {"path": "link", "mode": "0777", "type": "symlink", "target": "/etc/passwd"}
    assert entries["sub/f"]["size"] == 3 and entries["sub/f"]["mode"] == "0640"
    assert entries["sub/f"]["sha256"] == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    view = SandboxView(env.sandbox_path or "")
    assert view.read_bytes("link") is None and view.read_bytes("sub/f") == b"abc"
    env.step("ln -s /etc etc_link")
    assert view.read_bytes("etc_link/passwd") is None and view.files_under("etc_link") == []
    etc_mode = os.stat("/etc").st_mode
    env.close()  # removing the home must not touch what its links point to
    assert os.stat("/etc").st_mode == etc_mode


def test_removing_a_home_never_follows_its_links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o755)
    (outside / "keep.txt").write_text("keep")
    home = tmp_path / "base" / "agent"
    (home / "locked").mkdir(parents=True)
    (home / "locked" / "f").write_text("x")
    (home / "link").symlink_to(outside)
    (home / "locked").chmod(0o500)
    monkeypatch.setattr(shell_sandbox.os, "geteuid", lambda: 1000)  # the non-root path, which chmods
    shell_sandbox.remove_tree(str(tmp_path / "base"))
    assert not (tmp_path / "base").exists()
    assert (outside / "keep.txt").read_text() == "keep" and outside.stat().st_mode & 0o777 == 0o755


@pytest.mark.integration
def test_home_is_fresh_and_removed(env: ShellEnv) -> None:
    env.reset("text/sort-numbers")
    first = env.sandbox_path
    assert first and Path(first, "numbers.txt").exists()
    env.step("echo leftover > leftover.txt; chmod 000 .; true")
    env.reset("text/sort-numbers")
    assert not Path(first).exists() and env.sandbox_path != first
    assert not Path(env.sandbox_path or "", "leftover.txt").exists()
    second = env.sandbox_path
    env.close()
    assert second and not Path(second).parent.exists()


def test_unavailable_sandbox_is_an_error_not_a_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shell_sandbox, "find_bwrap", lambda: None)
    with pytest.raises(EnvUnavailableError, match="never runs commands unsandboxed.*bubblewrap"):
        ShellEnv()
    monkeypatch.setattr(shell_sandbox, "find_bwrap", lambda: "/nonexistent/bwrap")
    with pytest.raises(EnvUnavailableError, match="cannot build a sandbox"):
        ShellEnv()
    with pytest.raises(ValueError, match="timeout_s"):
        ShellEnv(timeout_s=0)


# ---------------------------------------------------------------- trying to break out


@pytest.mark.integration
def test_nothing_is_written_outside_the_sandbox(env: ShellEnv) -> None:
    env.reset("text/count-errors")
    name = f"ws-escape-{os.getpid()}-{time.monotonic_ns()}"
    targets = ["/tmp", "/var/tmp", str(REPO), os.path.expanduser("~"), "/etc", "/", "/home", "/usr/local/bin",
               "/dev/shm"]
    attempts = "; ".join(f"touch {target}/{name}" for target in targets)
    env.step(f"{attempts}; echo x > /tmp/{name}.2; ln -s / root_link; touch root_link/etc/{name}; "
             f"mount -o remount,rw / ; cp /bin/sh /etc/{name}")
    output, _ = run(env, f"ls /tmp/{name} && cat /proc/self/mountinfo | grep -c ' / rw' ; id -u")
    assert f"/tmp/{name}\n" in output  # /tmp is the sandbox's own tmpfs
    assert output.strip().endswith("1000")
    for target in targets:
        assert not Path(target, name).exists(), target
    assert not Path("/tmp", f"{name}.2").exists()
    home_entries = set(os.listdir(env.sandbox_path or ""))
    assert home_entries == {"server.log", "root_link"}


@pytest.mark.integration
def test_no_network(env: ShellEnv) -> None:
    env.reset("text/count-errors")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(0.3)
        port = server.getsockname()[1]
        output, info = run(env, f"echo hello > /dev/tcp/127.0.0.1/{port}")
        assert "Connection refused" in output and info["exit_code"] == 1
        with pytest.raises(socket.timeout):
            server.accept()
    output, info = run(env, "timeout 3 bash -c 'echo > /dev/tcp/1.1.1.1/80'")
    assert "Network is unreachable" in output and info["exit_code"] != 0
    output, _ = run(env, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
    assert output == "lo\n"


@pytest.mark.integration
def test_what_of_the_host_is_visible_is_exactly_what_the_module_documents(env: ShellEnv) -> None:
    """The module docstring lists the sandbox's `/` and what of the host it shows: hold it to that."""
    env.reset("text/count-errors")
    system = [name for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32") if os.path.lexists("/" + name)]
    output, _ = run(env, "ls -A / | tr '\\n' ' '")
    assert output.split() == sorted([*system, "dev", "etc", "home", "proc", "tmp", "usr", "var"])
    output, _ = run(env, "ls -A /etc")
    assert output.split() == sorted(os.listdir("/etc"))  # the host's /etc, whole
    output, _ = run(env, "cut -d: -f1 /etc/passwd | tr '\\n' ' '; ls -A /home /var | tr '\\n' ' '")
    assert output.split() == ["root", "agent", "nobody", "/home:", "agent", "/var:", "tmp"]
    if os.path.exists("/etc/shadow") and not os.stat("/etc/shadow").st_mode & 0o004:
        output, _ = run(env, "cat /etc/shadow")
        assert "Permission denied" in output
    output, _ = run(env, "touch /etc/x /usr/x 2>&1 | grep -c 'Read-only file system'")
    assert output == "2\n"


@pytest.mark.integration
def test_host_environment_is_not_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    require_sandbox()
    monkeypatch.setenv("WS_SHELL_TEST_SECRET", "hunter2-do-not-leak")
    with make("shell") as environment:
        environment.reset("text/count-errors")
        output, _ = run(environment, "env | cut -d= -f1 | sort | tr '\\n' ' '")
        assert output == "HOME HOSTNAME LANG PATH PWD SHLVL TERM TZ USER _ "
        output, _ = run(environment, "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c hunter2")
        assert output == "0\n"
        output, _ = run(environment, "echo $PATH $LANG $TERM $USER $HOME $HOSTNAME")
        assert output == "/usr/local/bin:/usr/bin:/bin C.UTF-8 dumb agent /home/agent sandbox\n"


@pytest.fixture
def limited():
    """Small file and memory limits with the default wall clock (a loaded machine must not time them out)."""
    require_sandbox()
    environment = make("shell", file_mb=1, memory_mb=256)
    environment.reset("text/count-errors")
    yield environment
    environment.close()


@pytest.mark.integration
def test_file_size_and_memory_limits(limited: ShellEnv) -> None:
    _, info = run(limited, "yes > big")
    assert info["exit_code"] == 128 + 25  # SIGXFSZ
    assert Path(limited.sandbox_path or "", "big").stat().st_size <= 1 << 20
    output, info = run(limited, "awk 'BEGIN { s = \"x\"; while (1) s = s s }'")
    assert "out of memory" in output and info["exit_code"] != 0 and not info["timed_out"]
    output, _ = run(limited, "ulimit -v unlimited; echo $?; ulimit -u 10000; echo $?")
    assert output.endswith("1\n") and "cannot modify limit" in output


@pytest.mark.integration
def test_wall_clock_timeout_interrupts_and_the_episode_goes_on(tight: ShellEnv) -> None:
    run(tight, "KEEP=me")
    step = tight.step("sleep 100")  # how soon it returns: benchmarks/timeouts.py
    assert step.info["timed_out"] and step.info["exit_code"] == 124 and not step.terminated
    assert "[command timed out after 1 s and was interrupted]" in step.observation.text
    output, _ = run(tight, "while :; do :; done")
    assert "timed out" in output
    output, info = run(tight, "echo $KEEP; ps -e --no-headers | wc -l")
    assert output == "me\n4\n" and not info["timed_out"]  # bwrap, bash, ps, wc: nothing left running
    output, _ = run(tight, "trap '' INT; while :; do :; done")
    assert "the shell did not recover: a new shell was started in ~" in output
    assert run(tight, "echo ${KEEP:-reset}")[0] == "reset\n"


@pytest.mark.integration
def test_disk_quota_interrupts_a_filling_command() -> None:
    require_sandbox()
    with make("shell", timeout_s=5, disk_mb=4) as environment:
        environment.reset("text/count-errors")
        step = environment.step("for i in $(seq 40); do head -c 1M /dev/zero > f$i; sleep 0.05; done")
        assert "[the home directory went over its disk quota of 4 MB and was interrupted]" in step.observation.text
        assert step.info["exit_code"] == 124 and not step.info["timed_out"]
        assert shell_sandbox.disk_usage(environment.sandbox_path or "") < 20 << 20  # not all 40 MB
        assert "over its disk quota of 4 MB" in environment.step("true").observation.text
        assert "quota" not in environment.step("rm f*").observation.text


@pytest.mark.integration
def test_output_is_truncated(tight: ShellEnv) -> None:
    output, _ = run(tight, "seq 100000")
    assert output.startswith("1\n2\n3\n") and len(output) < 2200
    assert re.search(r"\[output truncated: \d+ more bytes not shown\]\n$", output)


@pytest.mark.integration
def test_fork_bomb_is_contained() -> None:
    require_sandbox()
    environment = make("shell", timeout_s=2, max_procs=32)
    environment.reset("text/count-errors")
    sandbox = environment._sandbox
    assert sandbox is not None
    init_pid, peak, done = sandbox.init_pid, [0], threading.Event()

    def watch() -> None:  # counts the sandbox's processes from the host while the bomb runs
        while not done.is_set():
            peak[0] = max(peak[0], len(shell_processes.descendants(init_pid)))
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        step = environment.step(":(){ :|:& };:; sleep 1")
    finally:
        done.set()
        watcher.join()
    assert 16 <= peak[0] <= 32, peak  # it really forked, and never past the limit (the shell included)
    assert step.info["timed_out"] or step.info["exit_code"] == 0
    output, info = run(environment, "echo alive; ps -e --no-headers | wc -l")
    assert output == "alive\n4\n" and not info["timed_out"]  # bwrap, bash, ps, wc: the bomb is gone
    environment.close()
    assert not Path(f"/proc/{init_pid}").exists()


def test_descendants_counts_a_process_met_twice_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A child whose parent exits during the walk is re-parented to init, where the walk meets it again."""
    tree = {1: [2, 3], 2: [4], 3: [], 4: []}
    calls: dict[int, int] = {}

    def children_of(pid: int) -> list[int]:
        calls[pid] = calls.get(pid, 0) + 1
        if pid == 1 and calls[pid] == 1:
            return [2, 3, 4]  # 4 already re-parented to init when init's children are read ...
        return list(tree.get(pid, []))  # ... and still listed under its old parent 2

    monkeypatch.setattr(shell_processes, "children_of", children_of)
    assert sorted(shell_processes.descendants(1)) == [2, 3, 4]

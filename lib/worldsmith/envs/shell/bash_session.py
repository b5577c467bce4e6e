"""One interactive bash in a sandbox and the marker protocol that cuts its output into commands.

Why markers: bash talks through pipes, so the end of a command is only known from a line the
shell prints after it (a random nonce, the exit status and the working directory); timeouts,
quota overruns and a stuck or dead shell are all handled here.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import select
import signal
import subprocess
import time
import weakref
from dataclasses import dataclass

from worldsmith.envs.base import EnvError
from worldsmith.envs.shell.sandbox import (
    HOME,
    START_SECONDS,
    disk_usage,
    display_cwd,
    hand_over,
    launch,
    new_home_base,
    remove_tree,
)
from worldsmith.envs.shell.sandbox_processes import children_of, descendants, open_pidfd, send_signal, stat_fields
from worldsmith.envs.shell_tasks import Chore, materialise

__all__ = ["Limits", "Sandbox"]

_TIMEOUT_EXIT = 124  # exit_code reported for a command stopped by the wall-clock limit, as timeout(1) does
_KEEP = 8192  # bytes kept back from the output while looking for a marker (a marker with a long cwd)
_RECOVER_ROUNDS = 4  # interrupt-and-resynchronise rounds after a timeout before the shell is replaced
_RECOVER_WAIT = 0.3  # seconds each round waits for the shell to answer
_QUOTA_EVERY = 0.25  # seconds between disk-usage checks while a command runs
_TCSETATTR = re.compile(rb"bash: \[\d+: \d+ \(\d+\)\] tcsetattr: Inappropriate ioctl for device\n")


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandbox (see the `worldsmith.envs.shell` docstring)."""

    timeout_s: float
    memory_mb: int
    cpu_s: int
    file_mb: int
    max_procs: int
    tmp_mb: int
    max_output_bytes: int
    disk_mb: int

    def ulimit_command(self) -> str:
        """Hard and soft rlimits for the shell and its children (bash's -v and -f count KiB)."""
        return (
            f"ulimit -HS -c 0 -t {self.cpu_s} -v {self.memory_mb * 1024} -f {self.file_mb * 1024} "
            f"-u {self.max_procs}"
        )


@dataclass
class _Output:
    """A command's output as it arrives: the first `cap` bytes, and how many were dropped."""

    cap: int
    head: bytearray
    dropped: int = 0

    def add(self, data: bytes | bytearray) -> None:
        room = self.cap - len(self.head)
        if room > 0:
            self.head += data[:room]
        self.dropped += max(0, len(data) - max(room, 0))


@dataclass(frozen=True)
class _Result:
    output: str
    exit_code: int
    cwd: str
    timed_out: bool
    notes: tuple[str, ...]


def _ansi_c_quote(text: str) -> str:
    """`text` as a bash $'...' word: any byte that is not printable ASCII becomes a 3-digit octal escape."""
    pieces = []
    for byte in text.encode("utf-8", "surrogateescape"):
        if byte in (0x5C, 0x27):  # backslash, quote
            pieces.append("\\" + chr(byte))
        elif 0x20 <= byte < 0x7F:
            pieces.append(chr(byte))
        else:
            pieces.append(f"\\{byte:03o}")
    return "$'" + "".join(pieces) + "'"


class Sandbox:
    """A host directory, the bubblewrap process around one interactive bash, and the marker protocol."""

    def __init__(self, bwrap: str, limits: Limits) -> None:
        self.bwrap = bwrap
        self.limits = limits
        self.base, self.home = new_home_base()
        self._cleanup = weakref.finalize(self, remove_tree, self.base)
        self.process: subprocess.Popen[bytes] | None = None
        self.init_pidfd = self.bash_pidfd = -1
        self.init_pid = self.bash_pid = 0
        self.pid_namespace = ""
        self.bash_leads_group = False
        self.buffer = bytearray()
        self.nonce = ""
        self.seq = 0
        self.last_exit = 0
        self.last_cwd = HOME
        self.ended = False
        self.marker: re.Pattern[bytes] = re.compile(b"^$")

    # -- life cycle

    def prepare(self, chore: Chore) -> None:
        materialise(chore, self.home)
        hand_over(self.home)

    def start(self, cwd: str = HOME) -> None:
        """A new bash in the sandbox (the home directory persists), limits set before any command."""
        self.nonce = secrets.token_hex(12)
        self.marker = re.compile(b"\x1e" + self.nonce.encode() + rb":(\d+):(\d+):([^\x1e]*)\x1e\n")
        self.buffer = bytearray()
        self.last_exit = 0
        self.last_cwd = cwd
        self.ended = False
        # setsid(1): the shell leads its own process group, so a timeout can interrupt it and what it
        # runs with one signal, as Ctrl-C does (bwrap's pid 1 stays out of it).
        leader = ["/usr/bin/setsid"] if os.access("/usr/bin/setsid", os.X_OK) else []
        command = [*leader, "/bin/bash", "--norc", "--noprofile", "--noediting", "-i"]
        self.process = launch(
            self.bwrap, self.home, cwd, self.limits.tmp_mb, command,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        os.set_blocking(self.process.stdout.fileno(), False)
        os.set_blocking(self.process.stdin.fileno(), False)
        setup = (
            "PS1=''; PS2=''; PS3=''; PS4='+ '; set +H; set +o history; "
            "unset HISTFILE PROMPT_COMMAND MAIL MAILPATH; umask 022; "
            f"{self.limits.ulimit_command()}"
        )
        seq = self._send_line(setup)
        opening = _Output(cap=4096, head=bytearray())
        found = self._await(seq, time.monotonic() + START_SECONDS, opening)
        if found is None or found[0] != 0:
            said = bytes(opening.head).decode("utf-8", "replace").strip()
            self.stop()
            raise EnvError(f"the sandboxed shell did not start: {said or 'no answer'}")
        self._find_processes()

    def _find_processes(self) -> None:
        assert self.process is not None
        inits = children_of(self.process.pid)
        bashes = children_of(inits[0]) if len(inits) == 1 else []
        if len(bashes) != 1:
            self.stop()
            raise EnvError("the sandboxed shell started but its processes could not be found in /proc")
        self.init_pid, self.bash_pid = inits[0], bashes[0]
        init_pidfd, bash_pidfd = open_pidfd(self.init_pid), open_pidfd(self.bash_pid)
        self.init_pidfd = -1 if init_pidfd is None else init_pidfd
        self.bash_pidfd = -1 if bash_pidfd is None else bash_pidfd
        self.pid_namespace = os.readlink(f"/proc/{self.bash_pid}/ns/pid")
        self.bash_leads_group = (stat_fields(self.bash_pid) or ["", "", ""])[2] == str(self.bash_pid)

    def stop(self) -> None:
        """Kill every process of the sandbox (killing its pid 1 ends the namespace); keeps the home."""
        process, self.process = self.process, None
        if self.init_pidfd >= 0:
            send_signal(self.init_pidfd, signal.SIGKILL)
        if process is not None:
            try:  # bubblewrap's monitor reaps the killed pid 1 and exits with it: no zombie is left
                process.wait(timeout=0 if self.init_pidfd < 0 else 5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    process.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=10)
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
        for fd in (self.init_pidfd, self.bash_pidfd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.init_pidfd = self.bash_pidfd = -1

    def close(self) -> None:
        self.stop()
        self._cleanup()

    # -- the marker protocol

    def _send_line(self, body: str) -> int:
        """Send one command line that ends by printing a marker with this line's number; returns the number."""
        self.seq += 1
        line = (
            f"{body}; builtin printf '\\036{self.nonce}:{self.seq}:%d:%s\\036\\n' \"$?\" \"$PWD\"\n"
        ).encode("utf-8", "surrogateescape")
        self._write(line, time.monotonic() + max(self.limits.timeout_s, 5.0))
        return self.seq

    def _write(self, data: bytes, deadline: float) -> None:
        assert self.process is not None and self.process.stdin is not None
        fd = self.process.stdin.fileno()
        view = memoryview(data)
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return  # the shell is not reading: the caller's marker wait will time out
            _, writable, _ = select.select([], [fd], [], remaining)
            if not writable:
                continue
            try:
                written = os.write(fd, view)
            except BlockingIOError:
                continue
            except (BrokenPipeError, OSError):
                return  # the shell is gone: the marker wait sees the end of its output
            view = view[written:]

    def _await(self, seq: int | set[int], deadline: float, output: _Output) -> tuple[int, str] | None:
        """Read until marker `seq` (or any of a set: its exit status and cwd), the deadline, or the end."""
        assert self.process is not None and self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while True:
            found = self._take_marker(seq, output)
            if found is not None:
                return found
            if len(self.buffer) > _KEEP:
                output.add(self.buffer[:-_KEEP])
                del self.buffer[:-_KEEP]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            readable, _, _ = select.select([fd], [], [], remaining)
            if not readable:
                continue
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:  # the shell ended
                self.ended = True
                output.add(self.buffer)
                self.buffer.clear()
                return None
            self.buffer += chunk

    def _take_marker(self, seq: int | set[int], output: _Output) -> tuple[int, str] | None:
        """Move output before markers to `output`, drop markers of other lines; a wanted one ends it."""
        wanted = {seq} if isinstance(seq, int) else seq
        start = 0
        data = bytes(self.buffer)  # a bytearray being matched cannot be resized
        for match in self.marker.finditer(data):
            output.add(data[start:match.start()])
            start = match.end()
            if int(match.group(1)) in wanted:
                del self.buffer[:start]
                return int(match.group(2)), match.group(3).decode("utf-8", "surrogateescape")
        del self.buffer[:start]
        return None

    def _drain(self) -> None:
        """Forget whatever killed background processes printed after the command returned."""
        self.buffer.clear()
        if self.process is None or self.process.stdout is None:
            return
        with contextlib.suppress(BlockingIOError, OSError):
            while os.read(self.process.stdout.fileno(), 1 << 16):
                pass

    # -- processes inside

    def _strays(self) -> list[int]:
        """Live processes of the sandbox other than its pid 1 and the shell."""
        if not self.init_pid:
            return []
        return [
            pid for pid in descendants(self.init_pid)
            if pid != self.bash_pid and (stat_fields(pid) or ["Z"])[0] != "Z"
        ]

    def _member_pidfd(self, pid: int) -> int | None:
        """A pidfd for `pid` if it is (still) a process of this sandbox: pid reuse never hits the host."""
        fd = open_pidfd(pid)
        if fd is None:
            return None
        try:
            if os.readlink(f"/proc/{pid}/ns/pid") == self.pid_namespace:
                return fd
        except OSError:
            pass
        os.close(fd)
        return None

    def kill_strays(self) -> None:
        """Stop every stray (until none is left running, so a fork bomb cannot outpace it), then kill them."""
        held: dict[int, int] = {}
        try:
            for _ in range(200):
                new = [pid for pid in self._strays() if pid not in held]
                if not new:
                    break
                for pid in new:
                    fd = self._member_pidfd(pid)
                    if fd is not None:
                        send_signal(fd, signal.SIGSTOP)
                        held[pid] = fd
            for fd in held.values():
                send_signal(fd, signal.SIGKILL)
        finally:
            for fd in held.values():
                os.close(fd)
        deadline = time.monotonic() + 2.0
        while held and self._strays() and time.monotonic() < deadline:
            time.sleep(0.002)

    def _interrupt(self) -> None:
        """What Ctrl-C does: SIGINT to the shell's process group at once, and to any process outside it."""
        group = str(self.bash_pid)
        in_group = self.bash_leads_group and self._member_pidfd_check(self.bash_pid)
        if in_group:
            with contextlib.suppress(OSError):
                os.killpg(self.bash_pid, signal.SIGINT)
        elif self.bash_pidfd >= 0:
            send_signal(self.bash_pidfd, signal.SIGINT)
        for pid in self._strays():
            if in_group and (stat_fields(pid) or ["", "", ""])[2] == group:
                continue
            fd = self._member_pidfd(pid)
            if fd is not None:
                send_signal(fd, signal.SIGINT)
                os.close(fd)

    def _member_pidfd_check(self, pid: int) -> bool:
        fd = self._member_pidfd(pid)
        if fd is None:
            return False
        os.close(fd)
        return True

    # -- one command

    def run(self, command: str) -> _Result:
        """Run one command line in the persistent shell and collect its terminal output."""
        output = _Output(cap=self.limits.max_output_bytes, head=bytearray())
        body = f"(builtin exit {self.last_exit}); builtin eval -- {_ansi_c_quote(command)} </dev/null"
        seq = self._send_line(body)
        found, stopped_by = self._watch(seq, output)
        notes: list[str] = []
        if stopped_by:
            found = self._recover(seq, output)
            if found is not None:
                notes.append(f"{stopped_by} and was interrupted")
                found = (_TIMEOUT_EXIT, found[1])
        else:
            self.kill_strays()
            self._drain()
        if found is None and self.ended:  # the shell ended (exit, exec, a fatal signal)
            status = self._restart(HOME)
            notes.append(f"the shell exited with status {status}; a new shell was started in ~")
            found = (_TIMEOUT_EXIT if stopped_by else status, HOME)
        elif found is None:  # the shell itself is stuck (a trapped SIGINT, a redirected stdout)
            cwd = self.last_cwd
            self._restart(cwd if os.path.isdir(self._host_path(cwd)) else HOME)
            notes.append(
                f"{stopped_by} and the shell did not recover: a new shell was started in "
                f"{display_cwd(self.last_cwd)} (variables, functions and /tmp were reset)"
            )
            found = (_TIMEOUT_EXIT, self.last_cwd)
        elif not stopped_by and disk_usage(self.home) > self.limits.disk_mb << 20:
            notes.append(f"the home directory is over its disk quota of {self.limits.disk_mb} MB")
        exit_code, cwd = found
        self.last_exit = exit_code & 0xFF
        self.last_cwd = cwd
        if output.dropped:
            notes.append(f"output truncated: {output.dropped} more bytes not shown")
        text = _TCSETATTR.sub(b"", bytes(output.head)).decode("utf-8", "replace")
        timed_out = stopped_by.startswith("command timed out")
        return _Result(text, exit_code, cwd, timed_out, tuple(notes))

    def _watch(self, seq: int, output: _Output) -> tuple[tuple[int, str] | None, str]:
        """Wait for the command's marker; every quarter second past the first, look at the disk quota.

        Returns the marker (or None) and why the command must be stopped ('' when it need not be).
        """
        deadline = time.monotonic() + self.limits.timeout_s
        while True:
            found = self._await(seq, min(deadline, time.monotonic() + _QUOTA_EVERY), output)
            if found is not None or self.ended:
                return found, ""
            if time.monotonic() >= deadline:
                return None, f"command timed out after {self.limits.timeout_s:g} s"
            if disk_usage(self.home) > self.limits.disk_mb << 20:
                return None, f"the home directory went over its disk quota of {self.limits.disk_mb} MB"

    def _restart(self, cwd: str) -> int:
        """Replace a dead or stuck shell by a new one in `cwd`; returns the old one's exit status."""
        status = 0
        if self.process is not None:
            if self.ended:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=5)
            status = self.process.poll() or 0
        self.stop()
        self.start(cwd)
        return status if status >= 0 else 128 - status

    def _recover(self, seq: int, output: _Output) -> tuple[int, str] | None:
        """After a timeout: interrupt (then also kill what runs), and resynchronise on fresh markers.

        Each round sends a new marker line behind the interrupted command: the first marker that comes
        back, the command's or any of these, means the shell is listening again (later ones are
        dropped as stale when they arrive). None when the shell stays stuck or ended.
        """
        wanted = {seq}
        for attempt in range(_RECOVER_ROUNDS):
            self._interrupt()
            if attempt:
                self.kill_strays()  # children that ignore SIGINT
            wanted.add(self._send_line("builtin true"))
            found = self._await(wanted, time.monotonic() + _RECOVER_WAIT, output)
            if found is not None or self.ended:
                self.kill_strays()
                self._drain()
                return found
        return None

    def _host_path(self, cwd: str) -> str:
        inside = cwd.removeprefix(HOME).lstrip("/") if cwd == HOME or cwd.startswith(HOME + "/") else None
        return os.path.join(self.home, inside) if inside is not None else ""

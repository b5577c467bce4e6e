"""A real bash in a bubblewrap sandbox: scripted chores (files, text, archives) with checkers.

Why a sandbox and not a working directory: the agent's commands are untrusted and the host
process may run as root, so every episode gets its own mount, user, pid, network, ipc and uts
namespaces (bubblewrap, `apt-get install bubblewrap`). Its `/` holds exactly `bin dev etc home lib*
proc sbin tmp usr var`, all read-only but its home and tmpfs. Of the host it sees exactly:

- `/usr`, read-only;
- `/etc`, read-only and whole: every file of the host's /etc that the file's mode lets any user read
  (`/etc/hosts`, `/etc/resolv.conf`, `/etc/os-release`, package, locale and service configuration:
  keep secrets out of a world-readable /etc), except `/etc/passwd` and `/etc/group`, replaced by the
  sandbox's own (naming `root`, `agent` uid 1000 and `nobody`). Host files are owned by an unmapped
  user there and their modes hold, so a root-only file such as `/etc/shadow` cannot be read;
- `/bin`, `/sbin`, `/lib`, `/lib32`, `/lib64`, `/libx32` where the host has them, as links where they
  are links (merged /usr), else read-only;
- what the kernel itself shows: the kernel version (`uname -r`), and in its own /proc (its own
  processes only) the system-wide files such as /proc/cpuinfo and /proc/meminfo.

Nothing else of the host: no /root, /opt, /mnt, /srv, /run, /sys or /var of the host, no /home of
others, no project directory, no device but the minimal /dev below. Its own are:

- a fresh home, `/home/agent` (a host temporary directory bound read-write, removed on close and at
  the next reset), which is also the working directory, alone in a read-only `/home`;
- a private /tmp and /dev/shm (tmpfs of `tmp_mb` each, `/var/tmp` a link to /tmp), a minimal
  /dev (null, zero, full, random, urandom, tty, pts, fd, the std streams; no new file there): nothing the
  agent does is written outside its home and its private tmpfs;
- no network (only its own loopback), hostname `sandbox`;
- only HOME, PATH, USER, LANG=C.UTF-8, TERM=dumb, HOSTNAME and TZ=UTC in the environment (nothing
  of the host's, also not in /proc/1/environ);
- limits (hard rlimits of the shell and everything it starts): `cpu_s` seconds of CPU per process,
  `memory_mb` of address space, files up to `file_mb`, `max_procs` processes (counted inside the
  sandbox's user namespace); a host root never runs the sandbox as root: bubblewrap is started as
  `nobody` so the process limit holds. Each command has a wall-clock limit `timeout_s`: when it
  passes, the command is interrupted (SIGINT to the shell's process group, as Ctrl-C does, then
  SIGKILL to what still runs), the observation says so and the episode goes on in the same shell
  (a shell that ignores SIGINT is replaced by a new one in the same directory, with a note). The home lives on the host's disk:
  while a command runs, its size is checked every quarter second and a command that takes it past
  `disk_mb` is interrupted the same way (so a quota overshoot is bounded by what can be written in
  that time; a quick command that ends over quota gets a note).

Bash runs interactively (`bash -i --norc --noediting`, so error messages read as in a terminal:
`bash: foo: command not found`) but talks through pipes, one persistent shell per episode (`cd`,
variables and functions persist). Each command is sent as one line that `eval`s it with stdin
from /dev/null and then prints a random-nonce marker with the exit status and working directory;
stdout and stderr share one pipe, interleaved as a terminal shows them; a program waiting for
keyboard input reads end-of-file. Actions are command lines (text, or a tool call whose arguments
carry `command`). Observations are rendered
like a terminal: the prompt (`agent@sandbox:~/docs$ `), the echoed command (continuation lines
prefixed `> `), its output, bracketed notes of the environment (`[command timed out ...]`), then the
next prompt. The opening observation is a one-line task banner and the first prompt. The only text
removed from the shell's output is bash's `tcsetattr: Inappropriate ioctl for device` complaint
(pipe chrome: it follows any command killed by a signal). Output beyond `max_output_bytes` is cut
with a note.

Processes still running when a command returns (`sleep 9 &`, a fork bomb) are stopped and killed
before the next command: background jobs do not outlive their command line, so their late output
never lands in another observation. `exit` (or anything that ends the shell) starts a new shell in
the home directory, with a note. `set -x` traces the wrapper line too. bubblewrap's
`--die-with-parent` ties a sandbox to the thread that started it, so sandboxes are started from one
long-lived launcher thread: an environment reset in a short-lived thread (a Streamlit rerun) keeps
its shell.

Episodes end (`terminated`) on the step whose command makes the chore's checker pass (reward 1);
a policy may also stop earlier. `info`: `task`, `won` (the checker, evaluated after every step),
`exit_code` (124 after a timeout), `cwd`, `timed_out`. The expert offers the chore's gold commands
in order; one counts as done when it is the command just run. `seed` is accepted and ignored:
every chore's files are fixed.

Determinism: the same commands on the same chore give the same observations. Things that differ by
nature: times (`date`, mtimes of files the agent creates, `ps` start times; set-up files all carry
2024-01-01 00:00 UTC), directory order of unsorted listings (`find`, `ls -f`, `tar -v` on some file
systems), directory sizes and `total` in `ls -l` (they follow the host's file system), host paths
in /proc/self/mountinfo, timing of output from concurrent processes, and anything after a timeout. Process ids restart at 1 in every episode's pid namespace. The gold
commands avoid all of these.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import re
import secrets
import select
import shutil
import signal
import subprocess
import tempfile
import time
import weakref
from dataclasses import dataclass
from typing import Any

from worldsmith.envs.base import (
    EnvBase,
    EnvError,
    EnvUnavailableError,
    InvalidActionError,
    Step,
    TaskLoadError,
    UnknownTaskError,
    action_text,
    as_action,
)
from worldsmith.envs.shell_tasks import CHORES, FIXED_MTIME, Chore, SandboxView, materialise, snapshot
from worldsmith.traces.model import Action, Observation

__all__ = ["HOME", "ShellEnv", "sandbox_available"]

HOME = "/home/agent"
USER = "agent"
HOSTNAME = "sandbox"
SANDBOX_UID = 1000
HOST_NOBODY = 65534  # a host root starts bubblewrap as this user
ENVIRONMENT = {
    "HOME": HOME,
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "USER": USER,
    "LANG": "C.UTF-8",
    "TERM": "dumb",
    "HOSTNAME": HOSTNAME,
    "TZ": "UTC",
}
_PASSWD = (
    "root:x:0:0:root:/root:/usr/sbin/nologin\n"
    f"{USER}:x:{SANDBOX_UID}:{SANDBOX_UID}:{USER}:{HOME}:/bin/bash\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
).encode()
_GROUP = f"root:x:0:\n{USER}:x:{SANDBOX_UID}:\nnogroup:x:65534:\n".encode()
_INSTALL_HINT = "install bubblewrap (Debian: apt-get install -y bubblewrap; `make envs`)"
_TIMEOUT_EXIT = 124  # exit_code reported for a command stopped by the wall-clock limit, as timeout(1) does
_KEEP = 8192  # bytes kept back from the output while looking for a marker (a marker with a long cwd)
_MAX_COMMAND = 1 << 16
_START_SECONDS = 20.0
_RECOVER_ROUNDS = 4  # interrupt-and-resynchronise rounds after a timeout before the shell is replaced
_RECOVER_WAIT = 0.3  # seconds each round waits for the shell to answer
_QUOTA_EVERY = 0.25  # seconds between disk-usage checks while a command runs
_TCSETATTR = re.compile(rb"bash: \[\d+: \d+ \(\d+\)\] tcsetattr: Inappropriate ioctl for device\n")


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandbox (see the module docstring)."""

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


# ---------------------------------------------------------------- host-side process bookkeeping


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat after the command name: [state, ppid, ...]; None when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2:].decode("ascii", "replace").split()


def _children(pid: int) -> list[int]:
    """Direct children of a host process (the kernel's children lists, else a /proc scan)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as handle:
                found += [int(child) for child in handle.read().split()]
        except FileNotFoundError:  # kernel without CONFIG_PROC_CHILDREN
            return [other for other in _all_pids() if (_stat_fields(other) or ["", ""])[1] == str(pid)]
        except OSError:
            continue
    return found


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    queue = _children(pid)
    while queue:
        child = queue.pop()
        found.append(child)
        queue += _children(child)
    return found


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (OSError, AttributeError):
        return None


def _send(pidfd: int, signum: int) -> None:
    with contextlib.suppress(OSError):
        signal.pidfd_send_signal(pidfd, signum)


def _data_fd(data: bytes) -> int:
    """A readable fd holding `data` (a pipe: the contents are small)."""
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, data)
    finally:
        os.close(write_end)
    return read_end


def _bind_system(args: list[str]) -> None:
    """Top-level system paths, read-only; merged-/usr links (/bin -> usr/bin) stay links."""
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = "/" + name
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    args += ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]


def _bwrap_arguments(home: str, cwd: str, tmp_mb: int, passwd_fd: int, group_fd: int) -> list[str]:
    args: list[str] = []
    _bind_system(args)
    args += [
        "--ro-bind-data", str(passwd_fd), "/etc/passwd",
        "--ro-bind-data", str(group_fd), "/etc/group",
        "--dev", "/dev",
        "--size", str(tmp_mb << 20), "--tmpfs", "/dev/shm",
        "--remount-ro", "/dev",  # files in /dev would be memory without a bound; devices stay writable
        "--proc", "/proc",
        "--size", str(tmp_mb << 20), "--tmpfs", "/tmp",
        "--dir", "/var", "--symlink", "../tmp", "/var/tmp",
        "--ro-bind", os.path.dirname(home), "/home", "--bind", home, HOME,
        "--remount-ro", "/",
        "--unshare-all", "--unshare-user", "--disable-userns",
        "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
        "--hostname", HOSTNAME,
        "--die-with-parent", "--new-session", "--clearenv",
    ]
    for key, value in ENVIRONMENT.items():
        args += ["--setenv", key, value]
    return [*args, "--chdir", cwd]


# bubblewrap's --die-with-parent fires when the *thread* that started it exits. Streamlit runs every
# rerun of a page in a new thread, so sandboxes are started from one long-lived thread instead:
# they then live until close() or until this process exits.
_LAUNCHER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="worldsmith-sandbox-launcher")


def _launch(bwrap: str, home: str, cwd: str, tmp_mb: int, command: list[str], **popen: Any) -> subprocess.Popen[bytes]:
    """Start `command` in a new sandbox around `home`, from the launcher thread (see `_LAUNCHER`)."""
    return _LAUNCHER.submit(_launch_here, bwrap, home, cwd, tmp_mb, command, **popen).result()


def _launch_here(
    bwrap: str, home: str, cwd: str, tmp_mb: int, command: list[str], **popen: Any
) -> subprocess.Popen[bytes]:
    """Start `command` in a new sandbox around `home` (arguments through a pipe: `ps` inside stays short)."""
    passwd_fd, group_fd = _data_fd(_PASSWD), _data_fd(_GROUP)
    args_fd = -1
    try:
        arguments = _bwrap_arguments(home, cwd, tmp_mb, passwd_fd, group_fd)
        args_fd = _data_fd(b"".join(argument.encode() + b"\0" for argument in arguments))
        ids: dict[str, Any] = {}
        if os.geteuid() == 0:  # never the host's root inside: nobody, so RLIMIT_NPROC applies
            ids = {"user": HOST_NOBODY, "group": HOST_NOBODY, "extra_groups": []}
        return subprocess.Popen(
            [bwrap, "--args", str(args_fd), *command],
            pass_fds=(args_fd, passwd_fd, group_fd),
            cwd="/",
            env=dict(ENVIRONMENT),
            start_new_session=True,
            **ids,
            **popen,
        )
    finally:
        for fd in (args_fd, passwd_fd, group_fd):
            if fd >= 0:
                os.close(fd)


def _disk_usage(root: str, max_entries: int = 200_000) -> int:
    """Bytes allocated under `root` (links not followed); past `max_entries` entries, counted as full."""
    total, seen, stack = 0, 0, [root]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                seen += 1
                if seen > max_entries:
                    return 1 << 62
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                total += info.st_blocks * 512
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    return total


def _new_home_base() -> tuple[str, str]:
    """A host directory for one sandbox: `base` (seen as /home, read-only) holding `home` (/home/agent).

    Its fixed time keeps `ls -la ~` the same on every run (the `..` line).
    """
    base = tempfile.mkdtemp(prefix="worldsmith-shell-")
    os.chmod(base, 0o755)
    home = os.path.join(base, USER)
    os.mkdir(home, 0o755)
    os.utime(base, (FIXED_MTIME, FIXED_MTIME))
    return base, home


def _hand_over(home: str) -> None:
    """A host root gives the home tree to the user bubblewrap runs as."""
    if os.geteuid() != 0:
        return
    for dirpath, dirnames, filenames in os.walk(home):
        for name in dirnames + filenames:
            os.lchown(os.path.join(dirpath, name), HOST_NOBODY, HOST_NOBODY)
    os.lchown(home, HOST_NOBODY, HOST_NOBODY)


def _remove_tree(path: str) -> None:
    """Remove a sandbox's host directory even where the agent took write permission away.

    Never through a link the agent made: directories are opened with O_NOFOLLOW relative to their
    parent and changed through that descriptor (a `chmod` of `home/etc_link` would change /etc).
    Directories are made writable top-down, before `fwalk` needs to list them.
    """
    if not os.path.isdir(path):
        return
    if os.geteuid() != 0:  # root removes what it cannot write anyway
        with contextlib.suppress(OSError):
            os.chmod(path, 0o700)
        for _, dirnames, _, dir_fd in os.fwalk(path, follow_symlinks=False):
            for name in dirnames:
                with contextlib.suppress(OSError):
                    fd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
                    try:  # an O_PATH descriptor opens even a mode-000 directory; chmod through its /proc link
                        os.chmod(f"/proc/self/fd/{fd}", 0o700)
                    finally:
                        os.close(fd)
    shutil.rmtree(path, ignore_errors=True)


_PROBED: dict[str, str] = {}


def _probe(bwrap: str) -> str:
    """'' when bubblewrap can build the sandbox here, else why not (cached per program)."""
    if bwrap in _PROBED:
        return _PROBED[bwrap]
    base, home = _new_home_base()
    try:
        _hand_over(home)
        command = ["/bin/bash", "--norc", "--noprofile", "-c", "true"]
        process = _launch(bwrap, home, HOME, 1, command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            output, _ = process.communicate(timeout=_START_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            output = b"bubblewrap did not start within the time limit"
        problem = "" if process.returncode == 0 else output.decode("utf-8", "replace").strip() or "failed"
    except OSError as error:
        problem = str(error)
    finally:
        _remove_tree(base)
    _PROBED[bwrap] = problem
    return problem


def _find_bwrap() -> str | None:
    found = shutil.which("bwrap")
    if found:
        return found
    for candidate in ("/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"):
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def _pidfds_work() -> bool:
    """Pidfds (Linux >= 5.3) let the host signal sandbox processes without ever hitting a reused pid."""
    fd = _pidfd(os.getpid())
    if fd is None:
        return False
    os.close(fd)
    return True


def sandbox_available() -> tuple[bool, str]:
    """Whether this machine can run the shell sandbox, and why not."""
    bwrap = _find_bwrap()
    if bwrap is None:
        return False, f"bubblewrap (bwrap) is not installed: {_INSTALL_HINT}"
    if not _pidfds_work():
        return False, "the kernel or Python lacks pidfds (Linux >= 5.3 and Python >= 3.9 are needed)"
    problem = _probe(bwrap)
    if problem:
        return False, f"bubblewrap cannot build a sandbox here ({problem}); it needs user namespaces and bwrap >= 0.8"
    return True, ""


# ---------------------------------------------------------------- one sandboxed shell


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


class _Sandbox:
    """A host directory, the bubblewrap process around one interactive bash, and the marker protocol."""

    def __init__(self, bwrap: str, limits: Limits) -> None:
        self.bwrap = bwrap
        self.limits = limits
        self.base, self.home = _new_home_base()
        self._cleanup = weakref.finalize(self, _remove_tree, self.base)
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
        _hand_over(self.home)

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
        self.process = _launch(
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
        found = self._await(seq, time.monotonic() + _START_SECONDS, opening)
        if found is None or found[0] != 0:
            said = bytes(opening.head).decode("utf-8", "replace").strip()
            self.stop()
            raise EnvError(f"the sandboxed shell did not start: {said or 'no answer'}")
        self._find_processes()

    def _find_processes(self) -> None:
        assert self.process is not None
        inits = _children(self.process.pid)
        bashes = _children(inits[0]) if len(inits) == 1 else []
        if len(bashes) != 1:
            self.stop()
            raise EnvError("the sandboxed shell started but its processes could not be found in /proc")
        self.init_pid, self.bash_pid = inits[0], bashes[0]
        init_pidfd, bash_pidfd = _pidfd(self.init_pid), _pidfd(self.bash_pid)
        self.init_pidfd = -1 if init_pidfd is None else init_pidfd
        self.bash_pidfd = -1 if bash_pidfd is None else bash_pidfd
        self.pid_namespace = os.readlink(f"/proc/{self.bash_pid}/ns/pid")
        self.bash_leads_group = (_stat_fields(self.bash_pid) or ["", "", ""])[2] == str(self.bash_pid)

    def stop(self) -> None:
        """Kill every process of the sandbox (killing its pid 1 ends the namespace); keeps the home."""
        process, self.process = self.process, None
        if self.init_pidfd >= 0:
            _send(self.init_pidfd, signal.SIGKILL)
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
            pid for pid in _descendants(self.init_pid)
            if pid != self.bash_pid and (_stat_fields(pid) or ["Z"])[0] != "Z"
        ]

    def _member_pidfd(self, pid: int) -> int | None:
        """A pidfd for `pid` if it is (still) a process of this sandbox: pid reuse never hits the host."""
        fd = _pidfd(pid)
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
                        _send(fd, signal.SIGSTOP)
                        held[pid] = fd
            for fd in held.values():
                _send(fd, signal.SIGKILL)
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
            _send(self.bash_pidfd, signal.SIGINT)
        for pid in self._strays():
            if in_group and (_stat_fields(pid) or ["", "", ""])[2] == group:
                continue
            fd = self._member_pidfd(pid)
            if fd is not None:
                _send(fd, signal.SIGINT)
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
                f"{_display(self.last_cwd)} (variables, functions and /tmp were reset)"
            )
            found = (_TIMEOUT_EXIT, self.last_cwd)
        elif not stopped_by and _disk_usage(self.home) > self.limits.disk_mb << 20:
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
            if _disk_usage(self.home) > self.limits.disk_mb << 20:
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


def _display(cwd: str) -> str:
    """The working directory as bash's \\w shows it."""
    if cwd == HOME:
        return "~"
    if cwd.startswith(HOME + "/"):
        return "~" + cwd[len(HOME):]
    return cwd


def _prompt(cwd: str) -> str:
    return f"{USER}@{HOSTNAME}:{_display(cwd)}$ "


def _command_of(action: Action | str) -> str:
    """The command line to run: text as given; a tool call's `command` argument; else the action's text."""
    if isinstance(action, str):
        return action
    if not isinstance(action, Action):
        raise InvalidActionError(f"an action must be an Action or text, not {type(action).__name__}")
    arguments = action.arguments
    if isinstance(arguments, dict) and isinstance(arguments.get("command"), str):
        return arguments["command"]
    return action_text(action)


class ShellEnv(EnvBase):
    """Scripted chores in a sandboxed bash (see the module docstring for the sandbox and the rendering)."""

    name = "shell"

    def __init__(
        self,
        *,
        timeout_s: float = 10.0,
        memory_mb: int = 1024,
        cpu_s: int = 10,
        file_mb: int = 64,
        max_procs: int = 64,
        tmp_mb: int = 64,
        max_output_bytes: int = 16384,
        disk_mb: int = 512,
    ) -> None:
        numbers = {"timeout_s": timeout_s, "memory_mb": memory_mb, "cpu_s": cpu_s, "file_mb": file_mb,
                   "max_procs": max_procs, "tmp_mb": tmp_mb, "max_output_bytes": max_output_bytes,
                   "disk_mb": disk_mb}
        for key, value in numbers.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"{key} must be a positive number, not {value!r}")
        if max_procs < 8:
            raise ValueError("max_procs must be at least 8 (the shell and its pipes need a few)")
        self._limits = Limits(float(timeout_s), int(memory_mb), int(cpu_s), int(file_mb), int(max_procs),
                              int(tmp_mb), int(max_output_bytes), int(disk_mb))
        available, reason = sandbox_available()
        if not available:
            raise EnvUnavailableError(f"the shell environment never runs commands unsandboxed: {reason}")
        self._bwrap = _find_bwrap() or "bwrap"
        self._sandbox: _Sandbox | None = None
        self._chore: Chore | None = None
        self._cwd = HOME
        self._expert_next = 0
        self._won = False

    def tasks(self) -> list[str]:
        return list(CHORES)

    @property
    def sandbox_path(self) -> str | None:
        """The host directory seen inside as the home (for inspection; None between episodes)."""
        return None if self._sandbox is None else self._sandbox.home

    def reset(self, task: str | None = None, *, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        chore = self._chore_for(task)
        self._close_sandbox()
        sandbox = _Sandbox(self._bwrap, self._limits)
        try:
            sandbox.prepare(chore)
        except OSError as error:
            sandbox.close()
            raise TaskLoadError(f"shell task {chore.id!r} could not be set up: {error}") from error
        try:
            sandbox.start(HOME)
        except BaseException:
            sandbox.close()
            raise
        self._sandbox, self._chore = sandbox, chore
        self._cwd, self._expert_next = HOME, 0
        self._won = self._check()
        info = {"task": chore.instruction, "env_id": f"shell/{chore.id.split('/')[0]}", "won": self._won,
                "exit_code": 0, "cwd": HOME}
        return Observation(text=f"Task: {chore.instruction}\n{_prompt(HOME)}"), info

    def _chore_for(self, task: str | None) -> Chore:
        if task is None:
            return next(iter(CHORES.values()))
        chore = CHORES.get(task)
        if chore is None:
            raise UnknownTaskError(
                f"unknown shell task {task!r}; ShellEnv().tasks() lists the {len(CHORES)} chores "
                f"(e.g. {', '.join(list(CHORES)[:3])})"
            )
        return chore

    def step(self, action: Action | str) -> Step:
        if self._sandbox is None or self._chore is None:
            raise EnvError("call reset() before step()")
        command = _command_of(action).replace("\x00", "")
        if len(command) > _MAX_COMMAND:
            raise InvalidActionError(f"a command line is limited to {_MAX_COMMAND} characters, not {len(command)}")
        before = _prompt(self._cwd)
        result = self._sandbox.run(command)
        self._cwd = result.cwd
        gold = self._chore.gold
        if self._expert_next < len(gold) and command == gold[self._expert_next]:
            self._expert_next += 1
        was_won, self._won = self._won, self._check()
        info = {"task": self._chore.instruction, "won": self._won, "exit_code": result.exit_code,
                "cwd": result.cwd, "timed_out": result.timed_out}
        text = _render(before, command, result.output, result.notes, _prompt(result.cwd))
        reward = 1.0 if self._won and not was_won else 0.0
        return Step(Observation(text=text), reward, self._won, False, info)

    def _check(self) -> bool:
        assert self._sandbox is not None and self._chore is not None
        try:
            return bool(self._chore.check(SandboxView(self._sandbox.home)))
        except OSError:
            return False

    def expert_action(self) -> Action | None:
        if self._chore is None or self._won or self._expert_next >= len(self._chore.gold):
            return None
        return as_action(self._chore.gold[self._expert_next])

    def state(self) -> dict[str, Any] | None:
        if self._sandbox is None or self._chore is None:
            return None
        return {"task": self._chore.id, "cwd": self._cwd, "won": self._won,
                **snapshot(SandboxView(self._sandbox.home))}

    def _close_sandbox(self) -> None:
        sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None:
            sandbox.close()

    def close(self) -> None:
        self._close_sandbox()
        self._chore = None


def _render(prompt: str, command: str, output: str, notes: tuple[str, ...], next_prompt: str) -> str:
    """Prompt, echoed command, output, notes, next prompt: what a terminal would show."""
    text = prompt + command.rstrip("\n").replace("\n", "\n> ") + "\n" + output
    if notes:
        if not text.endswith("\n"):
            text += "\n"
        text += "".join(f"[{note}]\n" for note in notes)
    return text + next_prompt

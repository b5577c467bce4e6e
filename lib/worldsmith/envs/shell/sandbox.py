"""The bubblewrap sandbox around one shell: its arguments, its home on the host, its launcher thread.

What the sandbox shows of the host and why is described in the package docstring
(`worldsmith.envs.shell`); this module builds it, starts a command in it and removes its home.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import shutil
import subprocess
import tempfile
from typing import Any

from worldsmith.envs.shell.sandbox_processes import pidfds_work
from worldsmith.envs.shell_tasks import FIXED_MTIME

__all__ = [
    "ENVIRONMENT",
    "HOME",
    "HOSTNAME",
    "HOST_NOBODY",
    "SANDBOX_UID",
    "START_SECONDS",
    "USER",
    "disk_usage",
    "display_cwd",
    "find_bwrap",
    "hand_over",
    "launch",
    "new_home_base",
    "remove_tree",
    "sandbox_available",
]

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
START_SECONDS = 20.0


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


def launch(bwrap: str, home: str, cwd: str, tmp_mb: int, command: list[str], **popen: Any) -> subprocess.Popen[bytes]:
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


def disk_usage(root: str, max_entries: int = 200_000) -> int:
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


def new_home_base() -> tuple[str, str]:
    """A host directory for one sandbox: `base` (seen as /home, read-only) holding `home` (/home/agent).

    Its fixed time keeps `ls -la ~` the same on every run (the `..` line).
    """
    base = tempfile.mkdtemp(prefix="worldsmith-shell-")
    os.chmod(base, 0o755)
    home = os.path.join(base, USER)
    os.mkdir(home, 0o755)
    os.utime(base, (FIXED_MTIME, FIXED_MTIME))
    return base, home


def hand_over(home: str) -> None:
    """A host root gives the home tree to the user bubblewrap runs as."""
    if os.geteuid() != 0:
        return
    for dirpath, dirnames, filenames in os.walk(home):
        for name in dirnames + filenames:
            os.lchown(os.path.join(dirpath, name), HOST_NOBODY, HOST_NOBODY)
    os.lchown(home, HOST_NOBODY, HOST_NOBODY)


def remove_tree(path: str) -> None:
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
    base, home = new_home_base()
    try:
        hand_over(home)
        command = ["/bin/bash", "--norc", "--noprofile", "-c", "true"]
        process = launch(bwrap, home, HOME, 1, command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            output, _ = process.communicate(timeout=START_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            output = b"bubblewrap did not start within the time limit"
        problem = "" if process.returncode == 0 else output.decode("utf-8", "replace").strip() or "failed"
    except OSError as error:
        problem = str(error)
    finally:
        remove_tree(base)
    _PROBED[bwrap] = problem
    return problem


def find_bwrap() -> str | None:
    found = shutil.which("bwrap")
    if found:
        return found
    for candidate in ("/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"):
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def sandbox_available() -> tuple[bool, str]:
    """Whether this machine can run the shell sandbox, and why not."""
    bwrap = find_bwrap()
    if bwrap is None:
        return False, f"bubblewrap (bwrap) is not installed: {_INSTALL_HINT}"
    if not pidfds_work():
        return False, "the kernel or Python lacks pidfds (Linux >= 5.3 and Python >= 3.9 are needed)"
    problem = _probe(bwrap)
    if problem:
        return False, f"bubblewrap cannot build a sandbox here ({problem}); it needs user namespaces and bwrap >= 0.8"
    return True, ""


def display_cwd(cwd: str) -> str:
    """The working directory as bash's \\w shows it."""
    if cwd == HOME:
        return "~"
    if cwd.startswith(HOME + "/"):
        return "~" + cwd[len(HOME):]
    return cwd

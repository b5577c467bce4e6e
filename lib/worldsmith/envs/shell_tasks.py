"""Scripted chores for the sandboxed shell environment, and a safe host-side view of a sandbox home.

A chore is a small job a person does in a terminal (rename files, count lines, pack an archive):
an instruction, the files it starts from (deterministic content, fixed modes and times), the
commands an expert types, and a checker that looks at the sandbox home afterwards.

Checkers run on the host against a directory a sandboxed process can write to, so `SandboxView`
never follows a symbolic link (every path component is opened with O_NOFOLLOW relative to its
parent directory) and never reads more than a small limit: a link to /etc/shadow or a FIFO in the
sandbox reads as "not a regular file", a gzip bomb as "not a valid archive".
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import os
import stat
import tarfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

__all__ = ["CHORES", "FIXED_MTIME", "Chore", "SandboxView", "materialise", "snapshot"]

FIXED_MTIME = 1704067200  # 2024-01-01 00:00:00 UTC: set files look the same in `ls -l` on every run
READ_LIMIT = 1 << 20  # checkers and state() never read more of one file than this
HASH_LIMIT = 1 << 20  # state() hashes files up to this size
MAX_ENTRIES = 5000  # state() lists at most this many paths
_ARCHIVE_LIMIT = 8 << 20  # decompressed bytes a checker accepts from an archive


class SandboxView:
    """Read-only, link-refusing access to a sandbox home from the host (for checkers and `state()`)."""

    def __init__(self, root: str) -> None:
        self.root = root

    @contextlib.contextmanager
    def _parent(self, relative: str) -> Iterator[tuple[int, str] | None]:
        """An open fd of the directory holding `relative` and the last name; None if unreachable."""
        parts = [part for part in PurePosixPath(relative).parts if part not in ("", ".")]
        if not parts or any(part in ("..", "/") for part in parts):
            yield None
            return
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for part in parts[:-1]:
                try:
                    inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except OSError:
                    yield None
                    return
                os.close(fd)
                fd = inner
            yield fd, parts[-1]
        finally:
            os.close(fd)

    def lstat(self, relative: str) -> os.stat_result | None:
        with self._parent(relative) as found:
            if found is None:
                return None
            try:
                return os.stat(found[1], dir_fd=found[0], follow_symlinks=False)
            except OSError:
                return None

    def is_file(self, relative: str) -> bool:
        info = self.lstat(relative)
        return info is not None and stat.S_ISREG(info.st_mode)

    def is_dir(self, relative: str) -> bool:
        info = self.lstat(relative)
        return info is not None and stat.S_ISDIR(info.st_mode)

    def exists(self, relative: str) -> bool:
        return self.lstat(relative) is not None

    def mode(self, relative: str) -> int | None:
        """Permission bits of a path (0o644), None when absent."""
        info = self.lstat(relative)
        return None if info is None else stat.S_IMODE(info.st_mode)

    def read_bytes(self, relative: str, limit: int = READ_LIMIT) -> bytes | None:
        """A regular file's bytes; None when absent, not a regular file, or larger than `limit`."""
        with self._parent(relative) as found:
            if found is None:
                return None
            return _read_regular(found[0], found[1], limit)

    def read_text(self, relative: str, limit: int = READ_LIMIT) -> str | None:
        data = self.read_bytes(relative, limit)
        return None if data is None else data.decode("utf-8", "replace")

    def listdir(self, relative: str = ".") -> list[str] | None:
        """Names in a directory (sorted), None when it is not a directory."""
        if relative in ("", "."):
            return sorted(os.listdir(self.root))
        with self._parent(relative) as found:
            if found is None:
                return None
            try:
                fd = os.open(found[1], os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=found[0])
            except OSError:
                return None
            try:
                return sorted(os.listdir(fd))
            finally:
                os.close(fd)

    def walk(self, relative: str = ".") -> Iterator[tuple[str, os.stat_result, int, str]]:
        """(path relative to home, lstat, parent dir fd, name) of everything under `relative`, links not followed."""
        prefix = "" if relative in ("", ".") else str(PurePosixPath(relative)) + "/"
        if prefix and not self.is_dir(relative):
            return
        if prefix:
            with self._parent(relative) as found:
                if found is None:
                    return
                yield from self._fwalk(found[1], found[0], prefix)
        else:
            yield from self._fwalk(self.root, None, "")

    @staticmethod
    def _fwalk(top: str, dir_fd: int | None, prefix: str) -> Iterator[tuple[str, os.stat_result, int, str]]:
        for dirpath, dirnames, filenames, fd in os.fwalk(top, dir_fd=dir_fd, follow_symlinks=False):
            dirnames.sort()
            base = os.path.relpath(dirpath, top)
            base = "" if base == "." else base + "/"
            for name in sorted(dirnames + filenames):
                try:
                    info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except OSError:
                    continue
                yield prefix + base + name, info, fd, name

    def files_under(self, relative: str = ".") -> list[str]:
        """Regular files under `relative` (paths relative to home, sorted), at most MAX_ENTRIES."""
        found = []
        for path, info, _, _ in self.walk(relative):
            if stat.S_ISREG(info.st_mode):
                found.append(path)
                if len(found) >= MAX_ENTRIES:
                    break
        return sorted(found)


def _read_regular(dir_fd: int, name: str, limit: int) -> bytes | None:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(name, flags | getattr(os, "O_NOATIME", 0), dir_fd=dir_fd)
    except PermissionError:  # O_NOATIME needs ownership or CAP_FOWNER
        try:
            fd = os.open(name, flags, dir_fd=dir_fd)
        except OSError:
            return None
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        chunks = []
        remaining = limit + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        data = b"".join(chunks)
        return None if len(data) > limit else data
    finally:
        os.close(fd)


def snapshot(view: SandboxView) -> dict[str, Any]:
    """The sandbox home as JSON: every path with its type, permission bits, size and (small files) sha256."""
    entries: list[dict[str, Any]] = []
    truncated = False
    for path, info, dir_fd, name in view.walk():
        if len(entries) >= MAX_ENTRIES:
            truncated = True
            break
        entry: dict[str, Any] = {"path": path, "mode": f"{stat.S_IMODE(info.st_mode):04o}"}
        if stat.S_ISDIR(info.st_mode):
            entry["type"] = "dir"
        elif stat.S_ISLNK(info.st_mode):
            entry["type"] = "symlink"
            with contextlib.suppress(OSError):
                entry["target"] = os.readlink(name, dir_fd=dir_fd)
        elif stat.S_ISREG(info.st_mode):
            entry["type"] = "file"
            entry["size"] = info.st_size
            if info.st_size <= HASH_LIMIT:
                data = _read_regular(dir_fd, name, HASH_LIMIT)
                if data is not None:
                    entry["sha256"] = hashlib.sha256(data).hexdigest()
        else:
            entry["type"] = "other"
        entries.append(entry)
    entries.sort(key=lambda entry: entry["path"])
    return {"files": entries, "truncated": truncated}


# ---------------------------------------------------------------- chores


Checker = Callable[[SandboxView], bool]


@dataclass(frozen=True)
class Chore:
    """One scripted task: starting files, the expert's commands, and what counts as done."""

    id: str
    instruction: str
    files: dict[str, bytes]
    gold: tuple[str, ...]
    check: Checker
    modes: dict[str, int] = field(default_factory=dict)  # default 0o644 for files, 0o755 for dirs
    dirs: tuple[str, ...] = ()  # empty directories to create


def materialise(chore: Chore, home: str) -> None:
    """Write a chore's starting files under `home` with fixed modes and times (deterministic `ls -l`)."""
    for directory in chore.dirs:
        os.makedirs(os.path.join(home, directory), mode=0o755, exist_ok=True)
    for relative, content in chore.files.items():
        path = os.path.join(home, relative)
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(content)
        os.chmod(path, chore.modes.get(relative, 0o644))
    for dirpath, dirnames, filenames in os.walk(home, topdown=False):
        for name in filenames:
            os.utime(os.path.join(dirpath, name), (FIXED_MTIME, FIXED_MTIME), follow_symlinks=False)
        for name in dirnames:
            path = os.path.join(dirpath, name)
            os.chmod(path, chore.modes.get(os.path.relpath(path, home), 0o755))
            os.utime(path, (FIXED_MTIME, FIXED_MTIME), follow_symlinks=False)
    os.utime(home, (FIXED_MTIME, FIXED_MTIME))


def _text(value: str) -> bytes:
    return value.encode("utf-8")


def _lines(view: SandboxView, relative: str) -> list[str] | None:
    """A file's lines without trailing whitespace or blank trailing lines; None when unreadable."""
    text = view.read_text(relative)
    if text is None:
        return None
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _answer(view: SandboxView, relative: str) -> str | None:
    """A one-value answer file's content, stripped."""
    text = view.read_text(relative)
    return None if text is None else text.strip()


def _same_files(view: SandboxView, expected: dict[str, bytes]) -> bool:
    return all(view.read_bytes(path) == content for path, content in expected.items())


def _tar_members(view: SandboxView, relative: str) -> dict[str, bytes] | None:
    """Regular files in a (gzip-compressed) tar archive in the sandbox, read in memory; None if not valid."""
    data = view.read_bytes(relative)
    if data is None:
        return None
    if data[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
                data = stream.read(_ARCHIVE_LIMIT + 1)
        except (OSError, EOFError, zlib.error):
            return None
        if len(data) > _ARCHIVE_LIMIT:
            return None
    members: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
            for count, member in enumerate(archive):
                if count >= 1000:
                    return None
                if member.isfile():
                    extracted = archive.extractfile(member)
                    if extracted is not None:
                        members[member.name.removeprefix("./")] = extracted.read()
    except (tarfile.TarError, OSError, EOFError):
        return None
    return members


def _tar_gz(files: dict[str, bytes], dirs: tuple[str, ...] = ()) -> bytes:
    """A byte-for-byte reproducible .tar.gz (fixed times, owners and order)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as archive:
        entries: list[tuple[str, bytes | None]] = [(name, None) for name in dirs]
        entries += sorted(files.items())
        for name, content in entries:
            info = tarfile.TarInfo(name)
            info.mtime = FIXED_MTIME
            info.uid = info.gid = 1000
            info.uname = info.gname = "agent"
            if content is None:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                archive.addfile(info)
            else:
                info.mode = 0o644
                info.size = len(content)
                archive.addfile(info, io.BytesIO(content))
    return gzip.compress(raw.getvalue(), mtime=0)


# Starting content, shared by the checkers.

_NOTES = {
    "notes/todo.txt": _text("buy milk\ncall the plumber\nwater the plants\n"),
    "notes/ideas.txt": _text("a bike rack for the office\nshorter meetings\n"),
    "notes/journal.txt": _text("Monday: rain.\nTuesday: sun.\n"),
    "notes/readme.log": _text("these notes are mine\n"),
}

_SERVER_LOG = "".join(
    f"2024-01-01 10:{minute:02d}:00 {level} {message}\n"
    for minute, (level, message) in enumerate([
        ("INFO", "server started on port 8080"),
        ("INFO", "connected to database"),
        ("ERROR", "request /api/users failed: timeout"),
        ("WARN", "slow query (2.1 s)"),
        ("INFO", "request /api/items ok"),
        ("ERROR", "request /api/orders failed: 500"),
        ("INFO", "cache warmed"),
        ("ERROR", "disk usage above 90%"),
        ("DEBUG", "no error here, just a debug line"),
        ("INFO", "request /api/users ok"),
        ("ERROR", "worker 3 crashed"),
        ("INFO", "worker 3 restarted"),
        ("ERROR", "request /api/orders failed: timeout"),
        ("INFO", "shutting down"),
    ])
)

_BUNDLE_FILES = {
    "bundle/README.txt": _text("A bundle of configuration for the demo service.\n"),
    "bundle/a/notes.txt": _text("nothing to see here\n"),
    "bundle/b/c/settings.cfg": _text("mode=fast\nlevel=3\nowner=ops\n"),
    "bundle/b/data.csv": _text("id,value\n1,10\n2,20\n"),
    "bundle/d/e/f/empty.txt": b"",
}
_BUNDLE_DIRS = ("bundle", "bundle/a", "bundle/b", "bundle/b/c", "bundle/d", "bundle/d/e", "bundle/d/e/f")

_PEOPLE = [
    ("ana", "Lisbon", 34), ("ben", "Berlin", 28), ("chen", "Beijing", 41), ("dana", "Berlin", 36),
    ("eli", "Austin", 22), ("fay", "Lisbon", 30), ("gus", "Austin", 45), ("hana", "Osaka", 27),
    ("ivo", "Berlin", 39), ("jo", "Lisbon", 31), ("kim", "Osaka", 25), ("lea", "Berlin", 33),
]
_PEOPLE_CSV = "name,city,age\n" + "".join(f"{name},{city},{age}\n" for name, city, age in _PEOPLE)

_APP_CONF = (
    "# service configuration\n"
    "db_host = localhost\n"
    "db_port = 5432\n"
    "cache_url = redis://localhost:6379/0\n"
    "public_name = my-localhost-service\n"
    "log_level = info\n"
)

_REPORTS = {
    "reports/q1.txt": _text("Q1 revenue: 120\n"),
    "reports/q2.txt": _text("Q2 revenue: 135\n"),
    "reports/summary/total.txt": _text("H1 revenue: 255\n"),
}

_DATA_SIZES = {"alpha.bin": 1200, "beta.bin": 40960, "gamma.bin": 777, "delta.bin": 20480, "epsilon.bin": 4096}

_HELLO = _text('#!/bin/sh\necho "hello, world" > greeting.txt\n')

_CACHE = {
    "cache/a.tmp": _text("scratch a\n"),
    "cache/b.dat": _text("keep b\n"),
    "cache/sub/c.tmp": _text("scratch c\n"),
    "cache/sub/d.txt": _text("keep d\n"),
    "cache/sub/deeper/e.tmp": _text("scratch e\n"),
    "cache/sub/deeper/f.tmp.bak": _text("keep f\n"),
}

_NUMBERS = [42, 7, 1001, -3, 56, 8, 300, 19, 0, 77, 5, 123, 64, 2, 999]

_ETC = {
    "etc/app.conf": _text("name=app\n"),
    "etc/db.conf": _text("host=db\nport=5432\n"),
    "etc/web.conf": _text("listen=80\n"),
    "etc/notes.txt": _text("conf files live here\n"),
    "etc/old/legacy.conf": _text("obsolete=yes\n"),
}

_ESSAY = (
    "The shell is a small language for gluing programs together.\n"
    "Pipes pass the output of one program to the input of the next,\n"
    "and redirection sends it to files.\n"
    "\n"
    "Most chores need only a handful of tools: ls, cp, mv, grep, sed, sort and tar.\n"
)

_SRC = {
    "src/main.py": _text("from util.helpers import round_price\n\nprint(round_price(2.5))\n"),
    "src/util/helpers.py": _text("def round_price(value):\n    # TODO: fix rounding of halves\n    return round(value)\n"),
    "src/util/io.py": _text("def load(path):\n    # TODO later: stream large files\n    return open(path).read()\n"),
    "docs/notes.md": _text("Keep a TODO list; TODO: fix the docs build too.\n"),
}

_EMAILS = [
    "ana@example.org", "ben@example.org", "ana@example.org", "chen@example.net", "dana@example.org",
    "ben@example.org", "eli@example.com", "chen@example.net", "fay@example.org", "ana@example.org",
]

_SALES = [("2024-01-02", "pen", 12), ("2024-01-02", "book", 45), ("2024-01-03", "lamp", 130),
          ("2024-01-04", "pen", 12), ("2024-01-05", "desk", 410), ("2024-01-06", "book", 45)]


def _check_renamed(view: SandboxView) -> bool:
    expected = {path.replace(".txt", ".md"): content for path, content in _NOTES.items()}
    txt_left = [path for path in view.files_under("notes") if path.endswith(".txt")]
    return not txt_left and _same_files(view, expected)


def _check_cities(view: SandboxView) -> bool:
    return _lines(view, "cities.txt") == sorted({city for _, city, _ in _PEOPLE})


def _check_city_counts(view: SandboxView) -> bool:
    lines = _lines(view, "city_counts.txt")
    if lines is None:
        return False
    counts: dict[str, int] = {}
    for _, city, _ in _PEOPLE:
        counts[city] = counts.get(city, 0) + 1
    return [" ".join(line.split()) for line in lines] == [f"{city} {counts[city]}" for city in sorted(counts)]


def _check_project_tree(view: SandboxView) -> bool:
    dirs_ok = all(view.is_dir(f"project/{name}") for name in ("src", "tests", "docs"))
    init = view.read_bytes("project/src/__init__.py")
    return dirs_ok and init == b"" and _lines(view, "project/README.md") == ["# project"]


def _check_packed(view: SandboxView) -> bool:
    members = _tar_members(view, "reports.tar.gz")
    return members is not None and all(members.get(path) == content for path, content in _REPORTS.items())


def _check_executable(view: SandboxView) -> bool:
    mode = view.mode("hello.sh")
    return mode is not None and bool(mode & 0o100) and view.read_bytes("greeting.txt") == b"hello, world\n"


def _check_clean_tmp(view: SandboxView) -> bool:
    files = view.files_under("cache")
    kept = {path: content for path, content in _CACHE.items() if not path.endswith(".tmp")}
    return not any(path.endswith(".tmp") for path in files) and _same_files(view, kept)


def _check_backup(view: SandboxView) -> bool:
    wanted = {"backup/app.conf": _ETC["etc/app.conf"], "backup/db.conf": _ETC["etc/db.conf"],
              "backup/web.conf": _ETC["etc/web.conf"]}
    return _same_files(view, wanted) and view.files_under("backup") == sorted(wanted)


def _check_dedupe(view: SandboxView) -> bool:
    return _lines(view, "unique_emails.txt") == list(dict.fromkeys(_EMAILS))


def _check_found_settings(view: SandboxView) -> bool:
    content = _BUNDLE_FILES["bundle/b/c/settings.cfg"]
    return view.read_bytes("settings.cfg") == content and view.read_bytes("bundle/b/c/settings.cfg") == content


_CHORE_LIST = [
    Chore(
        id="files/rename-txt-to-md",
        instruction="In the folder notes, rename every file whose name ends in .txt so that it ends in .md "
        "instead (same name otherwise, same contents). Leave the other files alone.",
        files=dict(_NOTES),
        gold=("ls notes", "cd notes", 'for f in *.txt; do mv -- "$f" "${f%.txt}.md"; done'),
        check=_check_renamed,
    ),
    Chore(
        id="text/count-errors",
        instruction="Count the lines of server.log that contain the word ERROR (in capitals) and write just "
        "that number to error_count.txt.",
        files={"server.log": _text(_SERVER_LOG)},
        gold=("grep -c ERROR server.log", "grep -c ERROR server.log > error_count.txt"),
        check=lambda view: _answer(view, "error_count.txt") == str(_SERVER_LOG.count(" ERROR ")),
    ),
    Chore(
        id="archives/extract-and-find",
        instruction="Extract bundle.tar.gz in your home directory, find the file named settings.cfg inside "
        "what it unpacks, and copy that file to ~/settings.cfg.",
        files={"bundle.tar.gz": _tar_gz(_BUNDLE_FILES, _BUNDLE_DIRS)},
        gold=("tar -xzf bundle.tar.gz", "find bundle -name settings.cfg", "cp bundle/b/c/settings.cfg ~/settings.cfg"),
        check=_check_found_settings,
    ),
    Chore(
        id="csv/unique-cities",
        instruction="people.csv has a header line. Write the distinct values of its city column, sorted "
        "alphabetically, one per line, to cities.txt.",
        files={"people.csv": _text(_PEOPLE_CSV)},
        gold=("head -n 3 people.csv", "tail -n +2 people.csv | cut -d, -f2 | sort -u > cities.txt"),
        check=_check_cities,
    ),
    Chore(
        id="csv/count-by-city",
        instruction="people.csv has a header line. Write to city_counts.txt one line per city: the city, a "
        "space, and how many people in the file live there, sorted by city name.",
        files={"people.csv": _text(_PEOPLE_CSV)},
        gold=(
            "head -n 3 people.csv",
            "tail -n +2 people.csv | cut -d, -f2 | sort | uniq -c | awk '{ print $2, $1 }' > city_counts.txt",
        ),
        check=_check_city_counts,
    ),
    Chore(
        id="dirs/make-project-tree",
        instruction="Create a directory project containing the subdirectories src, tests and docs, an empty "
        "file src/__init__.py, and a file README.md whose only line is: # project",
        files={},
        gold=(
            "mkdir -p project/src project/tests project/docs",
            "touch project/src/__init__.py",
            "echo '# project' > project/README.md",
        ),
        check=_check_project_tree,
    ),
    Chore(
        id="text/replace-host",
        instruction="In app.conf, replace every occurrence of localhost with db.internal. Change nothing else.",
        files={"app.conf": _text(_APP_CONF)},
        gold=("grep -n localhost app.conf", "sed -i 's/localhost/db.internal/g' app.conf"),
        check=lambda view: view.read_text("app.conf") == _APP_CONF.replace("localhost", "db.internal"),
    ),
    Chore(
        id="archives/pack-reports",
        instruction="Pack the folder reports, with everything in it, into a gzip-compressed tar archive named "
        "reports.tar.gz in your home directory.",
        files=dict(_REPORTS),
        gold=("tar -czf reports.tar.gz reports",),
        check=_check_packed,
    ),
    Chore(
        id="files/largest-file",
        instruction="Find the largest file in the folder data and write its name (just the file name) to "
        "largest.txt.",
        files={f"data/{name}": bytes((index * 37 + offset) % 251 for offset in range(size))
               for index, (name, size) in enumerate(_DATA_SIZES.items())},
        gold=("ls -S data", "ls -S data | head -n 1 > largest.txt"),
        check=lambda view: _answer(view, "largest.txt") == max(_DATA_SIZES, key=_DATA_SIZES.__getitem__),
    ),
    Chore(
        id="scripts/make-executable",
        instruction="Make the script hello.sh executable, then run it from your home directory.",
        files={"hello.sh": _HELLO},
        gold=("chmod +x hello.sh", "./hello.sh"),
        check=_check_executable,
    ),
    Chore(
        id="files/clean-tmp",
        instruction="Delete every file whose name ends in .tmp anywhere under the folder cache; keep all "
        "other files.",
        files=dict(_CACHE),
        gold=("find cache -name '*.tmp' | sort", "find cache -name '*.tmp' -delete"),
        check=_check_clean_tmp,
    ),
    Chore(
        id="text/sort-numbers",
        instruction="Sort the numbers in numbers.txt in ascending numeric order and write them, one per "
        "line, to sorted.txt.",
        files={"numbers.txt": _text("".join(f"{number}\n" for number in _NUMBERS))},
        gold=("sort -n numbers.txt > sorted.txt",),
        check=lambda view: _lines(view, "sorted.txt") == [str(number) for number in sorted(_NUMBERS)],
    ),
    Chore(
        id="files/backup-configs",
        instruction="Copy every file ending in .conf that sits directly in the folder etc (not in its "
        "subfolders) into a new folder backup, keeping names and contents. Copy nothing else.",
        files=dict(_ETC),
        gold=("ls etc", "mkdir backup", "cp etc/*.conf backup/"),
        check=_check_backup,
    ),
    Chore(
        id="text/word-count",
        instruction="Count the words in essay.txt (as wc -w counts them) and write only that number to "
        "word_count.txt.",
        files={"essay.txt": _text(_ESSAY)},
        gold=("wc -w < essay.txt > word_count.txt",),
        check=lambda view: _answer(view, "word_count.txt") == str(len(_ESSAY.split())),
    ),
    Chore(
        id="search/find-todo",
        instruction="Exactly one file under the folder src contains the text 'TODO: fix'. Write its path "
        "relative to your home directory (like src/dir/file.py) to todo.txt.",
        files=dict(_SRC),
        gold=("grep -rl 'TODO: fix' src", "grep -rl 'TODO: fix' src > todo.txt"),
        check=lambda view: (_answer(view, "todo.txt") or "").removeprefix("./") == "src/util/helpers.py",
    ),
    Chore(
        id="text/dedupe-lines",
        instruction="Write the lines of emails.txt to unique_emails.txt with duplicates removed, keeping the "
        "first occurrence of each line and the original order.",
        files={"emails.txt": _text("".join(f"{email}\n" for email in _EMAILS))},
        gold=("awk '!seen[$0]++' emails.txt > unique_emails.txt",),
        check=_check_dedupe,
    ),
    Chore(
        id="files/private-secret",
        instruction="Make secret.txt readable and writable by its owner only, with no permissions at all for "
        "the group and others.",
        files={"secret.txt": _text("the launch code is 0000\n")},
        gold=("chmod 600 secret.txt",),
        check=lambda view: view.mode("secret.txt") == 0o600 and view.is_file("secret.txt"),
    ),
    Chore(
        id="csv/sum-column",
        instruction="sales.csv has a header line. Add up its amount column and write the total to total.txt.",
        files={"sales.csv": _text("date,item,amount\n" + "".join(f"{d},{i},{a}\n" for d, i, a in _SALES))},
        gold=("head -n 2 sales.csv", "awk -F, 'NR > 1 { total += $3 } END { print total }' sales.csv > total.txt"),
        check=lambda view: _answer(view, "total.txt") == str(sum(amount for _, _, amount in _SALES)),
    ),
]

CHORES: dict[str, Chore] = {chore.id: chore for chore in _CHORE_LIST}

if len(CHORES) != len(_CHORE_LIST):  # pragma: no cover - a duplicate id is a bug in this file
    raise RuntimeError("duplicate chore ids in worldsmith.envs.shell_tasks")

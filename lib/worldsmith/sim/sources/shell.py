"""A file-system state read from a shell session's transcript: later listings and reads reflect earlier writes.

A shell observation is framed: the prompt and the command echoed, the command's output, the next
prompt (`agent@box:~$ ls\\na.txt\\nagent@box:~$ `). Whether a recording shows that frame is learned
from the evidence, and so is which commands print nothing. Within an episode the tracker keeps the
working directory (from the prompt and `cd`), directory listings seen (`ls DIR`, one name a line),
file contents seen or written (`cat F`, `echo TEXT > F`), and applies the writes it can parse
(`mkdir`, `touch`, `rm`, `mv`, `cp`, redirections). It proposes a whole observation (`shell` source)
only when every part is known: the frame, the next prompt, and an output that is empty (a write,
a redirected command, a command that printed nothing in the evidence), a known listing or file, or
`pwd`. The route table (`sim.routing`) decides per command whether to trust it.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections import Counter
from collections.abc import Sequence
from typing import Any

from worldsmith.sim.sources.base import Answer, AnswerSource, CandidateAnswer, SourceContext, Step
from worldsmith.sim.sources.registry import answer_source
from worldsmith.worldbook.model import Evidence

__all__ = ["ShellSource", "ShellTracker"]

_PROMPT = re.compile(r"(?P<prompt>[\w.\-]+@[\w.\-]+:(?P<path>[^\n$#]*)[$#] ?)\Z")
_WRITES = frozenset({"mkdir", "touch", "rm", "rmdir", "mv", "cp", "chmod", "chown", "ln"})
_CONTROL = frozenset({"|", "||", "&&", ";", "&"})


def _words(command: str) -> list[str] | None:
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars="|&;<>")
        lexer.whitespace_split = True
        return list(lexer)
    except ValueError:
        return None


def _redirect_target(words: Sequence[str]) -> tuple[str, bool] | None:
    """(file, append) when standard output goes to a file at the end of a simple command."""
    if len(words) >= 3 and words[-2] in (">", ">>") and not words[-3].endswith("2"):
        return words[-1], words[-2] == ">>"
    return None


class ShellTracker:
    """The working directory, listings and files of a shell episode (see the module doc)."""

    def __init__(self, evidence: Sequence[Evidence] = ()) -> None:
        self.framed = False  # observations are prompt + command + "\n" + output + next prompt
        self.silent: set[str] = set()  # commands that printed nothing in (nearly) every recorded unredirected use
        self.home: str | None = None  # what `~` stands for (from a `pwd` in the evidence)
        self._learn(evidence)
        self.reset()

    # ------------------------------------------------------------------ learning
    def _learn(self, evidence: Sequence[Evidence]) -> None:
        from worldsmith.worldbook.induce import group_by_episode

        framed = total = 0
        outputs: dict[str, Counter[bool]] = {}
        for items in group_by_episode(evidence).values():
            prompt: str | None = None
            for item in items:
                found = _PROMPT.search(item.observation)
                first = item.observation.split("\n", 1)[0]
                if prompt is None and first.endswith(item.action_text):  # the first turn echoes its own prompt
                    prompt = first[: len(first) - len(item.action_text)]
                if prompt is not None and found is not None:
                    total += 1
                    head = f"{prompt}{item.action_text}\n"
                    if item.observation.startswith(head):
                        framed += 1
                        output = item.observation[len(head):found.start()]
                        words = _words(item.action_text) or [""]
                        if _redirect_target(words) is None and not any(w in _CONTROL for w in words):
                            outputs.setdefault(words[0], Counter())[output == ""] += 1
                        if words == ["pwd"] and found.group("path").startswith("~"):
                            self.home = posixpath.normpath(output.strip() + found.group("path")[1:])
                prompt = found.group("prompt") if found is not None else None
        self.framed = total > 0 and framed >= 0.9 * total
        self.silent = {command for command, counts in outputs.items()
                       if counts[True] >= 2 and counts[True] >= 0.9 * sum(counts.values())}

    # ------------------------------------------------------------------ episode state
    def reset(self, opening: str = "") -> None:
        found = _PROMPT.search(opening) if opening else None
        self.prompt: str | None = found.group("prompt") if found else None
        self.listings: dict[str, list[str]] = {}
        self.files: dict[str, str] = {}

    @property
    def cwd(self) -> str | None:
        found = _PROMPT.search(self.prompt) if self.prompt else None
        return (found.group("path") or "/") if found else None

    def _path(self, name: str) -> str | None:
        cwd = self.cwd
        if cwd is None:
            return None
        if name.startswith(("/", "~")):
            return posixpath.normpath(name)
        return posixpath.normpath(posixpath.join(cwd, name))

    def observe(self, command: str, observation: str) -> None:
        if not self.framed:  # not a shell transcript: nothing to follow
            return
        found = _PROMPT.search(observation)
        head = f"{self.prompt}{command}\n" if self.prompt is not None else None
        output = observation[len(head):found.start()] if head and found and observation.startswith(head) else None
        words = _words(command)
        if words and output is not None and not any(w in _CONTROL for w in words):
            self._read(words, output)
            self._write(words)
        elif words:
            self._forget(words)
        if found is not None:
            self.prompt = found.group("prompt")

    def _read(self, words: list[str], output: str) -> None:
        if _redirect_target(words) is not None:
            return
        if words[0] == "ls" and all(not w.startswith("-") for w in words[1:]) and len(words) <= 2:
            path = self._path(words[1] if len(words) == 2 else ".")
            if path is not None:
                self.listings[path] = [line for line in output.split("\n") if line]
        elif words[0] == "cat" and len(words) == 2:
            path = self._path(words[1])
            if path is not None:
                self.files[path] = output

    def _add(self, path: str | None) -> None:
        if path is None:
            return
        parent, name = posixpath.split(path)
        listing = self.listings.get(parent)
        if listing is not None and name not in listing:
            self.listings[parent] = sorted([*listing, name], key=str.casefold)

    def _remove(self, path: str | None) -> None:
        if path is None:
            return
        parent, name = posixpath.split(path)
        if name in self.listings.get(parent, []):
            self.listings[parent] = [n for n in self.listings[parent] if n != name]
        self.files.pop(path, None)
        self.listings.pop(path, None)

    def _write(self, words: list[str]) -> None:
        target = _redirect_target(words)
        if target is not None:
            path = self._path(target[0])
            self._add(path)
            if path is not None:
                if words[0] == "echo" and len(words) == 4 and not target[1]:
                    self.files[path] = words[1] + "\n"
                else:
                    self.files.pop(path, None)
            return
        operands = [w for w in words[1:] if not w.startswith("-")]
        if words[0] in ("mkdir", "touch"):
            for operand in operands:
                self._add(self._path(operand))
                if words[0] == "mkdir":
                    self.listings.setdefault(self._path(operand) or "", [])
        elif words[0] in ("rm", "rmdir"):
            for operand in operands:
                self._remove(self._path(operand))
        elif words[0] in ("mv", "cp") and len(operands) == 2:
            source, destination = self._path(operands[0]), self._path(operands[1])
            if destination is not None and destination in self.listings:  # into a directory
                destination = posixpath.join(destination, posixpath.basename(operands[0]))
            content = self.files.get(source or "")
            if words[0] == "mv":
                self._remove(source)
            self._add(destination)
            if destination is not None:
                if content is not None:
                    self.files[destination] = content
                else:
                    self.files.pop(destination, None)

    def _forget(self, words: list[str]) -> None:
        """A command this tracker cannot follow (a pipeline, a loop) may have changed anything it knew."""
        if words[0] not in ("ls", "cat", "head", "tail", "grep", "wc", "find", "pwd", "echo", "sort", "cut", "awk"):
            self.listings.clear()
            self.files.clear()
        elif _redirect_target(words) is not None:
            self._write(words)

    # ------------------------------------------------------------------ proposing
    def _output(self, words: list[str]) -> str | None:
        if _redirect_target(words) is not None:  # standard output goes to the file (a pipeline's last stage too)
            return ""
        if any(w in _CONTROL for w in words):
            return None
        if words[0] == "pwd" and len(words) == 1:
            cwd = self.cwd
            if cwd is None or (cwd.startswith("~") and self.home is None):
                return None
            return (self.home + cwd[1:] if cwd.startswith("~") and self.home else cwd) + "\n"
        if words[0] == "ls" and len(words) <= 2 and all(not w.startswith("-") for w in words[1:]):
            listing = self.listings.get(self._path(words[1] if len(words) == 2 else ".") or "")
            return None if listing is None else "".join(f"{name}\n" for name in listing)
        if words[0] == "cat" and len(words) == 2:
            return self.files.get(self._path(words[1]) or "")
        if words[0] in self.silent or words[0] in _WRITES or words[0] == "cd":
            return ""
        return None

    def _next_prompt(self, words: list[str]) -> str | None:
        if self.prompt is None:
            return None
        if words[0] != "cd":
            return self.prompt
        found = _PROMPT.search(self.prompt)
        target = self._path(words[1] if len(words) > 1 else "~")
        if found is None or target is None:
            return None
        start, end = found.span("path")
        return self.prompt[:start] + target + self.prompt[end:]

    def propose(self, command: str) -> list[CandidateAnswer]:
        if not self.framed or self.prompt is None:
            return []
        words = _words(command)
        if not words:
            return []
        output = self._output(words)
        prompt = self._next_prompt(words)
        if output is None or prompt is None:
            return []
        return [CandidateAnswer("shell", f"{self.prompt}{command}\n{output}{prompt}",
                         notes=[f"the shell state: {words[0]!r} in {self.cwd!r}"])]

    def snapshot(self) -> dict[str, Any]:
        return {"cwd": self.cwd, "listings": {k: list(v) for k, v in sorted(self.listings.items())},
                "files": sorted(self.files)}


class ShellSource:
    """The `shell` source: a `ShellTracker` on the book's evidence (answers while episode state is tracked)."""

    def __init__(self, context: SourceContext) -> None:
        self.tracker = ShellTracker(context.evidence)
        self.gate = context.tracking

    def reset(self, opening: str) -> None:
        self.tracker.reset(opening)

    def observe(self, step: Step, observation: str) -> None:
        self.tracker.observe(step.line, observation)

    def propose(self, step: Step) -> list[CandidateAnswer]:
        return self.tracker.propose(step.line) if self.gate else []

    def snapshot(self) -> dict[str, Any]:
        return self.tracker.snapshot()


@answer_source("shell", snapshot_key="shell", answers=(Answer("shell", rank=20, trusted=True),))
def _shell(context: SourceContext) -> AnswerSource:
    """A file-system state read from a shell transcript."""
    return ShellSource(context)

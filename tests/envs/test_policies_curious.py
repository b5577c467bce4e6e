"""The curious policy on three tiny in-test environments: a text adventure, a shell, tool calls."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fake_envs import CounterEnv
from worldsmith import Workspace
from worldsmith.envs import CuriousPolicy, EnvBase, Step, as_action, make_policy, record_episode
from worldsmith.envs.collect import CollectConfig, collect
from worldsmith.traces import Action, Observation
from worldsmith.traces.actions import action_line

COMPONENTS = {"expert", "random", "revisit", "read_after_write", "invalid"}


class RoomsEnv(EnvBase):
    """Two rooms (hall -north-> study), a box holding a coin, a table; put the coin on the table to win."""

    name = "rooms"
    WALK = ("open box", "take coin from box", "north", "put coin on table")

    def reset(self, task: str | None = None, *, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        self.room, self.box_open, self.coin, self.position, self.won = "hall", False, "box", 0, False
        return Observation(text=self._look()), {"task": "put the coin on the table"}

    def _look(self) -> str:
        return "Hall. There is a box. Exit: north." if self.room == "hall" else "Study. There is a table. Exit: south."

    def step(self, action: Action | str) -> Step:
        text = action_line(action, command=True).strip()
        if self.position < len(self.WALK) and text == self.WALK[self.position]:
            self.position += 1
        hall, observation = self.room == "hall", None
        if text == "look":
            observation = self._look()
        elif text == "inventory":
            observation = "You carry " + ("a coin." if self.coin == "hand" else "nothing.")
        elif text in ("north", "south") and hall == (text == "north"):
            self.room = "study" if hall else "hall"
            observation = self._look()
        elif text == "open box" and hall:
            self.box_open, observation = True, "You open the box."
        elif text == "examine box" and hall:
            observation = f"The box is {'open' if self.box_open else 'closed'}; a coin: {self.coin == 'box'}."
        elif text == "take coin from box" and hall and self.box_open and self.coin == "box":
            self.coin, observation = "hand", "Taken."
        elif text == "examine table" and not hall:
            observation = f"A table; a coin: {self.coin == 'table'}."
        elif text == "put coin on table" and not hall and self.coin == "hand":
            self.coin, self.won, observation = "table", True, "You win."
        return Step(Observation(text=observation or "You can't do that."), float(self.won), self.won, False,
                    {"won": self.won})

    def admissible_actions(self) -> list[str] | None:
        if self.room == "hall":
            here = ["north", "examine box", "open box"]
            here += ["take coin from box"] if self.box_open and self.coin == "box" else []
        else:
            here = ["south", "examine table"] + (["put coin on table"] if self.coin == "hand" else [])
        return ["look", "inventory", *here]

    def expert_action(self) -> Action | None:
        return None if self.won or self.position >= len(self.WALK) else as_action(self.WALK[self.position])


class ExpertlessRoomsEnv(RoomsEnv):
    def expert_action(self) -> Action | None:
        raise NotImplementedError("no expert")


class FakeShellEnv(EnvBase):
    """A pretend terminal (prompt `$ `): ls, cat, mkdir, cd, cd -, echo > file; no admissible actions."""

    name = "fakeshell"
    GOLD = ("ls", "mkdir docs", "cd docs", "echo hi > note.txt", "cat note.txt")

    def reset(self, task: str | None = None, *, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        self.cwd, self.old, self.files, self.position = "~", "~", {"~": {}}, 0
        return Observation(text="Task: write a note.\nme@box:~$ "), {"task": "write a note"}

    def step(self, action: Action | str) -> Step:
        command = action_line(action, command=True).strip()
        if self.position < len(self.GOLD) and command == self.GOLD[self.position]:
            self.position += 1
        words, here, output = command.split(), self.files[self.cwd], ""
        if command == "cd -":
            self.cwd, self.old = self.old, self.cwd
            output = self.cwd
        elif words[0] == "cd" and len(words) == 2 and f"{self.cwd}/{words[1]}" in self.files:
            self.old, self.cwd = self.cwd, f"{self.cwd}/{words[1]}"
        elif words[0] == "mkdir" and len(words) == 2:
            self.files[f"{self.cwd}/{words[1]}"] = {}
        elif words[0] == "echo" and ">" in words:
            here[words[-1]] = " ".join(words[1:words.index(">")])
        elif words[0] == "ls" and len(words) == 1:
            folders = [path.rpartition("/")[2] for path in self.files if path.rpartition("/")[0] == self.cwd]
            output = "\n".join(sorted([*here, *folders]))
        elif words[0] == "ls" and f"{self.cwd}/{words[1]}" in self.files:
            output = "\n".join(sorted(self.files[f"{self.cwd}/{words[1]}"]))
        elif words[0] == "cat" and len(words) == 2 and words[1] in here:
            output = here[words[1]]
        else:
            output = f"bash: {command}: error"
        return Step(Observation(text=f"me@box:{self.cwd}$ {command}\n{output}\nme@box:{self.cwd}$ "), 0.0, False,
                    False, {})

    def expert_action(self) -> Action | None:
        return as_action(self.GOLD[self.position]) if self.position < len(self.GOLD) else None


class FakeToolsEnv(EnvBase):
    """Tool calls (the reset info lists `tools`): a balance, a vault folder; `respond` ends the episode."""

    name = "faketools"
    GOLD = ("get_balance()", "deposit(amount=5)", "cd(folder='vault')", "list_files()", "respond")

    def reset(self, task: str | None = None, *, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        self.balance, self.cwd, self.position = 10, "/", 0
        tools = [{"type": "function", "function": {"name": n}} for n in ("get_balance", "deposit", "cd", "list_files")]
        return Observation(text="Deposit 5, then list the vault."), {"task": "deposit", "tools": tools}

    def step(self, action: Action | str) -> Step:
        action = as_action(action)
        expected = self.expert_action()
        if expected is not None and (action.name, action.arguments) == (expected.name, expected.arguments):
            self.position += 1
        name, arguments = action.name, action.arguments
        if name == "respond":
            return Step(Observation(text=""), 1.0, True, False, {"won": True, "record": False})
        if name == "get_balance" and not arguments:
            result: Any = {"balance": self.balance}
        elif name == "deposit" and isinstance(arguments.get("amount"), int):
            self.balance += arguments["amount"]
            result = {"balance": self.balance}
        elif name == "cd" and arguments.get("folder") in ("vault", ".."):
            self.cwd = "/vault" if arguments["folder"] == "vault" else "/"
            result = {"cwd": self.cwd}
        elif name == "list_files":
            result = {"files": ["gold.txt"] if self.cwd == "/vault" else ["vault"]}
        else:
            result = {"error": f"cannot run {name}({arguments})"}
        return Step(Observation(text=json.dumps(result)), 0.0, False, False, {})

    def expert_action(self) -> Action | None:
        if self.position >= len(self.GOLD):
            return None
        text = self.GOLD[self.position]
        if text == "respond":
            return Action(name="respond", arguments={"text": ""})
        name, _, rest = text.partition("(")
        arguments = {k: int(v) if v.isdigit() else v.strip("'") for k, v in
                     (pair.split("=") for pair in rest.rstrip(")").split(",") if pair)}
        return Action(name=name, arguments=arguments, raw=text)


def _play(env: EnvBase, policy: CuriousPolicy, max_steps: int = 40) -> list[dict[str, Any]]:
    """Every action sent, with the component behind it, the admissible actions before it and the answer."""
    observation, info = env.reset()
    policy.reset(env, observation, info)
    log: list[dict[str, Any]] = []
    for _ in range(max_steps):
        admissible = env.admissible_actions()
        action = policy.act(observation, info)
        if action is None:
            break
        result = env.step(action)
        log.append({"choice": policy.choices[-1], "text": action.raw if action.raw is not None else action.name,
                    "admissible": admissible, "answer": result.observation.text})
        observation, info = result.observation, result.info
        if result.terminated:
            break
    return log


def _logs(env_class: type[EnvBase], seeds: range = range(12), **weights: Any) -> list[list[dict[str, Any]]]:
    return [_play(env_class(), CuriousPolicy(seed, **weights)) for seed in seeds]


def test_text_adventure_mixes_every_component():
    logs = _logs(RoomsEnv, range(30), expert=0.25)
    steps = [step for log in logs for step in log]
    assert {step["choice"] for step in steps} == COMPONENTS
    assert all(step["text"] in step["admissible"] for step in steps if step["choice"] == "random")
    for log in logs:
        for index, step in enumerate(log):
            earlier = {s["text"] for s in log[:index]}
            if step["choice"] == "revisit" and step["text"] in ("look", "inventory", "examine box", "examine table"):
                assert step["text"] in earlier  # a read of this episode again
            if step["choice"] == "invalid":
                assert step["answer"] == "You can't do that."
            if step["choice"] == "read_after_write":
                assert step["text"].split()[0] in ("look", "inventory", "examine")
    pairs = [(a["text"], b["text"]) for log in logs for a, b in zip(log, log[1:], strict=False)
             if a["choice"] == b["choice"] == "revisit"]
    assert ("south", "north") in pairs  # a round trip back where the last move came from, then back
    writes = ("open box", "take coin from box", "put coin on table")
    reread = {(next(s["text"] for s in reversed(log[:index]) if s["text"] in writes), step["text"])
              for log in logs for index, step in enumerate(log) if step["choice"] == "read_after_write"}
    assert {("take coin from box", "examine box"), ("open box", "examine box")} & reread  # what the write changed


def test_same_seed_same_episode_and_episodes_end():
    assert _play(RoomsEnv(), CuriousPolicy(5)) == _play(RoomsEnv(), CuriousPolicy(5))
    assert _play(RoomsEnv(), CuriousPolicy(5)) != _play(RoomsEnv(), CuriousPolicy(6))
    policy = CuriousPolicy(5)  # reseeded at each reset: a reused policy repeats itself too
    assert _play(RoomsEnv(), policy) == _play(RoomsEnv(), policy)
    choices = []  # one seed, two tasks: the draws are not in lockstep
    for task in ("reach-8", "reach-9"):
        record_episode(CounterEnv(), seeded := CuriousPolicy(1, min_steps=20), task, max_steps=20)
        choices.append(seeded.choices)
    assert choices[0] != choices[1]
    expert_only = _play(RoomsEnv(), CuriousPolicy(0, expert=1, random=0, revisit=0, read_after_write=0, invalid=0))
    assert [step["text"] for step in expert_only] == list(RoomsEnv.WALK)
    for seed in range(8):  # no expert: the episode stops after min_steps, not at the step cap
        log = _play(ExpertlessRoomsEnv(), CuriousPolicy(seed, min_steps=6), max_steps=200)
        assert 6 <= len(log) < 200 and "expert" not in {step["choice"] for step in log}


def test_shell_reads_back_writes_and_fails_on_missing_paths():
    logs = _logs(FakeShellEnv)
    steps = [step for log in logs for step in log]
    assert {step["choice"] for step in steps} == COMPONENTS - {"random"}  # no admissible actions
    writes = ("mkdir docs", "echo hi > note.txt")
    after = {(next(s["text"] for s in reversed(log[:index]) if s["text"] in writes), step["text"])
             for log in logs for index, step in enumerate(log) if step["choice"] == "read_after_write"}
    assert ("mkdir docs", "ls docs") in after
    assert {("echo hi > note.txt", "cat note.txt"), ("echo hi > note.txt", "ls")} & after
    invalid = {step["text"].split()[0] for step in steps if step["choice"] == "invalid"}
    assert {"cd", "cat"} <= invalid
    assert all("no_such_" in step["text"] or len(step["text"].split()) == 1
               for step in steps if step["choice"] == "invalid")
    assert any(a["text"] == b["text"] == "cd -" and a["choice"] == b["choice"] == "revisit"
               for log in logs for a, b in zip(log, log[1:], strict=False))
    assert any(step["choice"] == "revisit" and step["text"] == "ls" for step in steps)


def test_tool_calls_reread_after_writes_and_never_respond_on_their_own():
    logs = _logs(FakeToolsEnv, expert=0.3)
    steps = [step for log in logs for step in log]
    assert {step["choice"] for step in steps} == COMPONENTS - {"random"}
    reads = ("get_balance()", "list_files()")
    for log in logs:
        for index, step in enumerate(log):
            if step["choice"] == "read_after_write":
                latest_read = next(s["text"] for s in reversed(log[:index]) if s["text"] in reads)
                assert step["text"] == latest_read
            if step["text"] == "respond":
                assert step["choice"] == "expert"
    invalid = [step["text"] for step in steps if step["choice"] == "invalid"]
    assert any(text.startswith(("frobnicate(", "xyzzy(", "plugh(")) for text in invalid)
    assert any("no_such_" in text for text in invalid)
    assert any(a["text"] == "cd(folder='..')" and b["text"] == "cd(folder='vault')"
               for log in logs for a, b in zip(log, log[1:], strict=False))


def test_make_policy_options_and_collect(tmp_path):
    policy = make_policy("curious", seed=3, options={"invalid": 0.5, "min_steps": 4})
    assert isinstance(policy, CuriousPolicy) and policy.weights["invalid"] == 0.5 and policy.min_steps == 4
    with pytest.raises(ValueError, match="takes no options"):
        make_policy("expert", options={"invalid": 0.5})
    with pytest.raises(ValueError, match="curious policy"):
        make_policy("curious", options={"bogus": 1})
    with pytest.raises(ValueError, match="weights"):
        CuriousPolicy(expert=-1)
    episode = record_episode(CounterEnv(), CuriousPolicy(1), "reach-3", max_steps=30)
    assert episode.metadata["policy"] == "curious" and len(episode.turns) >= 3
    config = CollectConfig(env="counter", tasks=["reach-2"], policy="curious", episodes=2, workers=0,
                           policy_options={"min_steps": 3})
    report = collect(Workspace(tmp_path / "ws"), "curious", config)
    assert report.episodes == 2 and report.ingested == 2
    with pytest.raises(ValueError, match="takes no options"):
        collect(Workspace(tmp_path / "ws"), "bad", CollectConfig(env="counter", policy="random",
                                                                 policy_options={"invalid": 1}))

"""The shell tracker: the frame, the working directory, listings and files that follow earlier writes."""

from __future__ import annotations

from worldsmith.sim.shell_state import ShellTracker
from worldsmith.worldbook import Evidence

P = "agent@box:~$ "


def _framed(episode: str, commands: list[tuple[str, str]], prompt: str = P) -> list[Evidence]:
    return [Evidence(turn_id=f"{episode}#{i}", action=cmd.split()[0], action_text=cmd,
                     observation=f"{prompt}{cmd}\n{out}{prompt}") for i, (cmd, out) in enumerate(commands)]


def _tracker() -> ShellTracker:
    evidence = _framed("a", [("pwd", "/home/agent\n"), ("chmod 600 x", ""), ("chmod +x y", ""),
                             ("grep -c a f > n.txt", "")])
    tracker = ShellTracker(evidence)
    tracker.reset(f"Task: tidy up.\n{P}")
    return tracker


def test_the_frame_and_silent_commands_are_learned_and_a_redirect_is_not_silence() -> None:
    tracker = _tracker()
    assert tracker.framed and tracker.home == "/home/agent"
    assert tracker.silent == {"chmod"}  # grep printed nothing only because its output was redirected
    [proposal] = tracker.propose("chmod 644 notes.txt")
    assert proposal.observation == f"{P}chmod 644 notes.txt\n{P}"
    assert tracker.propose("grep -c ERROR server.log") == []  # its output is not known


def test_listings_and_reads_reflect_earlier_writes_and_cd_moves_the_prompt() -> None:
    tracker = _tracker()
    tracker.observe("ls docs", f"{P}ls docs\nb.txt\nc.txt\n{P}")
    tracker.observe("touch docs/a.txt", f"{P}touch docs/a.txt\n{P}")
    tracker.observe("echo 'hi there' > docs/d.txt", f"{P}echo 'hi there' > docs/d.txt\n{P}")
    tracker.observe("rm docs/c.txt", f"{P}rm docs/c.txt\n{P}")
    [listing] = tracker.propose("ls docs")
    assert listing.observation == f"{P}ls docs\na.txt\nb.txt\nd.txt\n{P}"
    [moved] = tracker.propose("cd docs")
    assert moved.observation == f"{P}cd docs\nagent@box:~/docs$ "
    tracker.observe("cd docs", moved.observation)
    [read] = tracker.propose("cat d.txt")
    assert read.observation == "agent@box:~/docs$ cat d.txt\nhi there\nagent@box:~/docs$ "
    [where] = tracker.propose("pwd")
    assert where.observation.split("\n")[1] == "/home/agent/docs"
    tracker.observe("for f in *; do mv $f x$f; done", "agent@box:~/docs$ for f in *; do mv $f x$f; done\n"
                                                     "agent@box:~/docs$ ")
    assert tracker.propose("cat d.txt") == []  # a loop it cannot follow: what it knew may be stale

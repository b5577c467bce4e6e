"""`worldsmith simulate BOOK --session DIR --action ...` and `worldsmith play BOOK`: a worldbook as a simulator.

`simulate` creates or reopens a session, predicts one action, commits it and prints the
observation with its audit; `--uncertainty` first says how unsure the book is about it (and ranks
`--candidate` actions by the same score, `sim.uncertainty`). `play` is the same in a loop on standard input, with `:fork N`
(continue in a copy of the session that keeps its first N turns), `:state`, `:history`, `:quit`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson

from worldsmith.cli.common import EXIT_OK, CommandError, add_common, emit_json, workspace_from
from worldsmith.llm import LLMError, default_model_spec, open_llm, resolve_spec
from worldsmith.sim import Session, SessionError, SessionTurn, WorldModel, new_session_name
from worldsmith.sim.factory import DEFAULT_WORLD_MODEL
from worldsmith.sim.registry import canonical_world_model, make_world_model, needs_llm, takes_llm, world_models
from worldsmith.sim.uncertainty import assess, rank_actions
from worldsmith.traces import action_line
from worldsmith.worldbook import Worldbook, WorldbookStore


def _add_model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("book", help="worldbook name in the workspace")
    parser.add_argument("--version", help="worldbook version (default: HEAD, or the session's)")
    parser.add_argument("--model", type=canonical_world_model, choices=list(world_models()),
                        default=DEFAULT_WORLD_MODEL,
                        help="world model: " + "; ".join(f"{k}: {v.description}" for k, v in world_models().items()))
    parser.add_argument("--llm", metavar="SPEC", help="model spec or models.toml name for direct|rag|worldbook-prompt "
                        "(default: the default model)")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--initial", default="", help="opening observation of a new session")
    parser.add_argument("--task", help="task text of a new session")
    parser.add_argument("--from-episode", metavar="EPISODE", help="open a new session as this recorded episode "
                        "does (its initial observation, task, environment); with --dataset")
    parser.add_argument("--dataset", help="the dataset of --from-episode")


def register(subparsers: argparse._SubParsersAction) -> None:
    simulate = subparsers.add_parser("simulate", help="predict and commit one action in a simulation session")
    _add_model_options(simulate)
    simulate.add_argument("--session", required=True, type=Path, help="session folder (created if missing)")
    simulate.add_argument("--action", required=True, help="the action: a text command or a JSON action object")
    simulate.add_argument("--uncertainty", action="store_true",
                          help="also say how unsure the book is about the action before it is played (its answer "
                               "source, rule status, evidence, novelty and score: sim.uncertainty)")
    simulate.add_argument("--candidate", action="append", default=[], metavar="ACTION",
                          help="with --uncertainty: a candidate action to rank by the same score (repeatable); "
                               "nothing is played for it")
    add_common(simulate)
    simulate.set_defaults(handler=run_simulate)

    play = subparsers.add_parser("play", help="act in a simulator interactively (stdin: actions and :commands)")
    _add_model_options(play)
    play.add_argument("--session", type=Path, help="session folder (default: <workspace>/sessions/<book>-<time>)")
    add_common(play)
    play.set_defaults(handler=run_play)


def _session_for(args: argparse.Namespace, directory: Path, book_name: str) -> tuple[Session, Worldbook]:
    """Open the session (checking it was made with this book) or create it; load the matching book version."""
    store = WorldbookStore.of_workspace(workspace_from(args))
    version = args.version
    if Session.exists(directory):
        session = Session.open(directory)
        name, _, stored_version = (session.meta.get("book_ref") or "").partition("@")
        if name and name != book_name:
            session.close()
            raise CommandError(f"session {directory} was made with worldbook {name!r}, not {book_name!r}")
        if version and stored_version and version != stored_version:
            session.close()
            raise CommandError(f"session {directory} uses {name}@{stored_version}; fork it or use another session "
                               f"to simulate version {version}")
        version = version or stored_version or None
        return session, store.load(book_name, version)
    version = version or store.head(book_name)
    book = store.load(book_name, version)
    if getattr(args, "from_episode", None):
        if not args.dataset:
            raise CommandError("--from-episode needs --dataset (the dataset holding the episode)")
        try:
            episode = workspace_from(args).dataset(args.dataset).episode(args.from_episode, with_state=False)
        except KeyError as error:
            raise CommandError(str(error.args[0])) from None
        return Session.from_episode(directory, episode, book_ref=f"{book_name}@{version}", model=args.model,
                                    dataset=args.dataset), book
    session = Session.create(directory, book_ref=f"{book_name}@{version}", model=args.model,
                             initial_observation=args.initial, task=args.task, env_id=book.env_id)
    return session, book


def _world_model(args: argparse.Namespace, book: Worldbook) -> WorldModel:
    llm = None
    if needs_llm(args.model) or (takes_llm(args.model) and args.llm):
        root = workspace_from(args).root
        spec = args.llm or default_model_spec()
        if spec is None:
            raise CommandError(f"--model {args.model} needs a model: pass --llm SPEC or set WORLDSMITH_MODEL")
        spec = resolve_spec(spec, root)
        try:
            llm = open_llm(spec, root, component="simulate")
        except LLMError as error:
            raise CommandError(f"cannot open model {spec!r}: {error}") from None
        return make_world_model(args.model, book, llm=llm, max_tokens=args.max_tokens)
    return make_world_model(args.model, book)


def _turn_json(session: Session, turn: SessionTurn) -> dict[str, Any]:
    prediction = turn.prediction
    return {"session": str(session.directory), "turn": turn.index, "revision": turn.revision,
            "action": action_line(turn.action), "observation": prediction.observation, "outcome": prediction.outcome,
            "effects": [e.model_dump(mode="json") for e in prediction.effects], "done": prediction.done,
            "reward": prediction.reward, "audit": prediction.audit.model_dump(mode="json")}


def _uncertainty(model: WorldModel, action: str, candidates: list[str]) -> dict[str, Any]:
    """The action's assessment and the candidates ranked, before anything is played (assess never commits)."""
    out: dict[str, Any] = {"uncertainty": assess(model, action).model_dump(mode="json")}
    if candidates:
        out["candidates"] = [item.model_dump(mode="json") for item in rank_actions(model, candidates)]
    return out


def _print_uncertainty(unsure: dict[str, Any]) -> None:
    item = unsure["uncertainty"]
    status = f", {item['rule_status']} rule" if item["rule_status"] else ""
    print(f"  [uncertainty {item['score']:.2f}: {item['source'] or 'nothing'}{status}, {item['evidence']} evidence, "
          f"action seen {item['action_seen']}, in this situation {item['feature_seen']}] {item['reason']}")
    for rank, candidate in enumerate(unsure.get("candidates", []), start=1):
        print(f"  candidate {rank}: {candidate['score']:.2f}  {candidate['action']}  ({candidate['reason']})")


def _print_turn(turn: SessionTurn) -> None:
    prediction, audit = turn.prediction, turn.prediction.audit
    print(prediction.observation)
    cost = f", {audit.model_calls} model calls, {audit.tokens} tokens" if audit.model_calls else ""
    print(f"  [turn {turn.index}: {audit.route}, {prediction.outcome}{cost}, {audit.latency_s:.3f}s]")
    for note in audit.notes:
        print(f"  note: {note}")


def _play_one(session: Session, model: WorldModel, action: str) -> SessionTurn:
    try:
        return session.play(model, action)
    except SessionError as error:
        raise CommandError(str(error)) from None


def run_simulate(args: argparse.Namespace) -> int:
    try:
        session, book = _session_for(args, args.session, args.book)
    except SessionError as error:
        raise CommandError(str(error)) from None
    with session:
        model = _world_model(args, book)
        session.attach(model)
        if args.candidate and not args.uncertainty:
            raise CommandError("--candidate ranks candidates by uncertainty: add --uncertainty")
        unsure = _uncertainty(model, args.action, args.candidate) if args.uncertainty else None
        turn = _play_one(session, model, args.action)
        if getattr(args, "json", False):
            emit_json({**_turn_json(session, turn), **(unsure or {})})
        else:
            if unsure is not None:
                _print_uncertainty(unsure)
            _print_turn(turn)
    return EXIT_OK


def _emit_line(value: dict[str, Any]) -> None:
    """One compact JSON object per line: `play --json` is a stream another program reads event by event."""
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=str).decode() + "\n")
    sys.stdout.flush()


class _Play:
    """One `simulate play` loop: the session being played (a `:fork` replaces it) and how to answer."""

    def __init__(self, session: Session, model: WorldModel, as_json: bool) -> None:
        self.session, self.model, self.as_json = session, model, as_json

    def say(self, text: str, **payload: Any) -> None:
        if self.as_json:
            _emit_line({"session": str(self.session.directory), **payload})
        else:
            print(text)

    def handle(self, line: str) -> None:
        """Answer one non-empty input line other than a quit: a `:` command or an action."""
        session = self.session
        if line == ":state":
            self.say(str(session.state), event="state", revision=session.revision, state=session.state)
        elif line == ":history":
            turns = session.turns()
            self.say("\n".join(f"{t.index}: > {action_line(t.action)}\n{t.prediction.observation}" for t in turns),
                     event="history", turns=[_turn_json(session, t) for t in turns])
        elif line.startswith(":fork"):
            self.fork(line.split())
        elif line.startswith(":"):
            self.say(f"unknown command {line!r}", event="error", error=f"unknown command {line!r}")
        else:
            turn = _play_one(session, self.model, line)
            if self.as_json:
                _emit_line({**_turn_json(session, turn), "event": "turn"})
            else:
                _print_turn(turn)

    def fork(self, parts: list[str]) -> None:
        """`:fork N`: continue in a copy of the session that keeps its first N turns."""
        if len(parts) != 2 or not parts[1].isdigit():
            self.say("usage: :fork N (keep the first N turns)", event="error", error="usage: :fork N")
            return
        try:
            forked = self.session.fork(int(parts[1]))
        except SessionError as error:
            self.say(str(error), event="error", error=str(error))
            return
        self.session.close()
        self.session = forked
        forked.attach(self.model)
        self.say(f"forked: now in {forked.directory} (its first {len(forked)} turns)", event="fork", turns=len(forked))


def run_play(args: argparse.Namespace) -> int:
    as_json = bool(getattr(args, "json", False))
    directory = args.session or workspace_from(args).layout.sessions_dir / new_session_name(args.book)
    try:
        session, book = _session_for(args, directory, args.book)
    except SessionError as error:
        raise CommandError(str(error)) from None
    model = _world_model(args, book)
    session.attach(model)
    play = _Play(session, model, as_json)
    opening = session.prefix().initial_observation
    play.say(f"session {session.directory} ({len(session)} turns so far); actions, or :fork N, :state, :history, :quit",
             event="start", turns=len(session), observation=opening.text if opening is not None else "")
    try:
        while True:
            if not as_json:
                print("> ", end="", flush=True)
            line = sys.stdin.readline()
            if not line:
                break
            line = line.strip()
            if line in (":quit", ":q", ":exit"):
                break
            if line:
                play.handle(line)
    finally:
        play.session.close()
    return EXIT_OK

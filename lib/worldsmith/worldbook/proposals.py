"""Proposed patches for a rule that fails some of its turns: from failures to fixes.

A rule is replayed over its own evidence (`check_rule`): on *matched* turns its template fits the observation,
on *failed* turns it was chosen (its conditions held) and the observation took another form. Three kinds of fix
are learned from the arguments and the tracked state at those turns:

- `condition`: a test that holds on every matched turn and on no failed one, so the rule stops claiming them;
- `template`: one template, with state slots, that renders the matched and the failed observations alike;
- `split`: the rule keeps its form under a condition, and a new rule with the negated condition and a template
  learned from the failed turns answers the rest.

Every proposal is a normal `Patch` (the `worldsmith book patch` format, so applying it makes a new, undoable
version), and it is only offered when replaying the patched book fixes some of the rule's failed turns and
breaks none of the action's turns that were right before. Their held-out effect is `proposal_effects`.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from worldsmith.worldbook.engine import escape_braces, literal_value, match_template, render
from worldsmith.worldbook.model import Condition, Evidence, ListFormat, Rule, RuleStatus, Worldbook, join_path
from worldsmith.worldbook.rule_replay import ARGUMENT_SHAPES, check_rule, list_formats, observe_turn, replay_evidence
from worldsmith.worldbook.store import Patch, PatchOp, apply_ops

__all__ = ["Proposal", "ProposalKind", "describe_condition", "episodes_with_action", "propose_patches"]

ProposalKind = Literal["condition", "template", "split"]
_NEGATED = {"eq": "ne", "ne": "eq", "exists": "missing", "missing": "exists", "in": "not_in", "not_in": "in",
            "contains": "not_contains", "not_contains": "contains"}
_MIN_SLOT_TEXT = 2  # a one-character state value would replace letters everywhere


@dataclass(frozen=True)
class _Turn:
    """One turn of the rule's action: what a proposal may test (arguments, state before) and must produce."""

    turn_id: str
    arguments: dict[str, Any]
    state: dict[str, Any]
    observation: str
    verdict: Literal["matched", "failed", "other"]


@dataclass
class Proposal:
    """A patch that fixes some of a rule's failed turns on its own evidence (verified by replay)."""

    kind: ProposalKind
    rule_id: str
    patch: Patch
    explanation: str
    fixes: list[str]  # failed turns of the rule that the patched book gets right
    matched_before: int
    failed_before: int
    matched_after: int
    failed_after: int
    diff: list[str] = field(default_factory=list)  # "- old" / "+ new" lines, plain text (escape before markdown)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "rule": self.rule_id, "explanation": self.explanation, "fixes": self.fixes,
                "matched_before": self.matched_before, "failed_before": self.failed_before,
                "matched_after": self.matched_after, "failed_after": self.failed_after, "diff": self.diff,
                "patch": self.patch.model_dump(mode="json")}


def _episode(turn_id: str) -> str:
    return turn_id.rsplit("#", 1)[0]


def episodes_with_action(evidence: Sequence[Evidence], action: str) -> list[Evidence]:
    """Whole episodes (state builds over every turn) that hold at least one turn of `action`."""
    episodes = {_episode(item.turn_id) for item in evidence if item.action == action}
    return [item for item in evidence if _episode(item.turn_id) in episodes]


def _states_before(book: Worldbook, evidence: Sequence[Evidence],
                   formats: Mapping[str, ListFormat]) -> dict[str, dict[str, Any]]:
    """The tracked state before every turn, walked as `replay_evidence` walks it."""
    from worldsmith.worldbook.induce import group_by_episode

    by_action: dict[str, list[Rule]] = defaultdict(list)
    for rule in book.rules:
        by_action[rule.action].append(rule)
    states: dict[str, dict[str, Any]] = {}
    for episode in group_by_episode(evidence).values():
        state: dict[str, Any] = {}
        for item in episode:
            states[item.turn_id] = state
            state, _ = observe_turn(by_action.get(item.action, []), item, state, formats)
    return states


def _turns(book: Worldbook, rule: Rule, formats: Mapping[str, ListFormat]) -> list[_Turn]:
    replay = check_rule(book, rule)
    evidence = episodes_with_action(book.evidence, rule.action)
    states = _states_before(book, evidence, formats)
    by_id = {item.turn_id: item for item in evidence}
    out: list[_Turn] = []
    for check in replay.turns:
        item = by_id[check.turn_id]
        verdict: Literal["matched", "failed", "other"] = (
            "failed" if check.applicable and check.ok is False
            else "matched" if check.ok is True and (check.applicable or check.assumed) else "other")
        out.append(_Turn(check.turn_id, item.arguments if isinstance(item.arguments, dict) else {},
                         states.get(check.turn_id, {}), item.observation, verdict))
    return out


def _leaves(state: Mapping[str, Any], prefix: list[str]) -> Iterator[tuple[list[str], Any]]:
    for key, value in state.items():
        if isinstance(value, dict) and value:
            yield from _leaves(value, [*prefix, str(key)])
        else:
            yield [*prefix, str(key)], value


def _paths(turn: _Turn) -> dict[str, Any]:
    """Every state path at a turn, concrete (`world.contents[bed 1]`) and, where a key is an argument's value,
    written through the argument (`world.contents[arg.object]`) so a condition carries to other objects."""
    by_value = {str(value): name for name, value in turn.arguments.items() if isinstance(value, (str, int, float))}
    out: dict[str, Any] = {}
    for namespace, part in turn.state.items():
        if not isinstance(part, dict):
            continue
        for segments, value in _leaves(part, [namespace]):
            out[join_path(segments)] = value
            steps = [f"[arg.{by_value[s]}]" if s in by_value else None for s in segments[1:]]
            if any(steps):
                out[segments[0] + "".join(step or join_path(["x", s])[1:] for step, s in zip(steps, segments[1:],
                                                                                          strict=True))] = value
    return out


def _key(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def _separating(name: str, subject: Literal["arg", "path"], matched: list[Any], failed: list[Any],
                missing: object) -> Iterator[Condition]:
    """Conditions on one feature that hold on every matched turn and on no failed turn."""
    def make(op: str, value: Any = None) -> Condition:
        return Condition(**{subject: name}, op=op, value=value)  # type: ignore[arg-type]

    present_m = [v is not missing for v in matched]
    present_f = [v is not missing for v in failed]
    if subject == "path" and all(present_m) and not any(present_f):
        yield make("exists")
    if subject == "path" and not any(present_m) and all(present_f):
        yield make("missing")
    if not all(present_m) or not all(present_f):
        return
    kept = {_key(v) for v in matched}
    dropped = {_key(v) for v in failed}
    if len(kept) == 1 and not kept & dropped:
        yield make("eq", literal_value(matched[0]))
    if len(dropped) == 1 and not kept & dropped:
        yield make("ne", literal_value(failed[0]))
    if subject == "arg":
        for holds, _lacks in ARGUMENT_SHAPES:
            if all(isinstance(v, str) and re.search(holds, v) for v in matched) and not any(
                    isinstance(v, str) and re.search(holds, v) for v in failed):
                yield make("matches", holds)


def _candidate_conditions(turns: Sequence[_Turn], rule: Rule) -> list[Condition]:
    matched = [t for t in turns if t.verdict == "matched"]
    failed = [t for t in turns if t.verdict == "failed"]
    if not matched or not failed:
        return []
    missing = object()
    found: list[Condition] = []
    for name in sorted({n for t in (*matched, *failed) for n in t.arguments}):
        found += _separating(name, "arg", [t.arguments.get(name, missing) for t in matched],
                             [t.arguments.get(name, missing) for t in failed], missing)
    paths_m = [_paths(t) for t in matched]
    paths_f = [_paths(t) for t in failed]
    for path in sorted({p for paths in (*paths_m, *paths_f) for p in paths}):
        found += _separating(path, "path", [p.get(path, missing) for p in paths_m],
                             [p.get(path, missing) for p in paths_f], missing)
    # Arguments first, then paths written through an argument, then concrete paths: the most general first.
    found = [c for c in found if c not in rule.conditions]
    return sorted(found, key=lambda c: (c.arg is None, "[arg." not in (c.path or "[arg."), len(c.path or "")))


def _slot_texts(turn: _Turn, formats: Mapping[str, ListFormat]) -> list[tuple[str, str]]:
    """(slot body, the text it renders here) for every argument and state path worth a slot, longest text first."""
    slots: list[tuple[str, str]] = []
    for name, value in turn.arguments.items():
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            slots.append((f"arg.{name}", str(value)))
    for path in _paths(turn):
        try:
            text = render("{" + path + "}", turn.arguments, turn.state, formats)
        except ValueError:  # a key no template slot can name: no slot for it
            continue
        if text is not None:
            slots.append((path, text))
    # Prefer a path written through an argument over a concrete one of the same text.
    slots = [s for s in slots if len(s[1]) >= _MIN_SLOT_TEXT and s[1] in turn.observation]
    return sorted(slots, key=lambda s: (-len(s[1]), not s[0].startswith("arg."), "[arg." not in s[0], s[0]))


def _template_from(turn: _Turn, formats: Mapping[str, ListFormat]) -> str:
    """The turn's observation with each argument and state value (longest first) made a slot."""
    pieces: list[tuple[str | None, str]] = [(None, turn.observation)]
    for body, text in _slot_texts(turn, formats):
        pattern = re.compile(rf"(?<!\w){re.escape(text)}(?!\w)")
        out: list[tuple[str | None, str]] = []
        for slot, piece in pieces:
            if slot is not None:
                out.append((slot, piece))
                continue
            position = 0
            for match in pattern.finditer(piece):
                out += [(None, piece[position:match.start()]), (body, match.group())]
                position = match.end()
            out.append((None, piece[position:]))
        pieces = out
    return "".join(escape_braces(piece) if slot is None else "{" + slot + "}" for slot, piece in pieces)


def _renders(template: str, turns: Sequence[_Turn], formats: Mapping[str, ListFormat]) -> bool:
    return all(render(template, t.arguments, t.state, formats) == t.observation
               or (render(template, t.arguments, t.state, formats) is None
                   and match_template(template, t.observation, t.arguments) is not None) for t in turns)


def _candidate_templates(turns: Sequence[_Turn], formats: Mapping[str, ListFormat], rule: Rule,
                         which: Literal["both", "failed"]) -> list[str]:
    """Templates learned from one turn each that render every matched and failed turn (`both`) or every failed
    one (`failed`)."""
    failed = [t for t in turns if t.verdict == "failed"]
    target = failed if which == "failed" else [t for t in turns if t.verdict in ("matched", "failed")]
    seen: list[str] = []
    for turn in failed:
        template = _template_from(turn, formats)
        if template != rule.template and template not in seen and _renders(template, target, formats):
            seen.append(template)
    return seen


def _counts(book: Worldbook, rule: Rule) -> tuple[int, int, set[str]]:
    replay = check_rule(book, rule)
    failed = {t.turn_id for t in replay.turns if t.applicable and t.ok is False}
    return replay.matched, replay.failed, failed


def _verdicts(book: Worldbook, action: str, evidence: Sequence[Evidence]) -> dict[str, bool]:
    """Per turn of `action`: does the executable rule chosen for it fit the observation."""
    report = replay_evidence(book.rules, episodes_with_action(evidence, action), formats=list_formats(book))
    return {t.turn_id: t.fits for t in report.turns if t.action == action}


def _diff(before: Rule, after: Rule | None, added: Rule | None = None) -> list[str]:
    lines: list[str] = []
    if after is not None:
        for name in ("conditions", "template", "status"):
            old, new = getattr(before, name), getattr(after, name)
            if old != new:
                lines += [f"- {before.id}.{name}: {_show(old)}", f"+ {after.id}.{name}: {_show(new)}"]
    if added is not None:
        lines += [f"+ rule {added.id} ({added.action}): conditions {_show(added.conditions)}",
                  f"+ {added.id}.template: {_show(added.template)}", f"+ {added.id}.status: {added.status.value}"]
    return lines


def _show(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    if isinstance(value, Condition):
        subject = f"arg.{value.arg}" if value.arg else value.path
        return f"{subject} {value.op}" + ("" if value.op in ("exists", "missing") else f" {value.value!r}")
    if isinstance(value, RuleStatus):
        return value.value
    return repr(value)


def describe_condition(condition: Condition) -> str:
    """A condition in a line a person reads (`arg.object ne 'book 1'`)."""
    return _show(condition)


def _new_id(book: Worldbook, base: str) -> str:
    taken = {r.id for r in book.rules}
    index = 2
    while f"{base}.s{index}" in taken:
        index += 1
    return f"{base}.s{index}"


def _check(book: Worldbook, rule: Rule, kind: ProposalKind, ops: list[PatchOp], explanation: str,
           before: tuple[int, int, set[str]], verdicts: dict[str, bool], diff: list[str],
           version: str) -> Proposal | None:
    """The proposal, when the patched book fixes some failed turns and breaks no turn of the action."""
    try:
        after_book = apply_ops(book, ops)
    except ValueError:
        return None
    after_verdicts = _verdicts(after_book, rule.action, book.evidence)
    if any(verdicts.get(t) and not fits for t, fits in after_verdicts.items()):
        return None
    fixes = sorted(t for t in before[2] if after_verdicts.get(t))
    if not fixes:
        return None
    patched = after_book.rule(rule.id)
    matched, failed, _ = _counts(after_book, patched)
    return Proposal(kind=kind, rule_id=rule.id, patch=Patch(base=version, ops=ops, author="proposal",
                                                           message=f"{rule.id}: {explanation}"),
                    explanation=explanation, fixes=fixes, matched_before=before[0], failed_before=before[1],
                    matched_after=matched, failed_after=failed, diff=diff)


def _status_after(rule: Rule) -> dict[str, Any]:
    """A rule that was held back by its failures may execute once they are fixed (the replay checks it)."""
    return {} if rule.status in (RuleStatus.SUPPORTED, RuleStatus.DEPRECATED) else {"status": "supported"}


def propose_patches(book: Worldbook, rule_id: str, *, version: str = "HEAD", limit: int = 3,
                    max_tries: int = 20) -> list[Proposal]:
    """Patches that fix some of the rule's failed turns without breaking a turn of its action that was right,
    up to `limit` per kind, most general first. Each candidate costs a replay of the action's episodes, so at
    most `max_tries` candidates per kind are tried. `version` is the base the patches are made against."""
    rule = book.rule(rule_id)
    formats = list_formats(book)
    turns = _turns(book, rule, formats)
    before = _counts(book, rule)
    if not before[1]:
        return []
    verdicts = _verdicts(book, rule.action, book.evidence)
    proposals: list[Proposal] = []

    def offer(kind: ProposalKind, ops: list[PatchOp], explanation: str, diff: list[str]) -> bool:
        found = _check(book, rule, kind, ops, explanation, before, verdicts, diff, version)
        if found is not None:
            proposals.append(found)
        return found is not None

    status = _status_after(rule)
    conditions = _candidate_conditions(turns, rule)[:max_tries]
    offered = 0
    for condition in conditions:
        if offered >= limit:
            break
        fields = {"conditions": [c.model_dump(mode="json") for c in (*rule.conditions, condition)], **status}
        after = rule.model_copy(update={"conditions": [*rule.conditions, condition],
                                        "status": RuleStatus(status.get("status", rule.status))})
        offered += offer("condition", [PatchOp(op="update_rule", id=rule.id, fields=fields)],
                         f"only when {describe_condition(condition)}: holds on its {before[0]} matched turns, "
                         f"not on its {before[1]} failed ones", _diff(rule, after))
    offered = 0
    for template in _candidate_templates(turns, formats, rule, "both")[:max_tries]:
        if offered >= limit:
            break
        after = rule.model_copy(update={"template": template,
                                        "status": RuleStatus(status.get("status", rule.status))})
        offered += offer("template", [PatchOp(op="update_rule", id=rule.id, fields={"template": template, **status})],
                         "one template, with state slots, renders its matched and its failed turns",
                         _diff(rule, after))
    offered = 0
    failed_templates = _candidate_templates(turns, formats, rule, "failed")
    for condition in conditions:
        negated_op = _NEGATED.get(condition.op)
        if offered >= limit or negated_op is None or not failed_templates:
            break
        negated = condition.model_copy(update={"op": negated_op})
        new = rule.model_copy(update={
            "id": _new_id(book, rule.id), "conditions": [*rule.conditions, negated], "template": failed_templates[0],
            "status": RuleStatus.SUPPORTED, "support": 0, "confidence": 0.0, "counterexamples": [],
            "provenance": rule.provenance.model_copy(update={"supporting": [], "contradicting": [],
                                                             "supporting_total": None,
                                                             "contradicting_total": None}),
            "description": f"split from {rule.id}: its turns where {describe_condition(negated)}"})
        kept = rule.model_copy(update={"conditions": [*rule.conditions, condition],
                                       "status": RuleStatus(status.get("status", rule.status))})
        ops = [PatchOp(op="update_rule", id=rule.id,
                       fields={"conditions": [c.model_dump(mode="json") for c in kept.conditions], **status}),
               PatchOp(op="add_rule", id=new.id, value=new.model_dump(mode="json"))]
        offered += offer("split", ops, f"split: keep its form when {describe_condition(condition)}, and a new rule "
                         f"{new.id} answers when {describe_condition(negated)}", _diff(rule, kept, new))
    return proposals

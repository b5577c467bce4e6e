"""The bundled model's window: is it usable at 4,096 tokens, or only allowed to be?

    OMP_NUM_THREADS=1 python benchmarks/tiny_context.py [--model data_samples/models/tiny] [--windows 24]

Held-out text: the toolshop conversations (data_samples/toolshop, a tool-API world the tiny model never
trained on), in the model's own two views (agent, environment), rendered with its chat template. Reports
the mean next-token loss (nats) by position, 0-1k / 1-2k / 2-3k / 3-4k, on (a) single conversations read
from position 0 (only the long ones reach 3-4k) and (b) the conversations run together and cut into
windows of the model's full length, over all tokens and over the assistant tokens (the model's replies);
(c) on the conversations that fill most of the window, the loss on their last quarter read with the whole
prefix against read with only the half before it; and (d) as (b) on the sample traces it trained on (not
held out: the position effect alone, in domain; `--window 4096` measures a shorter-window model there too).
Then asks the model, through the library's hf backend, for the next observation after the longest real
environment prompt of at most `--prompt-tokens` tokens: no ContextOverflowError, and how long it took.
Writes benchmarks/results/tiny_context.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from worldsmith import Workspace  # noqa: E402
from worldsmith.llm import make_llm  # noqa: E402
from worldsmith.llm.base import Message  # noqa: E402
from worldsmith.llm.hf import HFLLM  # noqa: E402
from worldsmith.llm.tiny import _encode_chat, agent_messages, environment_messages  # noqa: E402
from worldsmith.traces.model import Episode  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BUCKET = 1024
FULL = 100_000  # message characters: unclipped, as a real log gives them


def toolshop_episodes() -> list[Episode]:
    """The toolshop sample logs (not among the tiny model's training traces)."""
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Workspace(tmp)
        workspace.ingest([REPO / "data_samples" / "toolshop"], "toolshop")
        return list(workspace.dataset("toolshop").iter_episodes())


def sample_episodes() -> list[Episode]:
    """The sample traces the bundled model trained on (not held out: the position effect alone, in domain)."""
    from worldsmith.traces.files import sample_trace_files

    with tempfile.TemporaryDirectory() as tmp:
        workspace = Workspace(tmp)
        workspace.ingest(sample_trace_files(REPO / "data_samples"), "samples")
        return list(workspace.dataset("samples").iter_episodes())


def conversations(episodes: list[Episode]) -> list[list[Message]]:
    """Both views of every episode, unclipped."""
    views = [view(episode, max_chars=FULL) for episode in episodes for view in (agent_messages, environment_messages)]
    return [messages for messages in views if messages]


def position_losses(net: Any, ids: list[int], train: list[bool]) -> list[tuple[int, float, bool]]:
    """(position, next-token loss in nats, is an assistant token) for every predicted token of one window."""
    import torch

    with torch.inference_mode():
        logits = net(input_ids=torch.tensor([ids])).logits[0, :-1].float()
        losses = torch.nn.functional.cross_entropy(logits, torch.tensor(ids[1:]), reduction="none")
    return [(position + 1, float(loss), train[position + 1]) for position, loss in enumerate(losses.tolist())]


def by_bucket(rows: list[tuple[int, float, bool]], window: int) -> dict[str, dict[str, Any]]:
    """Mean loss and token count per 1,024-position bucket, over all tokens and over assistant tokens."""
    out: dict[str, dict[str, Any]] = {}
    for start in range(0, window, BUCKET):
        label = f"{start // BUCKET}-{start // BUCKET + 1}k"
        inside = [(loss, train) for position, loss, train in rows if start <= position < start + BUCKET]
        replies = [loss for loss, train in inside if train]
        out[label] = {
            "tokens": len(inside),
            "loss": round(sum(loss for loss, _ in inside) / len(inside), 4) if inside else None,
            "assistant_tokens": len(replies),
            "assistant_loss": round(sum(replies) / len(replies), 4) if replies else None,
        }
    return out


def context_use(net: Any, samples: list[Any], window: int) -> dict[str, Any]:
    """Loss on the last quarter of each conversation that fills most of the window, read with its whole prefix
    against read with only the half before it (positions restarting there). A model that reads the whole
    window does no worse with more of it; one trained on shorter rows does worse past its positions."""
    import torch

    quarter = window // 4
    whole: list[float] = []
    half: list[float] = []
    for sample in samples:
        if len(sample.ids) < window - quarter // 2:
            continue
        ids = sample.ids[:window]
        with torch.inference_mode():
            for start, out in ((0, whole), (2 * quarter, half)):
                part = torch.tensor([ids[start:]])
                logits = net(input_ids=part).logits[0, :-1].float()
                losses = torch.nn.functional.cross_entropy(logits, part[0, 1:], reduction="none")
                out.append(float(losses[3 * quarter - start - 1 :].mean()))
    return {
        "conversations": len(whole),
        "last_quarter_loss_whole_prefix": round(sum(whole) / max(1, len(whole)), 4),
        "last_quarter_loss_half_prefix": round(sum(half) / max(1, len(half)), 4),
    }


def held_out_losses(llm: HFLLM, chats: list[list[Message]], windows: int, window: int) -> dict[str, Any]:
    """Per-position losses on single conversations (from position 0) and on full windows of them run together."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(llm.path) / "tokenizer.json"))
    samples = [_encode_chat(tokenizer, messages) for messages in chats]
    single: list[tuple[int, float, bool]] = []
    for sample in samples:
        single += position_losses(llm.net, sample.ids[:window], sample.train[:window])
    return {
        "context_use": context_use(llm.net, samples, window),
        "conversations": len(samples),
        "conversations_reaching_3k": sum(len(sample.ids) > 3 * BUCKET for sample in samples),
        "single_conversations": by_bucket(single, window),
        **run_together(llm.net, samples, windows, window),
    }


def run_together(net: Any, samples: list[Any], windows: int, window: int) -> dict[str, Any]:
    """Per-position losses on the first `windows` full windows of the samples run together."""
    stream_ids = [token for sample in samples for token in sample.ids]
    stream_train = [keep for sample in samples for keep in sample.train]
    joined: list[tuple[int, float, bool]] = []
    for start in range(0, min(len(stream_ids) - window + 1, windows * window), window):
        joined += position_losses(net, stream_ids[start : start + window], stream_train[start : start + window])
    return {"windows": len(joined) // max(1, window - 1), "run_together": by_bucket(joined, window)}


def long_prompt(llm: HFLLM, episodes: list[Episode], target: int) -> list[Message]:
    """The longest environment-view prefix (ending on the agent's action) of at most `target` prompt tokens."""
    best: list[Message] = []
    best_tokens = 0
    for episode in episodes:
        messages = environment_messages(episode, max_chars=FULL)
        for end in range(2, len(messages) + 1, 2):  # system, then (action, observation) pairs: end on an action
            tokens = len(llm.encode(messages[:end]))
            if tokens > target:
                break
            if tokens > best_tokens:
                best, best_tokens = messages[:end], tokens
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=str(REPO / "data_samples" / "models" / "tiny"))
    parser.add_argument("--windows", type=int, default=24, help="full windows of run-together conversations")
    parser.add_argument("--window", type=int, help="positions to measure (default: the model's window)")
    parser.add_argument("--prompt-tokens", type=int, default=3600)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "tiny_context.json"))
    args = parser.parse_args(argv)

    import torch
    from tokenizers import Tokenizer

    llm = make_llm(f"tiny:{args.model}")
    assert isinstance(llm, HFLLM)
    episodes = toolshop_episodes()
    started = time.perf_counter()
    window = args.window or llm.context_window
    losses = held_out_losses(llm, conversations(episodes), args.windows, window)
    loss_s = time.perf_counter() - started
    training = [view(e) for e in sample_episodes() for view in (agent_messages, environment_messages)]
    tokenizer = Tokenizer.from_file(str(Path(llm.path) / "tokenizer.json"))
    in_domain = run_together(
        llm.net, [_encode_chat(tokenizer, chat) for chat in training if chat], args.windows, window
    )
    prompt = long_prompt(llm, episodes, min(args.prompt_tokens, llm.context_window - args.max_tokens - 1))
    started = time.perf_counter()
    [answer] = llm.chat(prompt, max_tokens=args.max_tokens)
    chat_s = time.perf_counter() - started
    report = json.loads((Path(args.model) / "worldsmith_tiny.json").read_text(encoding="utf-8"))
    model = Path(args.model).resolve()
    result = {
        "benchmark": "tiny_context",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "model": str(model.relative_to(REPO)) if model.is_relative_to(REPO) else args.model,
        "context_window": llm.context_window,
        "measured_window": window,
        "trained_seq_len": report["config"]["seq_len"],
        "held_out": "data_samples/toolshop (agent and environment views, unclipped)",
        **losses,
        "loss_seconds": round(loss_s, 2),
        "training_text": {"text": "the sample traces, as trained (not held out)", **in_domain},
        "long_prompt": {
            "prompt_tokens": answer.prompt_tokens,
            "completion_tokens": answer.completion_tokens,
            "seconds": round(chat_s, 3),
            "action": prompt[-1]["content"][:200],
            "completion": answer.text[:300],
        },
        "threads": torch.get_num_threads(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
    }
    llm.close()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

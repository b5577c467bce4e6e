"""EnvACE costs: our GRPO trainer against TRL's GRPOTrainer, and act + rehearse with prefix reuse against act alone.

    OMP_NUM_THREADS=1 python benchmarks/envace.py [--repeats 3] [--steps 8] [--out benchmarks/results/envace.json]

1. Training throughput, side by side in one run, each arm in its own process (peak RSS = its memory):
   - `ours-grpo`: `worldsmith.envace.Trainer`, objective grpo, B = 2 BFCL tasks x G = 4 rollouts per step, one
     action of at most 32 new tokens per rollout (real BFCL answers it), act role only, lr 1e-3, no KL;
   - `trl-grpo`: TRL's `GRPOTrainer` on the same tiny model, the same 6 BFCL opening prompts (our policy prompt +
     first user message, as chat messages: the tokens are the same), per-device batch 8 = 2 prompts x 4
     generations, 32 new tokens, temperature 1, lr 1e-3, beta 0, one generation per step;
   - `ours-joint`: the joint supervised objective (batch 2 packed chunks), for reference.
   Both GRPO arms get an all-zero reward (BFCL's partial score of one tiny-model action is 0; TRL gets a zero
   reward function), so both run the same loss and backward on zero advantages. Wall time of the steps after
   `--warmup` (totals over them: with the defaults, 12 steps = 4 passes over the 6 tasks in both arms, so both see
   the same prompt mix), then the median over `--repeats` processes (interleaved). Throughput: rollouts/s,
   and sequence tokens/s = rollouts/s x (mean prompt tokens of the 6 tasks, which both arms cycle through, + the
   arm's mean completion tokens): the tokens trained on, one definition for both (TRL's own prompt + completion
   count is kept beside it as a check; our trainer's logged `tokens` counts its decoder's forward tokens too).
2. Act + rehearse with the prefix reused, against act alone (target <= 1.3x), on real BFCL histories (act prompts of
   the bundled episodes, 220-900 tokens): the `hf` backend (test-time rehearsal: the rehearse call is served from
   the prefix cache) and our training decoder (`SegmentDecoder`: the rehearse header appended to the act step's
   cache), greedy, 48 new tokens at most per role; also with 1 new token (the prompt side alone) and with the
   prefix cache off (two independent calls). Medians of `--repeats` per transition; ratios of summed medians.
   Each path decodes plainly and with prompt lookup (`--lookup-drafts`; `worldsmith.llm.prompt_lookup`), the arms
   interleaved: ratio, tokens per verify pass of the rehearse step, the share of drafted tokens accepted, and
   whether every greedy text equals the plain arm's. The training decoder's act step is always plain (rollouts use
   lookup for the rehearse step only); the hf backend decodes both calls with it. Also the trainer's fidelity
   probe (greedy batches) per arm. Section `rehearse-large` repeats the 48-token paths on a random-weight model of
   the same architecture, wider and deeper (LARGE, ~63M parameters), where a forward pass costs far more than
   Python overhead.
3. `rollouts`: GRPO rollouts of the bundled configuration (configs/envace_grpo_tiny.yaml), the rehearse step plain
   or with lookup, `--rollout-seeds` batches per arm interleaved: rollouts/s and generated tokens/s.
4. `lookup-ceiling`: how many tokens a verify pass of the rehearse step can yield (no timing: pass counts do not
   depend on load). The decoder's drafter (`worldsmith.llm.prompt_lookup.NgramIndex`, as `SegmentDecoder.generate`
   calls it) replayed over the REAL answers, teacher-forced after the real call (the ceiling of copy-based drafting:
   a model that rehearsed perfectly), against the model's own greedy rehearsals after its own greedy call, decoded
   with lookup by `SegmentDecoder` (the `rehearse` section's setting; replaying those answers must give the decoder's
   own counts, which checks the replay). Per transition and by kind (tool answers; hand-overs, whose "answer" is the
   user's next instruction), at each `--lookup-drafts`; also how faithful the model is (its greedy call equals the
   real one; token F1 of its greedy rehearsal after the real call against the real answer). Two pools: the
   section-2 transitions, and held-out tool transitions (the probe's held-out episode and the curious episodes of
   tasks outside the checkpoint's training data).
Writes benchmarks/results/envace.json.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
BFCL = REPO / "data_samples" / "collected" / "bfcl.jsonl"
TINY = REPO / "data_samples" / "models" / "tiny"
# the rehearse-cost section's default model: trained in both roles, so calls and answers end where they should
JOINT = REPO / "data_samples" / "models" / "tiny-envace-joint"
B, G, NEW_TOKENS, LR = 2, 4, 32, 1e-3
# the larger random-weight model of the act + rehearse section: the joint checkpoint's architecture, ~63M parameters
LARGE = {"hidden_size": 640, "intermediate_size": 1792, "num_hidden_layers": 12, "num_attention_heads": 10,
         "num_key_value_heads": 10, "head_dim": 64}


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _threads() -> None:
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))


# ---------------------------------------------------------------------------------------------- training arms


def _ours(objective: str, steps: int, warmup: int, seed: int) -> dict[str, Any]:
    from worldsmith.envace import EnvACEConfig, Trainer

    _threads()
    with tempfile.TemporaryDirectory() as folder:
        raw: dict[str, Any] = {
            "model": str(TINY), "data": {"paths": [str(BFCL)], "env": "bfcl"}, "objective": objective,
            "lr": LR, "steps": steps, "batch_size": B, "seed": seed, "threads": 1, "out": folder,
            "probe": {"every": 0, "n_transitions": 1, "max_new_tokens": 1},
        }
        if objective == "grpo":
            raw.update(rollout_source="real", grpo={"group_size": G, "max_new_tokens": NEW_TOKENS, "max_steps": 1,
                                                    "train_roles": "act", "rehearse_in_real": False,
                                                    "temperature": 1.0, "kl_coef": 0.0})
        started = time.perf_counter()
        Trainer(EnvACEConfig.from_dict(raw)).train(resume=False)
        total = time.perf_counter() - started
        rows = [json.loads(line) for line in (Path(folder) / "metrics.jsonl").read_text().splitlines()]
    timed = [row for row in rows if row["step"] > warmup]
    seconds = sum(row["time_s"] for row in timed)
    out = {"step_s": seconds / len(timed), "trainer_tokens_per_s": sum(row["tokens"] for row in timed) / seconds,
           "run_s": round(total, 2)}
    if objective == "grpo":
        out["rollouts_per_s"] = sum(row["rollouts"] for row in timed) / seconds
        out["completion_tokens_mean"] = sum(row["generated_tokens"] for row in timed) / sum(row["rollouts"] for row in timed)
    return out


def _trl(steps: int, warmup: int, seed: int) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from worldsmith.envace import Templates, policy_prompt, task_specs, transcript_from_episode

    _threads()
    episodes = _episodes()
    specs = task_specs(transcript_from_episode(episode) for episode in episodes)
    prompts = [[{"role": "system", "content": policy_prompt(Templates(), spec.env, spec.task, spec.tools)},
                {"role": "user", "content": spec.opening}] for spec in specs]
    tokenizer = AutoTokenizer.from_pretrained(TINY, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(TINY, local_files_only=True, dtype=torch.float32)
    times: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.started = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            times.append(time.perf_counter() - self.started)

    with tempfile.TemporaryDirectory() as folder:
        args = GRPOConfig(output_dir=folder, per_device_train_batch_size=B * G, num_generations=G,
                          max_completion_length=NEW_TOKENS, learning_rate=LR, logging_steps=1, max_steps=steps,
                          use_cpu=True, report_to="none", beta=0.0, temperature=1.0, save_strategy="no", seed=seed,
                          bf16=False, dataloader_num_workers=0, disable_tqdm=True)
        trainer = GRPOTrainer(model=model, reward_funcs=[lambda completions, **kwargs: [0.0] * len(completions)],
                              args=args, train_dataset=Dataset.from_list([{"prompt": p} for p in prompts]),
                              processing_class=tokenizer, callbacks=[Timer()])
        started = time.perf_counter()
        trainer.train()
        total = time.perf_counter() - started
    logged = [row for row in trainer.state.log_history if "num_tokens" in row]
    seen = [0.0] + [float(row["num_tokens"]) for row in logged]
    per_step = [seen[i + 1] - seen[i] for i in range(len(logged))]
    timed = list(range(warmup, min(len(times), len(per_step))))
    seconds = sum(times[i] for i in timed)
    lengths = [float(logged[i]["completions/mean_length"]) for i in timed]
    return {"step_s": seconds / len(timed), "sequence_tokens_per_s_logged": sum(per_step[i] for i in timed) / seconds,
            "rollouts_per_s": B * G * len(timed) / seconds, "completion_tokens_mean": sum(lengths) / len(lengths),
            "run_s": round(total, 2)}


# ---------------------------------------------------------------------------------------------- act + rehearse


def _act_prompts(episodes: Iterable[Any]) -> Iterator[dict[str, Any]]:
    """Every exchange's act prompt (as messages: the policy prompt, the history, its observation), with the
    transcript and the exchange's index."""
    from worldsmith.envace import Templates, policy_prompt, transcript_from_episode

    templates = Templates()
    for episode in episodes:
        transcript = transcript_from_episode(episode)
        messages = [{"role": "system", "content": policy_prompt(templates, transcript.env, transcript.task,
                                                                 transcript.tools)}]
        for index, exchange in enumerate(transcript.exchanges):
            messages.append({"role": "user", "content": exchange.observation})
            yield {"messages": list(messages), "transcript": transcript, "index": index}
            messages.append({"role": "assistant", "content": exchange.action})


def _fits(item: dict[str, Any]) -> bool:
    return len(str(item["messages"])) < 2400  # room for the call, the header and 48 tokens


def _transitions(limit: int) -> list[dict[str, Any]]:
    """Act prompts (as messages) of the bundled BFCL episodes, spread over their histories (first chunk only)."""
    found = [item for item in _act_prompts(_episodes())
             if item["index"] in (1, 3, 5) and _fits(item)]
    step = max(1, len(found) // limit)
    return found[::step][:limit]


def _episodes(path: Path = BFCL) -> list[Any]:
    """The episodes of a bundled trace file (its rejected records skipped), read once per process."""
    return list(_read_episodes(path))


@functools.cache
def _read_episodes(path: Path) -> tuple[Any, ...]:
    from worldsmith.traces import Episode, read_traces

    return tuple(item for item in read_traces([path]) if isinstance(item, Episode))


def _action_line(text: str) -> str:
    """The call a generated act turn makes: its first line (an empty turn calls `respond()`)."""
    return text.strip().splitlines()[0] if text.strip() else "respond()"


def _environment_prompt(transcript: Any, action: str) -> str:
    """The environment prompt the rehearse role answers `action` under (the trainer's templates and tools)."""
    from worldsmith.envace import Templates, environment_prompt

    return environment_prompt(Templates(), transcript.env, transcript.task, transcript.all_tools or transcript.tools,
                              action)


def _rehearse_header(fmt: Any, transcript: Any, action: str) -> list[int]:
    """The tokens after `action`'s end of turn that open the environment's answer (the training decoder's layout)."""
    return fmt.rehearse_header(_environment_prompt(transcript, action))


def _rehearse_messages(item: dict[str, Any], action: str) -> list[dict[str, str]]:
    system = _environment_prompt(item["transcript"], action)
    return [*item["messages"], {"role": "assistant", "content": action}, {"role": "system", "content": system}]


def _lookup_arms(drafts: Sequence[int]) -> dict[str, Any]:
    """Decoding arms: plain, then prompt lookup with each draft length (n-grams up to 3)."""
    from worldsmith.llm.prompt_lookup import PromptLookup

    return {"plain": None, **{f"lookup{draft}": PromptLookup(draft=draft) for draft in drafts}}


def _lookup_summary(stats: Any) -> dict[str, Any]:
    return {"tokens_per_pass": round(stats.tokens_per_pass, 3),
            "draft_accepted_share": round(stats.accepted / stats.drafted, 3) if stats.drafted else None}


def _stats_delta(after: Any, before: Any) -> Any:
    from worldsmith.llm.prompt_lookup import LookupStats

    return LookupStats(*(getattr(after, key) - getattr(before, key) for key in ("passes", "tokens", "drafted", "accepted")))


def _per_arm(act_s: dict[str, list[float]], pair_s: dict[str, list[float]], stats: dict[str, Any]) -> dict[str, Any]:
    """Each arm's totals of per-transition medians, their ratio, and what lookup did in the rehearse step."""
    return {name: {"act_s": sum(act_s[name]), "act_rehearse_s": sum(pair_s[name]),
                   "ratio": sum(pair_s[name]) / sum(act_s[name]),
                   "ratio_median": statistics.median(x / y for x, y in zip(pair_s[name], act_s[name], strict=True)),
                   **_lookup_summary(stats[name])} for name in act_s}


def _backend_costs(items: list[dict[str, Any]], repeats: int, new_tokens: int, model: Path, drafts: Sequence[int],
                   *, cold: bool = True) -> dict[str, Any]:
    """The hf backend, per decoding arm: act alone (cold cache) vs act then rehearse (rehearse served from the cache);
    with `cold`, also both calls without the prefix cache. The arms run interleaved, one backend each (lookup
    decodes the act step too: the backend does not know roles); greedy texts are compared with the plain arm's."""
    from worldsmith.llm.hf import HFLLM
    from worldsmith.llm.prompt_lookup import LookupStats

    arms = _lookup_arms(drafts)
    backends = {name: HFLLM(model, threads=1, prefix_cache=16, prompt_lookup=lookup is not None,
                            lookup_draft=lookup.draft if lookup is not None else 8) for name, lookup in arms.items()}
    nocache = HFLLM(model, threads=1, prefix_cache=0, prompt_lookup=False) if cold else None
    act_s: dict[str, list[float]] = {name: [] for name in arms}
    pair_s: dict[str, list[float]] = {name: [] for name in arms}
    rehearse_stats = {name: LookupStats() for name in arms}
    nocache_s, generated, cached, prompt, differing = [], [0, 0], 0, 0, 0
    try:
        for item in items:
            a: dict[str, list[float]] = {name: [] for name in arms}
            p: dict[str, list[float]] = {name: [] for name in arms}
            n = []
            for _ in range(repeats):
                texts = {}
                for name, llm in backends.items():
                    llm.clear_prefix_cache()
                    started = time.perf_counter()
                    [acted] = llm.chat(item["messages"], max_tokens=new_tokens)
                    a[name].append(time.perf_counter() - started)
                    action = _action_line(acted.text)
                    before = LookupStats(**vars(llm.lookup_stats))
                    started = time.perf_counter()
                    [rehearsed] = llm.chat(_rehearse_messages(item, action), max_tokens=new_tokens)
                    p[name].append(a[name][-1] + time.perf_counter() - started)
                    rehearse_stats[name].add(_stats_delta(llm.lookup_stats, before))
                    texts[name] = (acted.text, rehearsed.text)
                differing += sum(text != texts["plain"] for text in texts.values())
                if nocache is not None:
                    started = time.perf_counter()
                    nocache.chat(item["messages"], max_tokens=new_tokens)
                    nocache.chat(_rehearse_messages(item, action), max_tokens=new_tokens)
                    n.append(time.perf_counter() - started)
            for name in arms:
                act_s[name].append(statistics.median(a[name]))
                pair_s[name].append(statistics.median(p[name]))
            if n:
                nocache_s.append(statistics.median(n))
            generated[0] += acted.completion_tokens
            generated[1] += rehearsed.completion_tokens
            cached += rehearsed.cached_tokens
            prompt += rehearsed.prompt_tokens
        cache_mb = backends["plain"].prefix_cache_stats.bytes / 2**20
    finally:
        for llm in [*backends.values(), nocache]:
            if llm is not None:
                llm.close()
    out: dict[str, Any] = {"act_tokens_mean": generated[0] / len(items), "rehearse_tokens_mean": generated[1] / len(items),
                           "rehearse_cached_share": cached / max(prompt, 1), "prefix_cache_mb": round(cache_mb, 2),
                           "greedy_identical": differing == 0, **_per_arm(act_s, pair_s, rehearse_stats)}
    if nocache_s:
        out["no_reuse_s"] = sum(nocache_s)
        out["ratio_no_reuse"] = sum(nocache_s) / sum(act_s["plain"])
    return out


def _decoder_costs(items: list[dict[str, Any]], repeats: int, new_tokens: int, model_path: Path,
                   drafts: Sequence[int]) -> dict[str, Any]:
    """Our training decoder, per arm: act alone (plain) vs act then rehearse on the same cache (the header appended),
    the rehearse step decoded plainly or with prompt lookup; arms interleaved, greedy answers compared."""
    import torch

    from worldsmith.envace import ROLE_ACT, ROLE_REHEARSE, ChatFormat, SegmentDecoder, load_policy
    from worldsmith.llm.prompt_lookup import LookupStats

    arms = _lookup_arms(drafts)
    model, tokenizer = load_policy(model_path, device="cpu")
    model.eval()
    fmt = ChatFormat(tokenizer)
    act_s: dict[str, list[float]] = {name: [] for name in arms}
    pair_s: dict[str, list[float]] = {name: [] for name in arms}
    rehearse_stats = {name: LookupStats() for name in arms}
    generated, differing = [0, 0], 0
    with torch.inference_mode():
        for item in items:
            text = tokenizer.apply_chat_template(item["messages"], tokenize=False, add_generation_prompt=True)
            prompt = fmt.encode(text)
            a: dict[str, list[float]] = {name: [] for name in arms}
            p: dict[str, list[float]] = {name: [] for name in arms}
            for _ in range(repeats):
                answers = {}
                for name, lookup in arms.items():
                    decoder = SegmentDecoder(model, eos_id=fmt.eos_id, pad_id=fmt.pad_id)
                    started = time.perf_counter()
                    acted = decoder.generate(decoder.start([prompt]), [0], role=ROLE_ACT, max_new_tokens=new_tokens,
                                             temperature=0.0)[0]
                    a[name].append(time.perf_counter() - started)
                    header = _rehearse_header(fmt, item["transcript"], _action_line(fmt.decode(acted)))
                    before = LookupStats(**vars(decoder.stats.lookup))
                    started = time.perf_counter()
                    decoder.open_segment(0)
                    answered = decoder.generate(decoder.feed([header]), [0], role=ROLE_REHEARSE,
                                                max_new_tokens=new_tokens, temperature=0.0, lookup=lookup)[0]
                    decoder.close_segment(0)
                    p[name].append(a[name][-1] + time.perf_counter() - started)
                    rehearse_stats[name].add(_stats_delta(decoder.stats.lookup, before))
                    answers[name] = (acted, answered)
                differing += sum(answer != answers["plain"] for answer in answers.values())
            for name in arms:
                act_s[name].append(statistics.median(a[name]))
                pair_s[name].append(statistics.median(p[name]))
            generated[0] += len(acted)
            generated[1] += len(answered)
    return {"act_tokens_mean": generated[0] / len(items), "rehearse_tokens_mean": generated[1] / len(items),
            "greedy_identical": differing == 0, **_per_arm(act_s, pair_s, rehearse_stats)}


def _probe_costs(repeats: int, model_path: Path, drafts: Sequence[int]) -> dict[str, Any]:
    """The trainer's fidelity probe (16 real transitions of the bundled episodes, greedy, 96 new tokens, batches of 8)
    per arm, interleaved."""
    import torch

    from worldsmith.envace import load_policy, probe_transitions, rehearsal_fidelity

    model, tokenizer = load_policy(model_path, device="cpu")
    model.eval()
    samples = probe_transitions(_episodes(), tokenizer, n=16).samples
    arms = _lookup_arms(drafts)
    times: dict[str, list[float]] = {name: [] for name in arms}
    texts: dict[str, list[str]] = {}
    with torch.inference_mode():
        for _ in range(repeats):
            for name, lookup in arms.items():
                started = time.perf_counter()
                result = rehearsal_fidelity(model, tokenizer, samples, max_new_tokens=96, lookup=lookup,
                                            examples=len(samples))
                times[name].append(time.perf_counter() - started)
                texts[name] = [example["rehearsed"] for example in result["examples"]]
    return {"transitions": len(samples), "greedy_identical": all(text == texts["plain"] for text in texts.values()),
            **{name: {"s": statistics.median(values)} for name, values in times.items()}}


def _rehearse_cost(repeats: int, limit: int, model: Path, drafts: Sequence[int]) -> dict[str, Any]:
    _threads()
    items = _transitions(limit)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
    lengths = [len(tokenizer(tokenizer.apply_chat_template(item["messages"], tokenize=False, add_generation_prompt=True),
                             add_special_tokens=False)["input_ids"]) for item in items]
    return {"model": str(model), "transitions": len(items),
            "prompt_tokens": {"min": min(lengths), "median": statistics.median(lengths), "max": max(lengths)},
            "hf_48": _backend_costs(items, repeats, 48, model, drafts),
            "decoder_48": _decoder_costs(items, repeats, 48, model, drafts),
            "hf_1": _backend_costs(items, repeats, 1, model, ()),  # the prompt side alone: nothing to draft
            "decoder_1": _decoder_costs(items, repeats, 1, model, ()),
            "probe": _probe_costs(repeats, model, drafts)}


def _large_model(folder: Path) -> int:
    """The joint checkpoint's architecture made wider and deeper (LARGE), random weights (seed 0, the config's
    init): a forward pass costs far more than Python overhead. The tokenizer is the joint checkpoint's."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(JOINT, local_files_only=True)
    config.update(LARGE)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(JOINT, local_files_only=True).save_pretrained(folder)
    return sum(parameter.numel() for parameter in model.parameters())


def _rehearse_cost_large(repeats: int, limit: int, drafts: Sequence[int]) -> dict[str, Any]:
    _threads()
    items = _transitions(limit)
    with tempfile.TemporaryDirectory() as folder:
        model = Path(folder)
        parameters = _large_model(model)
        return {"model": f"random weights, {parameters / 1e6:.1f}M parameters", "config": LARGE,
                "transitions": len(items), "hf_48": _backend_costs(items, repeats, 48, model, drafts, cold=False),
                "decoder_48": _decoder_costs(items, repeats, 48, model, drafts)}


def _rollout_costs(repeats: int, drafts: Sequence[int]) -> dict[str, Any]:
    """GRPO rollouts of the bundled configuration (configs/envace_grpo_tiny.yaml: the joint checkpoint, 5 tasks x G = 8,
    at most 4 steps of at most 32 sampled tokens per role, real BFCL, every call rehearsed), per arm: the rehearse
    step decoded plainly or with prompt lookup. Seeds 0..repeats-1, arms interleaved; sampled rollouts differ between
    arms (the same distribution, other draws), so throughput is compared, not the rollouts."""
    import torch

    from worldsmith.envace import EnvACEConfig, load_policy, transcript_from_episode
    from worldsmith.envace.generate import DecodeStats
    from worldsmith.envace.rollouts import RolloutSettings, make_source_factory, rollout, task_specs

    _threads()
    config = EnvACEConfig.from_file(REPO / "configs" / "envace_grpo_tiny.yaml")
    grpo = config.grpo
    episodes = sorted(_episodes(), key=lambda e: e.id)
    episodes = episodes[: len(episodes) - config.probe.holdout]  # the trainer's training tasks
    specs = task_specs(transcript_from_episode(episode) for episode in episodes)[: config.batch_size]
    model, tokenizer = load_policy(REPO / config.model, device="cpu")
    arms = _lookup_arms(drafts)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in arms}
    for seed in range(repeats):
        for name, lookup in arms.items():
            stats = DecodeStats()
            started = time.perf_counter()
            settings = RolloutSettings(grpo.group_size, max_steps=grpo.max_steps, max_new_tokens=grpo.max_new_tokens,
                                       temperature=grpo.temperature,
                                       rehearse="calls" if grpo.rehearse_calls_only else "always", lookup=lookup)
            groups = rollout(model, tokenizer, specs, make_source_factory("real", env=config.data.env), settings,
                             generator=torch.Generator().manual_seed(seed), stats=stats)
            seconds = time.perf_counter() - started
            rollouts = [item for group in groups for item in group.rollouts]
            for item in rollouts:
                if item.source is not None:
                    item.source.close()
            runs[name].append({"s": seconds, "rollouts_per_s": len(rollouts) / seconds,
                               "generated_tokens_per_s": stats.generated_tokens / seconds,
                               "generated_tokens": stats.generated_tokens,
                               "rehearsals": sum(step.rehearsed is not None for item in rollouts for step in item.steps),
                               **_lookup_summary(stats.lookup)})
    return {"tasks": len(specs), "group": grpo.group_size, "seeds": repeats,
            **{name: {key: round(statistics.median(run[key] for run in values), 4)
                      for key in values[0] if values[0][key] is not None} for name, values in runs.items()},
            "runs": runs}


# ---------------------------------------------------------------------------------------------- lookup ceiling


def _heldout_transitions() -> list[dict[str, Any]]:
    """Tool transitions the bundled checkpoint did not train on: the probe's held-out episodes (the last
    `probe.holdout` of bfcl.jsonl by id, as the trainer holds them out under configs/envace_tiny.yaml) and the
    curious episodes (bfcl_curious.jsonl) of tasks none of its training episodes has."""
    from worldsmith.envace import EnvACEConfig

    holdout = EnvACEConfig.from_file(REPO / "configs" / "envace_tiny.yaml").probe.holdout
    ordered = sorted(_episodes(), key=lambda e: e.id)
    held, trained = ordered[len(ordered) - holdout:], ordered[: len(ordered) - holdout]
    seen = {episode.task_id for episode in trained}
    curious = [item for item in _episodes(BFCL.with_name("bfcl_curious.jsonl")) if item.task_id not in seen]
    return [item for item in _act_prompts([*held, *curious]) if _fits(item)
            and item["transcript"].exchanges[item["index"]].kind == "tool"
            and item["transcript"].exchanges[item["index"]].response is not None]


def _cut(ids: list[int], eos: int, new_tokens: int) -> list[int]:
    """`ids` (ending with `eos`) as the decoder emits them under a `new_tokens` cap: cut, the last token made `eos`."""
    return ids if len(ids) <= new_tokens else [*ids[: new_tokens - 1], eos]


def _replay(context: list[int], answer: list[int], lookup: Any, eos: int, new_tokens: int) -> Any:
    """The verify passes `SegmentDecoder.generate` makes (greedy, `lookup`) when the model's choices are `answer`:
    its first token comes from the header's feed; then each pass drafts from the stream (`context` + the answer so
    far) with the decoder's drafter and yields the draft's prefix that equals the answer plus the answer's next token.
    `answer` ends with `eos` and is at most `new_tokens` long."""
    from worldsmith.llm.prompt_lookup import LookupStats, NgramIndex

    stats, index, out = LookupStats(), NgramIndex(lookup.ngram), answer[:1]
    while out[-1] != eos:
        draft = index.draft(context + out, min(lookup.draft, new_tokens - len(out) - 1), (eos,))
        rest = answer[len(out):]
        agreed = next((i for i, (drafted, true) in enumerate(zip(draft, rest, strict=False)) if drafted != true),
                      len(draft))
        stats.record(len(draft), agreed, agreed + 1)
        out += rest[: agreed + 1]
    return stats


def _act_rehearse(model: Any, fmt: Any, prompt: list[int], transcript: Any, action: str | None, new_tokens: int,
                  lookup: Any = None) -> tuple[list[int], list[int], list[int], Any]:
    """The training decoder's greedy act step (or `action`, teacher-forced), then its greedy rehearse step on the same
    cache (`lookup` there): the act tokens, the rehearse step's context, the answer, the rehearse step's passes."""
    from worldsmith.envace import ROLE_ACT, ROLE_REHEARSE, SegmentDecoder
    from worldsmith.llm.prompt_lookup import LookupStats

    decoder = SegmentDecoder(model, eos_id=fmt.eos_id, pad_id=fmt.pad_id)
    if action is None:
        acted = decoder.generate(decoder.start([prompt]), [0], role=ROLE_ACT, max_new_tokens=new_tokens,
                                 temperature=0.0)[0]
        action = _action_line(fmt.decode(acted))
    else:
        acted = fmt.target(action)
        decoder.start([prompt + acted])
    decoder.open_segment(0)
    logits = decoder.feed([_rehearse_header(fmt, transcript, action)])
    context = list(decoder.rows[0].stream.ids)
    before = LookupStats(**vars(decoder.stats.lookup))  # the act step's passes are counted there too
    answer = decoder.generate(logits, [0], role=ROLE_REHEARSE, max_new_tokens=new_tokens, temperature=0.0,
                              lookup=lookup)[0]
    return acted, context, answer, _stats_delta(decoder.stats.lookup, before)


def _ceiling_row(model: Any, tokenizer: Any, fmt: Any, item: dict[str, Any], drafts: Sequence[int], f1: Any,
                 new_tokens: int) -> dict[str, Any]:
    """One transition: per draft, the passes over the real answer (replayed) and over the model's own (decoded), and
    whether replaying the model's answer gives the decoder's counts."""
    from worldsmith.llm.prompt_lookup import PromptLookup

    transcript = item["transcript"]
    exchange = transcript.exchanges[item["index"]]
    prompt = fmt.encode(tokenizer.apply_chat_template(item["messages"], tokenize=False, add_generation_prompt=True))
    _, real_context, faithful, _ = _act_rehearse(model, fmt, prompt, transcript, exchange.action, new_tokens)
    real = _cut(fmt.target(exchange.response), fmt.eos_id, new_tokens)
    acted, context, answer, _ = _act_rehearse(model, fmt, prompt, transcript, None, new_tokens)
    row: dict[str, Any] = {
        "episode": transcript.episode_id, "exchange": item["index"], "kind": exchange.kind, "prompt_tokens": len(prompt),
        "real_answer_tokens": len(real), "model_answer_tokens": len(answer),
        "action_exact": _action_line(fmt.decode(acted)) == exchange.action,
        "answer_token_f1": f1(fmt.decode(faithful).strip(), fmt.decode(real).strip()),
        "replay_matches_decoder": True, "greedy_identical": True, "real": {}, "model": {}}
    for draft in drafts:
        lookup = PromptLookup(draft=draft)
        _, _, decoded, stats = _act_rehearse(model, fmt, prompt, transcript, None, new_tokens, lookup)
        row["greedy_identical"] &= decoded == answer
        row["replay_matches_decoder"] &= vars(_replay(context, answer, lookup, fmt.eos_id, new_tokens)) == vars(stats)
        row["real"][draft] = vars(_replay(real_context, real, lookup, fmt.eos_id, new_tokens))
        row["model"][draft] = vars(stats)
    return row


def _ceiling_summary(rows: list[dict[str, Any]], drafts: Sequence[int]) -> dict[str, Any]:
    """Totals by kind (tool answers, hand-overs, all): passes summed over transitions, then tokens per pass."""
    from worldsmith.llm.prompt_lookup import LookupStats

    out = {}
    for kind in ("tool", "handover", "all"):
        chosen = [row for row in rows if kind in ("all", row["kind"])]
        if not chosen:
            continue
        summary: dict[str, Any] = {
            "transitions": len(chosen), "real_answer_tokens": sum(row["real_answer_tokens"] for row in chosen),
            "model_answer_tokens": sum(row["model_answer_tokens"] for row in chosen),
            "action_exact": sum(row["action_exact"] for row in chosen),
            "answer_token_f1": round(statistics.mean(row["answer_token_f1"] for row in chosen), 4)}
        for draft in drafts:
            for source in ("real", "model"):
                total = LookupStats()
                for row in chosen:
                    total.add(LookupStats(**row[source][draft]))
                summary.setdefault(f"draft{draft}", {})[source] = _lookup_summary(total)
        out[kind] = summary
    return out


def _lookup_ceiling(limit: int, model_path: Path, drafts: Sequence[int], new_tokens: int = 48) -> dict[str, Any]:
    import torch

    from worldsmith.envace import ChatFormat, load_policy
    from worldsmith.envace.probe import metric_functions

    _threads()
    model, tokenizer = load_policy(model_path, device="cpu")
    model.eval()
    fmt, f1 = ChatFormat(tokenizer), metric_functions()["token_f1"]
    pools: dict[str, Any] = {}
    with torch.inference_mode():
        for name, items in (("benchmark", _transitions(limit)), ("heldout", _heldout_transitions())):
            rows = [_ceiling_row(model, tokenizer, fmt, item, drafts, f1, new_tokens) for item in items]
            pools[name] = {"summary": _ceiling_summary(rows, drafts), "transitions": rows}
    rows = [row for pool in pools.values() for row in pool["transitions"]]
    return {"model": str(model_path), "new_tokens": new_tokens,
            "replay_matches_decoder": all(row["replay_matches_decoder"] for row in rows),
            "greedy_identical": all(row["greedy_identical"] for row in rows), **pools}


# ---------------------------------------------------------------------------------------------- driver


def _arm(name: str, args: argparse.Namespace) -> dict[str, Any]:
    if name == "ours-grpo":
        result = _ours("grpo", args.steps, args.warmup, args.seed)
    elif name == "ours-joint":
        result = _ours("joint", args.steps, args.warmup, args.seed)
    elif name == "trl-grpo":
        result = _trl(args.steps, args.warmup, args.seed)
    elif name == "rehearse-cost":
        result = _rehearse_cost(args.repeats, args.transitions, args.rehearse_model, args.lookup_drafts)
    elif name == "rehearse-cost-large":
        result = _rehearse_cost_large(args.repeats, args.transitions, args.lookup_drafts)
    elif name == "rollouts":
        result = _rollout_costs(args.rollout_seeds, args.lookup_drafts)
    elif name == "lookup-ceiling":
        result = _lookup_ceiling(args.transitions, args.rehearse_model, args.lookup_drafts)
    else:
        raise SystemExit(f"unknown arm {name!r}")
    return {**result, "peak_rss_mb": round(_peak_rss_mb(), 1)}


def _run_child(name: str, args: argparse.Namespace, seed: int) -> dict[str, Any]:
    command = [sys.executable, __file__, "--arm", name, "--steps", str(args.steps), "--warmup", str(args.warmup),
               "--repeats", str(args.repeats), "--transitions", str(args.transitions), "--seed", str(seed),
               "--rehearse-model", str(args.rehearse_model), "--rollout-seeds", str(args.rollout_seeds),
               "--lookup-drafts", *map(str, args.lookup_drafts)]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
                          timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"arm {name} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _prompt_tokens_mean() -> float:
    """Mean prompt tokens of the BFCL opening prompts both GRPO arms sample from (each task equally often)."""
    from transformers import AutoTokenizer

    from worldsmith.envace import ChatFormat, Templates, policy_prompt, task_specs, transcript_from_episode

    fmt = ChatFormat(AutoTokenizer.from_pretrained(TINY, local_files_only=True))
    episodes = _episodes()
    specs = task_specs(transcript_from_episode(episode) for episode in episodes)
    lengths = [len(fmt.opening(policy_prompt(Templates(), spec.env, spec.task, spec.tools), spec.opening))
               for spec in specs]
    return sum(lengths) / len(lengths)


def _median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [key for key, value in runs[0].items() if isinstance(value, int | float)]
    return {key: round(statistics.median(run[key] for run in runs), 4) for key in keys}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arm", help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--transitions", type=int, default=8)
    parser.add_argument("--rehearse-model", type=Path, default=JOINT,
                        help="policy for the act + rehearse section (default: the bundled joint EnvACE checkpoint)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "envace.json")
    parser.add_argument("--lookup-drafts", type=int, nargs="*", default=[2, 4, 8],
                        help="prompt-lookup draft lengths measured beside plain decoding")
    parser.add_argument("--rollout-seeds", type=int, default=3, help="GRPO rollout batches per arm (rollouts section)")
    sections = ["training", "rehearse", "rehearse-large", "rollouts", "lookup-ceiling"]
    parser.add_argument("--sections", nargs="+", choices=sections, default=sections,
                        help="what to measure (the others are kept from --out if it exists)")
    args = parser.parse_args()
    if args.arm:
        print(json.dumps(_arm(args.arm, args)))
        return
    import torch
    import transformers
    import trl

    results: dict[str, Any] = json.loads(args.out.read_text()) if args.out.is_file() else {}
    if "training" in args.sections:
        results["training"], results["runs"] = {}, {}
        for repeat in range(args.repeats):  # interleaved, so slow spells of the shared host hit every arm
            for name in ("ours-grpo", "trl-grpo", "ours-joint"):
                run = _run_child(name, args, args.seed + repeat)
                results["runs"].setdefault(name, []).append(run)
                print(f"{name} #{repeat}: {json.dumps(run)}", file=sys.stderr, flush=True)
        for name, runs in results["runs"].items():
            results["training"][name] = _median_of(runs)
        prompt_mean = _prompt_tokens_mean()
        ours, theirs = results["training"]["ours-grpo"], results["training"]["trl-grpo"]
        for arm in (ours, theirs):  # tokens of the trained sequences (prompt + completion) per second, one definition
            arm["sequence_tokens_per_s"] = round(arm["rollouts_per_s"] * (prompt_mean + arm["completion_tokens_mean"]), 1)
        results["training"]["prompt_tokens_mean"] = round(prompt_mean, 1)
        results["training"]["ours_vs_trl"] = {
            "sequence_tokens_per_s": round(ours["sequence_tokens_per_s"] / theirs["sequence_tokens_per_s"], 3),
            "rollouts_per_s": round(ours["rollouts_per_s"] / theirs["rollouts_per_s"], 3),
            "step_s": round(ours["step_s"] / theirs["step_s"], 3),
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n")  # kept if the next section fails
    for section, arm, key in (("rehearse", "rehearse-cost", "rehearse_cost"),
                              ("rehearse-large", "rehearse-cost-large", "rehearse_cost_large"),
                              ("rollouts", "rollouts", "rollouts"),
                              ("lookup-ceiling", "lookup-ceiling", "lookup_ceiling")):
        if section in args.sections:
            results[key] = _run_child(arm, args, args.seed)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(results, indent=2) + "\n")  # kept if the next section fails
    meta = results.setdefault("meta", {})
    meta.update({
        "date": datetime.now(UTC).isoformat(timespec="seconds"), "python": platform.python_version(),
        "platform": platform.platform(), "cpu_count": os.cpu_count(), "threads": os.environ.get("OMP_NUM_THREADS"),
        "torch": torch.__version__, "transformers": transformers.__version__, "trl": trl.__version__,
        "batch": {"tasks": B, "group": G, "new_tokens": NEW_TOKENS, "lr": LR},
    })
    if "training" in args.sections:
        meta["training_args"] = {"steps": args.steps, "warmup": args.warmup, "repeats": args.repeats}
    if {"rehearse", "rehearse-large"} & set(args.sections):
        meta["rehearse_args"] = {"repeats": args.repeats, "transitions": args.transitions,
                                 "lookup_drafts": args.lookup_drafts}
    if "rollouts" in args.sections:
        meta["rollout_args"] = {"seeds": args.rollout_seeds, "lookup_drafts": args.lookup_drafts}
    if "lookup-ceiling" in args.sections:
        meta["lookup_ceiling_args"] = {"date": meta["date"], "transitions": args.transitions,
                                       "lookup_drafts": args.lookup_drafts,
                                       "load_average": [round(load, 2) for load in os.getloadavg()]}
    for stale in ("steps", "warmup", "repeats"):
        meta.pop(stale, None)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps({k: results.get(k) for k in ("training", "rehearse_cost", "rehearse_cost_large", "rollouts")},
                     indent=2))


if __name__ == "__main__":
    main()

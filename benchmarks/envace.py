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
Writes benchmarks/results/envace.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
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
    from worldsmith.traces import Episode, read_traces

    _threads()
    episodes = [item for item in read_traces([BFCL]) if isinstance(item, Episode)]
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


def _transitions(limit: int) -> list[dict[str, Any]]:
    """Act prompts (as messages) of the bundled BFCL episodes, spread over their histories (first chunk only)."""
    from worldsmith.envace import Templates, policy_prompt, transcript_from_episode
    from worldsmith.traces import Episode, read_traces

    templates = Templates()
    found = []
    for episode in (item for item in read_traces([BFCL]) if isinstance(item, Episode)):
        transcript = transcript_from_episode(episode)
        messages = [{"role": "system", "content": policy_prompt(templates, transcript.env, transcript.task,
                                                                 transcript.tools)}]
        for index, exchange in enumerate(transcript.exchanges[:6]):
            messages.append({"role": "user", "content": exchange.observation})
            if index in (1, 3, 5) and len(str(messages)) < 2400:  # room for the call, the header and 48 tokens
                found.append({"messages": list(messages), "transcript": transcript})
            messages.append({"role": "assistant", "content": exchange.action})
    step = max(1, len(found) // limit)
    return found[::step][:limit]


def _rehearse_messages(item: dict[str, Any], action: str) -> list[dict[str, str]]:
    from worldsmith.envace import Templates, environment_prompt

    transcript = item["transcript"]
    system = environment_prompt(Templates(), transcript.env, transcript.task,
                                transcript.all_tools or transcript.tools, action)
    return [*item["messages"], {"role": "assistant", "content": action}, {"role": "system", "content": system}]


def _backend_costs(items: list[dict[str, Any]], repeats: int, new_tokens: int, model: Path) -> dict[str, Any]:
    """The hf backend: act alone (cold cache) vs act then rehearse (rehearse served from the cache) vs no cache."""
    from worldsmith.envace.rehearsal import load_checkpoint_llm

    llm = load_checkpoint_llm(model, threads=1)
    cold = load_checkpoint_llm(model, threads=1, prefix_cache=0)
    act_s, pair_s, nocache_s, generated, cached, prompt = [], [], [], [0, 0], 0, 0
    try:
        for item in items:
            a, p, n = [], [], []
            for _ in range(repeats):
                llm.clear_prefix_cache()
                started = time.perf_counter()
                [acted] = llm.chat(item["messages"], max_tokens=new_tokens)
                a.append(time.perf_counter() - started)
                action = acted.text.strip().splitlines()[0] if acted.text.strip() else "respond()"
                started = time.perf_counter()
                [rehearsed] = llm.chat(_rehearse_messages(item, action), max_tokens=new_tokens)
                p.append(a[-1] + time.perf_counter() - started)
                started = time.perf_counter()
                cold.chat(item["messages"], max_tokens=new_tokens)
                cold.chat(_rehearse_messages(item, action), max_tokens=new_tokens)
                n.append(time.perf_counter() - started)
            act_s.append(statistics.median(a))
            pair_s.append(statistics.median(p))
            nocache_s.append(statistics.median(n))
            generated[0] += acted.completion_tokens
            generated[1] += rehearsed.completion_tokens
            cached += rehearsed.cached_tokens
            prompt += rehearsed.prompt_tokens
        cache_mb = llm.prefix_cache_stats.bytes / 2**20
    finally:
        llm.close()
        cold.close()
    return {"act_s": sum(act_s), "act_rehearse_s": sum(pair_s), "no_reuse_s": sum(nocache_s),
            "ratio": sum(pair_s) / sum(act_s), "ratio_no_reuse": sum(nocache_s) / sum(act_s),
            "ratio_median": statistics.median(p / a for p, a in zip(pair_s, act_s, strict=True)),
            "act_tokens_mean": generated[0] / len(items), "rehearse_tokens_mean": generated[1] / len(items),
            "rehearse_cached_share": cached / max(prompt, 1), "prefix_cache_mb": round(cache_mb, 2)}


def _decoder_costs(items: list[dict[str, Any]], repeats: int, new_tokens: int, model_path: Path) -> dict[str, Any]:
    """Our training decoder: act alone vs act then rehearse on the same cache (the header appended)."""
    import torch

    from worldsmith.envace import (
        ROLE_ACT,
        ROLE_REHEARSE,
        ChatFormat,
        SegmentDecoder,
        Templates,
        environment_prompt,
        load_policy,
    )

    model, tokenizer = load_policy(model_path, device="cpu")
    model.eval()
    fmt = ChatFormat(tokenizer)
    act_s, pair_s, generated = [], [], [0, 0]
    with torch.inference_mode():
        for item in items:
            text = tokenizer.apply_chat_template(item["messages"], tokenize=False, add_generation_prompt=True)
            prompt = fmt.encode(text)
            a, p = [], []
            for _ in range(repeats):
                decoder = SegmentDecoder(model, eos_id=fmt.eos_id, pad_id=fmt.pad_id)
                started = time.perf_counter()
                acted = decoder.generate(decoder.start([prompt]), [0], role=ROLE_ACT, max_new_tokens=new_tokens,
                                         temperature=0.0)[0]
                a.append(time.perf_counter() - started)
                action = fmt.decode(acted).strip().splitlines()[0] if fmt.decode(acted).strip() else "respond()"
                transcript = item["transcript"]
                header = fmt.rehearse_header(environment_prompt(Templates(), transcript.env, transcript.task,
                                                                transcript.all_tools or transcript.tools, action))
                started = time.perf_counter()
                decoder.open_segment(0)
                answered = decoder.generate(decoder.feed([header]), [0], role=ROLE_REHEARSE,
                                            max_new_tokens=new_tokens, temperature=0.0)[0]
                decoder.close_segment(0)
                p.append(a[-1] + time.perf_counter() - started)
            act_s.append(statistics.median(a))
            pair_s.append(statistics.median(p))
            generated[0] += len(acted)
            generated[1] += len(answered)
    return {"act_s": sum(act_s), "act_rehearse_s": sum(pair_s), "ratio": sum(pair_s) / sum(act_s),
            "ratio_median": statistics.median(p / a for p, a in zip(pair_s, act_s, strict=True)),
            "act_tokens_mean": generated[0] / len(items), "rehearse_tokens_mean": generated[1] / len(items)}


def _rehearse_cost(repeats: int, limit: int, model: Path) -> dict[str, Any]:
    _threads()
    items = _transitions(limit)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
    lengths = [len(tokenizer(tokenizer.apply_chat_template(item["messages"], tokenize=False, add_generation_prompt=True),
                             add_special_tokens=False)["input_ids"]) for item in items]
    out: dict[str, Any] = {"model": str(model), "transitions": len(items), "prompt_tokens": {"min": min(lengths), "median":
                           statistics.median(lengths), "max": max(lengths)}}
    for new_tokens in (48, 1):
        out[f"hf_{new_tokens}"] = _backend_costs(items, repeats, new_tokens, model)
        out[f"decoder_{new_tokens}"] = _decoder_costs(items, repeats, new_tokens, model)
    return out


# ---------------------------------------------------------------------------------------------- driver


def _arm(name: str, args: argparse.Namespace) -> dict[str, Any]:
    if name == "ours-grpo":
        result = _ours("grpo", args.steps, args.warmup, args.seed)
    elif name == "ours-joint":
        result = _ours("joint", args.steps, args.warmup, args.seed)
    elif name == "trl-grpo":
        result = _trl(args.steps, args.warmup, args.seed)
    elif name == "rehearse-cost":
        result = _rehearse_cost(args.repeats, args.transitions, args.rehearse_model)
    else:
        raise SystemExit(f"unknown arm {name!r}")
    return {**result, "peak_rss_mb": round(_peak_rss_mb(), 1)}


def _run_child(name: str, args: argparse.Namespace, seed: int) -> dict[str, Any]:
    command = [sys.executable, __file__, "--arm", name, "--steps", str(args.steps), "--warmup", str(args.warmup),
               "--repeats", str(args.repeats), "--transitions", str(args.transitions), "--seed", str(seed),
               "--rehearse-model", str(args.rehearse_model)]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
                          timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"arm {name} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _prompt_tokens_mean() -> float:
    """Mean prompt tokens of the BFCL opening prompts both GRPO arms sample from (each task equally often)."""
    from transformers import AutoTokenizer

    from worldsmith.envace import ChatFormat, Templates, policy_prompt, task_specs, transcript_from_episode
    from worldsmith.traces import Episode, read_traces

    fmt = ChatFormat(AutoTokenizer.from_pretrained(TINY, local_files_only=True))
    episodes = [item for item in read_traces([BFCL]) if isinstance(item, Episode)]
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
    parser.add_argument("--sections", nargs="+", choices=["training", "rehearse"], default=["training", "rehearse"],
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
    if "rehearse" in args.sections:
        results["rehearse_cost"] = _run_child("rehearse-cost", args, args.seed)
    meta = results.setdefault("meta", {})
    meta.update({
        "date": datetime.now(UTC).isoformat(timespec="seconds"), "python": platform.python_version(),
        "platform": platform.platform(), "cpu_count": os.cpu_count(), "threads": os.environ.get("OMP_NUM_THREADS"),
        "torch": torch.__version__, "transformers": transformers.__version__, "trl": trl.__version__,
        "batch": {"tasks": B, "group": G, "new_tokens": NEW_TOKENS, "lr": LR},
    })
    if "training" in args.sections:
        meta["training_args"] = {"steps": args.steps, "warmup": args.warmup, "repeats": args.repeats}
    if "rehearse" in args.sections:
        meta["rehearse_args"] = {"repeats": args.repeats, "transitions": args.transitions}
    for stale in ("steps", "warmup", "repeats"):
        meta.pop(stale, None)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps({k: results.get(k) for k in ("training", "rehearse_cost")}, indent=2))


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# EnvACE on a GPU: train a larger configuration for a few hundred steps, print throughput and memory.
#
#   scripts/gpu_check.sh                 # joint (300 steps) then role-wise GRPO on real BFCL (40 steps)
#   MODEL=/path/to/hf-folder STEPS=500 GRPO_STEPS=60 scripts/gpu_check.sh
#
# Model: $MODEL (a local Hugging Face causal-LM folder with a ChatML tokenizer), else a randomly initialised
# Llama of about 110M parameters built here from the tiny model's tokenizer (nothing is downloaded: the GPU
# machine has no network). Data: the bundled BFCL episodes. bf16 on the GPU. It prints, per phase, steps,
# tokens/s (the trainer's own count), median seconds per step (probes excluded), both roles' losses first -> last, the rehearsal
# fidelity, and peak GPU memory (allocated and reserved); the same as JSON on the last line.
#
# It stops at once, with the reason, where there is no CUDA GPU or torch was built without CUDA.
set -euo pipefail

cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-}"
if [[ -z "$PYTHON" ]]; then
  if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
STEPS="${STEPS:-300}"
GRPO_STEPS="${GRPO_STEPS:-40}"
BATCH="${BATCH:-8}"
OUT="${OUT:-$(mktemp -d -t envace-gpu-XXXXXX)}"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONPATH="lib${PYTHONPATH:+:$PYTHONPATH}"

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check.sh: no NVIDIA GPU here (nvidia-smi is missing or lists no device); run it on a GPU machine." >&2
  exit 2
fi
if ! "$PYTHON" - <<'EOF'
import sys
import torch
if not torch.cuda.is_available():
    sys.exit(f"gpu_check.sh: torch {torch.__version__} sees no CUDA device (CUDA build: {torch.version.cuda}); "
             "install a CUDA build of torch (the default install here is the CPU wheel).")
print(f"GPU: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}")
EOF
then
  exit 2
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

"$PYTHON" - "$OUT" "$STEPS" "$GRPO_STEPS" "$BATCH" "${MODEL:-}" <<'EOF'
import json
import sys
import time
from pathlib import Path

import torch

from worldsmith.envace import EnvACEConfig, Trainer

out, steps, grpo_steps, batch, model = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
repo = Path.cwd()
bfcl = repo / "data_samples" / "collected" / "bfcl.jsonl"
if not model:
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tiny = repo / "data_samples" / "models" / "tiny"
    tokenizer = AutoTokenizer.from_pretrained(tiny, local_files_only=True)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
                         num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=2048,
                         eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"), pad_token_id=tokenizer.pad_token_id,
                         tie_word_embeddings=True)
    torch.manual_seed(0)
    net = LlamaForCausalLM(config)
    model = str(out / "model")
    net.save_pretrained(model, safe_serialization=True)
    tokenizer.save_pretrained(model)
    print(f"model: random-init Llama, {sum(p.numel() for p in net.parameters()) / 1e6:.1f}M parameters -> {model}")
    del net

phases = {
    "joint": {"objective": "joint", "steps": steps, "batch_size": batch, "lr": 3e-4, "warmup_steps": 20,
              "probe": {"every": max(1, steps // 3), "n_transitions": 16, "holdout": 1}},
    "grpo": {"objective": "grpo", "steps": grpo_steps, "batch_size": max(1, batch // 4), "lr": 1e-5,
             "rollout_source": "real", "grpo": {"group_size": 4, "max_new_tokens": 48, "max_steps": 4},
             "probe": {"every": 0, "n_transitions": 8, "holdout": 1}},
}
results = {}
for name, options in phases.items():
    torch.cuda.reset_peak_memory_stats()
    raw = {"model": model, "data": {"paths": [str(bfcl)], "env": "bfcl", "max_seq_len": 1024}, "device": "cuda",
           "dtype": "bfloat16", "seed": 0, "out": str(out / name), **options}
    started = time.perf_counter()
    summary = Trainer(EnvACEConfig.from_dict(raw)).train(resume=False)
    wall = time.perf_counter() - started
    rows = [json.loads(line) for line in (out / name / "metrics.jsonl").read_text().splitlines()]
    timed = sorted(row["time_s"] for row in rows[len(rows) // 10:])  # past the first tenth (warm-up, compilation)
    result = {
        "steps": summary.steps, "tokens_per_s": summary.tokens_per_s,
        "s_per_step": timed[len(timed) // 2], "wall_s": round(wall, 1),
        "act_loss": [summary.act_loss_first, summary.act_loss_last],
        "rehearse_loss": [summary.rehearse_loss_first, summary.rehearse_loss_last],
        "rehearsal_fidelity": summary.rehearsal_fidelity, "reward": [summary.reward_first, summary.reward_last],
        "peak_allocated_gib": round(torch.cuda.max_memory_allocated() / 2**30, 3),
        "peak_reserved_gib": round(torch.cuda.max_memory_reserved() / 2**30, 3),
    }
    results[name] = result
    print(f"{name:>5}: {result['steps']} steps, {result['tokens_per_s']} tokens/s, {result['s_per_step']} s/step, "
          f"act loss {result['act_loss'][0]} -> {result['act_loss'][1]}, rehearse loss {result['rehearse_loss'][0]} -> "
          f"{result['rehearse_loss'][1]}, fidelity {result['rehearsal_fidelity']}, peak GPU memory "
          f"{result['peak_allocated_gib']} GiB allocated / {result['peak_reserved_gib']} GiB reserved", flush=True)
results["device"] = torch.cuda.get_device_name(0)
results["torch"] = torch.__version__
print(json.dumps(results))
EOF

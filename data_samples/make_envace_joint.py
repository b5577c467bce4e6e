"""Rebuild the bundled joint-supervised EnvACE checkpoint (data_samples/models/tiny-envace-joint).

    OMP_NUM_THREADS=1 .venv/bin/python data_samples/make_envace_joint.py   # [--out DIR] [--steps N] [--keep K]

Role-wise GRPO needs a policy that already emits well-formed calls and answers: from the bundled tiny
model (trained on plain traces) almost every rollout scores zero and the groups carry no signal. This
runs `configs/envace_tiny.yaml` for `--steps` optimizer steps (cosine schedule over all of them) and
keeps the weights at step `--keep`, half way, where both roles' cross-entropies are low but not yet
memorised (`configs/envace_grpo_tiny.yaml` starts from it). About four minutes on one core;
deterministic for a thread count. Weights are stored in bfloat16 (half the size; the trainer loads
them in float32 on CPU); the optimizer and RNG state are left out: GRPO starts a fresh optimizer.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from worldsmith.envace import EnvACEConfig, Trainer  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# copied beside the bf16 weights (save_pretrained writes the model files); optimizer, RNG and trainer state stay behind
KEPT_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "envace_config.json")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE / "models" / "tiny-envace-joint")
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "envace_tiny.yaml")
    parser.add_argument("--steps", type=int, default=400, help="length of the joint run (sets the cosine schedule)")
    parser.add_argument("--keep", type=int, default=200, help="the step whose weights are bundled")
    args = parser.parse_args(argv)
    if not 0 < args.keep <= args.steps:
        parser.error(f"--keep {args.keep} must lie in 1..--steps ({args.steps})")

    import torch
    from transformers import AutoModelForCausalLM

    with tempfile.TemporaryDirectory() as tmp:
        config = EnvACEConfig.from_file(args.config).with_overrides(
            {"steps": args.steps, "checkpoint_every": args.keep, "keep_checkpoints": args.steps // args.keep + 1})
        def progress(row: dict) -> None:
            if row.get("step", 0) % 50 == 0:
                print(f"step {row.get('step')}/{args.steps}", file=sys.stderr, flush=True)

        summary = Trainer(config, out=Path(tmp) / "run", progress=progress).train().to_json()
        summary = {key: value for key, value in summary.items()
                   if key.endswith(("_first", "_last")) or key in ("steps", "rehearsal_fidelity", "fingerprint")}
        source = Path(tmp) / "run" / "checkpoints" / f"step-{args.keep}"
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=args.out.parent))
        try:
            for name in KEPT_FILES:
                if (source / name).exists():
                    shutil.copyfile(source / name, staging / name)
            model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
            model.to(torch.bfloat16).save_pretrained(staging, safe_serialization=True)
            record = {"made_by": "data_samples/make_envace_joint.py", "config": str(args.config.relative_to(ROOT))
                      if args.config.is_relative_to(ROOT) else str(args.config), "steps": args.steps,
                      "kept_step": args.keep, "whole_run": summary}
            (staging / "worldsmith_envace_joint.json").write_text(json.dumps(record, indent=1), encoding="utf-8")
            os.chmod(staging, 0o755)  # mkdtemp makes it private; the bundle is ordinary repository data
            for path in staging.iterdir():
                os.chmod(path, 0o644)
            if args.out.exists():
                shutil.rmtree(args.out)
            staging.rename(args.out)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

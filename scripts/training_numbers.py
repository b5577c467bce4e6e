"""Print the numbers three small seeded training runs produce, to check that a refactor of the training code
keeps them bit-identical: a joint supervised EnvACE run, a GRPO run (real BFCL rollouts when bfcl-eval is
installed, else imagined ones) and `train_tiny` on the bundled samples.

    python scripts/training_numbers.py [--out numbers.json]

Every loss, gradient norm, learning rate and reward row, and a SHA-256 of the saved weights, as one JSON
document; run it before and after a change and diff the two.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "envace"))
sys.path.insert(0, str(REPO / "tests" / "llm"))

_VOLATILE = ("time_s", "tokens_per_s", "saved")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _envace(out: Path, **fields: Any) -> dict[str, Any]:
    from envace_support import small_config

    from worldsmith.envace.trainer import Trainer
    from worldsmith.envace.training_runs import TrainingRunStore

    summary = Trainer(small_config(out, **fields)).train().to_json()
    rows = [{key: value for key, value in row.items() if key not in _VOLATILE}
            for row in TrainingRunStore(out).metrics()]
    losses = {key: summary[key] for key in ("act_loss_first", "act_loss_last", "rehearse_loss_first",
                                           "rehearse_loss_last", "rehearsal_fidelity", "reward_first",
                                           "reward_last")}
    return {"rows": rows, "summary": losses, "weights": _sha(Path(summary["checkpoint"]) / "model.safetensors")}


def _tiny(out: Path) -> dict[str, Any]:
    from test_tiny import SMALL, sample_traces

    from worldsmith import Workspace
    from worldsmith.llm.tiny import train_tiny

    workspace = Workspace(out / "ws")
    workspace.ingest(sample_traces(), "samples")
    report = train_tiny(list(workspace.dataset("samples").iter_episodes()), out / "tiny", config=SMALL)
    return {"losses": report.losses, "last_loss": report.last_loss, "data": report.data,
            "weights": _sha(out / "tiny" / "model.safetensors")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="also write the numbers to this JSON file")
    args = parser.parse_args()
    from worldsmith.envs import available

    source = "real" if available("bfcl") else "imagined"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        numbers = {
            "joint": _envace(root / "joint", steps=4, checkpoint_every=2, **{"probe.every": 2}),
            "grpo": _envace(root / "grpo", objective="grpo", steps=2, batch_size=1, rollout_source=source,
                            **{"grpo.reward": "shaped", "grpo.group_size": 3, "grpo.sft_coef": 0.5, "grpo.kl_coef": 0.05, "grpo.updates_per_batch": 2,
                               "grpo.log_alignment": True}),
            "tiny": _tiny(root),
        }
    text = json.dumps(numbers, indent=1, sort_keys=True)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

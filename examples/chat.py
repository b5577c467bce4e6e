"""The same eight lines for every backend: python examples/chat.py SPEC [WORKSPACE]  (tiny:, hf:, vllm:, openai:)."""
import sys

from worldsmith.llm import open_llm

llm = open_llm(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None, component="example")
messages = [{"role": "user", "content": "You are in a kitchen. You see a fridge. > open fridge"}]
first, second = llm.chat(messages, max_tokens=24)[0], llm.chat(messages, max_tokens=24)[0]
print(repr(first.text), f"usage {first.prompt_tokens}+{first.completion_tokens} tokens, {first.latency_s:.2f}s")
print(f"model calls: {llm.model_calls}; second call from the cache: {second.cached}")
llm.close()

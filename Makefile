# lmbench: Bengio et al. (2003) reproduced. `make install`, then `make test` / `make reproduce-brown`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# This machine's CPU build of PyTorch; on a GPU machine, install your own torch into the venv first
# (or set TORCH_SPEC): a torch that already imports is left alone.
TORCH_SPEC ?= torch==2.13.0

# The corpora beside the checkout, when they are there and the variables are unset.
ifneq ($(wildcard ../shared/nltk_data),)
NLTK_DATA ?= $(abspath ../shared/nltk_data)
export NLTK_DATA
endif
ifneq ($(wildcard ../shared/corpora/ap89),)
AP_DIR ?= $(abspath ../shared/corpora/ap89)
export AP_DIR
endif

.PHONY: install test bench reproduce-brown reproduce-ap

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

test: install
	$(PY) -m pytest -q

# Benchmarks print figures (speed is never a timed test).
bench: install
	$(PY) bench/ngram_bench.py
	$(PY) bench/cluster_bench.py
	$(PY) bench/nplm_bench.py

# The paper's tables end to end; QUICK=1 runs the same pipeline on a small slice in a few minutes,
# SKIP=nplm leaves out the rows of a kind (listed as not run).
reproduce-brown: install
	$(PY) -m lmbench.cli reproduce brown $(if $(QUICK),--quick) $(if $(SKIP),--skip $(SKIP))

reproduce-ap: install
	$(PY) -m lmbench.cli reproduce ap $(if $(QUICK),--quick) $(if $(SKIP),--skip $(SKIP))

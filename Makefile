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

bench: install
	@echo "make bench: not built yet (the n-gram and NPLM benchmarks come with their issues)"; exit 1

reproduce-brown: install
	@echo "make reproduce-brown: not built yet (needs the baselines, the NPLM and the reports)"; exit 1

reproduce-ap: install
	@echo "make reproduce-ap: not built yet (needs the baselines, the NPLM and the reports)"; exit 1

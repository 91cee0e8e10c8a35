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

# A variable's value as one word of the shell, whatever it holds (spaces, quotes, `$`): $(call quote,TRAIN).
quote = '$(subst ','\'',$(value $(1)))'

.PHONY: install test test-fast bench bench-scale bench-infinigram reproduce-brown reproduce-ap compare report-check

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

# Everything (CI too: .ci/run); test-fast leaves out the tests marked slow, for everyday work. Both run
# one test process per core, at most 4 (pytest-xdist; the Brown tests share one, tests/conftest.py).
# Python keeps its compiled modules (__pycache__, ignored by git) for the tests even where
# PYTHONDONTWRITEBYTECODE is set: each test process then collects in about 7.5 s instead of 11.5 s.
PARALLEL ?= -n auto --maxprocesses 4 --dist loadgroup
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -q
# The tests that compare figures saved on one machine (committed results, claims, pinned scores, older
# checkpoints) with figures computed on this one, run a second time under another instruction set: torch's
# and numpy's plain SSE kernels instead of AVX2/AVX-512, whose sums round differently. A test that compares
# such floats bit for bit fails here before it fails on a user's machine (docs/development.md).
SAVED_FIGURE_TESTS := tests/test_checkpoint_formats.py tests/test_intervals.py tests/test_pinned_scores.py \
	tests/test_quoted_figures.py tests/test_summary.py tests/test_schema.py tests/test_figure_layout.py
OTHER_ISA := ATEN_CPU_CAPABILITY=default NPY_DISABLE_CPU_FEATURES="X86_V3 X86_V4 AVX512_ICL AVX512_SPR"
test: install
	$(PYTEST) $(PARALLEL)
	env $(OTHER_ISA) $(PYTEST) $(PARALLEL) $(SAVED_FIGURE_TESTS)

test-fast: install
	$(PYTEST) -m "not slow" $(PARALLEL)

# Benchmarks print figures (speed is never a timed test).
bench: install
	$(PY) bench/ngram_bench.py
	$(PY) bench/cluster_bench.py
	$(PY) bench/nplm_bench.py
	$(PY) bench/parallel_bench.py
	$(PY) bench/pipeline_bench.py
	$(PY) bench/bootstrap_bench.py

# Interpolated KN 5 from 1M to ~100M training tokens (AP 1989's train, then text sampled from a KN 4-gram
# of it): peak memory and time per stage, in memory and in bounded memory (--memory); then the
# infini-gram's index and scoring (bench/infinigram_bench.py, on permuted copies). Not in CI: it runs
# long, and the bounded build's files take about 110 bytes of temporary disk per training token (3 GB at
# 28M tokens). TOKENS="1000000 14000000 100000000" MEMORY=600M TMP_DIR=DIR;
# PERMUTED=1 extends AP by permuted copies of it instead of sampled text (built in seconds).
bench-scale: install
	$(PY) bench/scale_bench.py $(if $(TOKENS),--tokens $(TOKENS)) $(if $(MEMORY),--memory $(MEMORY)) \
		$(if $(TMP_DIR),--tmp-dir $(call quote,TMP_DIR)) $(if $(PERMUTED),--permuted)
	$(PY) bench/infinigram_bench.py $(if $(TOKENS),--tokens $(TOKENS)) $(if $(TMP_DIR),--tmp-dir $(call quote,TMP_DIR))

# The infini-gram's index (build seconds, peak GB, bytes per token) and scoring speed, 1M to ~100M
# tokens of AP 1989's train extended by permuted copies (bench-scale runs it too); TOKENS=, TMP_DIR=.
bench-infinigram: install
	$(PY) bench/infinigram_bench.py $(if $(TOKENS),--tokens $(TOKENS)) $(if $(TMP_DIR),--tmp-dir $(call quote,TMP_DIR))

# The paper's tables end to end; QUICK=1 runs the same pipeline on a small slice in under a minute,
# SKIP=network leaves out the rows of a kind (listed as not run); EXTRA=energy adds the named optional
# row groups (brown: energy, section 5.1's energy network, about 20 minutes more); SEEDS=3 trains every
# network under 3 seeds (mean and sd, every seed's figure; 3 times the networks' time; SEEDS_FOR=nplm-ours,lstm: those rows only); THREADS=1 sets the
# networks' CPU threads (default: the cores not busy at the start, docs/parallel.md); NETWORKS=gru trains only
# the named network rows (the table's others listed as not run; a family beyond 2003 named adds its group: a
# sibling of a committed report, docs/reproducing.md); BUDGET=80m (BUDGET_FLOPS=, BUDGET_RULE=) trains them under
# a compute budget as `make compare` does (default: none, every recipe to its end); JOBS=2 runs rows at once
# on an embedded Ray (CLUSTER=HOST:6379: a Ray cluster's, docs/parallel.md); PRECISION=auto (bf16 products where
# native, neural/precision.py). The report goes to runs/reports/brown (ignored by git); REPORT_DIR=results/brown
# rebuilds the committed one.
reproduce-brown: install
	$(PY) -m lmbench_cli reproduce brown $(if $(QUICK),--quick) $(if $(REPORT_DIR),--report-dir $(call quote,REPORT_DIR)) $(if $(SKIP),--skip $(SKIP)) $(if $(EXTRA),--extra $(EXTRA)) $(if $(SEEDS),--seeds $(SEEDS))$(if $(SEEDS_FOR), --seeds-for $(SEEDS_FOR)) $(if $(THREADS),--threads $(THREADS)) \
		$(if $(NETWORKS),--networks $(NETWORKS)) $(if $(BUDGET),--budget $(BUDGET)) $(if $(BUDGET_FLOPS),--budget-flops $(BUDGET_FLOPS)) $(if $(BUDGET_RULE),--budget-rule $(BUDGET_RULE)) \
		$(if $(JOBS),--jobs $(JOBS)) $(if $(CLUSTER),--cluster $(CLUSTER)) $(if $(PRECISION),--precision $(PRECISION))

reproduce-ap: install
	$(PY) -m lmbench_cli reproduce ap $(if $(QUICK),--quick) $(if $(REPORT_DIR),--report-dir $(call quote,REPORT_DIR)) $(if $(SKIP),--skip $(SKIP)) $(if $(EXTRA),--extra $(EXTRA)) $(if $(SEEDS),--seeds $(SEEDS))$(if $(SEEDS_FOR), --seeds-for $(SEEDS_FOR)) $(if $(THREADS),--threads $(THREADS)) \
		$(if $(NETWORKS),--networks $(NETWORKS)) $(if $(BUDGET),--budget $(BUDGET)) $(if $(BUDGET_FLOPS),--budget-flops $(BUDGET_FLOPS)) $(if $(BUDGET_RULE),--budget-rule $(BUDGET_RULE)) \
		$(if $(JOBS),--jobs $(JOBS)) $(if $(CLUSTER),--cluster $(CLUSTER)) $(if $(PRECISION),--precision $(PRECISION))

# The same comparison on your own corpus: make compare TRAIN=a.txt VALID=b.txt TEST=c.txt, or one file cut
# by lines, make compare CORPUS=all.txt [SPLIT=0.8,0.1,0.1]; [NAME=mine] [NETWORKS=mlp1,mlp9] [ONLY=ngram]
# [MIN_COUNT=2: the default, 1 where train has <unk>] [VOCAB_SIZE=10000] [QUICK=1] [SEEDS=3] [SEEDS_FOR=lstm]
# [THREADS=1] [JOBS=3: rows at once, on an embedded Ray] [CLUSTER=HOST:6379: a Ray cluster's] [MEMORY=4G] [TMP_DIR=DIR] [SKIP=network] [PRECISION=auto: bf16 products where native, neural/precision.py]
# [EXTRA=...: the text table has no optional group; NETWORKS=default,rnn adds a network to the default ones]
# [BUDGET=20m: the whole run's wall time, shared among the network rows by BUDGET_RULE (default none: every
# recipe to its end); results/NAME/results.json: the updates it recorded] [BUDGET_FLOPS=1e15: FLOPs per network row]
# [BUDGET_RULE=complete: the default, as many networks to their recipe's end as fit, the quickest first, the others
# the same share of theirs; recipe: the same share of each network's recipe; flops: equal training FLOPs per network];
# the report goes to runs/reports/NAME (default runs/reports/text; git ignores runs/; REPORT_DIR=DIR elsewhere).
compare: install
	@test -n $(call quote,CORPUS) -o \( -n $(call quote,TRAIN) -a -n $(call quote,VALID) -a -n $(call quote,TEST) \) || { echo "compare: give CORPUS= (one file, cut by lines), or TRAIN=, VALID= and TEST= (files of whitespace-separated tokens)" >&2; exit 2; }
	$(PY) -m lmbench_cli reproduce text $(if $(CORPUS),--corpus-file $(call quote,CORPUS) $(if $(SPLIT),--corpus-split $(SPLIT)),--train $(call quote,TRAIN) --valid $(call quote,VALID) --test $(call quote,TEST)) $(if $(NAME),--name $(call quote,NAME)) \
		$(if $(NETWORKS),--networks $(NETWORKS)) $(if $(ONLY),--only $(ONLY)) $(if $(QUICK),--quick) \
		$(if $(MIN_COUNT),--min-count $(MIN_COUNT)) $(if $(VOCAB_SIZE),--vocab-size $(VOCAB_SIZE)) \
		$(if $(MEMORY),--memory $(MEMORY)) $(if $(TMP_DIR),--tmp-dir $(call quote,TMP_DIR)) $(if $(SEEDS),--seeds $(SEEDS))$(if $(SEEDS_FOR), --seeds-for $(SEEDS_FOR)) $(if $(THREADS),--threads $(THREADS)) $(if $(JOBS),--jobs $(JOBS)) $(if $(CLUSTER),--cluster $(CLUSTER)) $(if $(PRECISION),--precision $(PRECISION)) \
		$(if $(BUDGET),--budget $(BUDGET)) $(if $(BUDGET_FLOPS),--budget-flops $(BUDGET_FLOPS)) $(if $(BUDGET_RULE),--budget-rule $(BUDGET_RULE)) \
		$(if $(REPORT_DIR),--report-dir $(call quote,REPORT_DIR)) $(if $(SKIP),--skip $(SKIP)) $(if $(EXTRA),--extra $(EXTRA))

# Render the Brown report in headless Chromium (not installed by `make install`: `apt-get install -y
# chromium`, or set CHROMIUM) and fail unless a screenshot of the whole page comes out (reports/building/page_check.py:
# the page's height measured first); it is left in build/ to look at.
CHROMIUM ?= chromium
REPORT_HTML ?= results/brown/report.html
REPORT_SHOT := build/report-check.png

report-check:
	$(PY) -m reports.building.page_check $(call quote,REPORT_HTML) $(REPORT_SHOT) --chromium $(CHROMIUM)

# Two commands do all set-up on a fresh machine:
#   make demo   train a small NPLM on the Brown corpus, evaluate, generate, save and reload it
#   make test   the test suite
# Both create .venv, install the CPU torch wheel and the package, and fetch the corpora into
# $(HF_NLM_DATA) (outside git) first.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
HF_NLM_DATA ?= $(HOME)/.cache/hf_nlm
TORCH_PIN ?= torch==2.13.0
export HF_NLM_DATA
# Run time never touches the Hub: models, tokenizers and metrics load from local folders.
OFFLINE := HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

.PHONY: install data demo test lint benchmarks clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# The CPU wheel first: the package's own torch range then installs nothing more.
	$(PY) -m pip install --quiet "$(TORCH_PIN)"
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

install: $(VENV)/.installed

data: install
	$(VENV)/bin/hf-nlm download brown ptb sotu

demo: data
	$(OFFLINE) $(PY) examples/demo.py

# A registry hiccup must not fail the suite: the tests that need a real corpus skip without it.
test: install
	$(VENV)/bin/hf-nlm download brown ptb sotu || echo "WARNING: corpora not fetched; the tests that need them will skip"
	$(OFFLINE) $(PY) -m pytest -q

lint: install
	$(VENV)/bin/ruff check hf_nlm tests examples benchmarks

benchmarks: data
	$(OFFLINE) $(PY) benchmarks/train_throughput.py --quick

clean:
	rm -rf $(VENV) demo-output .pytest_cache

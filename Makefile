# Two commands do all set-up on a fresh machine:
#   make demo   train a small NPLM on the Brown corpus, compare it with a Kneser-Ney 5-gram, generate, save and reload it
#   make test   the documentation site (mkdocs build --strict, into a temporary folder), ruff, then the test suite
# and after `make demo`, `make app` serves the web demo over its model (http://127.0.0.1:7860).
# Both create .venv, install the CPU torch wheel and the package with the exact versions of
# constraints.txt (the lock the suite passed with), and fetch the corpora into $(HF_NLM_DATA)
# (outside git) first.
#
#   make test-latest   the suite in a fresh .venv-latest with the newest releases pyproject.toml allows
#   make test-oldest   the suite in a fresh .venv-oldest with the lowest versions it allows (floors)
#   make lock          rewrite constraints.txt from the newest releases (then run make test, commit)
#   make browser       install Debian's chromium and chromium-driver (apt-get, as root or with sudo) for
#                      the web demo's browser test. .ci/run calls it; make test never does.
#   make compiler      install Debian's g++ (apt-get, as root or with sudo), with which the suites build KenLM's
#                      Python module from PyPI's source. browser and compiler are the only targets that change
#                      the machine. The suites run with HF_NLM_REQUIRE_DATA=1: a test whose corpus or tool is
#                      missing fails with its reason (plain pytest skips it), and a fetch that fails 4 times
#                      fails the target.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
HF_NLM_DATA ?= $(HOME)/.cache/hf_nlm
TORCH_PIN ?= torch==2.13.0
UV_PIN ?= uv==0.13.9
LOCK := constraints.txt
export HF_NLM_DATA
# The documentation site built with every warning an error, into a temporary folder (site/ is never written):
# $(call BUILD_DOCS,VENV).
BUILD_DOCS = site=$$(mktemp -d) && $(1)/bin/mkdocs build --strict --quiet --site-dir "$$site"; \
	status=$$?; rm -rf "$$site"; exit $$status
# The corpora the suites need, fetched into $(HF_NLM_DATA) by $(call FETCH_CORPORA,VENV): 4 tries, 10, 30 and
# 90 s apart, then the target fails. A corpus already complete there is not fetched again (a few seconds).
CORPORA := brown ptb sotu
FETCH_CORPORA = for pause in 10 30 90 none; do $(1)/bin/hf-nlm download $(CORPORA) && exit 0; \
	[ "$$pause" = none ] && break; echo "hf-nlm download failed; trying again in $$pause s" >&2; \
	sleep $$pause; done; echo "ERROR: hf-nlm download $(CORPORA) failed 4 times" >&2; exit 1
# KenLM's Python module (tests/ngram/test_kenlm.py), built from PyPI's source package by pip (cmake comes
# from PyPI; the C++ compiler is the machine's: `make compiler` installs Debian's g++). No dependency of
# hf-nlm: the suites install it, and fail where it does not build.
KENLM_PIN ?= kenlm==0.3.0
INSTALL_KENLM = $(1)/bin/python -m pip install --quiet "$(KENLM_PIN)" || { echo "ERROR: pip could not \
	install $(KENLM_PIN), built from source here: it needs a C++ compiler (make compiler)" >&2; exit 1; }
# The suites' tests fail, not skip, where a corpus or tool they need is missing (tests/required_data.py).
REQUIRE := HF_NLM_REQUIRE_DATA=1
# Run time never touches the Hub: models, tokenizers and metrics load from local folders.
OFFLINE := HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# The versions that decide whether we work, printed before each suite.
SHOW_VERSIONS := import importlib.metadata as m; print('  '.join(f'{p}=={m.version(p)}' for p in ('torch', \
	'transformers', 'tokenizers', 'huggingface_hub', 'datasets', 'accelerate', 'evaluate', 'safetensors', \
	'numpy', 'pyarrow', 'matplotlib', 'sacrebleu', 'pytest')))

.PHONY: install data demo app test test-latest test-oldest lock lint benchmarks browser compiler clean

$(VENV)/.installed: pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# The CPU wheel first: the package's own torch range then installs nothing more.
	$(PY) -m pip install --quiet -c $(LOCK) "$(TORCH_PIN)"
	$(PY) -m pip install --quiet -c $(LOCK) -e ".[dev]"
	touch $@

install: $(VENV)/.installed

data: install
	$(call FETCH_CORPORA,$(VENV))

demo: data
	$(OFFLINE) $(PY) examples/demo.py

app: install
	$(OFFLINE) $(VENV)/bin/hf-nlm app demo-output/nplm-brown

# The web demo's browser test drives headless Chromium: Debian's packages, through apt-get as root or with sudo.
# Only this target and `compiler` install anything outside the repository (make test never calls them); without
# Chromium the test skips saying why, and fails saying why under make test.
APT_GET := $(if $(filter 0,$(shell id -u)),,sudo -n) apt-get -y -q --no-install-recommends
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	{ $(APT_GET) install chromium chromium-driver >/dev/null 2>&1 || \
	  { $(APT_GET) update >/dev/null 2>&1 && $(APT_GET) install chromium chromium-driver >/dev/null 2>&1; } || \
	  echo "WARNING: apt-get could not install chromium and chromium-driver; the browser test will fail"; }

# Debian's g++, which pip needs to build KenLM's Python module from its source package (the suites build it).
compiler:
	@command -v g++ >/dev/null || \
	{ $(APT_GET) install g++ >/dev/null 2>&1 || \
	  { $(APT_GET) update >/dev/null 2>&1 && $(APT_GET) install g++ >/dev/null 2>&1; } || \
	  echo "WARNING: apt-get could not install g++; KenLM's Python module will not build and make test fails"; }

$(VENV)/.kenlm: $(VENV)/.installed
	$(call INSTALL_KENLM,$(VENV))
	touch $@

# Nothing missing passes quietly: corpora that cannot be fetched fail the target, and under $(REQUIRE) a test
# whose corpus or tool (KenLM, Chromium, make, mkdocs) is missing fails with the reason it would skip with.
test: install $(VENV)/.kenlm
	$(call FETCH_CORPORA,$(VENV))
	@$(PY) -c "$(SHOW_VERSIONS)"
	$(call BUILD_DOCS,$(VENV))
	$(VENV)/bin/ruff check .
	$(OFFLINE) $(REQUIRE) $(PY) -m pytest -q

# A fresh venv each time: what a new user's `pip install hf-nlm` resolves today (torch stays the CPU wheel).
test-latest:
	rm -rf .venv-latest
	$(PYTHON) -m venv .venv-latest
	.venv-latest/bin/python -m pip install --quiet --upgrade pip
	.venv-latest/bin/python -m pip install --quiet "$(TORCH_PIN)"
	# torch named again: an eager upgrade would otherwise replace the CPU wheel by a newer (CUDA) build.
	.venv-latest/bin/python -m pip install --quiet --upgrade --upgrade-strategy eager "$(TORCH_PIN)" -e ".[dev]"
	$(call INSTALL_KENLM,.venv-latest)
	$(call FETCH_CORPORA,.venv-latest)
	@.venv-latest/bin/python -c "$(SHOW_VERSIONS)"
	$(call BUILD_DOCS,.venv-latest)
	$(OFFLINE) $(REQUIRE) .venv-latest/bin/python -m pytest -q -p no:cacheprovider

# The floors of pyproject.toml's ranges (uv's lowest-direct resolution; torch stays the CPU wheel).
test-oldest:
	rm -rf .venv-oldest
	$(PYTHON) -m venv .venv-oldest
	.venv-oldest/bin/python -m pip install --quiet --upgrade pip "$(UV_PIN)"
	echo "$(TORCH_PIN)" | .venv-oldest/bin/uv pip compile pyproject.toml - --extra dev --resolution lowest-direct \
		--python .venv-oldest/bin/python --no-header --quiet -o .venv-oldest/oldest.txt
	.venv-oldest/bin/python -m pip install --quiet "$(TORCH_PIN)"
	.venv-oldest/bin/python -m pip install --quiet -c .venv-oldest/oldest.txt -e ".[dev]"
	$(call INSTALL_KENLM,.venv-oldest)
	$(call FETCH_CORPORA,.venv-oldest)
	@.venv-oldest/bin/python -c "$(SHOW_VERSIONS)"
	$(call BUILD_DOCS,.venv-oldest)
	$(OFFLINE) $(REQUIRE) .venv-oldest/bin/python -m pytest -q -p no:cacheprovider

# The lock: every package `make test` installs, at the newest release the ranges allow (torch at the CPU wheel).
lock:
	rm -rf .venv-lock
	$(PYTHON) -m venv .venv-lock
	.venv-lock/bin/python -m pip install --quiet --upgrade pip "$(UV_PIN)"
	echo "$(TORCH_PIN)" | .venv-lock/bin/uv pip compile pyproject.toml - --extra dev \
		--python .venv-lock/bin/python --no-header --quiet -o $(LOCK).new
	{ echo "# The exact versions \`make test\` and \`make demo\` install (pip install -c $(LOCK) ...)."; \
	  echo "# Regenerate with \`make lock\`, then run \`make test\` and commit both."; \
	  cat $(LOCK).new; } > $(LOCK)
	rm -rf $(LOCK).new .venv-lock

lint: install
	$(VENV)/bin/ruff check .

benchmarks: data
	$(OFFLINE) $(PY) benchmarks/train_throughput.py --quick

clean:
	rm -rf $(VENV) .venv-latest .venv-oldest .venv-lock demo-output .pytest_cache site

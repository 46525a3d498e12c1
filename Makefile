# bigworld: every target sets itself up on first use.
#   make install   create .venv (if missing) and install the project, once
#   make demo      the whole loop for ten minutes on the embedded default, then a report
#   make serve     run the world server on the embedded default (SQLite in ./bigworld-data)
#   make interop   install the interop extra (OpenEnv's client and server library) into .venv
#   make test      ruff (lint and format), mypy on the packages, then the fast tier of the tests
#   make test-all  make test, then the slow tier (learning, crash under load, scale-out); CI runs it
#   make bench     run the benchmarks in bench/
#   make clean     remove the virtual environment and caches (never the world's data)

VENV   := .venv
PYTHON := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
INTEROP := $(VENV)/.interop

.PHONY: install interop demo serve test test-all bench clean

install: $(STAMP)

# Reinstalls when pyproject.toml changes. Without a GPU, torch comes first as the CPU build
# (pip finds torch==2.13.0 on the machine's disk); otherwise '.[agents]' brings the CUDA one.
$(STAMP): pyproject.toml
	test -x $(PYTHON) || python3 -m venv $(VENV)
	if ! command -v nvidia-smi >/dev/null 2>&1; then \
		$(PYTHON) -m pip install --quiet torch==2.13.0; \
	fi
	$(PYTHON) -m pip install --quiet -e '.[dev,agents]'
	touch $(STAMP)

# The trainers' libraries ('.[interop]'), pinned; the constraints keep the torch that install
# chose, so nothing here swaps in a CUDA build. install and demo never need them.
interop: $(INTEROP)

$(INTEROP): $(STAMP) pyproject.toml cpu-constraints.txt
	$(PYTHON) -m pip install --quiet -c cpu-constraints.txt -e '.[interop]'
	touch $(INTEROP)

demo: install
	$(VENV)/bin/bigworld demo

serve: install
	$(VENV)/bin/bigworld serve

# The dashboard test drives Debian's headless Chromium; install it where it is missing.
test: install interop
	command -v chromium >/dev/null 2>&1 || apt-get install -y -q chromium >/dev/null \
		|| (apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/pytest -q -n auto -m "not slow"

# The slow tier runs one test at a time: its learning runs time themselves against the wall
# clock and take every core they are given.
test-all: test
	$(VENV)/bin/pytest -q -m slow

# The CPU benchmarks; bench/gpu_check.py needs a CUDA GPU and runs only where there is one.
bench: install interop
	for script in bench/world_bench.py bench/server_bench.py bench/agents_bench.py bench/scoring_bench.py \
		bench/history_bench.py bench/openenv_bench.py; do \
		$(PYTHON) "$$script" || exit 1; \
	done
	if command -v nvidia-smi >/dev/null 2>&1; then $(PYTHON) bench/gpu_check.py; fi

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache .mypy_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

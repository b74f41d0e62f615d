# familiar: `make run` starts the daemon, `make test` runs everything CI runs.
# Both create or update .venv first; nothing here reads stdin.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PIP    := $(BIN)/python -m pip --no-input --disable-pip-version-check

.DEFAULT_GOAL := help
.PHONY: help venv run test test-fast lint docs docs-reference bench deps-system clean

help:
	@echo "make run          create/update $(VENV), then run the gateway in the foreground"
	@echo "                  (FAMILIAR_HOME from the environment, default ~/.familiar)"
	@echo "make test         ruff, ruff format --check, mypy, lint-imports, the docs site, pytest (what CI runs)"
	@echo "make test-fast    pytest -m 'not slow'"
	@echo "make docs         build the docs site into $(SITE)/ (mkdocs build --strict)"
	@echo "make docs-reference  regenerate docs/configuration-reference.md from the config models"
	@echo "make bench        benchmarks in tests/bench"
	@echo "make deps-system  as root on apt systems: install systemd-analyze and bubblewrap for the tests"
	@echo "PYTHON=...        interpreter for the venv (>= 3.11; default python3)"

venv: $(STAMP)

# Reinstall only when pyproject.toml is newer than the stamp. The venv is rebuilt
# when its interpreter is missing, broken or older than 3.11.
$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
	  echo "familiar needs Python >= 3.11, but '$(PYTHON)' is $$($(PYTHON) -V 2>/dev/null || echo "not installed")."; \
	  echo "Install one and run e.g.: make $(MAKECMDGOALS) PYTHON=python3.11"; exit 1; }
	@if ! $(BIN)/python -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then \
	  echo "creating $(VENV) with $$($(PYTHON) -V)"; \
	  $(PYTHON) -m venv --clear $(VENV) || { \
	    echo "could not create $(VENV): on Debian/Ubuntu install python3-venv"; exit 1; }; \
	fi
	$(PIP) install -e '.[dev]'
	@touch $(STAMP)

run: $(STAMP)
	exec $(BIN)/familiar gateway

# Most tests wait on subprocesses, sockets and timers rather than the CPU, so three
# workers fit two cores; a file's tests stay on one worker (--dist loadfile).
PYTEST_WORKERS ?= 3

test: deps-system lint docs
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadfile

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# The docs site (mkdocs.yml): strict, so a broken link or anchor, or a page missing from
# the navigation, fails the build (never --quiet: it hides the warnings strict counts).
SITE ?= .site

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir $(SITE)

docs-reference: $(STAMP)
	$(BIN)/python -m gateway.config_reference --output docs/configuration-reference.md

test-fast: $(STAMP)
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadfile -m "not slow"

bench: $(STAMP)
	$(BIN)/python -m tests.bench.bench_throughput
	$(BIN)/python -m tests.bench.bench_schedules
	$(BIN)/python -m tests.bench.bench_slack
	$(BIN)/python -m tests.bench.bench_control
	$(BIN)/python -m tests.bench.bench_bus_cpu
	$(BIN)/python -m tests.bench.bench_reliability
	$(BIN)/python -m tests.bench.bench_webhook
	$(BIN)/python -m tests.bench.bench_memory
	$(BIN)/python -m tests.bench.bench_hooks
	$(BIN)/python -m tests.bench.bench_mcp
	$(BIN)/python -m tests.bench.bench_teams
	$(BIN)/python -m tests.bench.bench_subagents
	$(BIN)/python -m tests.bench.bench_orchestration
	$(BIN)/python -m tests.bench.bench_processes
	$(BIN)/python -m tests.bench.bench_channel_processes
	$(BIN)/python -m tests.bench.bench_cli_start
	$(BIN)/python -m tests.bench.bench_danger
	$(BIN)/python -m tests.bench.bench_lifecycle_faults
	$(BIN)/python -m tests.bench.bench_store_faults

# systemd-analyze lints the unit files in tests; bubblewrap (bwrap) is the exec tool's
# sandbox; libseccomp lets tests apply the units' system-call filters (tests/unitsim). Installing them is best effort: without them those tests skip, except under
# CI=true, where they fail.
deps-system:
	@if command -v systemd-analyze >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing systemd (for systemd-analyze)"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y --no-install-recommends systemd >/dev/null 2>&1 \
	  || { apt-get update >/dev/null 2>&1 && apt-get install -y --no-install-recommends systemd; } \
	  || echo "warning: could not install systemd; unit-file tests will skip"; \
	else \
	  echo "note: systemd-analyze not found; unit-file tests will skip (install package systemd)"; \
	fi
	@if command -v bwrap >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing bubblewrap (the exec sandbox)"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y --no-install-recommends bubblewrap >/dev/null 2>&1 \
	  || { apt-get update >/dev/null 2>&1 && apt-get install -y --no-install-recommends bubblewrap; } \
	  || echo "warning: could not install bubblewrap; exec sandbox tests will skip"; \
	else \
	  echo "note: bwrap not found; exec sandbox tests will skip (install package bubblewrap)"; \
	fi
	@if ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2'; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing libseccomp2 (tests apply the units' seccomp filters)"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y --no-install-recommends libseccomp2 >/dev/null 2>&1 \
	  || { apt-get update >/dev/null 2>&1 && apt-get install -y --no-install-recommends libseccomp2; } \
	  || echo "warning: could not install libseccomp2; unit sandbox tests will skip"; \
	else \
	  echo "note: libseccomp not found; unit sandbox tests will skip (install package libseccomp2)"; \
	fi

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache build dist *.egg-info $(SITE)

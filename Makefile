# familiar: `make run` starts the daemon, `make test` runs everything CI runs.
# Both create or update .venv first; nothing here reads stdin, and both work from any
# directory (`make -C DIR run`, `make -f DIR/Makefile test`).

ROOT   := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))
PYTHON ?= python3
VENV   := $(ROOT)/.venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --no-input --disable-pip-version-check
# What running needs (requirements.lock), then the test, lint and docs tools on top
# (requirements-dev.lock); each stamp is renewed when its lock or pyproject.toml changes.
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
RUN_LOCK  := $(ROOT)/requirements.lock
DEV_LOCK  := $(ROOT)/requirements-dev.lock

.DEFAULT_GOAL := help
.PHONY: help venv venv-run run test test-fast lint docs docs-reference bench lock deps-system screenshots clean

help:
	@echo "make run          create/update $(VENV) with what running needs, then run the gateway"
	@echo "                  in the foreground (FAMILIAR_HOME from the environment, default ~/.familiar)"
	@echo "make test         ruff, ruff format --check, mypy, lint-imports, the docs site, pytest (what CI runs)"
	@echo "make test-fast    pytest -m 'not slow'"
	@echo "make venv-run     only create/update $(VENV) from requirements.lock (no test tools)"
	@echo "make venv         create/update $(VENV) from requirements-dev.lock (what make test uses)"
	@echo "make lock         re-resolve requirements.lock and requirements-dev.lock from pyproject.toml"
	@echo "make docs         build the docs site into $(SITE)/ (mkdocs build --strict)"
	@echo "make docs-reference  regenerate docs/configuration-reference.md from the config models"
	@echo "make bench        benchmarks in tests/bench"
	@echo "make screenshots  run the web panel's browser tests, saving their screenshots in docs/images/ui"
	@echo "make deps-system  as root on apt systems: install systemd-analyze, bubblewrap and chromium for the tests"
	@echo "PYTHON=...        interpreter for the venv (>= 3.11; default python3)"

venv-run: $(RUN_STAMP)
venv: $(DEV_STAMP)

# The venv is rebuilt when its interpreter is missing, broken or older than 3.11. The
# locks pin every package with its hashes; the project itself goes in editable, without
# its dependencies (they are the lock's).
$(RUN_STAMP): $(RUN_LOCK) $(ROOT)/pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
	  echo "familiar needs Python >= 3.11, but '$(PYTHON)' is $$($(PYTHON) -V 2>/dev/null || echo "not installed")."; \
	  echo "Install one and run e.g.: make $(MAKECMDGOALS) PYTHON=python3.11"; exit 1; }
	@if ! $(BIN)/python -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then \
	  echo "creating $(VENV) with $$($(PYTHON) -V)"; \
	  $(PYTHON) -m venv --clear $(VENV) || { \
	    echo "could not create $(VENV): on Debian/Ubuntu install python3-venv"; exit 1; }; \
	fi
	$(PIP) install -r $(RUN_LOCK)
	$(PIP) install --no-deps -e $(ROOT)
	@touch $@

$(DEV_STAMP): $(RUN_STAMP) $(DEV_LOCK)
	$(PIP) install -r $(DEV_LOCK)
	@touch $@

run: $(RUN_STAMP)
	exec $(BIN)/familiar gateway

# The exact versions of every package, resolved (with uv, a dev tool) for every platform
# and Python >= 3.11; the dev lock keeps the runtime lock's versions.
# tests/unit/test_locks.py fails when pyproject.toml asks for something they do not hold.
UV_COMPILE := $(BIN)/uv pip compile --quiet --universal --python-version 3.11 \
	--generate-hashes --custom-compile-command "make lock"

lock: $(DEV_STAMP)
	cd $(ROOT) && $(UV_COMPILE) pyproject.toml -o requirements.lock
	cd $(ROOT) && $(UV_COMPILE) pyproject.toml --extra dev -c requirements.lock -o requirements-dev.lock

# Most tests wait on subprocesses, sockets and timers rather than the CPU, so three
# workers fit two cores; a file's tests stay on one worker (--dist loadfile).
PYTEST_WORKERS ?= 3

test: deps-system lint docs
	cd $(ROOT) && $(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadfile

lint: $(DEV_STAMP)
	cd $(ROOT) && $(BIN)/ruff check .
	cd $(ROOT) && $(BIN)/ruff format --check .
	cd $(ROOT) && $(BIN)/mypy
	cd $(ROOT) && $(BIN)/lint-imports

# The docs site (mkdocs.yml): strict, so a broken link or anchor, or a page missing from
# the navigation, fails the build (never --quiet: it hides the warnings strict counts).
SITE ?= $(ROOT)/.site

docs: $(DEV_STAMP)
	cd $(ROOT) && NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir $(SITE)

docs-reference: $(DEV_STAMP)
	cd $(ROOT) && $(BIN)/python -m gateway.config_reference --output docs/configuration-reference.md

test-fast: $(DEV_STAMP)
	cd $(ROOT) && $(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadfile -m "not slow"

# The web panel's tests drive Chromium; each saves screenshots where this points.
screenshots: $(DEV_STAMP) deps-system
	cd $(ROOT) && FAMILIAR_UI_SCREENSHOTS=$(ROOT)/docs/images/ui $(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadfile tests/e2e/ui

bench: $(DEV_STAMP)
	cd $(ROOT) && $(BIN)/python -m tests.bench.bench_throughput
	cd $(ROOT) && $(BIN)/python -m tests.bench.bench_schedules
	cd $(ROOT) && $(BIN)/python -m tests.bench.bench_slack
	cd $(ROOT) && $(BIN)/python -m tests.bench.bench_control
	cd $(ROOT) && $(BIN)/python -m tests.bench.bench_bus_cpu
	cd $(ROOT) && $(BIN)/python -m tests.bench.bench_reliability
	cd $(ROOT) && $(BIN)/python -m tests.bench.bench_webhook
	cd $(ROOT) && $(BIN)/python -m tests.bench.bench_memory
	cd $(ROOT) && $(BIN)/python -m tests.bench.bench_hooks
	cd $(ROOT) && $(BIN)/python -m tests.bench.bench_mcp
	cd $(ROOT) && $(BIN)/python -m tests.bench.bench_teams
	cd $(ROOT) && $(BIN)/python -m tests.bench.bench_subagents
	cd $(ROOT) && $(BIN)/python -m tests.bench.bench_orchestration
	cd $(ROOT) && $(BIN)/python -m tests.bench.bench_group
	cd $(ROOT) && $(BIN)/python -m tests.bench.bench_ui
	cd $(ROOT) && $(BIN)/python -m tests.bench.bench_processes
	cd $(ROOT) && $(BIN)/python -m tests.bench.bench_footprint
	cd $(ROOT) && $(BIN)/python -m tests.bench.bench_channel_processes
	cd $(ROOT) && $(BIN)/python -m tests.bench.bench_cli_start
	cd $(ROOT) && $(BIN)/python -m tests.bench.bench_danger
	cd $(ROOT) && $(BIN)/python -m tests.bench.bench_lifecycle_faults
	cd $(ROOT) && $(BIN)/python -m tests.bench.bench_store_faults
	cd $(ROOT) && $(BIN)/python -m tests.bench.bench_gc
	cd $(ROOT) && $(BIN)/python -m tests.bench.bench_install

# systemd-analyze lints the unit files in tests; bubblewrap (bwrap) is the exec tool's
# sandbox; libseccomp lets tests apply the units' system-call filters (tests/unitsim);
# Chromium (the distribution's, driven by Playwright) runs the web panel's tests.
# Installing them is best effort: without them those tests skip, except under CI=true,
# where they fail.
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
	@if [ -x /usr/bin/chromium ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing chromium and chromium-driver (the web panel's browser tests)"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y --no-install-recommends chromium chromium-driver >/dev/null 2>&1 \
	  || { apt-get update >/dev/null 2>&1 && apt-get install -y --no-install-recommends chromium chromium-driver; } \
	  || echo "warning: could not install chromium; web panel tests will skip"; \
	else \
	  echo "note: /usr/bin/chromium not found; web panel tests will skip (install package chromium)"; \
	fi

clean:
	cd $(ROOT) && rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache build dist *.egg-info $(SITE)

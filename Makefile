# ctxsim — two commands: `make run` (set up and serve) and `make test` (set up and test).
# Both start with `make install`, which only sets up .venv.

VENV      := .venv
PY        := $(VENV)/bin/python
HOST      ?= 127.0.0.1
PORT      ?= 8000
# Candidates for the interpreter, best first; the first one that is Python >= 3.12 wins.
PYTHON_CANDIDATES ?= python3.13 python3.12 python3 $(wildcard $(HOME)/.pyenv/versions/3.13*/bin/python) $(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python)

.PHONY: install run test test-fast test-browser lint ci bench screenshots loadtest serve-prod clean chromium

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@set -e; \
	if [ ! -x "$(PY)" ]; then \
	  interp=""; \
	  for c in $(PYTHON_CANDIDATES); do \
	    if command -v "$$c" >/dev/null 2>&1 && "$$c" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then interp="$$c"; break; fi; \
	  done; \
	  if [ -z "$$interp" ]; then \
	    echo "ctxsim needs Python 3.12 or newer (3.13 preferred) with the venv module;" >&2; \
	    echo "none of these was found: $(PYTHON_CANDIDATES)." >&2; \
	    echo "Install python3.13 (e.g. 'pyenv install 3.13' or your OS package) and run make again." >&2; \
	    exit 1; \
	  fi; \
	  echo "Creating $(VENV) with $$interp ($$($$interp --version))"; \
	  "$$interp" -m venv $(VENV); \
	fi
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $@

run: install
	@$(PY) manage.py migrate --noinput
	@$(PY) manage.py bootstrap
	@$(PY) manage.py seed_demo
	@PORT=$(PORT) HOST=$(HOST) bin/run-dev

test: install chromium
	$(PY) -m pytest

# Pure and web tiers only (no browser); handy while developing.
test-fast: install
	$(PY) -m pytest -m "not browser"

# ruff on everything, mypy on the pure packages (pyproject.toml [tool.mypy] names them).
lint: install
	$(VENV)/bin/ruff check ctxsim tests
	$(PY) -m mypy

# Debian's chromium drives the browser tier; Playwright cannot download browsers here.
chromium:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "Installing Debian's chromium for the browser tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else \
	  echo "The browser tests need Debian's chromium: run 'sudo apt-get update && sudo apt-get install -y chromium'" >&2; \
	  echo "(or set CTXSIM_CHROMIUM to a Chromium binary); they are skipped until then." >&2; \
	fi

# Render the main pages into docs/screenshots/ (committed; the README shows them).
screenshots: install chromium
	$(PY) bin/screenshots

# SPEC §9 targets, each against its baseline in the same run (README "Benchmarks").
bench: install
	$(PY) -m bench.run

# The production stack on this machine: gunicorn + task worker + PostgreSQL (README "Production").
serve-prod: install
	@bin/serve-prod

# SPEC §9 load: 50 reviewers for 60 s against gunicorn + task worker + PostgreSQL (database
# ctxsim_load, recreated each run) on loopback; starts and stops the stack itself.
loadtest: install
	$(PY) -m loadtest.run

clean:
	rm -rf $(VENV) .pytest_cache

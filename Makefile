# ALT Workbench. `make run` starts the app, `make test` runs every test, `make test-fast` all but the
# browser, tuning and slow ones (a few minutes on 2 cores); each sets up .venv first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# Empty: .streamlit/config.toml decides (127.0.0.1:8501). HOST=0.0.0.0 serves every interface.
HOST ?=
PORT ?=
PYTEST_ARGS ?=

.PHONY: venv browser run test test-fast bench clean

venv: $(VENV)/.installed

# Re-installs only when requirements.txt is newer than the stamp.
$(VENV)/.installed: requirements.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
	  || { echo "ALT Workbench needs Python >= 3.11 (PYTHON=$(PYTHON))" >&2; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	@# the Graph page's view, for a new tab to show while a fresh server imports the engine
	-$(PY) -m workbench.app.first_view
	touch $@

# Debian's Chromium for the real-browser test (Playwright cannot download its own browser here).
browser:
	@if [ -x /usr/bin/chromium ]; then echo "chromium: /usr/bin/chromium"; else \
	  SUDO=; if [ "$$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO=sudo; fi; \
	  $$SUDO apt-get update && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
	fi

# `python -m` puts the repository root on sys.path, so the app imports `workbench` uninstalled;
# `workbench.app` runs `streamlit run` on itself and imports TVM meanwhile (the first tab is faster).
# Settings are in .streamlit/config.toml (read from here, the repository root); flags only for HOST/PORT.
run: venv
	$(PY) -m workbench.app $(if $(HOST),--server.address $(HOST)) $(if $(PORT),--server.port $(PORT))

test: venv browser
	$(PY) -m pytest -q --durations=10 $(PYTEST_ARGS)

# No Chromium, no MetaSchedule or joint tuning, no test marked slow (pyproject.toml lists the markers),
# on two worker processes (pytest-xdist): TVM's builds are single-threaded.
test-fast: venv
	$(PY) -m pytest -q -n 2 --durations=10 -m "not browser and not tuning and not slow" $(PYTEST_ARGS)

bench: venv
	$(PY) -m workbench bench

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis work test-artifacts

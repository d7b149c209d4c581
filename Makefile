# ALT Workbench: `make run` starts the app, `make test` runs the tests; both set up .venv first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8501

.PHONY: run test bench browser venv clean

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

# Debian's Chromium for the real-browser test (Playwright cannot download a browser here).
browser:
	@if [ ! -x /usr/bin/chromium ]; then \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium; \
	fi

run: venv
	$(PY) -m streamlit run workbench/app.py --server.headless true --server.port $(PORT) \
	  --browser.gatherUsageStats false

test: venv browser
	$(PY) -m pytest -q --durations=10

bench: venv
	$(PY) -m workbench bench

clean:
	rm -rf $(VENV) .pytest_cache work test-artifacts

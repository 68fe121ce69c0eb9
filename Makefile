# Quick start: `make demo` and `make test`; both run set-up when needed.
.PHONY: setup demo test bench clean

VENV := .venv
STAMP := $(VENV)/.ioobserve-installed

setup:
	ci/setup.sh

$(STAMP): pyproject.toml ci/setup.sh
	ci/setup.sh

demo: $(STAMP)
	$(VENV)/bin/python bench/workloads/demo.py --prepare-only
	$(VENV)/bin/ioobserve record -o demo-traces -- $(VENV)/bin/python bench/workloads/demo.py

test: $(STAMP)
	ci/test.sh

bench: $(STAMP)
	$(VENV)/bin/python bench/run_all.py

clean:
	rm -rf $(VENV) demo-traces .pytest_cache

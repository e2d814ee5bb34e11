# opkit — the commands in README.md. Every target does its own set-up.
SHELL := /bin/bash
CARGO ?= cargo
# Where the control plane (and, if needed, a Go toolchain) is built and kept.
OPKIT_CACHE ?= $(HOME)/.cache/opkit
export OPKIT_CACHE

.PHONY: help demo test controlplane dev-cluster check-orphans lint bench bench-workqueue bench-informer bench-e2e

help:
	@echo "make demo          run the Memcached operator on a local control plane (builds what is missing)"
	@echo "make test          build the control plane if missing, run every test, check for leftovers"
	@echo "make controlplane  build kube-apiserver and etcd into $(OPKIT_CACHE)/controlplane"
	@echo "make dev-cluster   start a local control plane and keep it running until Ctrl-C"
	@echo "make lint          cargo fmt --check and clippy with warnings denied"
	@echo "make bench         run the benchmarks and print ratio tables"
	@echo "make bench-e2e     one operator in opkit, controller-runtime and kube-runtime, end to end"

controlplane:
	@tests/controlplane/build.sh >/dev/null

# The Memcached operator (examples/memcached) on a local control plane.
demo: controlplane
	@$(CARGO) run --quiet -p memcached-operator --example demo

test: controlplane
	$(CARGO) test --workspace --all-features
	@$(MAKE) --no-print-directory check-orphans

# Fails if an etcd or kube-apiserver from the build cache is still running
# (a test that leaked one, or a `make dev-cluster` left open elsewhere).
check-orphans:
	@left=$$(pgrep -af "$(OPKIT_CACHE)/controlplane/[^ ]*/bin/(etcd|kube-apiserver)" || true); \
	if [ -n "$$left" ]; then echo "left running after the tests:"; echo "$$left"; exit 1; fi; \
	echo "check-orphans: no etcd or kube-apiserver left running"

dev-cluster: controlplane
	@$(CARGO) run --quiet -p opkit --features envtest --example dev_cluster

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --all-features -- -D warnings

bench: bench-workqueue bench-informer bench-e2e

bench-workqueue:
	@tests/peers/bench-workqueue.sh

bench-informer: controlplane
	@tests/peers/bench-informer.sh

# The same operator in opkit, controller-runtime and kube-runtime against one
# control plane (issue 13). SIZES=1000,10000 REPS=3 by default.
bench-e2e: controlplane
	@tests/peers/bench-e2e.sh

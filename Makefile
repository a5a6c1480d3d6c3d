# hwbarr — Open MPI coll component (Rust cdylib), for Open MPI 4.1, 5.0 and 6.0.
#   make            build the component for the Open MPI on PATH (or OMPI_PREFIX)
#   make install    copy it where that Open MPI loads it (see COMPONENT_DIR);
#                   PREFIX=<dir>: into a prefix of its own, with a module file
#   make run        build, install into a private dir, hwbarr vs. the stock barrier
#   make test       lint, unit tests, model checks, mpirun integration tests
#   make lint       the module layer rules (scripts/layers.py), cargo fmt --check
#                   and clippy (warnings are errors)
#   make soak       10^6 barriers at 2 ranks, 3*10^5 at 4, every kind, random
#                   communicators; checks semantics, RSS, mappings, fds (not in make test)
#   make bench      hwbarr beside every barrier of this Open MPI, MPICH (PyPI wheel
#                   in build/mpich-venv) and the scheduler floor at 2/4/8 ranks,
#                   interleaved rounds: table, skew, placement, targets, CSV, chart
#                   (bench/barrier_osu.c; ROUNDS=, NPS=, SECTIONS=, NO_MPICH=1, BIND=1;
#                   OSU_DIR=<dir with osu_barrier> runs the real OSU benchmark)
#   make probe      where a persistent barrier's time goes: a diagnostic build
#                   (feature `probe`, src/ompi/probe.rs), barrier_osu's persistent
#                   mode at 2 ranks bound apart, PROBE_LAUNCHES launches (default 3)
# OMPI_PREFIX=<prefix> builds and tests against the Open MPI installed there
# (e.g. one built by scripts/build-ompi.sh) instead of the one on PATH.
# Prerequisites (Open MPI 4.1 + headers, libclang; python3 for lint and test,
# Lmod for test, gnuplot and python3-venv for bench) are installed with
# apt-get when run as root on Debian (scripts/deps.sh).

CARGO ?= cargo

ifneq ($(strip $(OMPI_PREFIX)),)
  override OMPI_PREFIX := $(abspath $(OMPI_PREFIX))
  export OMPI_PREFIX
  export PATH := $(OMPI_PREFIX)/bin:$(PATH)
  export LD_LIBRARY_PATH := $(OMPI_PREFIX)/lib:$(LD_LIBRARY_PATH)
  # One build tree per Open MPI: rsmpi and the FFI layer differ.
  OMPI_VERSION := $(shell $(OMPI_PREFIX)/bin/mpicc --showme:version 2>/dev/null | sed -n 's/.*Open MPI \([0-9][0-9.a-z]*\).*/\1/p')
  TARGET_DIR := $(CURDIR)/target/ompi-$(or $(OMPI_VERSION),unknown)
else
  TARGET_DIR := $(CURDIR)/target
endif
export CARGO_TARGET_DIR := $(TARGET_DIR)

SO          := $(TARGET_DIR)/release/libmca_coll_hwbarr.so
PRIVATE_DIR := $(TARGET_DIR)/components
# Where `make install` puts the component: the component directory of the
# Open MPI it was built for when we may write there, else the per-user
# directory both release lines search (~/.openmpi/components).
# (The ompi_info of that Open MPI by path: $(shell) does not see the PATH
# exported above in make 4.3.)
OMPI_INFO    := $(if $(OMPI_PREFIX),$(OMPI_PREFIX)/bin/ompi_info,ompi_info)
MPICC        := $(if $(OMPI_PREFIX),$(OMPI_PREFIX)/bin/mpicc,mpicc)
PKGLIBDIR    = $(shell $(OMPI_INFO) --path pkglibdir --parsable 2>/dev/null | sed 's/.*://')
OMPI_RELEASE = $(shell $(MPICC) --showme:version 2>/dev/null | sed -n 's/.*Open MPI \([0-9][0-9.a-z]*\).*/\1/p')
# `make install PREFIX=<dir>`: a prefix of hwbarr's own, one component
# directory per Open MPI release, and a module file that points that Open
# MPI at it (scripts/modulefile.sh).
ifneq ($(strip $(PREFIX)),)
  override PREFIX := $(abspath $(PREFIX))
  COMPONENT_DIR ?= $(PREFIX)/lib/hwbarr/openmpi-$(OMPI_RELEASE)
endif
COMPONENT_DIR ?= $(shell d="$(PKGLIBDIR)"; if [ -n "$$d" ] && [ -w "$$d" ]; then echo "$$d"; else echo "$(HOME)/.openmpi/components"; fi)
export HWBARR_TARGET_DIR := $(TARGET_DIR)
# The mpirun integration tests, one file per concern (tests/common: their harness).
MPIRUN_TESTS := semantics fake_nodes install_and_select device_refused disagreement death ulfm p2p_faults lifecycle soak

.PHONY: all build deps install component-dir run test test-other-builds soak unit-test mpirun-test lint bench probe clean

all: build

deps:
	@scripts/deps.sh

build: deps
	$(CARGO) build --release --lib --examples
	@echo "built $(SO) for $$(mpicc --showme:version 2>/dev/null | sed 's/^mpicc: //')"

install: build
	@HWBARR_MODULE=$(if $(PREFIX),1,) scripts/install.sh "$(SO)" "$(COMPONENT_DIR)"
	@if [ -n "$(PREFIX)" ]; then scripts/modulefile.sh "$(PREFIX)" "$(COMPONENT_DIR)" "$(PKGLIBDIR)" "$(OMPI_RELEASE)"; fi

# Where `make install` would put the component (for users and the tests).
component-dir:
	@echo "$(COMPONENT_DIR)"

run: build
	@scripts/install.sh "$(SO)" "$(PRIVATE_DIR)" >/dev/null
	COMPONENT_DIR=$(PRIVATE_DIR) scripts/run.sh

lint: deps
	@scripts/deps.sh lint
	python3 scripts/layers.py --self-test
	python3 scripts/layers.py
	$(CARGO) fmt --check
	$(CARGO) clippy --release --all-targets -- -D warnings
	$(CARGO) clippy --release --lib --features probe -- -D warnings
	$(CARGO) clippy --release --lib --features pairs -- -D warnings

test: lint build
	@scripts/deps.sh test
	@scripts/install.sh "$(SO)" "$(PRIVATE_DIR)" >/dev/null
	$(CARGO) test --release --lib --test model_cores --test build_abi --test contention
	RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=$(TARGET_DIR)/loom $(CARGO) test --release --test loom_cores --test loom_sleep --test loom_express
	HWBARR_COMPONENT_DIR=$(PRIVATE_DIR) $(CARGO) test --release $(MPIRUN_TESTS:%=--test %) -- --test-threads=1

# A build for another release line, loaded by this Open MPI, must be refused
# in one line: `make test` checks the builds already in target/, so CI, which
# runs 4.1 first, runs this again under 4.1 once every line's build exists.
test-other-builds: build
	@scripts/install.sh "$(SO)" "$(PRIVATE_DIR)" >/dev/null
	HWBARR_COMPONENT_DIR=$(PRIVATE_DIR) $(CARGO) test --release --test install_and_select -- --exact a_build_for_the_other_release_line_is_refused_in_one_line

# The fault-injection tests build the component with `--features
# fault-injection` themselves, into $(TARGET_DIR)/fault: never the build
# that `make`/`make install` ship.
soak: build
	@scripts/install.sh "$(SO)" "$(PRIVATE_DIR)" >/dev/null
	HWBARR_COMPONENT_DIR=$(PRIVATE_DIR) $(CARGO) test --release --test soak -- --ignored --nocapture --test-threads=1

bench: build
	@scripts/deps.sh bench
	@scripts/install.sh "$(SO)" "$(PRIVATE_DIR)" >/dev/null
	COMPONENT_DIR=$(PRIVATE_DIR) python3 scripts/bench.py

PROBE_LAUNCHES ?= 3
probe: deps
	$(CARGO) build --release --lib --features probe --target-dir $(TARGET_DIR)/probe
	@scripts/install.sh "$(TARGET_DIR)/probe/release/libmca_coll_hwbarr.so" "$(TARGET_DIR)/probe/components" >/dev/null
	@mkdir -p build/barrier_osu
	$(MPICC) -O2 -Wall -o build/barrier_osu/probe-$(OMPI_RELEASE) bench/barrier_osu.c
	COMPONENT_DIR=$(TARGET_DIR)/probe/components PROBE_LAUNCHES=$(PROBE_LAUNCHES) \
	  scripts/probe.sh build/barrier_osu/probe-$(OMPI_RELEASE)

clean:
	$(CARGO) clean
	rm -rf build target

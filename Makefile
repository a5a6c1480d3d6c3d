# hwbarr — Open MPI coll component (Rust cdylib).
#   make            build target/release/libmca_coll_hwbarr.so
#   make install    copy it to $(COMPONENT_DIR) as mca_coll_hwbarr.so
#   make run        build, install into a private dir, hwbarr vs. the stock barrier
#   make test       unit tests, model checks, mpirun integration tests
#   make bench      hwbarr vs. tuned/basic/sm at 2/4/8 ranks: table, CSV, PNG chart
#                   (OSU_DIR=<dir with osu_barrier> runs the real OSU benchmark)
# Prerequisites (Open MPI 4.1 + headers, libclang) are installed with
# apt-get when run as root on Debian (scripts/deps.sh).

CARGO         ?= cargo
COMPONENT_DIR ?= $(HOME)/.openmpi/components
PRIVATE_DIR   := $(CURDIR)/build/components
SO            := target/release/libmca_coll_hwbarr.so

.PHONY: all build deps install run test bench clean

all: build

deps:
	@scripts/deps.sh

build: deps
	$(CARGO) build --release --lib --examples

install: build
	install -d "$(COMPONENT_DIR)"
	install -m 0644 $(SO) "$(COMPONENT_DIR)/mca_coll_hwbarr.so"
	@echo "installed $(COMPONENT_DIR)/mca_coll_hwbarr.so"

run: build
	@$(MAKE) --no-print-directory install COMPONENT_DIR=$(PRIVATE_DIR) >/dev/null
	COMPONENT_DIR=$(PRIVATE_DIR) scripts/run.sh

test: build
	@$(MAKE) --no-print-directory install COMPONENT_DIR=$(PRIVATE_DIR) >/dev/null
	$(CARGO) test --release --lib --test model_cores
	RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom $(CARGO) test --release --test loom_cores
	HWBARR_COMPONENT_DIR=$(PRIVATE_DIR) $(CARGO) test --release --test mpirun -- --test-threads=1

bench: build
	@scripts/deps.sh bench
	@$(MAKE) --no-print-directory install COMPONENT_DIR=$(PRIVATE_DIR) >/dev/null
	COMPONENT_DIR=$(PRIVATE_DIR) python3 scripts/bench.py

clean:
	$(CARGO) clean
	rm -rf build

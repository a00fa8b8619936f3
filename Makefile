# outbox — top-level entry points. Each target installs what is missing first.
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
# The default build compiles with clang and links with lld: clang runs the
# thread-safety analysis (-Wthread-safety -Werror=thread-safety) on every
# file as it compiles it, so the analysis costs nothing extra and is
# incremental (docs/TESTING.md "Thread-safety analysis"); lld links the ~80
# test programs in a fraction of ld.bfd's time. OUTBOX_CXX=g++ OUTBOX_CC=gcc
# OUTBOX_LD= builds with GCC (the analysis then runs as a separate pass).
OUTBOX_CC ?= clang
OUTBOX_CXX ?= clang++
OUTBOX_LD ?= lld
COMPILER_FLAGS = -DCMAKE_C_COMPILER=$(OUTBOX_CC) -DCMAKE_CXX_COMPILER=$(OUTBOX_CXX) \
  $(if $(OUTBOX_LD),-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=$(OUTBOX_LD) -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=$(OUTBOX_LD))

.PHONY: all bootstrap build run test check test-asan test-tsan bench fuzz sim format clean

all: build

bootstrap:
	@bash scripts/bootstrap

$(BUILD)/build.ninja: CMakeLists.txt
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(COMPILER_FLAGS) $(CMAKE_FLAGS)

build: bootstrap $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# The main job on the embedded default: `outbox demo petshop --chaos`, then
# `outbox serve` left running on the same data on 127.0.0.1:$(PORT)
# (docs/DEMO.md); `make stop` stops it.
PORT ?= 8080
run: bootstrap $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target outbox_cli
	bash scripts/run-demo $(BUILD) $(PORT)

.PHONY: stop
stop:
	bash scripts/run-demo --stop

# Every test (what README and .ci/run run). CTEST_JOBS: tests run at once;
# most e2e tests wait on processes and emulators more than they compute, so
# the default is twice the cores (docs/TESTING.md "Tiers").
CTEST_JOBS ?= $(shell echo $$(( $(JOBS) * 2 )))
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(CTEST_JOBS) --timeout 900

# The inner loop (label `check`): unit tests, the embedded conformance suites
# and the pinned simulation seeds, after building only what they need.
check: bootstrap $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target check_programs
	cd $(BUILD) && ctest --output-on-failure -j $(CTEST_JOBS) --timeout 300 -L check

test-asan: bootstrap
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DOUTBOX_SANITIZE=ON -DOUTBOX_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	bash scripts/run-sanitized asan $(ASAN_BUILD) -j $(JOBS) --timeout 1800

# ThreadSanitizer over the concurrency tests (docs/TESTING.md "Sanitizers and
# fuzzing"); tests/tsan.supp suppresses third-party (uninstrumented abseil) only.
TSAN_BUILD ?= build-tsan
TSAN_TESTS ?= conformance_store conformance_queue unit_engine_emit_test unit_inbox_test \
  unit_relay_test unit_relay_poll_test unit_relay_records_test unit_relay_stream_test \
  unit_relay_stream_gaps_test unit_worker_proofs_test unit_worker_soak_test \
  unit_server_webhook_test e2e_serve_test
test-tsan: bootstrap
	cmake -S . -B $(TSAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOUTBOX_TSAN=ON -DOUTBOX_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target outbox_cli $(TSAN_TESTS)
	bash scripts/run-sanitized tsan $(TSAN_BUILD) -j $(JOBS) --timeout 1800 \
	  -R '^($(subst $(eval) ,|,$(strip $(TSAN_TESTS))))$$'

# Every benchmark binary; JSON results in $(BUILD)/bench-<name>.json.
bench: build
	@for b in $(BUILD)/bench/bench_*; do \
	  echo "== $$b"; $$b --benchmark_out=$(BUILD)/$$(basename $$b).json --benchmark_out_format=json || exit 1; \
	done

# Deterministic simulation campaign (docs/TESTING.md): seeds FIRST..FIRST+SEEDS-1
# on JOBS processes (default: every core); prints seeds/s.
SEEDS ?= 10000
FIRST ?= 1
sim: bootstrap $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target sim_run
	$(BUILD)/tests/sim_run --seeds $(FIRST)..$$(( $(FIRST) + $(SEEDS) - 1 )) --jobs $(JOBS)

# Differential campaign against DynamoDB Local (docs/DYNAMODB-COMPATIBILITY.md
# "Differential test"): SEEDS fresh seeds of DIFF_STEPS requests each, about a
# quarter of them invalid; prints the match rate, fails on any difference.
DIFF_STEPS ?= 500
.PHONY: ddb-diff
ddb-diff: SEEDS := 20
ddb-diff: bootstrap $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target conformance_store
	OUTBOX_DIFF_SEEDS=$(SEEDS) OUTBOX_DIFF_STEPS=$(DIFF_STEPS) \
	  $(BUILD)/tests/conformance_store --gtest_filter='StoreDifferential.*'

# Power-loss campaign (docs/TESTING.md "Power loss"): CRASH_SEEDS runs of
# CRASH_ROUNDS random power cuts each, every run on its own file and seed.
CRASH_SEEDS ?= 10
CRASH_ROUNDS ?= 200
.PHONY: crash-campaign
crash-campaign: bootstrap $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target unit_sqlite_power_loss_test
	@for s in $$(seq 1 $(CRASH_SEEDS)); do \
	  echo "== power-loss seed $$s ($(CRASH_ROUNDS) cuts)"; \
	  OUTBOX_POWER_SEED=$$s OUTBOX_POWER_CUTS=$(CRASH_ROUNDS) $(BUILD)/tests/unit_sqlite_power_loss_test \
	    --gtest_brief=1 | grep -E "power loss|FAILED|Failure" || exit 1; \
	done

FUZZ_SECONDS ?= 60
fuzz: bootstrap
	CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOUTBOX_FUZZ=ON -DOUTBOX_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build build-fuzz -j $(JOBS) --target fuzz_targets
	bash scripts/run-fuzz build-fuzz $(FUZZ_SECONDS)

format:
	clang-format -i $$(git ls-files '*.h' '*.cc')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) build-fuzz

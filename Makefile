# gpusched: the two entry points of the README.
#   make run    install what is missing, build, replay the bundled trace with all six policies
#   make test   install what is missing, build twice (plain and ASan+UBSan), build the
#               Kubernetes control plane for tests/k8s (cached outside the tree), run every test
# Other targets: build, k8s, bench, bench-k8s, check-published, lint, fuzz, tsan, soak, clean.

BUILD      ?= build
BUILD_SAN  ?= build-asan
BUILD_FUZZ ?= build-fuzz
BUILD_TSAN ?= build-tsan
FUZZ_RUNS  ?= 20000
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
TRACE      := data/alibaba-gpu-v2023/csv
OUT        ?= out/default

.PHONY: all deps hooks build build-asan k8s run test bench bench-k8s check-published lint fuzz tsan soak clean

all: build

deps: hooks
	@bash scripts/install-deps.sh

# The commit-msg hook (scripts/git-hooks) for this clone. A linked worktree shares its config
# with the main checkout, so there the main checkout's make sets it.
hooks:
	@if [ "$$(git rev-parse --git-dir 2>/dev/null)" = "$$(git rev-parse --git-common-dir 2>/dev/null)" ]; \
	then git config core.hooksPath scripts/git-hooks; fi

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null

$(BUILD_SAN)/CMakeCache.txt:
	cmake -S . -B $(BUILD_SAN) -DCMAKE_BUILD_TYPE=Debug -DGS_SANITIZE=ON >/dev/null

$(BUILD_TSAN)/CMakeCache.txt:
	cmake -S . -B $(BUILD_TSAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGS_SANITIZE=thread >/dev/null

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory

build-asan: deps $(BUILD_SAN)/CMakeCache.txt
	cmake --build $(BUILD_SAN) -j $(JOBS) -- --no-print-directory

# etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kubectl and helm from the Go module
# proxy, into ${GPUSCHED_K8S_CACHE:-/var/cache/gpusched/k8s}; a no-op when already cached.
k8s: deps
	bash tests/k8s/control-plane.sh build
	bash tests/k8s/helm.sh build

# Builds the gpusched binary alone (not the tests and benchmarks) before the run.
run: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) --target gpusched -- --no-print-directory
	$(BUILD)/gpusched simulate --nodes $(TRACE)/openb_node_list_gpu_node.csv \
	    --pods $(TRACE)/openb_pod_list_default.csv --policy all --seeds 42-51 --tune 1.3 \
	    --jobs $(JOBS) --out $(OUT)

test: build build-asan k8s
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	cd $(BUILD_SAN) && ctest --output-on-failure -j $(JOBS)

# Runs every benchmark and rewrites README.md's speed table from that run's output.
bench: build
	mkdir -p out/bench
	bash -c 'set -o pipefail; bash bench/run.sh $(BUILD) 2>&1 | tee out/bench/bench.txt'
	python3 bench/readme_table.py out/bench/bench.txt README.md

# The node agent's soak (tests/agent/soak.py: SOAK_MINUTES of XIDs, lost GPUs, MIG changes,
# kubelet restarts every 2 s and a scrape every 100 ms; RSS and descriptors must stay flat) and
# the registration race with 100 kubelet restarts; not part of `make test`.
SOAK_MINUTES ?= 10
soak: build
	GS_RACE_ROUNDS=100 /usr/bin/python3 tests/agent/test_agent_faults.py --gpusched $(BUILD)/gpusched \
	    --stub $(BUILD)/tests/agent/libnvidia-ml-faults.so --source-dir . --only registration_race
	/usr/bin/python3 tests/agent/soak.py --gpusched $(BUILD)/gpusched --source-dir . \
	    --minutes $(SOAK_MINUTES)

# gpusched scheduler vs kube-scheduler and a no-op binder on one real control plane (5,000
# nodes x 8 GPUs, 10,000 one-GPU pods; BENCH_K8S_ARGS="--nodes 500 --pods 1000" for a quick one).
bench-k8s: build k8s
	bash bench/k8s.sh $(BUILD) $(BENCH_K8S_ARGS)

check-published: build
	bash tools/check-published.sh $(BUILD)/gpusched

# clang-tidy needs the build's compile_commands.json and its generated protobuf headers. Files
# are linted JOBS at a time; any warning fails (.clang-tidy: WarningsAsErrors '*'). The gate's
# own test (tests/lint/selftest.sh) runs first: it must reject planted faults. The layering of
# docs/internals/layering.md is checked from the includes and CMake links, after its own test
# (tests/lint/layering_selftest.sh: planted wrong arrows must fail).
lint: build
	clang-format --dry-run -Werror $$(git ls-files '*.c' '*.h')
	bash tests/lint/layering_selftest.sh
	python3 scripts/check-layering.py
	bash tests/lint/selftest.sh
	git ls-files 'src/*.c' | xargs -P $(JOBS) -n 2 clang-tidy -p $(BUILD) --quiet

# ThreadSanitizer over the code that runs threads: the gRPC server and client, the node agent
# (device plugin, health, exporter; its Python and Prometheus peers drive the real binary), the
# scheduler's admission webhook over HTTPS (test_kwebhook) and
# `simulate --jobs 2` on the slice trace (simulate_golden_slice). Any report fails the test.
TSAN_TESTS := ^(test_grpc_|test_health$$|test_exporter$$|test_gpu_fake$$|test_labels$$|test_kwebhook$$|agent_|rpc_|simulate_golden_slice$$)
tsan: deps $(BUILD_TSAN)/CMakeCache.txt
	cmake --build $(BUILD_TSAN) -j $(JOBS) -- --no-print-directory
	cd $(BUILD_TSAN) && TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1" \
	    ctest --output-on-failure -j $(JOBS) -R '$(TSAN_TESTS)'

# Every libFuzzer target, built with clang, FUZZ_RUNS executions each from a fixed seed.
fuzz: deps
	bash tests/fuzz/run.sh $(BUILD_FUZZ) $(FUZZ_RUNS) $(JOBS)

clean:
	rm -rf $(BUILD) $(BUILD_SAN) $(BUILD_FUZZ) $(BUILD_TSAN) out

# fikit — kernel-level priority scheduling for shared NVIDIA GPUs.
#
#   make          build everything into bin/
#   make test-busy  make test with two busy loops on the host's CPUs (tests/busy.sh)
#   make demo     the main job on the simulated GPU (no GPU needed)
#   make demo-doc run it again into docs/demo.json and the README's demo block
#   make test     every test (no GPU needed)
#   make install  PREFIX=/usr/local DESTDIR=; make uninstall; make image (docs/deploy.md)
#   make bench    the benchmark suite (fikit bench; BENCHFLAGS=--quick for the short one)
#   make fuzz     the fuzz targets, longer than in make test
#   make soak     services coming and going around one daemon (SOAK=30m)
#   make test-asan / test-tsan   the C side under sanitizers (in make test)
#   make fikit-k8s  fikit with the pod informer (build tag k8s; the image's)
#   make test-k8s   against a real kube-apiserver and etcd (tests/k8s; docs/kubernetes.md)
#
# C code builds against NVIDIA's real cuda.h; simgpu/cuda-headers.sh finds an
# installed toolkit or fetches Debian's nvidia-cuda-dev headers once per machine.

SHELL       := /bin/bash
GO          ?= go
CC          ?= gcc
BIN         := $(CURDIR)/bin
BUILD       := $(CURDIR)/build
# Evaluated where used (recipes only), so `make clean` never downloads anything.
CUDA_ROOT    = $(shell $(CURDIR)/simgpu/cuda-headers.sh)
CUDA_STUB    = $(shell $(CURDIR)/simgpu/cuda-headers.sh --stub)
CWARN       := -Wall -Wextra -Werror
CFLAGS_BASE := -std=gnu11 -O2 -g -fPIC -D_GNU_SOURCE $(CWARN)
GOTESTFLAGS ?=
FUZZTIME    ?= 60s

.PHONY: all fikit replay clean test test-go test-c test-e2e demo bench faults fuzz fuzz-brief fuzz-run vet cuda-headers
all: fikit replay simgpu hook

# Go commands that compile cmd/fikit-replay need the CUDA headers and link stub.
GOCUDA = CGO_CFLAGS="-I$(CUDA_ROOT)/include" CGO_LDFLAGS="-L$(CUDA_STUB) -Wl,-z,lazy"

cuda-headers:
	@test -n "$(CUDA_ROOT)" || { echo "no CUDA headers" >&2; exit 1; }

fikit:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/fikit ./cmd/fikit

# fikit-replay compiles against cuda.h and dlopens libcuda.so.1 when it first
# opens a device (cmd/fikit-replay/cuda.go): --help, gen and ptx need no driver.
replay: cuda-headers
	@mkdir -p $(BIN)
	$(GOCUDA) $(GO) build -o $(BIN)/fikit-replay ./cmd/fikit-replay

# Each C component owns its fragment: simgpu/build.mk defines `simgpu` and
# `test-simgpu`, hookclient/build.mk defines `hook` and `test-hook`.
include simgpu/build.mk
include hookclient/build.mk

test-c: test-simgpu test-hook

vet: cuda-headers
	$(GOCUDA) $(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi

# Unit tests in parallel; end-to-end tests one package at a time (they measure time).
test: all vet test-c test-go fuzz-brief test-e2e

# The suite must hold on a loaded host (issue 32): make test with two busy
# loops spinning beside it; prints its time.
.PHONY: test-busy
test-busy:
	tests/busy.sh $(MAKE) --no-print-directory test

test-go: all
	$(GOCUDA) FIKIT_BIN=$(BIN) $(GO) test $(GOTESTFLAGS) $$($(GO) list ./... | grep -v /tests)

test-e2e: all
	$(GOCUDA) FIKIT_BIN=$(BIN) $(GO) test -p 1 -count=1 -timeout 30m $(GOTESTFLAGS) ./tests/...

demo: all
	$(BIN)/fikit demo

# The README's demo block and its timeline picture come from one committed
# run (docs/demo.json, docs/img/fikit-timeline.png; cmd/fikit/docs_test.go,
# in make test, fails when the block and the file disagree): run the demo
# again and rewrite them whenever the scheduler changes what it shows.
.PHONY: demo-doc
demo-doc: all
	rm -rf build/demo; mkdir -p build/demo
	$(BIN)/fikit demo --json --keep build/demo --record > build/demo/demo.json
	$(BIN)/fikit trace --timeline build/demo/timeline.jsonl --decisions build/demo/decisions.jsonl \
		--around-run 250 --runs 2 --png docs/img/fikit-timeline.png
	cp build/demo/demo.json docs/demo.json
	$(GO) test ./cmd/fikit -run '^TestReadmeDemo$$' -count=1 -rewrite-readme
	$(GO) test ./cmd/fikit -run '^Test(ReadmeDemo|DocDefaults)$$' -count=1

bench: all
	$(BIN)/fikit bench $(BENCHFLAGS)

# The fault campaign at full scale (tests/faults_*_test.go; `make test` runs
# it small): 20 daemon restarts, 20 kills right after a profile completes,
# 64 clients at once, broken store directories. Prints one row per scenario.
FAULTS_REPORT ?= $(BUILD)/faults.md
faults: all
	@mkdir -p $(dir $(FAULTS_REPORT)); rm -f $(FAULTS_REPORT)
	@printf '| scenario | scale | result | figures |\n|---|---|---|---|\n' > $(FAULTS_REPORT)
	$(GOCUDA) FIKIT_BIN=$(BIN) FIKIT_FAULTS=full FIKIT_FAULTS_REPORT=$(FAULTS_REPORT) \
		$(GO) test -p 1 -count=1 -timeout 30m -run 'TestFault' $(GOTESTFLAGS) ./tests/; \
		rc=$$?; echo; cat $(FAULTS_REPORT); exit $$rc

# Every Go fuzz target: briefly in `make test` (FUZZ_BRIEF each), longer in
# `make fuzz` (FUZZTIME each). Seed corpora are committed under testdata/.
# The brief budget is a count of executions, not a duration: Go 1.26's
# fuzzing coordinator can report a -fuzztime deadline that expires while a
# worker is mid-input as a failure ("context deadline exceeded", no input
# written; go.dev/issue/75804, fixed in Go 1.27).
FUZZ_BRIEF ?= 20000x
fuzz: cuda-headers
	@$(MAKE) --no-print-directory fuzz-run FUZZ_FOR=$(FUZZTIME) FUZZ_MIN=5s

# Brief runs skip minimizing new inputs: a short -fuzztime ending inside a
# minimization is reported as a failure ("context deadline exceeded").
fuzz-brief: cuda-headers
	@$(MAKE) --no-print-directory fuzz-run FUZZ_FOR=$(FUZZ_BRIEF) FUZZ_MIN=0s

fuzz-run:
	@for pkg in $$($(GOCUDA) $(GO) list ./... | grep -v /tests); do \
	  for t in $$($(GOCUDA) $(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== fuzz $$pkg $$t ($(FUZZ_FOR))"; \
	    $(GOCUDA) $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZ_FOR) -fuzzminimizetime $(FUZZ_MIN) $$pkg >/tmp/fikit-fuzz.$$$$.log 2>&1 \
	      || { cat /tmp/fikit-fuzz.$$$$.log; rm -f /tmp/fikit-fuzz.$$$$.log; exit 1; }; \
	    rm -f /tmp/fikit-fuzz.$$$$.log; \
	  done; \
	done

# ---- sanitizers (issue 24; docs/operations.md "Sanitizers") ----
# The hook, simgpu, their C tests and the launcher, built a second time
# instrumented (gcc's runtimes) into build/<san> and bin/<san>, by the same
# rules with CC carrying the flags. Then the C tests and the hooked C
# services of tests/ (hook-launcher under a fake daemon: holder, waiter,
# board gate, profiling, graphs, fork, threads, daemon gone and back) run
# under the runtime. Any report fails the target: the runtimes exit non-zero
# and write it under build/<san>/reports, which must hold no error (LSan's
# "thread was not suspended" warning in a forked child is not one).
#
# The runtime comes first in LD_PRELOAD (FIKIT_TEST_PRELOAD, prepended by
# tests/hook_helpers_test.go): it must be initialized before any
# instrumented library, and it resolves its interceptors with
# dlsym(RTLD_NEXT), which the hook interposes.
SAN_TESTS = ^TestHook(Paths|Waiter|BadEnvironment|SchedulerChanges|SilentAfterGoodbye|ProfilingExit|Gate|InflightBound|RetransmitsRegister|ManyThreads|DaemonGoneAndBack|NullFunction)$$
SAN_FLAGS_asan = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
SAN_FLAGS_tsan = -fsanitize=thread -fno-omit-frame-pointer
SAN_RT_asan    = libasan.so
SAN_RT_tsan    = libtsan.so
# halt_on_error: the first report ends the process with exitcode.
SAN_ENV_asan   = ASAN_OPTIONS=halt_on_error=1:exitcode=86:detect_leaks=1:log_path=$(BUILD)/asan/reports/asan \
                 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:exitcode=86:log_path=$(BUILD)/asan/reports/ubsan \
                 LSAN_OPTIONS=exitcode=86
# Tests a runtime cannot run (go test -skip); none now. The fork path's
# child used to hang under both: their allocators take no lock around fork,
# and the child inherited one the hook's sender held. The hook now parks its
# sender across fork (hookclient/sender.c, work_mu).
SAN_SKIP_asan  =
SAN_SKIP_tsan  =
SAN_ENV_tsan   = TSAN_OPTIONS=halt_on_error=1:exitcode=86:second_deadlock_stack=1:die_after_fork=0:log_path=$(BUILD)/tsan/reports/tsan
.PHONY: test-asan test-tsan test-san-%
test-asan: test-san-asan
test-tsan: test-san-tsan
test-san-%: cuda-headers
	@rm -rf $(BUILD)/$*/reports; mkdir -p $(BUILD)/$*/reports
	@rt=$$(readlink -f $$($(CC) -print-file-name=$(SAN_RT_$*))); \
	  test -f "$$rt" || { echo "no $(SAN_RT_$*) for $(CC): install gcc's sanitizer runtimes" >&2; exit 1; }
	$(SAN_ENV_$*) FIKIT_TEST_SANITIZED=1 $(MAKE) --no-print-directory BUILD=$(BUILD)/$* BIN=$(BIN)/$* \
		CC="$(CC) $(SAN_FLAGS_$*)" hook simgpu test-hook test-simgpu
	rt=$$(readlink -f $$($(CC) -print-file-name=$(SAN_RT_$*))); \
	  $(SAN_ENV_$*) FIKIT_TEST_PRELOAD=$$rt FIKIT_BIN=$(BIN)/$* $(GOCUDA) \
	  $(GO) test -count=1 -timeout 20m -run '$(SAN_TESTS)' $(if $(SAN_SKIP_$*),-skip '$(SAN_SKIP_$*)') $(GOTESTFLAGS) ./tests/
	@if grep -l -E 'ERROR: |runtime error|WARNING: ThreadSanitizer' $(BUILD)/$*/reports/* 2>/dev/null; then \
	  echo "$* reports:"; cat $(BUILD)/$*/reports/*; exit 1; fi; \
	  echo "$*: no reports ($$(ls $(BUILD)/$*/reports | wc -l) files of runtime warnings only)"

# ---- C fuzzing (issue 24; hookclient/fuzz/build.mk) ----
include hookclient/fuzz/build.mk
# Added to make test and make fuzz here, so their own lines stay as they are.
test: fuzz-c-brief test-asan test-tsan
fuzz: fuzz-c

# ---- soak (issue 24; tests/soak_test.go, docs/operations.md "Soak") ----
# Services of mixed priorities under fixed task keys start, run and end
# (clean, killed, SIGSTOPped and resumed or killed) wave after wave around
# one daemon, sampled after every wave; fails where a resource's trend over
# the second half still rises. `make test` runs it for 40 s (TestSoak).
SOAK        ?= 30m
SOAK_REPORT ?= $(BUILD)/soak.md
.PHONY: soak
soak: all
	@mkdir -p $(dir $(SOAK_REPORT))
	$(GOCUDA) FIKIT_BIN=$(BIN) FIKIT_SOAK=$(SOAK) FIKIT_SOAK_REPORT=$(SOAK_REPORT) \
		$(GO) test -p 1 -count=1 -timeout 24h -run '^TestSoak$$' -v $(GOTESTFLAGS) ./tests/ | grep -v '^=== RUN'; \
		rc=$${PIPESTATUS[0]}; echo "soak report: $(SOAK_REPORT)"; exit $$rc

clean:
	rm -rf $(BIN) $(BUILD)

# ---- install, uninstall, image (issue 25; docs/deploy.md) ----
include cmd/fikit/deploy/deploy.mk

# ---- Kubernetes (issue 35; docs/kubernetes.md) ----
# fikit with the pod informer: the k8s build tag pulls client-go in, which
# the default binary and make test never compile.
.PHONY: fikit-k8s test-k8s
fikit-k8s:
	@mkdir -p $(BIN)
	$(GO) build -tags k8s -o $(BIN)/fikit-k8s ./cmd/fikit

# Against a real control plane: tests/k8s/tools.sh builds kube-apiserver and
# etcd once per machine (cached in ~/.cache/fikit/k8s, ~25 min on 2 cores),
# then the chart, the webhook, the informer and simulated pods are tested
# against them. tests/k8s is a module of its own (helm, client-go).
test-k8s: all fikit-k8s
	FIKIT_K8S_TOOLS=$$(tests/k8s/tools.sh) && export FIKIT_K8S_TOOLS && \
	cd tests/k8s && $(GO) vet -tags k8s ./ && \
	FIKIT_BIN=$(BIN) $(GO) test -tags k8s -count=1 -timeout 20m $(GOTESTFLAGS) ./

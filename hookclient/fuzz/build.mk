# hookclient/fuzz: C fuzz targets of the hook's decoders (issue 24;
# docs/operations.md "Fuzzing"). Included by the top Makefile.
#
#   make fuzz-c-brief   every target for CFUZZ_RUNS executions (in make test)
#   make fuzz-c         every target for CFUZZ_SECONDS each (in make fuzz)
#
# With clang's libFuzzer (Debian bookworm: apt-get install clang
# libclang-rt-14-dev; .ci/run installs both) the targets are
# coverage-guided; without it they are built with gcc around replay.c,
# which runs the seeds and CFUZZ_RUNS deterministic mutations of them. Both
# run under ASan and UBSan. Under CI (CI=true, or CFUZZ_REQUIRE_LIBFUZZER=1)
# a missing libFuzzer fails the build instead: CI must fuzz for real. Seeds come from the shared test vectors
# (seeds.sh); the corpus grows in build/fuzz/corpus/, crashes land in
# build/fuzz/artifacts/.

FUZZ_DIR      := hookclient/fuzz
FUZZ_BUILD    := $(BUILD)/fuzz
FUZZ_C_TARGETS := decode auth board config
# The hook's sources each target calls (through wire.h, auth.h, board.h,
# config.h): their public entry points only.
FUZZ_SRCS_decode := wire.c
FUZZ_SRCS_auth   := auth.c
FUZZ_SRCS_board  := board.c log.c
FUZZ_SRCS_config := config.c kernelid.c log.c
CFUZZ_RUNS    ?= 200000
CFUZZ_SECONDS ?= 60
CFUZZ_CC      ?= clang
# libFuzzer if CFUZZ_CC links a trivial target with -fsanitize=fuzzer.
FUZZ_ENGINE = $(shell printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n){(void)d;(void)n;return 0;}' | \
	$(CFUZZ_CC) -fsanitize=fuzzer -x c - -o /dev/null >/dev/null 2>&1 && echo libfuzzer || echo replay)
CFUZZ_REQUIRE_LIBFUZZER ?= $(if $(filter true 1,$(CI)),1,0)
FUZZ_SAN    := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS  = -std=gnu11 -O1 -g -D_GNU_SOURCE $(CWARN) -I$(HOOK_DIR) -I$(FUZZ_DIR) -I$(CUDA_ROOT)/include $(FUZZ_SAN)

.PHONY: fuzz-c fuzz-c-brief fuzz-c-build
fuzz-c-build: cuda-headers
	@mkdir -p $(FUZZ_BUILD)
	@engine=$(FUZZ_ENGINE); echo "== C fuzz targets: $$engine"; \
	if [ $$engine != libfuzzer ] && [ "$(CFUZZ_REQUIRE_LIBFUZZER)" = 1 ]; then \
	  echo "$(CFUZZ_CC) cannot link -fsanitize=fuzzer (Debian: apt-get install clang libclang-rt-14-dev);" \
	    "CI=true (CFUZZ_REQUIRE_LIBFUZZER=1) needs libFuzzer, not the replay.c fallback" >&2; exit 1; \
	fi; \
	for t in $(FUZZ_C_TARGETS); do \
	  case $$t in decode) srcs="$(FUZZ_SRCS_decode)";; auth) srcs="$(FUZZ_SRCS_auth)";; \
	    board) srcs="$(FUZZ_SRCS_board)";; config) srcs="$(FUZZ_SRCS_config)";; esac; \
	  srcs=$$(for s in $$srcs; do printf '%s ' $(HOOK_DIR)/$$s; done); \
	  if [ $$engine = libfuzzer ]; then \
	    cmd="$(CFUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $(FUZZ_BUILD)/fuzz_$$t $(FUZZ_DIR)/fuzz_$$t.c $$srcs -pthread"; \
	  else \
	    cmd="$(CC) $(FUZZ_CFLAGS) -o $(FUZZ_BUILD)/fuzz_$$t $(FUZZ_DIR)/fuzz_$$t.c $(FUZZ_DIR)/replay.c $$srcs -pthread"; \
	  fi; \
	  echo "$$cmd"; $$cmd || exit 1; \
	done

# $(1): the run's limit (flags for libFuzzer; replay.c reads -runs only).
define fuzz_c_run
	@mkdir -p $(FUZZ_BUILD)/artifacts
	@for t in $(FUZZ_C_TARGETS); do \
	  rm -rf $(FUZZ_BUILD)/seeds/$$t; $(FUZZ_DIR)/seeds.sh $$t $(FUZZ_BUILD)/seeds/$$t; \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t; \
	  echo "== C fuzz $$t ($(1))"; \
	  $(FUZZ_BUILD)/fuzz_$$t $(1) -seed=1 -artifact_prefix=$(FUZZ_BUILD)/artifacts/$$t- \
	    $(FUZZ_BUILD)/corpus/$$t $(FUZZ_BUILD)/seeds/$$t >$(FUZZ_BUILD)/$$t.log 2>&1 \
	    || { tail -40 $(FUZZ_BUILD)/$$t.log; exit 1; }; \
	  tail -1 $(FUZZ_BUILD)/$$t.log; \
	done
endef

fuzz-c-brief: fuzz-c-build
	$(call fuzz_c_run,-runs=$(CFUZZ_RUNS))

fuzz-c: fuzz-c-build
	$(call fuzz_c_run,-max_total_time=$(CFUZZ_SECONDS) -runs=-1)

# hookclient: libfikit_hook.so, its C tests, the launcher and the benchmark
# (owned by hookclient/). Included by the top Makefile.
#
#   make hook        bin/libfikit_hook.so, bin/hook-launcher, bin/hook-bench
#   make test-hook   C unit tests (vectors shared with kernelid/ and udp/), the
#                    core's scenarios, the files' dependency check

HOOK_DIR   := hookclient
HOOK_BUILD := $(BUILD)/hookclient
HOOK_LIB   := $(BIN)/libfikit_hook.so
# The library's own objects; the pure ones are also linked into the tests.
HOOK_SRCS  := auth.c intercept.c table.c htab.c naming.c task.c launch.c graph.c sync.c sender.c \
              waiter.c measure.c wire.c kernelid.c config.c log.c board.c inflight.c core.c control.c \
              link.c process.c probe.c kerneltimes.c warm.c
HOOK_PURE  := auth.o table.o htab.o wire.o kernelid.o config.o log.o core.o kerneltimes.o
HOOK_TESTS := test_kernelid test_wire test_ring test_config test_table test_cache test_board test_auth \
              test_core test_bound
HOOK_HDRS  := $(wildcard $(HOOK_DIR)/*.h) $(HOOK_DIR)/hooks.def
HOOK_CFLAGS = $(CFLAGS_BASE) -I$(CUDA_ROOT)/include -I$(HOOK_DIR) -fvisibility=hidden \
              -fno-strict-aliasing -pthread
# The glibc floor (glibc_floor.h): the oldest versions of the symbols, and
# the libraries that define them before glibc 2.34 kept as needed.
HOOK_CFLAGS += -include $(HOOK_DIR)/glibc_floor.h
# (By soname: a glibc of 2.34 or later ships no libpthread.so to link.)
HOOK_FLOOR_LIBS := -Wl,--no-as-needed -l:libpthread.so.0 -l:libdl.so.2 -Wl,--as-needed

.PHONY: hook test-hook
.PRECIOUS: $(HOOK_BUILD)/test/%.o
hook: $(HOOK_LIB) $(BIN)/hook-launcher $(BIN)/hook-bench

$(HOOK_BUILD)/%.o: $(HOOK_DIR)/%.c $(HOOK_HDRS) | cuda-headers
	@mkdir -p $(HOOK_BUILD)
	$(CC) $(HOOK_CFLAGS) -c -o $@ $<

$(HOOK_BUILD)/test/%.o: $(HOOK_DIR)/test/%.c $(HOOK_HDRS) $(HOOK_DIR)/test/check.h $(HOOK_DIR)/test/wiretext.h | cuda-headers
	@mkdir -p $(HOOK_BUILD)/test
	$(CC) $(HOOK_CFLAGS) -c -o $@ $<

# Nothing but libc: no C++ runtime, no libcuda (found at run time).
# -z defs makes any undefined symbol a link error.
$(HOOK_LIB): $(addprefix $(HOOK_BUILD)/,$(HOOK_SRCS:.c=.o))
	@mkdir -p $(BIN)
	$(CC) -shared -pthread -Wl,-z,defs -Wl,-z,now -Wl,--as-needed -o $@ $^ $(HOOK_FLOOR_LIBS)
	@if nm -D --defined-only $@ | awk '{print $$3}' | grep -v -E '^(cu[A-Za-z0-9_]+|dlsym|fikit_run_end|fikit_flush|fikit_own_wait_ns|fikit_own_wait_lapses)$$' | grep .; then \
	  echo "libfikit_hook.so exports more than the hooked symbols" >&2; rm -f $@; exit 1; fi

$(HOOK_BUILD)/test/test_%: $(HOOK_BUILD)/test/test_%.o $(HOOK_BUILD)/test/check.o \
                           $(HOOK_BUILD)/test/wiretext.o $(addprefix $(HOOK_BUILD)/,$(HOOK_PURE))
	$(CC) -pthread -o $@ $^

# The launcher and the benchmark are ordinary driver-API programs: they link
# the CUDA stub (any libcuda.so.1 at run time: simgpu or a real driver).
$(BIN)/hook-launcher: $(HOOK_DIR)/tools/hook-launcher.c | cuda-headers
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS_BASE) -I$(CUDA_ROOT)/include -pthread -o $@ $< -L$(CUDA_STUB) -lcuda -ldl

$(BIN)/hook-bench: $(HOOK_DIR)/tools/hook-bench.c $(HOOK_DIR)/board_gen.h | cuda-headers
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS_BASE) -I$(CUDA_ROOT)/include -I$(HOOK_DIR) -pthread -o $@ $< -L$(CUDA_STUB) -lcuda

# test_core runs the core's scenarios (test/testdata/core; FIKIT_REWRITE=1
# rewrites them). circles fails if the library's files depend on each other
# in a circle (calls, data or includes).
test-hook: $(addprefix $(HOOK_BUILD)/test/,$(HOOK_TESTS)) $(HOOK_LIB)
	@set -e; for t in $(HOOK_TESTS); do \
	  echo "== hookclient $$t"; $(HOOK_BUILD)/test/$$t $(CURDIR) $(CUDA_ROOT)/include; done
	@echo "== hookclient circles"; $(GO) run ./$(HOOK_DIR)/tools/circles -src $(HOOK_DIR) \
	  $(addprefix $(HOOK_BUILD)/,$(HOOK_SRCS:.c=.o))

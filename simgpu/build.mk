# simgpu: the simulated libcuda.so.1 (owned by simgpu/).
#
#   make simgpu        bin/simgpu/libcuda.so.1 (+ libcuda.so link), bin/simgpu/simgpu-bench and
#                      bin/switch-probe (tests/gpu/calibrate.sh: runs on a GPU and on simgpu)
#   make test-simgpu   build and run the C tests in simgpu/tests/ (Go tests of the
#                      device model: go test ./simgpu/devmodel/)
#
# Objects go to $(BUILD)/simgpu/; header dependencies come from -MMD.

.PHONY: simgpu test-simgpu

SIMGPU_BIN   := $(BIN)/simgpu
SIMGPU_OBJ   := $(BUILD)/simgpu
SIMGPU_LIB   := $(SIMGPU_BIN)/libcuda.so.1
SIMGPU_CFLAGS = $(CFLAGS_BASE) -I$(CUDA_ROOT)/include -fvisibility=hidden -MMD -MP

SIMGPU_DM_SRC  := $(wildcard simgpu/devmodel/*.c)
SIMGPU_DRV_SRC := $(wildcard simgpu/driver/*.c)
SIMGPU_LIB_OBJ := $(patsubst simgpu/%.c,$(SIMGPU_OBJ)/%.o,$(SIMGPU_DM_SRC) $(SIMGPU_DRV_SRC))

SIMGPU_TEST_SRC  := $(filter-out simgpu/tests/testutil.c,$(wildcard simgpu/tests/*.c))
SIMGPU_TESTS     := $(patsubst simgpu/tests/%.c,$(SIMGPU_OBJ)/tests/%,$(SIMGPU_TEST_SRC))
SIMGPU_BENCH     := $(SIMGPU_BIN)/simgpu-bench

SIMGPU_PROBE     := $(BIN)/switch-probe

simgpu: $(SIMGPU_LIB) $(SIMGPU_BIN)/libcuda.so $(SIMGPU_BENCH) $(SIMGPU_PROBE)

# An ordinary driver-API program: it links the CUDA stub, so any libcuda.so.1
# runs it (simgpu's with LD_LIBRARY_PATH=bin/simgpu, or a GPU's).
$(SIMGPU_PROBE): simgpu/tools/switch-probe.c | cuda-headers
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) -I$(CUDA_ROOT)/include -o $@ $< -L$(CUDA_STUB) -lcuda

$(SIMGPU_OBJ)/%.o: simgpu/%.c | cuda-headers
	@mkdir -p $(@D)
	$(CC) $(SIMGPU_CFLAGS) -c $< -o $@

$(SIMGPU_LIB): $(SIMGPU_LIB_OBJ)
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-soname,libcuda.so.1 -Wl,-Bsymbolic-functions -Wl,-z,defs -o $@ $^ -lpthread -lrt

$(SIMGPU_BIN)/libcuda.so: $(SIMGPU_LIB)
	ln -sf libcuda.so.1 $@

# The benchmark and the tests link against the simulated driver itself.
SIMGPU_LINK = -L$(SIMGPU_BIN) -Wl,-rpath,$(SIMGPU_BIN) -lcuda -lpthread -lm

$(SIMGPU_BENCH): $(SIMGPU_OBJ)/tests/bench.o $(SIMGPU_OBJ)/tests/testutil.o $(SIMGPU_LIB) $(SIMGPU_BIN)/libcuda.so
	$(CC) -o $@ $(filter %.o,$^) $(SIMGPU_LINK)

$(SIMGPU_OBJ)/tests/%: $(SIMGPU_OBJ)/tests/%.o $(SIMGPU_OBJ)/tests/testutil.o $(SIMGPU_LIB) $(SIMGPU_BIN)/libcuda.so
	$(CC) -o $@ $(filter %.o,$^) $(SIMGPU_LINK)

# dm_*_test exercise the device model directly: they link its objects too.
SIMGPU_DM_OBJ := $(patsubst simgpu/%.c,$(SIMGPU_OBJ)/%.o,$(SIMGPU_DM_SRC))
$(SIMGPU_OBJ)/tests/dm_%: $(SIMGPU_OBJ)/tests/dm_%.o $(SIMGPU_OBJ)/tests/testutil.o $(SIMGPU_DM_OBJ) $(SIMGPU_LIB) $(SIMGPU_BIN)/libcuda.so
	$(CC) -o $@ $(filter %.o,$^) $(SIMGPU_LINK)

$(SIMGPU_OBJ)/tests/%.o: simgpu/tests/%.c | cuda-headers
	@mkdir -p $(@D)
	$(CC) $(SIMGPU_CFLAGS) -Isimgpu -c $< -o $@

# Each test uses its own FIKIT_SIMGPU_SHM (set inside the test), so tests never
# share a device with each other or with anything else running on the machine.
test-simgpu: simgpu $(filter-out %/bench,$(SIMGPU_TESTS))
	@fail=0; for t in $(filter-out %/bench,$(SIMGPU_TESTS)); do \
	  echo "== $$t"; $$t || fail=1; \
	done; exit $$fail

# Test objects are intermediate to the pattern rules: keep them, or every make rebuilds them.
.PRECIOUS: $(SIMGPU_OBJ)/tests/%.o

-include $(SIMGPU_LIB_OBJ:.o=.d) $(SIMGPU_OBJ)/tests/*.d

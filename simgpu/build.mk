# simgpu: the simulated libcuda.so.1 (owned by simgpu/).
.PHONY: simgpu test-simgpu
simgpu:
	@echo "simgpu: not built yet"
test-simgpu:
	@true

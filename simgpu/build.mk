# simgpu: the simulated libcuda.so.1 (owned by simgpu/).
.PHONY: simgpu
simgpu:
	@echo "simgpu: not built yet"

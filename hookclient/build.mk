# hookclient: libfikit_hook.so (owned by hookclient/).
.PHONY: hook test-c
hook:
	@echo "hook: not built yet"
test-c:
	@true

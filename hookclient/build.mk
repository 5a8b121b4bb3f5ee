# hookclient: libfikit_hook.so (owned by hookclient/).
.PHONY: hook test-hook
hook:
	@echo "hook: not built yet"
test-hook:
	@true

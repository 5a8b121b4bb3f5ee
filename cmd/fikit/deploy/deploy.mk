# Installing and packaging fikit (docs/deploy.md). Included by the top
# Makefile.
#
#   make install [PREFIX=/usr/local] [DESTDIR=]   fikit, the hook, the tools
#                                                 fikit demo/bench run, docs,
#                                                 the systemd unit and user
#   make uninstall [PREFIX=…] [DESTDIR=]          removes what install put
#   make image [IMAGE=localhost/fikit:VERSION]    an OCI image of the daemon and
#                                                 the hook (buildah or podman),
#                                                 also saved as build/fikit-image.tar
#
# The layout (fikit finds its companions relative to its own binary):
#   $(PREFIX)/bin/fikit
#   $(PREFIX)/lib/fikit/libfikit_hook.so    where `fikit run` looks (cmd/fikit/paths.go)
#   $(PREFIX)/lib/fikit/fikit-replay        the trace replayer of fikit demo and
#   $(PREFIX)/lib/fikit/simgpu/libcuda.so.1   fikit bench, and the simulated driver
#   $(PREFIX)/lib/fikit/fikit -> ../../bin/fikit   (never on the loader's path)
#   $(PREFIX)/share/doc/fikit/              README.md, docs/, hookclient/README.md
#   $(SYSTEMDUNITDIR)/fikit.service         fikit serve as user fikit, group fikit
#   $(SYSUSERSDIR)/fikit.conf               that user and group (systemd-sysusers)

PREFIX         ?= /usr/local
DESTDIR        ?=
BINDIR          = $(PREFIX)/bin
# Not configurable: fikit looks for the hook in <prefix>/lib/fikit.
FIKIT_LIBDIR    = $(PREFIX)/lib/fikit
DOCDIR         ?= $(PREFIX)/share/doc/fikit
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR    ?= $(PREFIX)/lib/sysusers.d
DEPLOY_DIR     := cmd/fikit/deploy
# What is installed as bin/fikit (the image's is built static), and whether
# fikit demo/bench's replayer and simulated driver come too.
INSTALL_FIKIT  ?= $(BIN)/fikit
INSTALL_TOOLS  ?= yes
INSTALL_DOCS    = README.md $(wildcard docs/*.md)

INSTALL_NEEDS = fikit hook
ifeq ($(INSTALL_TOOLS),yes)
INSTALL_NEEDS += replay simgpu
endif

.PHONY: install uninstall image
install: $(INSTALL_NEEDS)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(FIKIT_LIBDIR) $(DESTDIR)$(DOCDIR)/docs/img \
		$(DESTDIR)$(DOCDIR)/hookclient $(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(SYSUSERSDIR)
	install -m 0755 $(INSTALL_FIKIT) $(DESTDIR)$(BINDIR)/fikit
	install -m 0755 $(BIN)/libfikit_hook.so $(DESTDIR)$(FIKIT_LIBDIR)/libfikit_hook.so
ifeq ($(INSTALL_TOOLS),yes)
	install -d $(DESTDIR)$(FIKIT_LIBDIR)/simgpu
	install -m 0755 $(BIN)/fikit-replay $(DESTDIR)$(FIKIT_LIBDIR)/fikit-replay
	install -m 0755 $(BIN)/simgpu/libcuda.so.1 $(DESTDIR)$(FIKIT_LIBDIR)/simgpu/libcuda.so.1
	ln -sfn ../../bin/fikit $(DESTDIR)$(FIKIT_LIBDIR)/fikit
endif
	install -m 0644 README.md $(DESTDIR)$(DOCDIR)/README.md
	install -m 0644 $(wildcard docs/*.md) $(DESTDIR)$(DOCDIR)/docs/
	install -m 0644 $(wildcard docs/img/*.png) $(DESTDIR)$(DOCDIR)/docs/img/
	install -m 0644 hookclient/README.md $(DESTDIR)$(DOCDIR)/hookclient/README.md
	sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@DOCDIR@|$(DOCDIR)|g' $(DEPLOY_DIR)/fikit.service.in \
		>$(DESTDIR)$(SYSTEMDUNITDIR)/fikit.service
	chmod 0644 $(DESTDIR)$(SYSTEMDUNITDIR)/fikit.service
	install -m 0644 $(DEPLOY_DIR)/fikit.sysusers $(DESTDIR)$(SYSUSERSDIR)/fikit.conf

# Only what install puts: $(FIKIT_LIBDIR) and $(DOCDIR) are fikit's alone.
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/fikit $(DESTDIR)$(SYSTEMDUNITDIR)/fikit.service $(DESTDIR)$(SYSUSERSDIR)/fikit.conf
	rm -rf $(DESTDIR)$(FIKIT_LIBDIR) $(DESTDIR)$(DOCDIR)

# ---- the OCI image ----
# fikit is built static for it (cgo stays on: simgpu's device model, used by
# fikit sim and bench, is C; os/user and the resolver in Go), so the image
# is FROM scratch: a staging root from `make install PREFIX=/usr` without
# the tools (the replayer needs a libcuda), plus /etc/passwd and /etc/group
# naming root and nobody, and /tmp.
IMAGE_VERSION  = $(shell git describe --always --dirty 2>/dev/null || echo dev)
IMAGE         ?= localhost/fikit:$(IMAGE_VERSION)
IMAGE_ROOT     = $(BUILD)/image/root
IMAGE_TAR      = $(BUILD)/fikit-image.tar

# IMAGE_TAGS=osusergo,netgo,k8s builds the image's fikit with the pod
# informer, for the Helm chart (docs/kubernetes.md): client-go makes it
# about 38 MB larger, and make test does not build that one.
IMAGE_TAGS    ?= osusergo,netgo

$(BUILD)/image/fikit: FORCE
	@mkdir -p $(@D)
	CGO_ENABLED=1 $(GO) build -tags $(IMAGE_TAGS) -ldflags '-linkmode external -extldflags "-static"' -o $@ ./cmd/fikit

image: $(BUILD)/image/fikit hook
	@tool=$$(command -v buildah || command -v podman) || \
	  { echo "make image needs buildah or podman (apt-get install buildah)" >&2; exit 1; }; \
	rm -rf $(IMAGE_ROOT) && \
	$(MAKE) --no-print-directory install DESTDIR=$(IMAGE_ROOT) PREFIX=/usr INSTALL_TOOLS=no \
	  INSTALL_FIKIT=$(BUILD)/image/fikit >/dev/null && \
	rm -rf $(IMAGE_ROOT)/usr/lib/systemd $(IMAGE_ROOT)/usr/lib/sysusers.d && \
	install -d -m 0755 $(IMAGE_ROOT)/etc $(IMAGE_ROOT)/var/lib/fikit && install -d -m 1777 $(IMAGE_ROOT)/tmp && \
	printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' \
	  >$(IMAGE_ROOT)/etc/passwd && \
	printf 'root:x:0:\nnogroup:x:65534:\n' >$(IMAGE_ROOT)/etc/group && \
	echo "== $$tool: $(IMAGE)" && \
	if [ "$${tool##*/}" = buildah ]; then \
	  buildah bud --quiet --format oci --build-arg VERSION=$(IMAGE_VERSION) -f $(CURDIR)/$(DEPLOY_DIR)/Containerfile \
	    -t $(IMAGE) $(IMAGE_ROOT) && rm -f $(IMAGE_TAR) && buildah push --quiet $(IMAGE) oci-archive:$(IMAGE_TAR); \
	else \
	  podman build --quiet --format oci --build-arg VERSION=$(IMAGE_VERSION) -f $(CURDIR)/$(DEPLOY_DIR)/Containerfile \
	    -t $(IMAGE) $(IMAGE_ROOT) && rm -f $(IMAGE_TAR) && podman save --format oci-archive -o $(IMAGE_TAR) $(IMAGE); \
	fi && echo "$(IMAGE), saved as $(IMAGE_TAR)"

.PHONY: FORCE
FORCE:

#!/usr/bin/env bash
# Builds, once per machine, the control plane that `make test-k8s` runs
# against: kube-apiserver from k8s.io/kubernetes and etcd from
# go.etcd.io/etcd/server/v3, both from the Go module proxy, cached outside the
# repository (like the CUDA headers) under $FIKIT_CACHE/k8s/<versions>/.
#
# Prints the directory holding kube-apiserver and etcd. Idempotent: a second
# run with the same versions prints the directory and builds nothing. The
# first run takes about 20 minutes on 2 cores (kube-apiserver; etcd about 2);
# the log and the time each took are kept beside the binaries (build.log).
#
# k8s.io/kubernetes is not meant to be required as a module: its go.mod
# points every k8s.io/* staging module at ./staging/src/..., which a module
# requiring it cannot see. A throwaway module outside the repository requires
# it and replaces each staging module with its published v0.<minor>.<patch>;
# the list of staging modules is read from that release's own go.mod.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.7.3}
STAGING_VERSION=v0.${K8S_VERSION#v1.}
CACHE=${FIKIT_CACHE:-$HOME/.cache/fikit}/k8s/kube-${K8S_VERSION}-etcd-${ETCD_VERSION}
GO=${GO:-go}

if [ -x "$CACHE/kube-apiserver" ] && [ -x "$CACHE/etcd" ]; then
	echo "$CACHE"
	exit 0
fi
mkdir -p "$CACHE"
log=$CACHE/build.log
work=$(mktemp -d "$CACHE/.work.XXXXXX")
trap 'rm -rf "$work"' EXIT
# Mine: a nice build leaves the other work on this machine its CPUs.
nice=(nice -n 10)

build_etcd() {
	[ -x "$CACHE/etcd" ] && return 0
	local d=$work/etcd start=$SECONDS
	mkdir -p "$d"
	cat >"$d/go.mod" <<MOD
module fikit.local/etcdbuild

go 1.26

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
MOD
	cat >"$d/tools.go" <<'SRC'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
SRC
	(cd "$d" && GOFLAGS=-mod=mod "$GO" mod tidy -e >>"$log" 2>&1 &&
		GOFLAGS=-mod=mod "${nice[@]}" "$GO" build -trimpath -o "$CACHE/etcd.tmp" go.etcd.io/etcd/server/v3 >>"$log" 2>&1)
	mv "$CACHE/etcd.tmp" "$CACHE/etcd"
	echo "etcd $ETCD_VERSION built in $((SECONDS - start)) s" >>"$log"
}

build_apiserver() {
	[ -x "$CACHE/kube-apiserver" ] && return 0
	local d=$work/kube start=$SECONDS
	mkdir -p "$d"
	# The release's own go.mod names its staging modules.
	local kmod
	kmod=$(cd "$work" && "$GO" mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
		sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
	{
		echo "module fikit.local/kubebuild"
		echo
		echo "go 1.26"
		echo
		echo "require k8s.io/kubernetes $K8S_VERSION"
		echo
		sed -n 's#^[[:space:]]*\(k8s\.io/[^ ]*\) => \./staging/.*#replace \1 => \1 '"$STAGING_VERSION"'#p' "$kmod"
	} >"$d/go.mod"
	cat >"$d/tools.go" <<'SRC'
//go:build tools

package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
SRC
	(cd "$d" && GOFLAGS=-mod=mod "$GO" mod tidy -e >>"$log" 2>&1 &&
		GOFLAGS=-mod=mod "${nice[@]}" "$GO" build -trimpath -o "$CACHE/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver >>"$log" 2>&1)
	mv "$CACHE/kube-apiserver.tmp" "$CACHE/kube-apiserver"
	echo "kube-apiserver $K8S_VERSION built in $((SECONDS - start)) s" >>"$log"
}

if ! build_etcd || ! build_apiserver; then
	echo "tests/k8s/tools.sh: build failed; see $log" >&2
	tail -n 20 "$log" >&2
	exit 1
fi
echo "$CACHE"

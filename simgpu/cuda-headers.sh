#!/usr/bin/env bash
# cuda-headers.sh — print a directory holding NVIDIA's real CUDA driver headers
# (include/cuda.h, CUDA >= 12.3) and the link stub (lib/libcuda.so), fetching
# them once per machine when no toolkit is installed.
#
# Order of preference:
#   1. $CUDA_HOME or $CUDA_PATH, then /usr/local/cuda, then /usr (an installed
#      toolkit or Debian's nvidia-cuda-dev), if its cuda.h is new enough;
#   2. a cache under ${FIKIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fikit};
#   3. otherwise Debian's non-free nvidia-cuda-dev (trixie, CUDA 12.4) is
#      downloaded with apt from the mirror this machine's own apt sources name,
#      its sha256 checked, and only the headers and libcuda stub extracted.
#
# Only the resulting directory goes to stdout; progress goes to stderr.
set -euo pipefail

MIN_VERSION=12030          # cuGetProcAddress_v2, cuFuncGetName, cuKernelGetName
SUITE=trixie               # the Debian release whose nvidia-cuda-dev is >= 12.3
PACKAGE=nvidia-cuda-dev

say() { printf 'cuda-headers: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

cuda_version() { # $1 = path to cuda.h; prints CUDA_VERSION or 0
	sed -n 's/^#define CUDA_VERSION \([0-9][0-9]*\).*/\1/p' "$1" 2>/dev/null | head -n1 || true
}

# A usable directory has include/cuda.h new enough and a libcuda.so to link.
usable() { # $1 = dir; echo the stub dir if usable
	local dir=$1 v stub
	[ -f "$dir/include/cuda.h" ] || return 1
	v=$(cuda_version "$dir/include/cuda.h"); [ "${v:-0}" -ge "$MIN_VERSION" ] || return 1
	for stub in "$dir/lib" "$dir/lib64/stubs" "$dir/lib/stubs" "$dir/lib/x86_64-linux-gnu/stubs" \
		"$dir/targets/x86_64-linux/lib/stubs"; do
		[ -e "$stub/libcuda.so" ] && return 0
	done
	return 1
}

stub_dir() { # $1 = usable dir; prints the directory holding libcuda.so
	local stub
	for stub in "$1/lib" "$1/lib64/stubs" "$1/lib/stubs" "$1/lib/x86_64-linux-gnu/stubs" \
		"$1/targets/x86_64-linux/lib/stubs"; do
		[ -e "$stub/libcuda.so" ] && { echo "$stub"; return; }
	done
}

case "${1:-}" in
	--stub) mode=stub ;;          # print the directory of libcuda.so instead
	""|--include) mode=root ;;
	*) die "usage: $0 [--include|--stub]" ;;
esac

emit() { if [ "$mode" = stub ]; then stub_dir "$1"; else echo "$1"; fi; exit 0; }

for dir in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda /usr; do
	[ -n "$dir" ] && usable "$dir" && emit "$dir"
done

cache_root=${FIKIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fikit}
cache=$cache_root/cuda-headers
[ -f "$cache/.complete" ] && usable "$cache" && emit "$cache"

command -v apt-get >/dev/null || die "no CUDA >= 12.3 headers found and apt-get is missing; set CUDA_HOME to a CUDA toolkit"
command -v dpkg-deb >/dev/null || die "dpkg-deb is missing; set CUDA_HOME to a CUDA toolkit"

# The Debian mirror comes from this machine's own apt configuration: the first
# archive (not -security) URI in sources.list or a deb822 .sources file.
mirror=""
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
	[ -f "$f" ] || continue
	mirror=$(awk '$1=="deb" { for (i=2;i<=NF;i++) if ($i ~ /^(https?|file):/) { if ($(i+1) !~ /-security/ && $i ~ /debian\/?$/) { print $i; exit } } }' "$f")
	[ -n "$mirror" ] && break
done
if [ -z "$mirror" ]; then
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		mirror=$(awk 'BEGIN{RS=""; FS="\n"}
			{ uri=""; suites=""; enabled=1
			  for (i=1;i<=NF;i++) {
			    if ($i ~ /^URIs:/) { sub(/^URIs:[ \t]*/, "", $i); split($i, u, /[ \t]+/); uri=u[1] }
			    if ($i ~ /^Suites:/) suites=$i
			    if ($i ~ /^Enabled:[ \t]*no/) enabled=0 }
			  if (enabled && uri ~ /debian\/?$/ && suites !~ /-security/) { print uri; exit } }' "$f")
		[ -n "$mirror" ] && break
	done
fi
[ -n "$mirror" ] || die "could not find a Debian archive URI in /etc/apt/sources.list*; set CUDA_HOME to a CUDA toolkit"

keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[ -f "$keyring" ] || die "$keyring is missing (package debian-archive-keyring)"

work=$(mktemp -d "${TMPDIR:-/tmp}/fikit-cuda.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
echo "deb [signed-by=$keyring] $mirror $SUITE non-free" >"$work/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
	-o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache"
	-o "APT::Architecture=amd64" -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root")

say "no CUDA >= 12.3 headers installed; fetching Debian $SUITE's $PACKAGE once into $cache"
say "mirror (from this machine's apt sources): $mirror"
apt-get "${apt_opts[@]}" -q update >&2 || die "apt-get update for $SUITE non-free failed"
line=$(apt-get "${apt_opts[@]}" -q --print-uris download "$PACKAGE" | grep "^'") ||
	die "apt could not locate $PACKAGE in $SUITE non-free"
url=$(echo "$line" | awk '{print $1}' | tr -d "'")
size=$(echo "$line" | awk '{print $3}')
sha=$(echo "$line" | awk '{print $4}' | sed 's/^SHA256://')
say "downloading $(basename "$url") ($((size / 1048576)) MiB)"
if [ -t 2 ] && command -v curl >/dev/null; then
	curl -fL --retry 3 --progress-bar -o "$work/pkg.deb" "$url" || die "download failed: $url"
else
	# Not a terminal (CI logs): one progress line every few seconds.
	(curl -fsSL --retry 3 -o "$work/pkg.deb" "$url" 2>"$work/curl.err" || wget -q -O "$work/pkg.deb" "$url") &
	fetch=$!
	while kill -0 "$fetch" 2>/dev/null; do
		sleep 3
		have=$(stat -c %s "$work/pkg.deb" 2>/dev/null || echo 0)
		say "  $((have / 1048576)) / $((size / 1048576)) MiB ($((have * 100 / size))%)"
	done
	wait "$fetch" || die "download failed: $url ($(cat "$work/curl.err" 2>/dev/null))"
fi
say "verifying sha256"
echo "$sha  $work/pkg.deb" | sha256sum -c --quiet - >&2 || die "sha256 mismatch for $url"

say "extracting headers and the libcuda stub"
mkdir -p "$work/x"
dpkg-deb --fsys-tarfile "$work/pkg.deb" |
	tar -x -C "$work/x" --wildcards './usr/include/cuda*.h' './usr/lib/x86_64-linux-gnu/stubs/libcuda.so' ||
	die "extraction failed"
rm -f "$work/pkg.deb"
rm -rf "$cache.tmp"
mkdir -p "$cache.tmp/include" "$cache.tmp/lib"
cp "$work"/x/usr/include/cuda*.h "$cache.tmp/include/"
cp "$work/x/usr/lib/x86_64-linux-gnu/stubs/libcuda.so" "$cache.tmp/lib/"
echo "$url $sha" >"$cache.tmp/.complete"
rm -rf "$cache" && mkdir -p "$cache_root" && mv "$cache.tmp" "$cache"
usable "$cache" || die "extracted headers in $cache are not usable"
say "cached CUDA $(cuda_version "$cache/include/cuda.h") headers in $cache"
emit "$cache"

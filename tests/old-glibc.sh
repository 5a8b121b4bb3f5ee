#!/usr/bin/env bash
# old-glibc.sh — print a directory holding an older glibc than this
# machine's: Debian 11's (bullseye, glibc 2.31, from before 2.34 merged
# libpthread and libdl into libc), fetched once per machine with apt from the
# Debian mirror this machine's apt sources name, and cached under
# ${FIKIT_CACHE:-~/.cache/fikit}/glibc-2.31. tests/glibc_floor_test.go loads
# the hook with its dynamic loader:
#
#   DIR/lib/x86_64-linux-gnu/ld-2.31.so --library-path DIR/lib/x86_64-linux-gnu \
#       --preload bin/libfikit_hook.so DIR/usr/bin/getconf GNU_LIBC_VERSION
#
# Only the directory goes to stdout; progress and errors go to stderr.
set -euo pipefail
SUITE=bullseye
VERSION=2.31
say() { printf 'old-glibc: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

cache=${FIKIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fikit}/glibc-$VERSION
usable() { [ -x "$1/lib/x86_64-linux-gnu/ld-$VERSION.so" ] && [ -x "$1/usr/bin/getconf" ]; }
if [ -f "$cache/.complete" ] && usable "$cache"; then
	echo "$cache"
	exit 0
fi
[ "$(uname -m)" = x86_64 ] || die "only for x86-64"
command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || die "needs apt-get and dpkg-deb (Debian)"
mirror=$(apt-get indextargets --format '$(REPO_URI)' 2>/dev/null | grep -E '/debian/?$' | head -n1) ||
	die "no Debian archive in this machine's apt sources"
[ -n "$mirror" ] || die "no Debian archive in this machine's apt sources"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[ -f "$keyring" ] || die "$keyring is missing (package debian-archive-keyring)"

work=$(mktemp -d "${TMPDIR:-/tmp}/fikit-glibc.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/x"
: >"$work/status" # nothing installed: the candidates are bullseye's, not this machine's
echo "deb [signed-by=$keyring] $mirror $SUITE main" >"$work/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
	-o "Dir::State::Lists=$work/lists" -o "Dir::State::Status=$work/status" -o "Dir::Cache=$work/cache"
	-o "APT::Architecture=amd64" -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root")
say "fetching Debian $SUITE's libc6 and libc-bin (glibc $VERSION) once into $cache, from $mirror"
apt-get "${apt_opts[@]}" -q update >&2 || die "apt-get update for $SUITE failed"
(cd "$work" && apt-get "${apt_opts[@]}" -q download libc6 libc-bin >&2) || die "apt-get download failed"
for deb in "$work"/*.deb; do
	dpkg-deb -x "$deb" "$work/x" || die "extracting $deb failed"
done
usable "$work/x" || die "the packages hold no ld-$VERSION.so or getconf"
rm -rf "$cache.tmp" && mkdir -p "$(dirname "$cache")"
mv "$work/x" "$cache.tmp"
echo "$SUITE libc6 libc-bin" >"$cache.tmp/.complete"
rm -rf "$cache" && mv "$cache.tmp" "$cache"
say "cached in $cache"
echo "$cache"

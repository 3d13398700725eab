#!/bin/sh
# Build the guest kernel from Debian's linux-source-6.1 into the cache, keyed by a hash of
# the config fragment, the recipe version below and the source package version. Prints the
# directory that holds bzImage and vmlinux. A second run with the same inputs does nothing;
# concurrent runs wait for each other (a lock in the cache) instead of building twice.
#
# usage: guest/kernel/build.sh [CACHE_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cache=${1:-${SANDBOX_CACHE:-${SANDBOX_HOME:-/var/lib/sandbox}/cache}}
src=/usr/src/linux-source-6.1.tar.xz
[ -r "$src" ] || { echo "guest kernel: $src missing (apt-get install linux-source-6.1)" >&2; exit 1; }
# Bump when the build steps below change what they produce (comments do not count).
recipe=1
ver=$(dpkg-query -W -f='${Version}' linux-source-6.1 2>/dev/null || echo unknown)
key=$( (cat "$here/config.fragment"; echo "recipe $recipe"; echo "$ver") | sha256sum | cut -c1-16)
out="$cache/kernel/$key"
if [ -f "$out/bzImage" ] && [ -f "$out/vmlinux" ]; then
	echo "$out"
	exit 0
fi
mkdir -p "$cache/kernel"
exec 9>"$cache/kernel/.lock"
flock 9
if [ -f "$out/bzImage" ] && [ -f "$out/vmlinux" ]; then
	echo "$out" # built by a concurrent run while we waited
	exit 0
fi
work=$(mktemp -d "$cache/kernel/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "guest kernel: building $key from linux-source $ver (a few minutes, once)" >&2
tar -C "$work" -xf "$src"
ksrc="$work/linux-source-6.1"
cd "$ksrc"
make -s tinyconfig >&2
KCONFIG_CONFIG=.config scripts/kconfig/merge_config.sh -m .config "$here/config.fragment" >/dev/null
make -s olddefconfig >&2
# Every option the fragment asks for must have survived olddefconfig (a dependency we missed
# would silently drop it).
missing=0
while IFS= read -r line; do
	case "$line" in CONFIG_*=n) opt=${line%%=*}
		grep -q "^$opt=" .config && { echo "guest kernel: $opt still set" >&2; missing=1; } ;;
	CONFIG_*) grep -qx "$line" .config || { echo "guest kernel: $line did not stick" >&2; missing=1; } ;;
	esac
done < "$here/config.fragment"
[ "$missing" = 0 ] || exit 1
make -s -j"$(nproc)" bzImage >&2
mkdir -p "$work/out"
cp arch/x86/boot/bzImage vmlinux .config "$work/out/"
rm -rf "$out"
mv "$work/out" "$out"
echo "$out"

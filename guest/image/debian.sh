#!/bin/sh
# The default image: Debian 12 (bookworm), debootstrap's minbase plus a shell, python3, a C
# toolchain (gcc and the C library's headers, libc6-dev), make, git, curl and the CA
# certificates, in a 2 GiB sparse ext4 (~0.55 GB used).
# The mirror is the one this machine's apt sources use for bookworm (or $DEBIAN_MIRROR).
# Building takes about a minute; the result is cached.
#
# usage: guest/image/debian.sh
# Prints the path of rootfs.ext4 (under $SANDBOX_CACHE/images, see lib.sh and docs/images.md).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=guest/image/lib.sh
. "$here/lib.sh"
image_init debian "$here/debian.sh"

if [ "$#" -ne 0 ]; then
	echo "usage: $0" >&2
	exit 2
fi

suite=bookworm
include=bash,coreutils,python3,gcc,libc6-dev,make,git,ca-certificates,curl
size=2G

# debian_mirror: the first http(s) URI that this machine's apt sources use for $suite, in the
# one-line format (sources.list, *.list) or deb822 (*.sources). apt reads no other files.
debian_mirror() {
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		awk -v suite="$suite" '
			$1 == "deb" {
				i = 2
				if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
				if ($(i + 1) == suite && $i ~ /^https?:\/\//) { print $i; exit }
			}' "$f"
	done
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		# one paragraph per blank-line-separated block; fields are case-insensitive
		awk -v suite="$suite" '
			function flush() {
				if (done) return
				if (types ~ /(^| )deb( |$)/ && enabled != "no" && (" " suites " ") ~ (" " suite " "))
					for (k = 1; k <= nu; k++) if (u[k] ~ /^https?:\/\//) { print u[k]; done = 1; exit }
				types = ""; suites = ""; enabled = ""; nu = 0
			}
			/^[ \t]*$/ { flush(); next }
			/^#/ { next }
			{
				key = tolower($1); sub(/:$/, "", key)
				val = $0; sub(/^[^:]*:[ \t]*/, "", val)
				if (key == "types") types = val
				else if (key == "suites") suites = val
				else if (key == "enabled") enabled = tolower(val)
				else if (key == "uris") nu = split(val, u, /[ \t]+/)
			}
			END { flush() }' "$f"
	done
}

image_need_root
image_need_pkg debootstrap e2fsprogs debian-archive-keyring
mirror=${DEBIAN_MIRROR:-$(debian_mirror | head -n 1)}
[ -n "$mirror" ] || image_die "no $suite mirror in /etc/apt/sources.list{,.d/*}; set DEBIAN_MIRROR"

# The key: what debootstrap will install is what the mirror has today, unknowable before the
# download; the versions this machine's apt lists give for the packages asked for stand in
# for it (they change when the mirror does, after an apt-get update). The mirror itself is
# not part of the key: any mirror of $suite serves the same packages.
versions=$(
	# shellcheck disable=SC2046 # split the list into package names
	apt-cache policy $(echo "$include" | tr , ' ') 2>/dev/null |
		awk '/^[^ ]/ { p = $1 } /Candidate:/ { print p, $2 }'
)
image_begin "suite $suite
include $include
size $size
debootstrap $(image_pkg_version debootstrap)
e2fsprogs $(image_pkg_version e2fsprogs)
$versions"

r=$image_root
image_log "debootstrap $suite from $mirror"
if ! debootstrap --variant=minbase --include="$include" "$suite" "$r" "$mirror" \
	> "$image_work/debootstrap.log" 2>&1; then
	tail -n 20 "$image_work/debootstrap.log" >&2
	image_die "debootstrap failed (the last lines are above)"
fi
image_log "debootstrap done at $(image_elapsed) s"

# What debootstrap copied from this machine, or that must differ per sandbox.
echo sandbox > "$r/etc/hostname"
cat > "$r/etc/hosts" <<'HOSTS'
127.0.0.1	localhost
127.0.1.1	sandbox
HOSTS
rm -f "$r/etc/resolv.conf"
echo '# the sandbox network is set up at boot' > "$r/etc/resolv.conf"
rm -f "$r/etc/machine-id" "$r/var/lib/dbus/machine-id"
# Caches that only make the image bigger: downloaded .debs and apt's package lists.
rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/cache/apt/*.bin "$r"/var/lib/apt/lists/*
rm -rf "$r"/var/log/* "$r"/tmp/* "$r"/var/tmp/*
mkdir -p "$r/var/lib/apt/lists/partial"
# The image's identity, in the os-release fields meant for it (as mkosi does): /etc/os-release
# is a link to base-files' /usr/lib/os-release.
cat >> "$r/usr/lib/os-release" <<OSREL
IMAGE_ID=debian
IMAGE_VERSION=$image_key
OSREL
dpkg-query --admindir="$r/var/lib/dpkg" -W -f='${Package} ${Version}\n' > "$image_work/packages"

image_finish "$size"

#!/bin/sh
# The default image: Debian 12 (bookworm), debootstrap's minbase, then apt-get install of the
# packages listed in debian.packages (a C and C++ toolchain, Python with pip and venv, Node.js
# with npm, git, curl and the usual tools; docs/images.md), in a 4 GiB sparse ext4 (~874 MiB
# used). The mirror is the one this machine's apt sources use for bookworm (or $DEBIAN_MIRROR).
# Building takes about 1.5 minutes; the result is cached.
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
# the list, without its comments: one line of package names
packages=$(sed 's/#.*//' "$here/debian.packages" | tr -s ' \t\n' '  ' | sed 's/^ //; s/ $//')
size=4G

# debian_mirror SUITE: the first http(s) URI that this machine's apt sources use for SUITE, in
# the one-line format (sources.list, *.list) or deb822 (*.sources). apt reads no other files.
debian_mirror() {
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		awk -v suite="$1" '
			$1 == "deb" {
				i = 2
				if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
				if ($(i + 1) == suite && $i ~ /^https?:\/\//) { print $i; exit }
			}' "$f"
	done
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		# one paragraph per blank-line-separated block; fields are case-insensitive
		awk -v suite="$1" '
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
mirror=${DEBIAN_MIRROR:-$(debian_mirror "$suite" | head -n 1)}
[ -n "$mirror" ] || image_die "no $suite mirror in /etc/apt/sources.list{,.d/*}; set DEBIAN_MIRROR"
# The image's apt sources: the release, and its point-release and security updates where this
# machine's sources name them (a fresh computer is patched). "URI SUITE" lines.
sources="$mirror $suite"
for _s in "$suite-updates" "$suite-security"; do
	_u=$(debian_mirror "$_s" | head -n 1)
	[ "$_s" = "$suite-updates" ] && [ -n "${DEBIAN_MIRROR:-}" ] && _u=$DEBIAN_MIRROR
	if [ -n "$_u" ]; then
		sources="$sources
$_u $_s"
	else
		image_log "warning: no $_s in this machine's apt sources: the image goes without it"
	fi
done

# The key: what will be installed is what the suites have today, unknowable before the
# download. Each suite's release file in this machine's apt lists (InRelease, signed, with the
# hash of every package index) stands in for it: it changes when the suite does, which the
# machine sees after an apt-get update. Without the release's, the versions apt-cache gives
# for the packages asked for stand in (a package from another repository can show there).
# The mirrors' names are not in the key: any mirror of a suite serves the same packages.
suite_releases() {
	echo "$sources" | while read -r _u _s; do
		_l=/var/lib/apt/lists/$(echo "$_u" | sed 's|^[a-z]*://||; s|/*$||; s|/|_|g')_dists_$_s
		if [ -f "${_l}_InRelease" ]; then
			echo "release $_s $(sha256sum < "${_l}_InRelease" | cut -c1-64)"
		elif [ -f "${_l}_Release" ]; then
			echo "release $_s $(sha256sum < "${_l}_Release" | cut -c1-64)"
		elif [ "$_s" = "$suite" ]; then
			# shellcheck disable=SC2086 # split the list into package names
			apt-cache policy $packages 2>/dev/null |
				awk '/^[^ ]/ { p = $1 } /Candidate:/ { print p, $2 }'
		fi
	done
}
image_begin "suite $suite
sources $(echo "$sources" | awk '{ printf "%s ", $2 }')
packages $packages
size $size
debootstrap $(image_pkg_version debootstrap)
e2fsprogs $(image_pkg_version e2fsprogs)
$(suite_releases)"

r=$image_root
image_log "debootstrap $suite from $mirror"
if ! debootstrap --variant=minbase "$suite" "$r" "$mirror" > "$image_work/debootstrap.log" 2>&1; then
	tail -n 20 "$image_work/debootstrap.log" >&2
	image_die "debootstrap failed (the last lines are above)"
fi
image_log "debootstrap done at $(image_elapsed) s"

# The packages, by the image's own apt (debootstrap's resolver takes the first of a choice
# and cannot place virtual packages: npm's dependencies defeat it). For the build only: the
# host's resolver, /proc (dpkg's scripts read it), and no service started (no init runs).
# sources.list names the suites, for the build and for an apt-get in a sandbox.
echo "$sources" | awk '{ print "deb " $1 " " $2 " main" }' > "$r/etc/apt/sources.list"
cat /etc/resolv.conf > "$r/etc/resolv.conf"
printf '#!/bin/sh\nexit 101\n' > "$r/usr/sbin/policy-rc.d"
chmod 0755 "$r/usr/sbin/policy-rc.d"
mount -t proc proc "$r/proc"
# Translations, manual pages (no man-db) and documentation but the licences: ~110 MB of a
# ~1 GB image that a sandbox working in C.UTF-8 never reads. In dpkg's own configuration, so
# a package installed later in a sandbox is trimmed the same; what debootstrap unpacked
# before it is removed by hand.
mkdir -p "$r/etc/dpkg/dpkg.cfg.d"
cat > "$r/etc/dpkg/dpkg.cfg.d/sandbox-excludes" <<'EXCL'
# The sandbox image keeps no translations, manual pages or documentation but the licences
# (guest/image/debian.sh, docs/images.md).
path-exclude=/usr/share/locale/*
path-include=/usr/share/locale/locale.alias
path-exclude=/usr/share/man/*
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
EXCL
find "$r/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
find "$r/usr/share/man" -mindepth 1 -maxdepth 1 -exec rm -rf {} +
find "$r/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
in_root() {
	chroot "$r" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
		LANG=C.UTF-8 "$@" >> "$image_work/apt.log" 2>&1 || {
		tail -n 20 "$image_work/apt.log" >&2
		image_die "in the image: $* failed (the last lines are above)"
	}
}
in_root apt-get update -q
in_root apt-get upgrade -y -q
# shellcheck disable=SC2086 # split the list into package names
in_root apt-get install -y -q --no-install-recommends $packages
in_root apt-get clean
umount "$r/proc"
rm -f "$r/usr/sbin/policy-rc.d"
image_log "packages installed at $(image_elapsed) s"

# Locale and time: C.UTF-8 (glibc's built-in UTF-8 locale, no locales package needed) and UTC.
echo 'LANG=C.UTF-8' > "$r/etc/default/locale"
ln -sf /usr/share/zoneinfo/Etc/UTC "$r/etc/localtime"
echo Etc/UTC > "$r/etc/timezone"
# A sandbox is disposable: `pip install` outside a venv installs into /usr/local, as in the
# python images agents know, instead of refusing (PEP 668's marker; Debian's own packages
# stay in /usr/lib/python3/dist-packages, apart from what pip installs).
rm -f "$r"/usr/lib/python3*/EXTERNALLY-MANAGED
# pip, in a venv too, finds setuptools and wheel for a build (an isolated one included) among
# Debian's wheels when there is no index (no network, or --no-index), and does not warn that
# it runs as root, which every command in a sandbox does.
cat > "$r/etc/pip.conf" <<'PIP'
[global]
find-links = /usr/share/python-wheels
root-user-action = ignore
PIP

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

# Shared by the image recipes (guest/image/*.sh), sourced, not run. A recipe:
#   . "$here/lib.sh"
#   image_init NAME "$0"                      # name it, find the cache
#   image_need_root; image_need_pkg PKG...    # what it needs
#   image_begin "$(inputs)"                   # key; exits printing the path if cached
#   ... fill "$image_root" ...
#   image_finish SIZE                         # mke2fs, manifest, rename into place, print path
# Everything goes to stderr but the final path, which goes to stdout.
#
# The image lands in $image_cache/NAME-KEY/ (rootfs.ext4 + manifest), KEY = the first 16 hex
# digits of the sha256 of this file, the recipe, and the recipe's inputs (package versions,
# files it copies in). It is built in a temporary directory beside it and renamed into place,
# so a reader never sees half an image, and a second run with the same inputs does nothing.

image_cache=${SANDBOX_CACHE:-${SANDBOX_HOME:-/var/lib/sandbox}/cache}/images
image_lib=$(cd "$(dirname "$0")" && pwd)/lib.sh

# image_log MSG...: one progress line on stderr.
image_log() {
	echo "image $image_name: $*" >&2
}

# image_die MSG...: one error line on stderr, exit 1.
image_die() {
	echo "image $image_name: error: $*" >&2
	exit 1
}

# image_init NAME RECIPE: set the image's name and the recipe file that defines it.
image_init() {
	image_name=$1
	image_recipe=$2
	image_start=$(date +%s.%N)
	image_work=
	umask 022 # the modes of what the recipe creates must not depend on the caller's umask
}

# image_elapsed: seconds since image_init, one decimal.
image_elapsed() {
	awk -v a="$image_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'
}

# image_need_root: file owners in the image come from the tree, and debootstrap needs root.
image_need_root() {
	[ "$(id -u)" = 0 ] || image_die "must run as root (the image's files must belong to root)"
}

# image_pkg_version PKG: the installed version of PKG on this machine, or "none".
image_pkg_version() {
	dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo none
}

# image_need_pkg PKG...: install the host packages that are missing (apt-get update first if
# the install fails on stale lists).
image_need_pkg() {
	_missing=
	for _p in "$@"; do
		case "$(dpkg-query -W -f='${Status}' "$_p" 2>/dev/null)" in
		*" installed") ;;
		*) _missing="$_missing $_p" ;;
		esac
	done
	[ -n "$_missing" ] || return 0
	image_log "installing host packages:$_missing"
	# shellcheck disable=SC2086 # a list of package names
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q $_missing >&2; then
		DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
		# shellcheck disable=SC2086
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q $_missing >&2
	fi
}

# image_cleanup: unmount whatever a builder left mounted in the work dir (debootstrap mounts
# proc and sys in its target), deepest first, then remove it without crossing filesystems.
image_cleanup() {
	[ -n "$image_work" ] && [ -d "$image_work" ] || return 0
	awk -v w="$image_work/" 'index($2, w) == 1 { print $2 }' /proc/self/mounts | sort -r |
		while IFS= read -r _m; do umount -l "$_m" 2>/dev/null || true; done
	rm -rf --one-file-system "$image_work"
}

# image_begin INPUTS: compute the key from this file, the recipe and INPUTS (text: versions,
# hashes of files copied in). If the image exists, print its path and exit 0. Otherwise make
# the work dir: $image_root is the tree to fill, $image_key and $image_dir are set.
image_begin() {
	image_key=$( (cat "$image_lib" "$image_recipe"; printf '%s\n' "$1") | sha256sum | cut -c1-16)
	image_inputs=$1
	image_dir=$image_cache/$image_name-$image_key
	if [ -f "$image_dir/rootfs.ext4" ]; then
		echo "$image_dir/rootfs.ext4"
		exit 0
	fi
	mkdir -p "$image_cache"
	image_work=$(mktemp -d "$image_cache/.$image_name-$image_key.XXXXXX")
	trap image_cleanup EXIT
	trap 'exit 1' HUP INT TERM
	image_root=$image_work/root
	mkdir -m 0755 "$image_root" "$image_work/out"
	image_log "building $image_name-$image_key in $image_work"
}

# image_uuid: a filesystem UUID made from the key, so the image names its recipe (blkid).
image_uuid() {
	_h=$(printf '%s' "$image_name-$image_key" | sha256sum)
	echo "$_h" | awk '{ h = $1; printf "%s-%s-4%s-8%s-%s\n", substr(h, 1, 8), substr(h, 9, 4),
		substr(h, 14, 3), substr(h, 18, 3), substr(h, 21, 12) }'
}

# image_finish SIZE: make rootfs.ext4 (sparse, SIZE as mke2fs takes it) from $image_root,
# write the manifest, rename the result into place and print the image's path.
image_finish() {
	_img=$image_work/out/rootfs.ext4
	_uuid=$(image_uuid)
	image_log "mke2fs ($1) at $(image_elapsed) s"
	mke2fs -q -t ext4 -d "$image_root" -L "sandbox-$image_name" -U "$_uuid" \
		-E "hash_seed=$_uuid" "$_img" "$1" >&2
	chmod 0444 "$_img" # a base image: the VMM stacks overlays on it, nobody writes it
	{
		echo "name: $image_name"
		echo "key: $image_key"
		echo "uuid: $_uuid"
		echo "size: $1"
		echo "used_kib: $(du -k "$_img" | cut -f1)"
		echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
		echo "build_seconds: $(image_elapsed)"
		echo "inputs: |"
		printf '%s\n' "$image_inputs" | sed 's/^/  /'
		if [ -f "$image_work/packages" ]; then
			echo "packages: |"
			sed 's/^/  /' "$image_work/packages"
		fi
	} > "$image_work/out/manifest"
	# mv -T renames the directory itself; it fails if another build got there first, which
	# is fine as long as that one is complete
	if ! mv -T "$image_work/out" "$image_dir" 2>/dev/null; then
		[ -f "$image_dir/rootfs.ext4" ] || image_die "cannot move the image to $image_dir"
		image_log "another build finished first; using it"
	fi
	image_log "done in $(image_elapsed) s: $(du -h "$image_dir/rootfs.ext4" | cut -f1) used of $1"
	echo "$image_dir/rootfs.ext4"
}

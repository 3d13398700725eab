#!/bin/sh
# sandboxctl images import --oci, natively (no guest): archives written by oci_make.py (an OCI
# layout as a tar and as a directory, a docker save tar; 3 layers) are imported and the root
# file system is read back with debugfs, without a mount: the whiteout and the opaque directory
# applied, the setuid file's owner and mode, the symlink, the hard link, the xattrs (user.*
# kept, trusted.* skipped), the skipped device,
# the mount points, exec.conf's exact text. Then the hostile archives are refused, each with
# its message, exit status 1, nothing installed, no staging directory left, nothing written in
# the canary directory their links point at; a leftover 3000 directories deep is removed by
# the next import of its name.
#
# usage: oci_import.sh SANDBOXCTL
set -u
here=$(cd "$(dirname "$0")" && pwd)
ctl=$1
. "$here/check_lib.sh"

command -v debugfs >/dev/null || { echo "SKIP: no debugfs (e2fsprogs)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# the staging tree is $SANDBOX_HOME/images/.NAME.PID/staging: ../../../../ from its root is
# $work, so the hostile symlink's ../../../../tmp/CANARY lands in $work/tmp
SANDBOX_HOME=$work/home
export SANDBOX_HOME
mkdir -p "$work/tmp" "$SANDBOX_HOME"
bb=/bin/busybox
[ -x "$bb" ] || bb=
CANARY=$work/tmp python3 "$here/oci_make.py" "$work/arch" $bb || fail "oci_make.py"
echo kernel >"$work/kernel"
echo initrd >"$work/initrd"
kargs="--kernel $work/kernel --initrd $work/initrd"

# no debian or busybox image to take a kernel from
"$ctl" images import x --oci "$work/arch/good-oci.tar" >"$work/out" 2>&1
st=$?
if [ "$st" != 2 ] || ! grep -q 'give --kernel and --initrd' "$work/out"; then
	fail "import without a kernel: status $st, $(cat "$work/out")"
fi

# with a busybox image installed, its kernel and initrd are the default
echo rootfs >"$work/rootfs"
"$ctl" images import busybox --kernel "$work/kernel" --initrd "$work/initrd" --rootfs "$work/rootfs" \
	>/dev/null || fail "import of a stand-in busybox image"
"$ctl" images import dflt --oci "$work/arch/good-oci.tar" >"$work/out" 2>&1 ||
	fail "import with the default kernel: $(cat "$work/out")"
cmp -s "$SANDBOX_HOME/images/dflt/initrd" "$work/initrd" || fail "the initrd is not busybox's"
rm -rf "$SANDBOX_HOME/images/busybox" "$SANDBOX_HOME/images/dflt"
echo "ok: the kernel and initrd default to the busybox image's"

# stat FS PATH: debugfs's stat of PATH
dstat() {
	debugfs -R "stat $2" "$1" 2>/dev/null
}

# shellcheck disable=SC2016 # the image's Cmd, as it is
expect_conf='env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
env GREETING=hello world
env APP_MODE=test
workdir /app/work
user 1000:1000
entrypoint /bin/sh
entrypoint -c
cmd echo entrypoint ran as $(id -u) in $(pwd)'

for a in good-oci.tar good-oci good-docker.tar; do
	name=img-$(echo "$a" | tr -c 'a-z\n' '-')
	t0=$(date +%s%N)
	# shellcheck disable=SC2086 # the options are words
	"$ctl" images import "$name" --oci "$work/arch/$a" $kargs >"$work/out" 2>&1 ||
		fail "import $a: $(cat "$work/out")"
	ms=$((($(date +%s%N) - t0) / 1000000))
	grep -q 'dev/null: a character device (1, 3): skipped' "$work/out" ||
		fail "import $a: no warning for the device: $(cat "$work/out")"
	fs=$SANDBOX_HOME/images/$name/rootfs
	[ -f "$fs" ] || fail "$a: no rootfs"
	[ -f "$SANDBOX_HOME/images/$name/hash" ] || fail "$a: no hash"
	root=$(debugfs -R 'ls -p /' "$fs" 2>/dev/null)
	for d in bin etc dev proc sys run tmp app opq; do
		echo "$root" | grep -q "/$d/" || fail "$a: no /$d in the image: $root"
	done
	echo "$root" | grep -q '/keep.txt/' || fail "$a: keep.txt missing"
	echo "$root" | grep -q '/gone.txt/' && fail "$a: gone.txt survived its whiteout"
	opq=$(debugfs -R 'ls -p /opq' "$fs" 2>/dev/null | awk -F/ 'NF > 5 && $6 != "." && $6 != ".." { print $6 }')
	[ "$opq" = new ] || fail "$a: /opq holds '$opq', not only the upper layer's new"
	s=$(dstat "$fs" /app/suid)
	for want in 'Mode:  04755' 'User:  1000   Group:  1000' 'Links: 2'; do
		echo "$s" | grep -q "$want" || fail "$a: /app/suid is not '$want': $s"
	done
	h=$(dstat "$fs" /app/hard | head -n 1)
	[ "$h" = "$(echo "$s" | head -n 1)" ] || fail "$a: /app/hard is not /app/suid's inode: $h"
	dstat "$fs" /app/link | grep -q 'Fast link dest: "../etc/hostname"' ||
		fail "$a: /app/link: $(dstat "$fs" /app/link)"
	dstat "$fs" /bin/sh | grep -q 'Fast link dest: "busybox"' || fail "$a: /bin/sh"
	x=$(debugfs -R 'ea_list /app/xattr' "$fs" 2>/dev/null)
	echo "$x" | grep -q 'user.note.*hello' || fail "$a: /app/xattr lost user.note: $x"
	echo "$x" | grep -q trusted && fail "$a: /app/xattr has trusted.evil: $x"
	grep -q 'xattr trusted.evil skipped' "$work/out" || fail "$a: no warning for trusted.evil"
	dstat "$fs" /tmp | grep -q 'Mode:  01777' || fail "$a: /tmp's mode"
	dstat "$fs" /app/work | grep -q 'Type: directory' || fail "$a: no WorkingDir /app/work"
	debugfs -R 'ls /dev' "$fs" 2>/dev/null | grep -q null && fail "$a: /dev/null was made"
	[ "$(debugfs -R 'cat /etc/hostname' "$fs" 2>/dev/null)" = oci-test ] || fail "$a: hostname"
	conf=$(cat "$SANDBOX_HOME/images/$name/exec.conf")
	[ "$conf" = "$expect_conf" ] || fail "$a: exec.conf is
$conf"
	for f in "$SANDBOX_HOME"/images/.*; do
		case "$f" in */. | */..) ;; *) [ -e "$f" ] && fail "$a: left $f" ;; esac
	done
	echo "ok: $a imported in $ms ms ($(du -k "$fs" | cut -f1) KiB used of $(($(stat -c %s "$fs") >> 20)) MiB): whiteout, opaque dir, 04755 1000:1000, links, xattrs, exec.conf"
done
"$ctl" images ls | grep -q '^img-good-oci-tar ' || fail "images ls: $("$ctl" images ls)"

# refused ARCHIVE MESSAGE: the import of ARCHIVE fails saying MESSAGE, leaving nothing
refused() {
	# shellcheck disable=SC2086
	"$ctl" images import bad --oci "$work/arch/$1" $kargs >"$work/out" 2>&1
	st=$?
	[ "$st" = 1 ] || fail "$1: status $st, $(cat "$work/out")"
	grep -q "^sandboxctl: $work/arch/$1: .*$2" "$work/out" ||
		fail "$1: not the message '$2': $(cat "$work/out")"
	[ -e "$SANDBOX_HOME/images/bad" ] && fail "$1: an image was installed"
	for f in "$SANDBOX_HOME"/images/* "$SANDBOX_HOME"/images/.*; do
		case "$f" in */. | */.. | */img-*) ;; *) [ -e "$f" ] && fail "$1: left $f" ;; esac
	done
	[ -z "$(ls -A "$work/tmp")" ] || fail "$1: wrote $(ls -A "$work/tmp") outside"
	echo "ok: $1 refused: $(grep "^sandboxctl: $work" "$work/out" | sed "s|$work/arch/||")"
}
# an absolute symlink an earlier layer planted, aimed at a host directory: what a later layer
# writes through it stays inside the image
# shellcheck disable=SC2086
"$ctl" images import planted --oci "$work/arch/planted-abs.tar" $kargs >"$work/out" 2>&1 ||
	fail "planted-abs.tar: $(cat "$work/out")"
[ -z "$(ls -A "$work/tmp")" ] || fail "planted-abs.tar: wrote $(ls -A "$work/tmp") on the host"
debugfs -R "cat $work/tmp/owned" "$SANDBOX_HOME/images/planted/rootfs" 2>/dev/null |
	grep -q 'through a planted link' || fail "planted-abs.tar: the file is not inside the image"
rm -rf "$SANDBOX_HOME/images/planted"
echo "ok: a symlink to $work/tmp planted by layer 1, written through by layer 2: inside the image, not on the host"

# a ref name and a tag holding terminal escapes: printed as '?', no control byte reaches the
# terminal
for a in esc-oci.tar esc-docker.tar; do
	# shellcheck disable=SC2086
	"$ctl" images import esc --oci "$work/arch/$a" $kargs >"$work/out" 2>&1 ||
		fail "$a: $(cat "$work/out")"
	# ESC, BEL and U+009B (2 bytes) each a '?'
	grep -q "image x?\]0;PWNED??\[2J?\[31mred??1m" "$work/out" ||
		fail "$a: the name is not shown with '?': $(cat -v "$work/out")"
	LC_ALL=C grep -q "$(printf '[\001-\010\013-\037\177]')" "$work/out" &&
		fail "$a: a control byte printed: $(cat -v "$work/out")"
	rm -rf "$SANDBOX_HOME/images/esc"
	echo "ok: $a: $(grep -m1 'images import esc' "$work/out")"
done

# one directory named 20000 times by a layer (a 3.9 KB path): one record for it, not 20000
# (which took 78 MB), so the import fits in 64 MiB of address space
# shellcheck disable=SC2086,SC3045 # the options are words; dash and bash have ulimit -v
(ulimit -v 65536 && "$ctl" images import rep --oci "$work/arch/repeat.tar" $kargs) >"$work/out" 2>&1 ||
	fail "repeat.tar in 64 MiB: $(cat "$work/out")"
rm -rf "$SANDBOX_HOME/images/rep"
echo "ok: repeat.tar (a directory named 20000 times) imported in 64 MiB"

# 16384 paths that all collide under the made set's old, unkeyed hash: 1.4 s of CPU in our
# process then, 0.07 s now (its unknown User stops the import before mke2fs). User time, from
# the shell's `times` (its children's, second line): the system calls' time varies a lot here
# user_ms FILE: the children's user time `times` wrote there, in ms
user_ms() {
	sed -n 2p "$1" | awk '{ split($1, t, /[ms]/); print int((t[1] * 60 + t[2]) * 1000) }'
}
times >"$work/t0"
# shellcheck disable=SC2086
"$ctl" images import fnv --oci "$work/arch/fnv.tar" $kargs >"$work/out" 2>&1
times >"$work/t1"
ms=$(($(user_ms "$work/t1") - $(user_ms "$work/t0")))
grep -q 'User nobody-here is not in' "$work/out" || fail "fnv.tar: $(cat "$work/out")"
[ "$ms" -lt 700 ] || fail "fnv.tar: $ms ms of CPU: the made set's hash is floodable"
echo "ok: fnv.tar (16384 paths colliding under FNV-1a) applied in $ms ms of CPU"

# a layer of 2000 files whose directory it makes opaque 5000 times: 1.0 s of user CPU when
# each repeat re-read the directory, 0.01 s now
times >"$work/t0"
# shellcheck disable=SC2086
"$ctl" images import opq --oci "$work/arch/opaque.tar" $kargs >"$work/out" 2>&1
times >"$work/t1"
ms=$(($(user_ms "$work/t1") - $(user_ms "$work/t0")))
grep -q 'User nobody-here is not in' "$work/out" || fail "opaque.tar: $(cat "$work/out")"
[ "$ms" -lt 400 ] || fail "opaque.tar: $ms ms of CPU: each opaque marker re-reads the directory"
echo "ok: opaque.tar (a directory made opaque 5000 times by one layer) applied in $ms ms of CPU"

# a nested index of 63 objects of 4096 keys: each key was compared with all before it (1.4 s
# of CPU), now found through a hash
times >"$work/t0"
# shellcheck disable=SC2086
"$ctl" images import keys --oci "$work/arch/json-keys.tar" $kargs >"$work/out" 2>&1 ||
	fail "json-keys.tar: $(cat "$work/out")"
times >"$work/t1"
ms=$(($(user_ms "$work/t1") - $(user_ms "$work/t0")))
[ "$ms" -lt 700 ] || fail "json-keys.tar: $ms ms of CPU: duplicate keys are looked for one by one"
rm -rf "$SANDBOX_HOME/images/keys"
echo "ok: json-keys.tar (63 objects of 4096 keys) imported in $ms ms of CPU"

refused bad-truncated.tar 'truncated'
refused bad-bad-json.tar 'index.json: bad JSON at byte'
refused bad-digest.tar 'layer 2 of 3 (sha256:[0-9a-f]*): digest mismatch'
refused bad-dotdot.tar '\.\./\.\./x: the path leaves the root'
refused bad-symlink.tar 'evil: a symlink to \.\./\.\./\.\./\.\./tmp/CANARY, which leaves the root'
refused bad-hardlink.tar 'passwd: a hard link to \.\./\.\./\.\./\.\./etc/passwd, outside the root'
refused bad-arm-only.tar 'no linux/amd64 image.*linux/arm64'
refused bad-two-amd64.tar 'index.json has 2 linux/amd64 images, import one at a time: linux/amd64 test:latest.*linux/amd64 other:latest'
refused bad-checksum.tar 'a bad header checksum at byte 0'
# what an import killed long ago left, 3000 directories deep (deeper than any descriptor
# limit): the next import of the name removes it whole (refused checks nothing is left)
left=$SANDBOX_HOME/images/.bad.2000000000/staging
mkdir -p "$left" || fail "cannot make $left"
python3 -c 'import os, sys
os.chdir(sys.argv[1])
for _ in range(3000):
    os.mkdir("a"); os.chdir("a")
open("f", "w").close()' "$left" || fail "cannot make the deep leftover"
ctl_chars='a control character (tab and CR too), DEL, a C1 control, U+2028, U+2029 or invalid UTF-8'
refused bad-conf-cr.tar "the config's Env\[1\] holds, at byte 3, $ctl_chars"
refused bad-conf-u2028.tar "the config's Env\[0\] holds, at byte 3, a control"
refused bad-conf-c1.tar "the config's Cmd\[1\] holds, at byte 1, a control"
refused bad-conf-tab.tar "the config's Entrypoint\[0\] holds, at byte 1, a control"
refused bad-conf-workdir.tar "the config's WorkingDir holds, at byte 4, a control"
refused bad-conf-user.tar "the config's User holds, at byte 4, a control"
refused bad-json-twice.tar 'index.json: the index sha256:[0-9a-f]* listed twice'
refused bad-json-total.tar 'more than 32 MiB of JSON in all'
refused bad-deep.tar 't/a/a.*/f: lies too deep in the tree (more than 256 directories down'
refused bad-deep-opq.tar 't/a/a.*/.wh..wh..opq: lies too deep in the tree'
refused bad-deep-workdir.tar "the config's WorkingDir /t/a/a.*: too deep in the tree"
exit 0

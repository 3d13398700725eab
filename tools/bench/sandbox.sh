#!/bin/sh
# The sandbox benchmarks (tools/dev bench exec, bench create; docs/benchmarks.md), run where
# Linux guests boot: natively, or inside the emulated KVM host (tools/dev picks). Sandboxes
# live in a fresh $SANDBOX_HOME whose images/ is the installed one (tools/dev setup imports
# busybox there), and are all removed at the end.
#
# usage: sandbox.sh exec|sdk|create|snapshot BUILD_DIR IMAGES_DIR
#   exec    one busybox sandbox, then bench-exec: 50 round trips of `exec -- true`
#   sdk     one busybox sandbox, then tools/bench/sdk.py: the Python SDK's run of `true`
#           beside bench-exec's conn and a whole sandboxctl exec, in the same run
#   create  bench-create: 10 x (sandboxctl create + first exec) against QEMU microvm booting
#           the image's kernel, initramfs and root disk to sandbox-init's banner
#   snapshot  bench-snapshot-linux: 10 x restore, fork -n 1, warm and cold create, each to
#           the first answered exec
set -eu
mode=$1 build=$2 images=$3
ctl=$build/tools/sandboxctl/sandboxctl
img=$images/busybox
[ -r "$img/kernel" ] || { echo "sandbox.sh: no busybox image in $images (tools/dev setup)" >&2; exit 1; }

SANDBOX_HOME=$(mktemp -d)
export SANDBOX_HOME
cleanup() {
	for d in "$SANDBOX_HOME"/sandboxes/*; do
		[ -d "$d" ] || continue
		# a sandbox left behind is one a failed run was using: show its console
		echo "sandbox.sh: ${d##*/} left behind; its console ends:" >&2
		tail -n 20 "$d/console.log" >&2 2>/dev/null
		"$ctl" rm -f "${d##*/}" >/dev/null 2>&1
	done
	rm -rf "$SANDBOX_HOME"
}
trap cleanup EXIT
ln -s "$images" "$SANDBOX_HOME/images"

case $mode in
exec)
	id=$("$ctl" create --image busybox --memory 256)
	"$build/tools/bench/bench-exec" --runs 50 \
		--socket "$SANDBOX_HOME/sandboxes/$id/vsock.sock" --ctl "$ctl" --id "$id"
	"$ctl" rm -f "$id"
	;;
sdk)
	id=$("$ctl" create --image busybox --memory 256 --network none)
	python3 "$(dirname "$0")/sdk.py" --id "$id" --ctl "$ctl" \
		--bench-exec "$build/tools/bench/bench-exec"
	"$ctl" rm -f "$id"
	;;
create)
	# The command line sandboxctl create gives its guests (GUEST_CMDLINE in cmd_create.c);
	# QEMU microvm appends its virtio_mmio.device= words (auto-kernel-cmdline). Its root
	# disk is the image's, writes kept in a temporary overlay (snapshot=on), as ours keeps
	# them in the sandbox's layer.
	cmdline='console=ttyS0 reboot=k panic=-1 quiet sandbox.root=/dev/vda sandbox.reboot=0'
	"$build/tools/bench/bench-create" --runs 10 --timeout-ms 120000 --ctl "$ctl" \
		--image busybox --memory 256 \
		--qemu qemu-system-x86_64 -M microvm,acpi=off -accel kvm -cpu host -m 256 -smp 1 \
		-nodefaults -no-user-config -nographic -no-reboot -serial stdio \
		-kernel "$img/kernel" -initrd "$img/initrd" -append "$cmdline" \
		-drive "id=root,file=$img/rootfs,format=raw,if=none,snapshot=on" \
		-device virtio-blk-device,drive=root
	;;
snapshot)
	"$build/tools/bench/bench-snapshot-linux" --runs 10 --ctl "$ctl" --image busybox \
		--memory 256
	;;
*)
	echo "usage: sandbox.sh exec|sdk|create|snapshot BUILD_DIR IMAGES_DIR" >&2
	exit 2
	;;
esac

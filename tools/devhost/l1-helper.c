/*
 * l1-helper: what the L1 /init of the emulated host needs beyond busybox.
 *
 * "l1-helper probe": the health check, run right after kvm/kvm_amd load. It
 * creates a VM with one page of real-mode code
 * ("mov al,42; out 0x10,al; hlt"), runs it and expects an I/O exit and then
 * a HLT exit. About 2 L1 boots in 90 hang in their first VM (docs/hosts.md):
 * doing the first VM here, before the user's command, turns that hang into a
 * missing "ready" marker that tools/devhost/run detects and retries.
 *
 * "l1-helper exit N": write N to the isa-debug-exit port 0xf4, which makes
 * QEMU exit with status (N << 1) | 1. The cloud kernel has no /dev/port, so
 * busybox cannot do this write; ioperm() + outb can.
 *
 * Built statically by tools/devhost/build-image (no libraries needed in L1).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/io.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int fail(const char *what)
{
	fprintf(stderr, "l1-helper: %s: %s\n", what, strerror(errno));
	return 1;
}

static int probe(void)
{
	static const uint8_t code[] = {0xb0, 42, 0xe6, 0x10, 0xf4};
	double t0 = now_ms();
	int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0)
		return fail("open /dev/kvm");
	if (ioctl(kvm, KVM_GET_API_VERSION, 0) != KVM_API_VERSION)
		return fail("KVM_GET_API_VERSION");
	int vm = ioctl(kvm, KVM_CREATE_VM, 0);
	if (vm < 0)
		return fail("KVM_CREATE_VM");
	uint8_t *mem =
		mmap(NULL, 0x1000, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return fail("mmap");
	memcpy(mem, code, sizeof(code));
	struct kvm_userspace_memory_region region = {
		.slot = 0,
		.guest_phys_addr = 0x1000,
		.memory_size = 0x1000,
		.userspace_addr = (uintptr_t)mem,
	};
	if (ioctl(vm, KVM_SET_USER_MEMORY_REGION, &region) < 0)
		return fail("KVM_SET_USER_MEMORY_REGION");
	int vcpu = ioctl(vm, KVM_CREATE_VCPU, 0);
	if (vcpu < 0)
		return fail("KVM_CREATE_VCPU");
	int sz = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (sz <= 0)
		return fail("KVM_GET_VCPU_MMAP_SIZE");
	struct kvm_run *run = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu, 0);
	if (run == MAP_FAILED)
		return fail("mmap vcpu");
	struct kvm_sregs sregs;
	if (ioctl(vcpu, KVM_GET_SREGS, &sregs) < 0)
		return fail("KVM_GET_SREGS");
	sregs.cs.base = 0;
	sregs.cs.selector = 0;
	if (ioctl(vcpu, KVM_SET_SREGS, &sregs) < 0)
		return fail("KVM_SET_SREGS");
	struct kvm_regs regs = {.rip = 0x1000, .rflags = 0x2};
	if (ioctl(vcpu, KVM_SET_REGS, &regs) < 0)
		return fail("KVM_SET_REGS");
	double t1 = now_ms();
	int saw_io = 0;
	for (int i = 0; i < 16; i++) {
		if (ioctl(vcpu, KVM_RUN, 0) < 0)
			return fail("KVM_RUN");
		if (run->exit_reason == KVM_EXIT_IO && run->io.port == 0x10 &&
		    run->io.direction == KVM_EXIT_IO_OUT &&
		    *((uint8_t *)run + run->io.data_offset) == 42) {
			saw_io = 1;
			continue;
		}
		if (run->exit_reason == KVM_EXIT_HLT && saw_io) {
			printf("kvm ok (setup %.1f ms, run %.1f ms)\n", t1 - t0, now_ms() - t1);
			return 0;
		}
		fprintf(stderr, "l1-helper: unexpected exit reason %u\n", run->exit_reason);
		return 1;
	}
	fprintf(stderr, "l1-helper: no HLT exit\n");
	return 1;
}

static int debug_exit(const char *arg)
{
	char *end;
	long v = strtol(arg, &end, 0);
	if (*arg == '\0' || *end != '\0' || v < 0 || v > 255) {
		fprintf(stderr, "l1-helper: exit: bad value '%s'\n", arg);
		return 2;
	}
	if (ioperm(0xf4, 1, 1) < 0)
		return fail("ioperm(0xf4)");
	outb((unsigned char)v, 0xf4);
	/* Only reached if no isa-debug-exit device is there. */
	fprintf(stderr, "l1-helper: exit: QEMU did not exit\n");
	return 1;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "probe") == 0)
		return probe();
	if (argc == 3 && strcmp(argv[1], "exit") == 0)
		return debug_exit(argv[2]);
	fprintf(stderr, "usage: l1-helper probe | l1-helper exit N\n");
	return 2;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The KVM state of a snapshot: every vCPU's (registers, special registers, FPU/XSAVE, XCRs,
 * the MSRs of KVM's save list, LAPIC, pending events, MP state, debug registers) and the VM's
 * (the two PICs, the IOAPIC, the PIT, kvmclock). KVM's structures are stored as they are:
 * fixed-size x86-64 layouts of the kernel's ABI, checked to the byte on load. Read and written
 * from the I/O thread while every vCPU is parked (vcpu_pause_all) or not started yet.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "vmm.h"

#define SNAP_MSRS_MAX 1024u /* KVM's save list has ~50-150 on the hosts we know */

struct snap_msr {
	uint32_t index;
	uint32_t reserved;
	uint64_t data;
};
_Static_assert(sizeof(struct snap_msr) == 16, "snap_msr layout");

static int kvm_ioctl(int fd, unsigned long req, void *arg)
{
	int ret;

	do
		ret = ioctl(fd, req, arg);
	while (ret < 0 && errno == EINTR);
	return ret < 0 ? -errno : ret;
}

/* Get one fixed-size structure and store it as property `name`. */
#define SAVE_STRUCT(w, fd, req, type, name, what)                                                  \
	do {                                                                                       \
		type v_;                                                                           \
		memset(&v_, 0, sizeof(v_));                                                        \
		if ((err = kvm_ioctl((fd), (req), &v_)) < 0) {                                     \
			log_error("snapshot: %s: %s", (what), strerror(-err));                     \
			return err;                                                                \
		}                                                                                  \
		snapw_prop((w), (name), &v_, sizeof(v_));                                          \
	} while (0)

/* Load property `name` as a fixed-size structure and set it. */
#define LOAD_STRUCT(r, node, fd, req, type, name, what)                                            \
	do {                                                                                       \
		type v_;                                                                           \
		if ((err = snapr_get((r), (node), (name), &v_, sizeof(v_))) < 0)                   \
			return err;                                                                \
		if ((err = kvm_ioctl((fd), (req), &v_)) < 0)                                       \
			return snapr_fail((r), err, "restoring %s: %s", (what), strerror(-err));   \
	} while (0)

/* ---- the MSR list ---- */

/* KVM's list of MSRs to save and restore (KVM_GET_MSR_INDEX_LIST), fetched once. */
static int snap_msr_list(struct vm *vm, const uint32_t **list, unsigned *n)
{
	static uint32_t *cached;
	static unsigned ncached;
	struct kvm_msr_list probe = {.nmsrs = 0}, *l;
	int err;

	if (cached) {
		*list = cached;
		*n = ncached;
		return 0;
	}
	err = kvm_ioctl(vm->kvm_fd, KVM_GET_MSR_INDEX_LIST, &probe);
	if (err < 0 && err != -E2BIG)
		return err;
	if (probe.nmsrs > SNAP_MSRS_MAX)
		return -E2BIG;
	l = calloc(1, sizeof(*l) + probe.nmsrs * sizeof(l->indices[0]));
	if (!l)
		return -ENOMEM;
	l->nmsrs = probe.nmsrs;
	if ((err = kvm_ioctl(vm->kvm_fd, KVM_GET_MSR_INDEX_LIST, l)) < 0) {
		free(l);
		return err;
	}
	cached = malloc(l->nmsrs * sizeof(uint32_t) + 1);
	if (!cached) {
		free(l);
		return -ENOMEM;
	}
	memcpy(cached, l->indices, l->nmsrs * sizeof(uint32_t));
	ncached = l->nmsrs;
	free(l);
	*list = cached;
	*n = ncached;
	return 0;
}

/*
 * KVM_GET_MSRS stops at the first MSR it cannot read and returns how many it read; the list
 * has some a given host refuses (kvm-pvm refuses a few). Read in one call, and where it stops
 * skip that MSR and go on from the next, so every readable one is saved.
 */
static int snap_save_msrs(struct vcpu *vcpu, struct snap_writer *w)
{
	const uint32_t *list;
	struct kvm_msrs *m;
	struct snap_msr *out;
	unsigned n, nout = 0, at = 0;
	int err;

	if ((err = snap_msr_list(vcpu->vm, &list, &n)) < 0) {
		log_error("snapshot: KVM_GET_MSR_INDEX_LIST: %s", strerror(-err));
		return err;
	}
	m = calloc(1, sizeof(*m) + n * sizeof(m->entries[0]));
	out = calloc(n + 1, sizeof(*out));
	if (!m || !out) {
		free(m);
		free(out);
		return -ENOMEM;
	}
	while (at < n) {
		m->nmsrs = n - at;
		for (unsigned i = 0; i < m->nmsrs; i++)
			m->entries[i] = (struct kvm_msr_entry){.index = list[at + i]};
		err = kvm_ioctl(vcpu->fd, KVM_GET_MSRS, m);
		if (err < 0) {
			log_error("snapshot: vcpu%u: KVM_GET_MSRS: %s", vcpu->index,
				  strerror(-err));
			goto out;
		}
		for (int i = 0; i < err; i++)
			out[nout++] = (struct snap_msr){.index = htole32(m->entries[i].index),
							.data = htole64(m->entries[i].data)};
		if ((unsigned)err < m->nmsrs)
			log_debug("snapshot: vcpu%u: MSR %#x is not readable here, skipped",
				  vcpu->index, list[at + (unsigned)err]);
		at += (unsigned)err + 1; /* past the one refused, if any */
	}
	snapw_prop(w, "msrs", out, nout * sizeof(*out));
	err = 0;
out:
	free(m);
	free(out);
	return err;
}

/* Set every saved MSR; one the host refuses is skipped with a warning, as at boot. */
static int snap_load_msrs(struct vcpu *vcpu, struct snap_reader *r, int node)
{
	const struct snap_msr *in;
	struct kvm_msrs *m;
	size_t len;
	unsigned n, at = 0;
	int err = 0;

	in = snapr_var(r, node, "msrs", &len);
	if (!in)
		return -ENOENT;
	if (len % sizeof(*in) || len / sizeof(*in) > SNAP_MSRS_MAX)
		return snapr_fail(r, -EBADMSG, "vcpu%u: msrs: %zu bytes, not a list of at most %u",
				  vcpu->index, len, SNAP_MSRS_MAX);
	n = (unsigned)(len / sizeof(*in));
	m = calloc(1, sizeof(*m) + (n + 1) * sizeof(m->entries[0]));
	if (!m)
		return -ENOMEM;
	while (at < n) {
		m->nmsrs = n - at;
		for (unsigned i = 0; i < m->nmsrs; i++) {
			struct snap_msr e;

			memcpy(&e, &in[at + i], sizeof(e));
			m->entries[i] = (struct kvm_msr_entry){.index = le32toh(e.index),
							       .data = le64toh(e.data)};
		}
		err = kvm_ioctl(vcpu->fd, KVM_SET_MSRS, m);
		if (err < 0) {
			snapr_fail(r, err, "vcpu%u: KVM_SET_MSRS: %s", vcpu->index, strerror(-err));
			break;
		}
		if ((unsigned)err < m->nmsrs)
			log_warn("restore: vcpu%u: MSR %#x refused by this host, skipped",
				 vcpu->index, m->entries[err].index);
		at += (unsigned)err + 1;
		err = 0;
	}
	free(m);
	return err;
}

/* ---- FPU and extended state ---- */

/* The size of KVM's XSAVE buffer on this host: 0 without XSAVE (then KVM_GET_FPU). */
static size_t snap_xsave_len(const struct vm *vm)
{
	int n;

	if (ioctl(vm->vm_fd, KVM_CHECK_EXTENSION, KVM_CAP_XSAVE) <= 0)
		return 0;
	n = ioctl(vm->vm_fd, KVM_CHECK_EXTENSION, KVM_CAP_XSAVE2);
	return n > (int)sizeof(struct kvm_xsave) ? (size_t)n : sizeof(struct kvm_xsave);
}

static int snap_save_fpu(struct vcpu *vcpu, struct snap_writer *w)
{
	size_t len = snap_xsave_len(vcpu->vm);
	void *buf;
	int err;

	if (!len) {
		SAVE_STRUCT(w, vcpu->fd, KVM_GET_FPU, struct kvm_fpu, "fpu", "KVM_GET_FPU");
		return 0;
	}
	buf = calloc(1, len);
	if (!buf)
		return -ENOMEM;
	err = kvm_ioctl(vcpu->fd, len > sizeof(struct kvm_xsave) ? KVM_GET_XSAVE2 : KVM_GET_XSAVE,
			buf);
	if (err < 0)
		log_error("snapshot: vcpu%u: KVM_GET_XSAVE: %s", vcpu->index, strerror(-err));
	else
		snapw_prop(w, "xsave", buf, len);
	free(buf);
	if (err < 0)
		return err;
	if (ioctl(vcpu->vm->vm_fd, KVM_CHECK_EXTENSION, KVM_CAP_XCRS) > 0)
		SAVE_STRUCT(w, vcpu->fd, KVM_GET_XCRS, struct kvm_xcrs, "xcrs", "KVM_GET_XCRS");
	return 0;
}

static int snap_load_fpu(struct vcpu *vcpu, struct snap_reader *r, int node)
{
	size_t len = snap_xsave_len(vcpu->vm), got;
	const void *in;
	void *buf;
	int err;

	/* The kind of state this host keeps: the legacy FPU only where there is no XSAVE. */
	if (!len) {
		LOAD_STRUCT(r, node, vcpu->fd, KVM_SET_FPU, struct kvm_fpu, "fpu", "the FPU");
		return 0;
	}
	in = snapr_var(r, node, "xsave", &got);
	if (!in)
		return -ENOENT;
	if (got != len)
		return snapr_fail(r, -EBADMSG,
				  "vcpu%u: the XSAVE area is %zu bytes, this host's is %zu: the "
				  "snapshot was made on a CPU with other features",
				  vcpu->index, got, len);
	/* KVM_SET_XSAVE takes the larger buffer KVM_CAP_XSAVE2 announced as it is. */
	buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, in, len);
	err = kvm_ioctl(vcpu->fd, KVM_SET_XSAVE, buf);
	free(buf);
	if (err < 0)
		return snapr_fail(r, err, "vcpu%u: KVM_SET_XSAVE: %s", vcpu->index, strerror(-err));
	if (snapr_has(r, node, "xcrs"))
		LOAD_STRUCT(r, node, vcpu->fd, KVM_SET_XCRS, struct kvm_xcrs, "xcrs", "the XCRs");
	return 0;
}

/* ---- one vCPU ---- */

int vcpu_save_state(struct vcpu *vcpu, struct snap_writer *w)
{
	int err;

	snapw_begin_index(w, "vcpu", vcpu->index);
	SAVE_STRUCT(w, vcpu->fd, KVM_GET_MP_STATE, struct kvm_mp_state, "mp-state",
		    "KVM_GET_MP_STATE");
	SAVE_STRUCT(w, vcpu->fd, KVM_GET_REGS, struct kvm_regs, "regs", "KVM_GET_REGS");
	SAVE_STRUCT(w, vcpu->fd, KVM_GET_SREGS, struct kvm_sregs, "sregs", "KVM_GET_SREGS");
	if ((err = snap_save_fpu(vcpu, w)) < 0)
		return err;
	SAVE_STRUCT(w, vcpu->fd, KVM_GET_DEBUGREGS, struct kvm_debugregs, "debugregs",
		    "KVM_GET_DEBUGREGS");
	SAVE_STRUCT(w, vcpu->fd, KVM_GET_LAPIC, struct kvm_lapic_state, "lapic", "KVM_GET_LAPIC");
	if ((err = snap_save_msrs(vcpu, w)) < 0)
		return err;
	/* Last: reading the others may not change pending events, but this keeps the order
	 * Firecracker found safe. */
	SAVE_STRUCT(w, vcpu->fd, KVM_GET_VCPU_EVENTS, struct kvm_vcpu_events, "events",
		    "KVM_GET_VCPU_EVENTS");
	snapw_end(w);
	return 0;
}

/*
 * The order matters: CPUID is set by vcpu_create_restored before this; special registers
 * before MSRs (EFER), the LAPIC before MSRs (the TSC deadline MSR needs the timer mode), and
 * the events last (they refer to the state around them).
 */
int vcpu_load_state(struct vcpu *vcpu, struct snap_reader *r, int parent)
{
	int node = snapr_node_index(r, parent, "vcpu", vcpu->index), err;
	struct kvm_mp_state mp;

	if (node < 0)
		return node;
	if ((err = snapr_get(r, node, "mp-state", &mp, sizeof(mp))) < 0)
		return err;
	if (mp.mp_state > KVM_MP_STATE_AP_RESET_HOLD)
		return snapr_fail(r, -EBADMSG, "vcpu%u: mp-state %u is not one KVM knows",
				  vcpu->index, mp.mp_state);
	LOAD_STRUCT(r, node, vcpu->fd, KVM_SET_REGS, struct kvm_regs, "regs", "the registers");
	LOAD_STRUCT(r, node, vcpu->fd, KVM_SET_SREGS, struct kvm_sregs, "sregs",
		    "the special registers");
	if ((err = snap_load_fpu(vcpu, r, node)) < 0)
		return err;
	LOAD_STRUCT(r, node, vcpu->fd, KVM_SET_DEBUGREGS, struct kvm_debugregs, "debugregs",
		    "the debug registers");
	LOAD_STRUCT(r, node, vcpu->fd, KVM_SET_LAPIC, struct kvm_lapic_state, "lapic",
		    "the local APIC");
	if ((err = snap_load_msrs(vcpu, r, node)) < 0)
		return err;
	if ((err = kvm_ioctl(vcpu->fd, KVM_SET_MP_STATE, &mp)) < 0)
		return snapr_fail(r, err, "vcpu%u: KVM_SET_MP_STATE: %s", vcpu->index,
				  strerror(-err));
	LOAD_STRUCT(r, node, vcpu->fd, KVM_SET_VCPU_EVENTS, struct kvm_vcpu_events, "events",
		    "the pending events");
	return 0;
}

/* ---- the VM ---- */

static const char *const irqchip_names[] = {"pic-master", "pic-slave", "ioapic"};

int vm_save_state(struct vm *vm, struct snap_writer *w)
{
	struct kvm_clock_data clock;
	int err;

	snapw_begin(w, "vm");
	for (unsigned i = 0; i < 3; i++) {
		struct kvm_irqchip chip = {.chip_id = i};

		if ((err = kvm_ioctl(vm->vm_fd, KVM_GET_IRQCHIP, &chip)) < 0) {
			log_error("snapshot: KVM_GET_IRQCHIP %s: %s", irqchip_names[i],
				  strerror(-err));
			return err;
		}
		snapw_prop(w, irqchip_names[i], &chip, sizeof(chip));
	}
	SAVE_STRUCT(w, vm->vm_fd, KVM_GET_PIT2, struct kvm_pit_state2, "pit", "KVM_GET_PIT2");
	memset(&clock, 0, sizeof(clock));
	if ((err = kvm_ioctl(vm->vm_fd, KVM_GET_CLOCK, &clock)) < 0) {
		log_error("snapshot: KVM_GET_CLOCK: %s", strerror(-err));
		return err;
	}
	snapw_prop(w, "clock", &clock, sizeof(clock));
	snapw_end(w);
	return 0;
}

int vm_load_state(struct vm *vm, struct snap_reader *r, int parent)
{
	int node = snapr_node(r, parent, "vm"), err;
	struct kvm_clock_data clock;

	if (node < 0)
		return node;
	for (unsigned i = 0; i < 3; i++) {
		struct kvm_irqchip chip;

		if ((err = snapr_get(r, node, irqchip_names[i], &chip, sizeof(chip))) < 0)
			return err;
		if (chip.chip_id != i)
			return snapr_fail(r, -EBADMSG, "vm/%s: chip id %u, want %u",
					  irqchip_names[i], chip.chip_id, i);
		if ((err = kvm_ioctl(vm->vm_fd, KVM_SET_IRQCHIP, &chip)) < 0)
			return snapr_fail(r, err, "restoring the %s: %s", irqchip_names[i],
					  strerror(-err));
	}
	LOAD_STRUCT(r, node, vm->vm_fd, KVM_SET_PIT2, struct kvm_pit_state2, "pit", "the PIT");
	if ((err = snapr_get(r, node, "clock", &clock, sizeof(clock))) < 0)
		return err;
	/* Only the clock value: the flags say how KVM_GET_CLOCK read it, and KVM_SET_CLOCK
	 * takes KVM_CLOCK_REALTIME as a request to advance by the wall time since then. */
	clock.flags = 0;
	memset(clock.pad, 0, sizeof(clock.pad));
	clock.realtime = clock.host_tsc = 0;
	if ((err = kvm_ioctl(vm->vm_fd, KVM_SET_CLOCK, &clock)) < 0)
		return snapr_fail(r, err, "restoring kvmclock: %s", strerror(-err));
	return 0;
}

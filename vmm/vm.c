/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The VM: /dev/kvm, the VM fd with its in-kernel irqchip and PIT, guest RAM in memory slots,
 * the host's CPUID, and the stop protocol every vCPU and the main loop share.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <unistd.h>

#include "layout.h"
#include "vmm.h"

/* KVM_SET_CPUID2 takes at most 256 entries (KVM_MAX_CPUID_ENTRIES), ours included. */
#define KVM_CPUID_MAX_ENTRIES 256

/* ioctl() retried across EINTR: KVM returns it for signals on long operations. */
static int vm_ioctl(int fd, unsigned long req, void *arg)
{
	int ret;

	do
		ret = ioctl(fd, req, arg);
	while (ret < 0 && errno == EINTR);
	return ret < 0 ? -errno : ret;
}

static int vm_get_supported_cpuid(struct vm *vm)
{
	struct kvm_cpuid2 *c;
	unsigned cap = KVM_CPUID_MAX_ENTRIES;
	int err;

	if (getrandom(&vm->cpuid_nonce, sizeof(vm->cpuid_nonce), 0) != sizeof(vm->cpuid_nonce))
		return -EIO;
	c = calloc(1, sizeof(*c) + cap * sizeof(c->entries[0]));
	if (!c)
		return -ENOMEM;
	c->nent = KVM_CPUID_MAX_ENTRIES;
	if (ioctl(vm->kvm_fd, KVM_GET_SUPPORTED_CPUID, c) < 0) {
		err = -errno;
		free(c);
		return err;
	}
	if (ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_TSC_DEADLINE_TIMER) > 0)
		cpuid_set_tsc_deadline(c->entries, c->nent);
	/* A host table so full that ours do not fit (none seen: KVM's have 40-80 entries) still
	 * boots guests; only payloads lose the check that their cpuid reached this table. */
	if (cpuid_add_vmm_leaves(c->entries, &c->nent, cap, vm->cpuid_nonce) < 0)
		log_warn("KVM_GET_SUPPORTED_CPUID filled all %u entries: the VMM's CPUID leaves "
			 "are left out",
			 cap);
	vm->cpuid = c;
	return 0;
}

static int vm_add_memory(struct vm *vm)
{
	for (unsigned i = 0; i < vm->mem.nregions; i++) {
		const struct mem_region *r = &vm->mem.regions[i];
		struct kvm_userspace_memory_region slot = {
			.slot = i,
			.guest_phys_addr = r->gpa,
			.memory_size = r->len,
			.userspace_addr = (uintptr_t)r->hva,
		};
		int err = vm_ioctl(vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &slot);

		if (err < 0)
			return err;
	}
	return 0;
}

int vm_create(struct vm *vm, uint64_t ram_len, unsigned ncpus)
{
	return vm_create_from(vm, ram_len, ncpus, -1, NULL, 0);
}

int vm_create_from(struct vm *vm, uint64_t ram_len, unsigned ncpus, int first_fd,
		   const char *const *paths, unsigned npaths)
{
	struct kvm_pit_config pit = {.flags = KVM_PIT_SPEAKER_DUMMY};
	uint64_t identity = KVM_IDENTITY_MAP_GPA;
	int err;

	memset(vm, 0, sizeof(*vm));
	vm->kvm_fd = vm->vm_fd = vm->stop_fd = vm->tap_fd = -1;
	vm->mem.fd = vm->mem.pager_fd = vm->mem.uffd = -1;
	vm->loop.epoll_fd = -1;
	for (unsigned i = 0; i < VCPU_MAX; i++)
		vm->vcpus[i].fd = -1;
	vm->ncpus = ncpus;
	atomic_init(&vm->exit_status, -1);
	pthread_mutex_init(&vm->lock, NULL);
	pthread_cond_init(&vm->pause_cond, NULL);
	pthread_cond_init(&vm->release_cond, NULL);
	pthread_cond_init(&vm->parked_cond, NULL);

	vm->kvm_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (vm->kvm_fd < 0) {
		err = -errno;
		log_error("cannot open /dev/kvm: %s", strerror(errno));
		goto fail;
	}
	if (ioctl(vm->kvm_fd, KVM_GET_API_VERSION, 0) != KVM_API_VERSION) {
		err = -ENOTSUP;
		log_error("/dev/kvm speaks an unsupported API version");
		goto fail;
	}
	if (ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_IMMEDIATE_EXIT) <= 0 ||
	    ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_IRQCHIP) <= 0 ||
	    ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_USER_MEMORY) <= 0) {
		err = -ENOTSUP;
		log_error("this KVM lacks a required capability (IMMEDIATE_EXIT, IRQCHIP, "
			  "USER_MEMORY)");
		goto fail;
	}
	do
		vm->vm_fd = ioctl(vm->kvm_fd, KVM_CREATE_VM, 0);
	while (vm->vm_fd < 0 && errno == EINTR);
	if (vm->vm_fd < 0) {
		err = -errno;
		log_error("KVM_CREATE_VM: %s", strerror(errno));
		goto fail;
	}
	/* The TSS and identity-map pages are VMX's real-mode helpers; other KVMs ignore or refuse
	 * them, which is harmless because our guests never run in real mode. */
	if (vm_ioctl(vm->vm_fd, KVM_SET_TSS_ADDR, (void *)(uintptr_t)KVM_TSS_GPA) < 0)
		log_debug("KVM_SET_TSS_ADDR refused (not VMX)");
	if (vm_ioctl(vm->vm_fd, KVM_SET_IDENTITY_MAP_ADDR, &identity) < 0)
		log_debug("KVM_SET_IDENTITY_MAP_ADDR refused (not VMX)");
	err = npaths ? mem_open_files(&vm->mem, paths, npaths, first_fd, ram_len)
		     : mem_create(&vm->mem, ram_len);
	if (err == -EBADMSG)
		goto fail; /* mem_open_files said why */
	if (err) {
		if (npaths)
			log_error("cannot map the snapshot's memory %s: %s", paths[0],
				  strerror(-err));
		else
			log_error("cannot allocate %llu MiB of guest RAM: %s",
				  (unsigned long long)(ram_len >> 20), strerror(-err));
		goto fail;
	}
	/* RAM before the irqchip: adding a slot to a VM that has one costs ~6 ms for 256 MiB
	 * on kvm-pvm (measured), against 0.2 ms the other way round. */
	if ((err = vm_add_memory(vm)) < 0) {
		log_error("KVM_SET_USER_MEMORY_REGION: %s", strerror(-err));
		goto fail;
	}
	if ((err = vm_ioctl(vm->vm_fd, KVM_CREATE_IRQCHIP, NULL)) < 0) {
		log_error("KVM_CREATE_IRQCHIP: %s", strerror(-err));
		goto fail;
	}
	if ((err = vm_ioctl(vm->vm_fd, KVM_CREATE_PIT2, &pit)) < 0) {
		log_error("KVM_CREATE_PIT2: %s", strerror(-err));
		goto fail;
	}
	if ((err = vm_get_supported_cpuid(vm)) < 0) {
		log_error("KVM_GET_SUPPORTED_CPUID: %s", strerror(-err));
		goto fail;
	}
	vm->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (vm->stop_fd < 0) {
		err = -errno;
		goto fail;
	}
	if ((err = evloop_init(&vm->loop)) < 0) {
		log_error("cannot create the I/O thread's epoll set: %s", strerror(-err));
		goto fail;
	}
	return 0;
fail:
	vm_destroy(vm);
	return err;
}

int vm_place_fds(struct vm *vm)
{
	int err;

	if ((err = jail_place_fd(&vm->kvm_fd, JAIL_FD_KVM)) < 0 ||
	    (err = jail_place_fd(&vm->vm_fd, JAIL_FD_VM)) < 0)
		return err;
	for (unsigned i = 0; i < vm->ncpus; i++)
		if ((err = jail_place_fd(&vm->vcpus[i].fd, (int)(JAIL_FD_VCPU0 + i))) < 0)
			return err;
	return 0;
}

int vm_device_add(struct vm *vm, void *dev, void (*destroy)(void *dev))
{
	if (vm->ndevices >= VM_DEVICES_MAX)
		return -ENOSPC;
	vm->devices[vm->ndevices++] = (struct vm_device){dev, destroy};
	return 0;
}

void vm_device_cancel(struct vm *vm, void *dev)
{
	if (vm->ndevices > 0 && vm->devices[vm->ndevices - 1].dev == dev)
		vm->ndevices--;
}

void vm_destroy(struct vm *vm)
{
	for (unsigned i = 0; i < vm->ncpus && i < VCPU_MAX; i++)
		vcpu_destroy(&vm->vcpus[i]);
	while (vm->ndevices > 0) {
		struct vm_device *d = &vm->devices[--vm->ndevices];

		d->destroy(d->dev);
	}
	vm->nvirtio = 0;
	vm->serial = NULL;
	vm->i8042 = NULL;
	mem_destroy(&vm->mem);
	free(vm->cpuid);
	vm->cpuid = NULL;
	if (vm->stop_fd >= 0)
		close(vm->stop_fd);
	if (vm->vm_fd >= 0)
		close(vm->vm_fd);
	if (vm->kvm_fd >= 0)
		close(vm->kvm_fd);
	vm->stop_fd = vm->vm_fd = vm->kvm_fd = -1;
	evloop_fini(&vm->loop);
}

void vm_request_stop(struct vm *vm, enum vm_exit_status status, const char *fmt, ...)
{
	uint64_t one = 1;
	int expected = -1;
	va_list ap;

	pthread_mutex_lock(&vm->lock);
	if (atomic_compare_exchange_strong(&vm->exit_status, &expected, (int)status)) {
		va_start(ap, fmt);
		vsnprintf(vm->exit_reason, sizeof(vm->exit_reason), fmt, ap);
		va_end(ap);
	}
	atomic_store(&vm->stopping, true);
	/* A pause waiting for every vCPU to park would otherwise wait for its timeout. */
	pthread_cond_broadcast(&vm->parked_cond);
	pthread_mutex_unlock(&vm->lock);
	/* Wake the main loop; the vCPUs are kicked by vcpu_stop_all from there. */
	if (write(vm->stop_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn("cannot signal the main loop: %s", strerror(errno));
}

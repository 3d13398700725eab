/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A struct vm with no KVM behind it, for device tests: buses, the stop protocol (a real
 * eventfd) and the panic flag work; vm_fd is -1, so interrupt injection fails harmlessly.
 */
#ifndef TEST_FAKE_VM_H
#define TEST_FAKE_VM_H

#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "vmm.h"

static inline void fake_vm_init(struct vm *vm)
{
	memset(vm, 0, sizeof(*vm));
	vm->kvm_fd = vm->vm_fd = vm->mem.fd = -1;
	vm->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (evloop_init(&vm->loop) < 0)
		vm->loop.epoll_fd = -1;
	atomic_init(&vm->exit_status, -1);
	pthread_mutex_init(&vm->lock, NULL);
}

static inline void fake_vm_destroy(struct vm *vm)
{
	close(vm->stop_fd);
	evloop_fini(&vm->loop);
	pthread_mutex_destroy(&vm->lock);
}

/* One byte through the port bus. */
static inline void fake_vm_outb(struct vm *vm, uint16_t port, uint8_t v)
{
	bus_access(&vm->pio, port, &v, 1, true);
}

static inline uint8_t fake_vm_inb(struct vm *vm, uint16_t port)
{
	uint8_t v = 0;

	bus_access(&vm->pio, port, &v, 1, false);
	return v;
}

#endif

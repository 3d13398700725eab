/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The i8042 keyboard controller, reduced to the one thing a sandbox needs from it: the reset
 * line. Writing 0xfe to the command port (Linux's reboot=k, and the payload ABI's power-off)
 * ends the VM, as a reset after a kernel panic or as a clean shutdown.
 *
 * It deliberately looks like "no controller" to a driver's probe: the status register always
 * says the output buffer is full and the input buffer empty, and data reads return 0, so
 * Linux's i8042 driver flushes 16 bytes, logs "No controller found" and leaves it alone, while
 * reboot=k (which only waits for the input buffer to drain) still resets at once. A fuller
 * model (control byte, self tests, a keyboard that acknowledges) was tried and made a driver-
 * carrying kernel hang in i8042_init or at reboot; our guest kernel has no such driver, and no
 * guest needs a keyboard.
 * Payload guests reach it through an MMIO window (payload_abi.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "payload_abi.h"
#include "vmm.h"

#define I8042_DATA_PORT 0x60
#define I8042_CMD_PORT	0x64

#define I8042_STATUS_OBF 0x01 /* output buffer full: never empties, so probes give up */
#define I8042_CMD_RESET	 0xfe

struct i8042 {
	struct vm *vm;
};

/* One access at `reg` (0: data port, 4: command/status port). Stateless, so no lock. */
static void i8042_access_reg(struct i8042 *k, uint64_t reg, uint8_t *data, uint32_t len, bool write)
{
	bool panicked;

	if (!write) {
		memset(data, 0, len);
		if (reg == 4)
			data[0] = I8042_STATUS_OBF;
		return;
	}
	if (reg != 4 || data[0] != I8042_CMD_RESET)
		return; /* every other command and data byte is ignored */
	panicked = atomic_load(&k->vm->guest_panicked);
	vm_request_stop(k->vm, panicked ? VM_EXIT_PANIC : VM_EXIT_SHUTDOWN,
			panicked ? "guest kernel panicked, then reset" : "guest reset the machine");
}

static void i8042_data_access(void *opaque, uint64_t offset, uint8_t *data, uint32_t len,
			      bool write)
{
	i8042_access_reg(opaque, 0, data, len, write);
}

static void i8042_cmd_access(void *opaque, uint64_t offset, uint8_t *data, uint32_t len, bool write)
{
	i8042_access_reg(opaque, 4, data, len, write);
}

/* The payload ABI's MMIO window: +0 is the data port, +PAYLOAD_I8042_CMD the command port;
 * other offsets read as zero and ignore writes. */
static void i8042_mmio_access(void *opaque, uint64_t offset, uint8_t *data, uint32_t len,
			      bool write)
{
	if (offset == 0 || offset == PAYLOAD_I8042_CMD)
		i8042_access_reg(opaque, offset, data, len, write);
	else if (!write)
		memset(data, 0, len);
}

static void i8042_destroy_dev(void *k)
{
	i8042_destroy(k);
}

int i8042_create(struct vm *vm, struct i8042 **out)
{
	struct i8042 *k = calloc(1, sizeof(*k));
	int err;

	if (!k)
		return -ENOMEM;
	k->vm = vm;
	if ((err = vm_device_add(vm, k, i8042_destroy_dev)) ||
	    (err = bus_register(&vm->pio, I8042_DATA_PORT, 1, i8042_data_access, k,
				"i8042-data")) ||
	    (err = bus_register(&vm->pio, I8042_CMD_PORT, 1, i8042_cmd_access, k, "i8042-cmd")) ||
	    (err = bus_register(&vm->mmio, PAYLOAD_I8042_GPA, 8, i8042_mmio_access, k,
				"i8042-mmio"))) {
		vm_device_cancel(vm, k);
		bus_unregister(&vm->pio, k);
		bus_unregister(&vm->mmio, k);
		free(k);
		return err;
	}
	*out = k;
	return 0;
}

void i8042_destroy(struct i8042 *k)
{
	free(k);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Just enough of the i8042 keyboard controller for a guest to reset the machine: Linux's
 * reboot (reboot=k) and the payload ABI write 0xfe to the command port, which ends the VM.
 * The status register always reads "buffers empty" so that the guest's wait loops end.
 * Payload guests reach it through an MMIO window (payload_abi.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "payload_abi.h"
#include "vmm.h"

#define I8042_DATA_PORT 0x60
#define I8042_CMD_PORT	0x64
#define I8042_CMD_RESET 0xfe

struct i8042 {
	struct vm *vm;
};

static void i8042_data_access(void *opaque, uint64_t offset, uint8_t *data, uint32_t len,
			      bool write)
{
	if (!write)
		memset(data, 0, len);
}

static void i8042_cmd_access(void *opaque, uint64_t offset, uint8_t *data, uint32_t len, bool write)
{
	struct i8042 *k = opaque;

	if (!write) {
		memset(data, 0, len); /* status: output and input buffers empty */
		return;
	}
	if (data[0] == I8042_CMD_RESET) {
		bool panicked = atomic_load(&k->vm->guest_panicked);

		vm_request_stop(k->vm, panicked ? VM_EXIT_PANIC : VM_EXIT_SHUTDOWN,
				panicked ? "guest kernel panicked, then reset"
					 : "guest reset the machine");
	}
}

/* The payload ABI's MMIO window: +0 is the data port, +PAYLOAD_I8042_CMD the command port. */
static void i8042_mmio_access(void *opaque, uint64_t offset, uint8_t *data, uint32_t len,
			      bool write)
{
	if (offset == PAYLOAD_I8042_CMD)
		i8042_cmd_access(opaque, 0, data, len, write);
	else
		i8042_data_access(opaque, 0, data, len, write);
}

int i8042_create(struct vm *vm, struct i8042 **out)
{
	struct i8042 *k = calloc(1, sizeof(*k));
	int err;

	if (!k)
		return -ENOMEM;
	k->vm = vm;
	if ((err = bus_register(&vm->pio, I8042_DATA_PORT, 1, i8042_data_access, k,
				"i8042-data")) ||
	    (err = bus_register(&vm->pio, I8042_CMD_PORT, 1, i8042_cmd_access, k, "i8042-cmd")) ||
	    (err = bus_register(&vm->mmio, PAYLOAD_I8042_GPA, 8, i8042_mmio_access, k,
				"i8042-mmio"))) {
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

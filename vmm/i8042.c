/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Just enough of the i8042 keyboard controller for a guest to find it and reset the machine:
 * the controller commands a driver's probe uses (read/write the control byte, self tests,
 * port enables, the output port) answer through a one-byte output buffer, and the reset
 * command (0xfe, Linux's reboot=k and the payload ABI's power-off) ends the VM. There is no
 * keyboard behind it: bytes for the keyboard are dropped.
 * Payload guests reach it through an MMIO window (payload_abi.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "payload_abi.h"
#include "vmm.h"

#define I8042_DATA_PORT 0x60
#define I8042_CMD_PORT	0x64

#define I8042_STATUS_OBF     0x01 /* output buffer full */
#define I8042_STATUS_SYSFLAG 0x04 /* self test passed */
#define I8042_STATUS_CMD     0x08 /* last write was a command */

#define I8042_CMD_READ_CTR   0x20
#define I8042_CMD_WRITE_CTR  0x60
#define I8042_CMD_AUX_OFF    0xa7
#define I8042_CMD_AUX_ON     0xa8
#define I8042_CMD_SELF_TEST  0xaa
#define I8042_CMD_KBD_TEST   0xab
#define I8042_CMD_KBD_OFF    0xad
#define I8042_CMD_KBD_ON     0xae
#define I8042_CMD_READ_OUTP  0xd0
#define I8042_CMD_WRITE_OUTP 0xd1
#define I8042_CMD_RESET	     0xfe

#define I8042_CTR_KBD_INT  0x01
#define I8042_CTR_SYSFLAG  0x04
#define I8042_CTR_KBD_OFF  0x10
#define I8042_CTR_AUX_OFF  0x20
#define I8042_SELF_TEST_OK 0x55

struct i8042 {
	struct vm *vm;
	pthread_mutex_t lock; /* every vCPU may poke it */
	uint8_t ctr;	      /* the controller's command byte */
	uint8_t outp;	      /* the output port */
	uint8_t pending;      /* a command waiting for its data byte, or 0 */
	uint8_t out;	      /* the output buffer */
	bool out_full;
	bool last_cmd;
};

static void i8042_respond(struct i8042 *k, uint8_t byte)
{
	k->out = byte;
	k->out_full = true;
}

static void i8042_command(struct i8042 *k, uint8_t cmd)
{
	bool panicked;

	k->pending = 0;
	switch (cmd) {
	case I8042_CMD_READ_CTR:
		i8042_respond(k, k->ctr);
		break;
	case I8042_CMD_WRITE_CTR:
	case I8042_CMD_WRITE_OUTP:
		k->pending = cmd;
		break;
	case I8042_CMD_AUX_OFF:
		k->ctr |= I8042_CTR_AUX_OFF;
		break;
	case I8042_CMD_AUX_ON:
		k->ctr &= (uint8_t)~I8042_CTR_AUX_OFF;
		break;
	case I8042_CMD_SELF_TEST:
		i8042_respond(k, I8042_SELF_TEST_OK);
		break;
	case I8042_CMD_KBD_TEST:
		i8042_respond(k, 0x00); /* no error */
		break;
	case I8042_CMD_KBD_OFF:
		k->ctr |= I8042_CTR_KBD_OFF;
		break;
	case I8042_CMD_KBD_ON:
		k->ctr &= (uint8_t)~I8042_CTR_KBD_OFF;
		break;
	case I8042_CMD_READ_OUTP:
		i8042_respond(k, k->outp);
		break;
	case I8042_CMD_RESET:
		panicked = atomic_load(&k->vm->guest_panicked);
		vm_request_stop(k->vm, panicked ? VM_EXIT_PANIC : VM_EXIT_SHUTDOWN,
				panicked ? "guest kernel panicked, then reset"
					 : "guest reset the machine");
		break;
	default:
		break; /* commands for devices we do not have */
	}
}

static void i8042_data_write(struct i8042 *k, uint8_t byte)
{
	if (k->pending == I8042_CMD_WRITE_CTR)
		k->ctr = byte;
	else if (k->pending == I8042_CMD_WRITE_OUTP)
		k->outp = byte;
	/* else: a byte for the keyboard, and there is none */
	k->pending = 0;
}

/* One access at `reg` (0: data port, 4: command/status port). */
static void i8042_access_reg(struct i8042 *k, uint64_t reg, uint8_t *data, uint32_t len, bool write)
{
	pthread_mutex_lock(&k->lock);
	if (write) {
		k->last_cmd = reg == 4;
		if (reg == 4)
			i8042_command(k, data[0]);
		else
			i8042_data_write(k, data[0]);
	} else {
		memset(data, 0, len);
		if (reg == 4) {
			data[0] = I8042_STATUS_SYSFLAG | (k->out_full ? I8042_STATUS_OBF : 0) |
				  (k->last_cmd ? I8042_STATUS_CMD : 0);
		} else {
			data[0] = k->out;
			k->out_full = false;
		}
	}
	pthread_mutex_unlock(&k->lock);
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

int i8042_create(struct vm *vm, struct i8042 **out)
{
	struct i8042 *k = calloc(1, sizeof(*k));
	int err;

	if (!k)
		return -ENOMEM;
	k->vm = vm;
	k->ctr = I8042_CTR_KBD_INT | I8042_CTR_SYSFLAG;
	k->outp = 0x01; /* the reset line, not asserted */
	pthread_mutex_init(&k->lock, NULL);
	if ((err = bus_register(&vm->pio, I8042_DATA_PORT, 1, i8042_data_access, k,
				"i8042-data")) ||
	    (err = bus_register(&vm->pio, I8042_CMD_PORT, 1, i8042_cmd_access, k, "i8042-cmd")) ||
	    (err = bus_register(&vm->mmio, PAYLOAD_I8042_GPA, 8, i8042_mmio_access, k,
				"i8042-mmio"))) {
		pthread_mutex_destroy(&k->lock);
		free(k);
		return err;
	}
	*out = k;
	return 0;
}

void i8042_destroy(struct i8042 *k)
{
	pthread_mutex_destroy(&k->lock);
	free(k);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* vmm/i8042.c: the controller commands a driver's probe uses, and the reset. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "fake_vm.h"
#include "payload_abi.h"

static struct vm vm;
static struct i8042 *k;

static void setup(void)
{
	fake_vm_init(&vm);
	cr_assert(eq(int, i8042_create(&vm, &k), 0));
}

static void teardown(void)
{
	i8042_destroy(k);
	fake_vm_destroy(&vm);
}

TestSuite(i8042, .init = setup, .fini = teardown);

Test(i8042, status_empty_until_a_command_answers)
{
	cr_assert(eq(u8, fake_vm_inb(&vm, 0x64) & 0x01, 0));
	fake_vm_outb(&vm, 0x64, 0xaa); /* self test */
	cr_assert(eq(u8, fake_vm_inb(&vm, 0x64) & 0x01, 0x01));
	cr_assert(eq(u8, fake_vm_inb(&vm, 0x60), 0x55));
	cr_assert(eq(u8, fake_vm_inb(&vm, 0x64) & 0x01, 0), "reading data empties the buffer");
}

Test(i8042, control_byte_round_trip)
{
	fake_vm_outb(&vm, 0x64, 0x60);
	fake_vm_outb(&vm, 0x60, 0x47);
	fake_vm_outb(&vm, 0x64, 0x20);
	cr_assert(eq(u8, fake_vm_inb(&vm, 0x60), 0x47));
	/* Port enables flip their CTR bits. */
	fake_vm_outb(&vm, 0x64, 0xad);
	fake_vm_outb(&vm, 0x64, 0x20);
	cr_assert(eq(u8, fake_vm_inb(&vm, 0x60) & 0x10, 0x10));
	/* A data byte with no command pending goes to the (absent) keyboard: CTR unchanged. */
	fake_vm_outb(&vm, 0x60, 0x00);
	fake_vm_outb(&vm, 0x64, 0x20);
	cr_assert(eq(u8, fake_vm_inb(&vm, 0x60) & 0x10, 0x10));
}

Test(i8042, unknown_commands_are_ignored)
{
	for (unsigned c = 0; c < 0x100; c++)
		if (c != 0xfe)
			fake_vm_outb(&vm, 0x64, (uint8_t)c);
	cr_assert(eq(int, atomic_load(&vm.exit_status), -1), "only 0xfe stops the VM");
	cr_assert(not(atomic_load(&vm.stopping)));
}

Test(i8042, reset_stops_with_shutdown)
{
	fake_vm_outb(&vm, 0x64, 0xfe);
	cr_assert(atomic_load(&vm.stopping));
	cr_assert(eq(int, atomic_load(&vm.exit_status), VM_EXIT_SHUTDOWN));
}

Test(i8042, reset_after_panic_is_a_panic)
{
	atomic_store(&vm.guest_panicked, true);
	fake_vm_outb(&vm, 0x64, 0xfe);
	cr_assert(eq(int, atomic_load(&vm.exit_status), VM_EXIT_PANIC));
}

Test(i8042, payload_mmio_window)
{
	uint8_t v = PAYLOAD_I8042_RESET;

	/* Offsets other than the two registers do nothing. */
	cr_assert(bus_access(&vm.mmio, PAYLOAD_I8042_GPA + 2, &v, 1, true));
	cr_assert(eq(int, atomic_load(&vm.exit_status), -1));
	cr_assert(bus_access(&vm.mmio, PAYLOAD_I8042_GPA + PAYLOAD_I8042_CMD, &v, 1, true));
	cr_assert(eq(int, atomic_load(&vm.exit_status), VM_EXIT_SHUTDOWN));
}

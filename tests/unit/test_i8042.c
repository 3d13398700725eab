/* SPDX-License-Identifier: Apache-2.0 */
/* vmm/i8042.c: the reset line, and "no controller" for a driver's probe. */
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

Test(i8042, probe_sees_no_controller_but_reset_can_proceed)
{
	/* Linux's flush gives up after 16 reads with the output buffer still full... */
	for (int i = 0; i < 32; i++) {
		cr_assert(eq(u8, fake_vm_inb(&vm, 0x64) & 0x01, 0x01));
		cr_assert(eq(u8, fake_vm_inb(&vm, 0x60), 0));
	}
	/* ...while reboot=k's kb_wait only needs the input buffer (bit 1) empty. */
	cr_assert(eq(u8, fake_vm_inb(&vm, 0x64) & 0x02, 0));
}

Test(i8042, other_commands_and_data_are_ignored)
{
	for (unsigned c = 0; c < 0x100; c++) {
		fake_vm_outb(&vm, 0x60, (uint8_t)c);
		if (c != 0xfe)
			fake_vm_outb(&vm, 0x64, (uint8_t)c);
	}
	cr_assert(eq(int, atomic_load(&vm.exit_status), -1), "only 0xfe on 0x64 stops the VM");
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

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * payload-fault: ends in a triple fault, to test the VMM's triple-fault exit status.
 *
 * vCPU 0 announces itself, then reads a page just beyond the identity map: a page fault
 * with no IDT to deliver it to, so #PF becomes #DF becomes a triple fault. Should the read
 * somehow succeed, the payload says so and powers off, which a test sees as a clean exit
 * with a FAIL line rather than the status it expects.
 */
#include "rt.h"

void payload_main(uint32_t cpu, uint32_t ncpus, const struct payload_info *info)
{
	volatile const uint64_t *unmapped;

	if (cpu != 0)
		cpu_spin_forever();
	if (rt_check_info(info, "fault") != 0)
		poweroff();

	uart_puts("fault: about to fault\n");
	unmapped = (volatile const uint64_t *)(info->map_end + 0x1000);
	(void)*unmapped;

	uart_puts("fault: FAIL read of 0x");
	uart_put_hex(info->map_end + 0x1000);
	uart_puts(" did not fault\n");
	poweroff();
}

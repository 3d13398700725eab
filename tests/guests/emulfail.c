/* SPDX-License-Identifier: Apache-2.0 */
/*
 * payload-emulfail: makes KVM's instruction emulator give up, to test that the VMM ends such
 * a VM at once and names why.
 *
 * vCPU 0 announces itself, then jumps into the MMIO hole (mapped by the payload's page tables,
 * backed by no memory and no device): the fetch exits to KVM as MMIO, and KVM cannot fetch an
 * instruction from MMIO to emulate it. kvm-pvm then exits to the VMM ("KVM internal error,
 * suberror 1 (emulation failure)", status 5: what a Linux guest meets there, docs/hosts.md);
 * SVM and VMX inject #UD into a CPL-3 guest instead, which without an IDT is a triple fault
 * (status 4). Should the jump somehow return, the payload says so and powers off, which a test
 * sees as a clean exit with a FAIL line.
 */
#include "rt.h"

#define NOTHING_GPA (PAYLOAD_UART_GPA + 0x10000) /* in the hole, past every device window */

void payload_main(uint32_t cpu, uint32_t ncpus, const struct payload_info *info)
{
	void (*nowhere)(void) = (void (*)(void))NOTHING_GPA;

	(void)ncpus;
	if (cpu != 0)
		cpu_spin_forever();
	if (rt_check_info(info, "emulfail") != 0)
		poweroff();
	uart_puts("emulfail: jumping into the MMIO hole\n");
	nowhere();
	uart_puts("emulfail: FAIL the jump returned\n");
	poweroff();
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * payload-spin: a guest that never stops on its own. vCPU 0 says so once, then every vCPU
 * spins. For tests of the VMM's --timeout and signal handling.
 */
#include "rt.h"

void payload_main(uint32_t cpu, uint32_t ncpus, const struct payload_info *info)
{
	if (cpu == 0 && rt_check_info(info, "spin") == 0)
		uart_puts("spin: running until stopped\n");
	cpu_spin_forever();
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * payload-hello: the smallest payload. vCPU 0 checks the payload_info the VMM wrote, prints
 * "hello from payload" and powers off; other vCPUs wait. The sentinel for "a payload boots".
 */
#include "rt.h"

void payload_main(uint32_t cpu, uint32_t ncpus, const struct payload_info *info)
{
	if (cpu != 0)
		cpu_spin_forever();
	if (rt_check_info(info, "hello") == 0)
		uart_puts("hello from payload\n");
	poweroff();
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * payload-smp: every vCPU runs, and each has the APIC id the VMM promised.
 *
 * Each vCPU ORs (1 << its initial APIC id) into a shared mask, then counts itself in. vCPU 0
 * waits (bounded) for all ncpus to have checked in and then expects the mask to be exactly
 * ncpus low bits: the VMM gives vCPU i APIC id i.
 * Prints "smp: vcpus=<n> apic_mask=0x<hex> ok" or a line starting "smp: FAIL".
 */
#include "rt.h"

/* About 2^32 `pause`s: ~85 s on a CPU whose pause takes ~20 ns (measured on our machines). */
#define SMP_WAIT_MAX (1ull << 32)

/* Zero at start: .bss, which the VMM zero-fills (p_memsz beyond p_filesz). */
static uint64_t smp_apic_mask;
static uint32_t smp_checked_in;
/* Set by a vCPU whose APIC id cannot be a bit of a 64-bit mask. */
static uint32_t smp_bad_apic_id;

/* Returns the initial APIC id of the calling vCPU: CPUID.1:EBX[31:24]. */
static uint32_t smp_apic_id(void)
{
	uint32_t ebx;

	cpu_cpuid(1, NULL, &ebx, NULL, NULL);
	return ebx >> 24;
}

/* Records the calling vCPU in the mask, then in the count. */
static void smp_check_in(void)
{
	uint32_t apic_id = smp_apic_id();

	if (apic_id < 64)
		atomic_or_u64(&smp_apic_mask, 1ull << apic_id);
	else
		atomic_store_release_u32(&smp_bad_apic_id, 0x100 | apic_id);
	/*
	 * Sequentially consistent: the OR above (or the store) is visible before the count
	 * that vCPU 0 waits for, so when it sees ncpus it also sees every bit.
	 */
	atomic_add_u32(&smp_checked_in, 1);
}

void payload_main(uint32_t cpu, uint32_t ncpus, const struct payload_info *info)
{
	uint32_t count = 0, bad_apic_id;
	uint64_t want, mask;

	smp_check_in();
	if (cpu != 0)
		cpu_spin_forever();

	if (rt_check_info(info, "smp") != 0)
		poweroff();
	if (info->ncpus != ncpus) {
		uart_puts("smp: FAIL info->ncpus=");
		uart_put_dec(info->ncpus);
		uart_puts(" rsi=");
		uart_put_dec(ncpus);
		uart_puts("\n");
		poweroff();
	}

	for (uint64_t i = 0; i < SMP_WAIT_MAX; i++) {
		/* Acquire: the mask bits ORed before each increment are visible after it. */
		count = atomic_load_acquire_u32(&smp_checked_in);
		if (count >= ncpus)
			break;
		cpu_relax();
	}
	if (count != ncpus) {
		uart_puts(count < ncpus ? "smp: FAIL timeout count=" : "smp: FAIL count=");
		uart_put_dec(count);
		uart_puts("\n");
		poweroff();
	}

	mask = atomic_load_acquire_u64(&smp_apic_mask);
	want = ncpus >= 64 ? ~0ull : (1ull << ncpus) - 1;
	bad_apic_id = atomic_load_acquire_u32(&smp_bad_apic_id);
	if (bad_apic_id) {
		uart_puts("smp: FAIL apic id ");
		uart_put_dec(bad_apic_id & 0xff);
		uart_puts(" >= 64\n");
	} else if (mask != want) {
		uart_puts("smp: FAIL vcpus=");
		uart_put_dec(ncpus);
		uart_puts(" apic_mask=0x");
		uart_put_hex(mask);
		uart_puts(" want=0x");
		uart_put_hex(want);
		uart_puts("\n");
	} else {
		uart_puts("smp: vcpus=");
		uart_put_dec(ncpus);
		uart_puts(" apic_mask=0x");
		uart_put_hex(mask);
		uart_puts(" ok\n");
	}
	poweroff();
}

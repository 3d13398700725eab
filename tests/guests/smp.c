/* SPDX-License-Identifier: Apache-2.0 */
/*
 * payload-smp: every vCPU runs, and each has the APIC id and CPUID the VMM promised.
 *
 * Each vCPU reads its local APIC's ID register and, through `cpuid`, the VMM's signature leaf,
 * leaf 1 and the VMM's info leaf, judges them (smp_judge.h), ORs (1 << its LAPIC id) into a
 * shared mask and counts itself in. vCPU 0 waits (bounded) for all ncpus, then prints
 *   "smp: vcpus=<n> apic_mask=0x<hex> cpuid=trapped ok"   cpuid reached the VMM's table
 *   "smp: vcpus=<n> apic_mask=0x<hex> cpuid=native ok"    cpuid ran on the host CPU
 * (the latter after a line saying that CPUID could not be checked from the guest, and where it
 * is checked instead), or a line starting "smp: FAIL".
 */
#include "rt.h"
#include "smp_judge.h"

/* About 2^32 `pause`s: ~85 s on a CPU whose pause takes ~20 ns (measured on our machines). */
#define SMP_WAIT_MAX (1ull << 32)

/* Zero at start: .bss, which the VMM zero-fills (p_memsz beyond p_filesz). */
static uint64_t smp_apic_mask;
static uint32_t smp_checked_in;
static uint32_t smp_ntrapped, smp_nnative, smp_nfailed;
/* The first failure: (cpu << 8 | verdict) + 1, and what that vCPU saw. */
static uint32_t smp_first_bad;
static struct smp_seen smp_bad_seen;

static void smp_read(struct smp_seen *s)
{
	s->lapic_id_reg = mmio_read32(PAYLOAD_LAPIC_GPA + PAYLOAD_LAPIC_ID_REG);
	cpu_cpuid(PAYLOAD_CPUID_SIG_LEAF, NULL, &s->sig[0], &s->sig[1], &s->sig[2]);
	cpu_cpuid(1, NULL, &s->leaf1_ebx, NULL, NULL);
	cpu_cpuid(PAYLOAD_CPUID_INFO_LEAF, &s->info_eax, &s->info_ebx, &s->info_ecx, NULL);
}

/* Judges the calling vCPU and records it in the counts and the mask. */
static void smp_check_in(uint32_t cpu, uint32_t ncpus, uint32_t nonce)
{
	struct smp_seen s;
	enum smp_verdict v;
	uint32_t none = 0;

	smp_read(&s);
	v = smp_judge(&s, cpu, ncpus, nonce);
	if (smp_lapic_id(&s) < 64)
		atomic_or_u64(&smp_apic_mask, 1ull << smp_lapic_id(&s));
	if (v == SMP_OK_TRAPPED)
		atomic_add_u32(&smp_ntrapped, 1);
	else if (v == SMP_OK_NATIVE)
		atomic_add_u32(&smp_nnative, 1);
	else {
		/* Only the first failing vCPU writes smp_bad_seen: the exchange elects it. */
		if (__atomic_compare_exchange_n(&smp_first_bad, &none, ((cpu << 8) | v) + 1, false,
						__ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
			smp_bad_seen = s;
		atomic_add_u32(&smp_nfailed, 1);
	}
	/*
	 * Sequentially consistent: everything above is visible before the count that vCPU 0
	 * waits for, so when it sees ncpus it also sees every bit, count and smp_bad_seen.
	 */
	atomic_add_u32(&smp_checked_in, 1);
}

static void smp_report_failure(void)
{
	uint32_t bad = atomic_load_acquire_u32(&smp_first_bad) - 1;
	const struct smp_seen *s = &smp_bad_seen;
	static const char *const why[] = {
		[SMP_BAD_LAPIC_ID] = "its LAPIC id is not its index",
		[SMP_BAD_CPUID_APIC] = "cpuid trapped but leaf 1 has another APIC id",
		[SMP_BAD_INFO] = "cpuid trapped but the VMM's info leaf names another vCPU",
	};
	uint32_t v = bad & 0xff;

	uart_puts("smp: FAIL vcpu ");
	uart_put_dec(bad >> 8);
	uart_puts(": ");
	uart_puts(v < sizeof(why) / sizeof(why[0]) && why[v] ? why[v] : "?");
	uart_puts(" (lapic id reg=0x");
	uart_put_hex(s->lapic_id_reg);
	uart_puts(" cpuid.1.ebx=0x");
	uart_put_hex(s->leaf1_ebx);
	uart_puts(" info=");
	uart_put_dec(s->info_eax);
	uart_puts("/");
	uart_put_dec(s->info_ebx);
	uart_puts(")\n");
}

void payload_main(uint32_t cpu, uint32_t ncpus, const struct payload_info *info)
{
	uint32_t count = 0;
	uint64_t want, mask;

	/* payload_info is written before any vCPU starts; its magic is checked below. */
	smp_check_in(cpu, ncpus, info->cpuid_nonce);
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
		/* Acquire: what each vCPU recorded before its increment is visible after it. */
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
	switch (smp_outcome(atomic_load_acquire_u32(&smp_ntrapped),
			    atomic_load_acquire_u32(&smp_nnative),
			    atomic_load_acquire_u32(&smp_nfailed))) {
	case SMP_FAILED:
		smp_report_failure();
		poweroff();
	case SMP_MIXED:
		uart_puts("smp: FAIL cpuid trapped on ");
		uart_put_dec(atomic_load_acquire_u32(&smp_ntrapped));
		uart_puts(" vCPUs and ran on the host CPU on the others\n");
		poweroff();
	case SMP_ALL_NATIVE:
		uart_puts("smp: cpuid does not trap on this host (not this VM's signature and "
			  "nonce in 0x");
		uart_put_hex(PAYLOAD_CPUID_SIG_LEAF);
		uart_puts("): it ran on the host CPU, so CPUID is not checked from the guest here;"
			  " the vcpu-cpuid test checks each vCPU's table through KVM_GET_CPUID2\n");
		break;
	case SMP_ALL_TRAPPED:
		break;
	}
	/* Each vCPU's LAPIC id is its index, so the mask can only differ if that failed. */
	if (mask != want) {
		uart_puts("smp: FAIL vcpus=");
		uart_put_dec(ncpus);
		uart_puts(" apic_mask=0x");
		uart_put_hex(mask);
		uart_puts(" want=0x");
		uart_put_hex(want);
		uart_puts("\n");
		poweroff();
	}
	uart_puts("smp: vcpus=");
	uart_put_dec(ncpus);
	uart_puts(" apic_mask=0x");
	uart_put_hex(mask);
	uart_puts(atomic_load_acquire_u32(&smp_ntrapped) ? " cpuid=trapped ok\n"
							 : " cpuid=native ok\n");
	poweroff();
}

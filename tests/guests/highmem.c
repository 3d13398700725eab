/* SPDX-License-Identifier: Apache-2.0 */
/*
 * payload-highmem: RAM above 4 GiB is there, distinct and identity-mapped.
 *
 * vCPU 0 writes a 64-bit pattern derived from each address every 16 MiB through every RAM
 * range at or above 4 GiB, and into the last 8 bytes of each such range; only when all are
 * written does it read them all back, so two addresses that alias one host page show up.
 * Prints "highmem: ok ranges=<n> high_bytes=<bytes> checked=<words>", "highmem: none" when
 * no RAM lies above 4 GiB, or a line starting "highmem: FAIL".
 */
#include "rt.h"

#define HIGHMEM_BASE   0x100000000ull /* 4 GiB */
#define HIGHMEM_STRIDE 0x1000000ull   /* 16 MiB */

/* The part of one RAM range at or above 4 GiB: [start_gpa, end_gpa). */
struct highmem_span {
	uint64_t start_gpa;
	uint64_t end_gpa;
};

/* The value stored at gpa: a multiplicative hash of the address, so each word differs. */
static uint64_t highmem_pattern(uint64_t gpa)
{
	return (gpa * 0x9e3779b97f4a7c15ull) ^ 0x5a5aa5a5c3c33c3cull;
}

/*
 * Calls visit(gpa) for each word the test touches in span: every HIGHMEM_STRIDE from its
 * (8-aligned) start, then its last 8 bytes unless a stride already landed there. Returns
 * the count of visited words, or stops early and returns -1 when visit() does.
 */
static int64_t highmem_walk(const struct highmem_span *span, int (*visit)(uint64_t gpa))
{
	uint64_t first = (span->start_gpa + 7) & ~7ull;
	uint64_t last = (span->end_gpa - 8) & ~7ull;
	uint64_t gpa = first;
	int64_t n = 0;

	if (span->end_gpa - span->start_gpa < 8 || last < first)
		return 0;
	for (; gpa <= last; gpa += HIGHMEM_STRIDE) {
		if (visit(gpa) != 0)
			return -1;
		n++;
		if (last - gpa < HIGHMEM_STRIDE)
			break;
	}
	if (gpa != last) {
		if (visit(last) != 0)
			return -1;
		n++;
	}
	return n;
}

/* Stores the pattern of gpa at gpa. */
static int highmem_write(uint64_t gpa)
{
	*(volatile uint64_t *)gpa = highmem_pattern(gpa);
	return 0;
}

/* Checks the pattern of gpa at gpa; prints the failure and returns -1 on a mismatch. */
static int highmem_check(uint64_t gpa)
{
	uint64_t got = *(volatile uint64_t *)gpa;

	if (got == highmem_pattern(gpa))
		return 0;
	uart_puts("highmem: FAIL at 0x");
	uart_put_hex(gpa);
	uart_puts(" read 0x");
	uart_put_hex(got);
	uart_puts(" want 0x");
	uart_put_hex(highmem_pattern(gpa));
	uart_puts("\n");
	return -1;
}

/*
 * Collects the parts of info's RAM ranges at or above 4 GiB into spans (up to
 * PAYLOAD_MAX_RANGES). Returns how many, or -1 after printing why info cannot be trusted.
 */
static int highmem_collect(const struct payload_info *info, struct highmem_span *spans)
{
	uint32_t nranges = info->nranges;
	int n = 0;

	if (nranges > PAYLOAD_MAX_RANGES) {
		uart_puts("highmem: FAIL nranges=");
		uart_put_dec(nranges);
		uart_puts("\n");
		return -1;
	}
	for (uint32_t i = 0; i < nranges; i++) {
		uint64_t start = info->ram[i].gpa;
		uint64_t end = start + info->ram[i].len;

		if (end < start || end > info->map_end) {
			/* Touching it would fault: report rather than triple-fault. */
			uart_puts("highmem: FAIL range 0x");
			uart_put_hex(start);
			uart_puts("+0x");
			uart_put_hex(info->ram[i].len);
			uart_puts(" beyond map_end 0x");
			uart_put_hex(info->map_end);
			uart_puts("\n");
			return -1;
		}
		if (end <= HIGHMEM_BASE)
			continue;
		spans[n].start_gpa = start < HIGHMEM_BASE ? HIGHMEM_BASE : start;
		spans[n].end_gpa = end;
		n++;
	}
	return n;
}

void payload_main(uint32_t cpu, uint32_t ncpus, const struct payload_info *info)
{
	struct highmem_span spans[PAYLOAD_MAX_RANGES];
	uint64_t high_bytes = 0, checked = 0;
	int nspans;

	if (cpu != 0)
		cpu_spin_forever();
	if (rt_check_info(info, "highmem") != 0)
		poweroff();

	nspans = highmem_collect(info, spans);
	if (nspans < 0)
		poweroff();
	if (nspans == 0) {
		uart_puts("highmem: none\n");
		poweroff();
	}

	for (int i = 0; i < nspans; i++) {
		high_bytes += spans[i].end_gpa - spans[i].start_gpa;
		highmem_walk(&spans[i], highmem_write);
	}
	for (int i = 0; i < nspans; i++) {
		int64_t n = highmem_walk(&spans[i], highmem_check);

		if (n < 0)
			poweroff();
		checked += (uint64_t)n;
	}

	uart_puts("highmem: ok ranges=");
	uart_put_dec((uint64_t)nspans);
	uart_puts(" high_bytes=");
	uart_put_dec(high_bytes);
	uart_puts(" checked=");
	uart_put_dec(checked);
	uart_puts("\n");
	poweroff();
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The payload runtime's out-of-line half: the UART, power-off and the memory helpers.
 * See rt.h for what each function does.
 */
#include "rt.h"

#define UART_THR      (PAYLOAD_UART_GPA + 0) /* transmit holding register */
#define UART_LSR      (PAYLOAD_UART_GPA + 5) /* line status register */
#define UART_LSR_THRE 0x20		     /* THR empty: ready for a byte */

/*
 * How many times uart_putc() reads LSR before it writes anyway. Each read is a VM exit
 * (microseconds), so a UART that never says ready costs a few milliseconds per byte rather
 * than a hang; a payload's output must never depend on the VMM's LSR being right.
 */
#define UART_POLL_MAX 4096

void uart_putc(char c)
{
	for (unsigned int i = 0; i < UART_POLL_MAX; i++) {
		if (mmio_read8(UART_LSR) & UART_LSR_THRE)
			break;
		cpu_relax();
	}
	mmio_write8(UART_THR, (uint8_t)c);
}

void uart_puts(const char *s)
{
	while (*s)
		uart_putc(*s++);
}

void uart_put_hex(uint64_t val)
{
	static const char digits[] = "0123456789abcdef";
	int shift = 60;

	while (shift > 0 && ((val >> shift) & 0xf) == 0)
		shift -= 4;
	for (; shift >= 0; shift -= 4)
		uart_putc(digits[(val >> shift) & 0xf]);
}

void uart_put_dec(uint64_t val)
{
	char buf[20]; /* 2^64 - 1 has 20 digits */
	int n = 0;

	do {
		buf[n++] = (char)('0' + val % 10);
		val /= 10;
	} while (val);
	while (n > 0)
		uart_putc(buf[--n]);
}

void poweroff(void)
{
	mmio_write8(PAYLOAD_I8042_GPA + PAYLOAD_I8042_CMD, PAYLOAD_I8042_RESET);
	/* The VMM stops every vCPU after the reset; until it does, wait without faulting. */
	cpu_spin_forever();
}

void cpu_spin_forever(void)
{
	for (;;)
		cpu_relax();
}

int rt_check_info(const struct payload_info *info, const char *who)
{
	if (info->magic == PAYLOAD_INFO_MAGIC && info->version == PAYLOAD_ABI_VERSION)
		return 0;
	uart_puts(who);
	uart_puts(": FAIL bad payload_info magic=0x");
	uart_put_hex(info->magic);
	uart_puts(" version=");
	uart_put_dec(info->version);
	uart_puts("\n");
	return -1;
}

/*
 * The memory helpers use the string instructions: short, and no loop GCC could recognise and
 * turn back into a call to the very function being defined. DF is clear on entry (ABI) and
 * left clear.
 */
void *memcpy(void *dst, const void *src, size_t len)
{
	void *d = dst;

	__asm__ volatile("rep movsb" : "+D"(d), "+S"(src), "+c"(len) : : "memory");
	return dst;
}

void *memmove(void *dst, const void *src, size_t len)
{
	const unsigned char *s = src;
	unsigned char *d = dst;

	if (d <= s || d >= s + len)
		return memcpy(dst, src, len);
	/* Overlapping with dst above src: copy backwards, from the last byte. */
	d += len - 1;
	s += len - 1;
	__asm__ volatile("std\n\trep movsb\n\tcld" : "+D"(d), "+S"(s), "+c"(len) : : "memory");
	return dst;
}

void *memset(void *dst, int c, size_t len)
{
	void *d = dst;

	__asm__ volatile("rep stosb" : "+D"(d), "+c"(len) : "a"(c) : "memory");
	return dst;
}

int memcmp(const void *a, const void *b, size_t len)
{
	const unsigned char *p = a, *q = b;

	for (size_t i = 0; i < len; i++) {
		if (p[i] != q[i])
			return p[i] < q[i] ? -1 : 1;
	}
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The payload runtime: what every freestanding payload guest in tests/guests/ links with.
 *
 * start.S enters payload_main() on every vCPU with the registers the payload ABI
 * (wire/payload_abi.h) defines, and powers the VM off if it returns. This header declares the
 * little a payload needs besides: the UART, power-off, MMIO and port I/O, atomics and memory
 * helpers. Everything runs in ring 3: `pause`, `cpuid` and MMIO work everywhere, `in`/`out`
 * only on hardware KVM (the ABI's devices are reached through MMIO windows for that reason),
 * `hlt` nowhere (it faults, and with no IDT a fault ends the VM).
 */
#ifndef SANDBOX_GUESTS_RT_H
#define SANDBOX_GUESTS_RT_H

#include <stddef.h>
#include <stdint.h>

#include "payload_abi.h"

/*
 * The payload's own code, called once on every vCPU with its index (0..ncpus-1), the number
 * of vCPUs and the VMM's description of the machine. Returning powers the VM off.
 */
void payload_main(uint32_t cpu, uint32_t ncpus, const struct payload_info *info);

/* Writes one byte to a device register (a guest-physical address in the MMIO hole). */
static inline void mmio_write8(uint64_t gpa, uint8_t val)
{
	*(volatile uint8_t *)gpa = val;
}

/* Reads one byte from a device register. */
static inline uint8_t mmio_read8(uint64_t gpa)
{
	return *(volatile const uint8_t *)gpa;
}

/* Reads a 32-bit device register (a naturally aligned guest-physical address). */
static inline uint32_t mmio_read32(uint64_t gpa)
{
	return *(volatile const uint32_t *)gpa;
}

/*
 * Writes one byte to an I/O port. Faults at CPL 3 on kvm-pvm (see payload_abi.h): for
 * payloads that test port I/O itself, on hardware KVM.
 */
static inline void outb(uint16_t port, uint8_t val)
{
	__asm__ volatile("outb %0, %1" : : "a"(val), "Nd"(port) : "memory");
}

/* Reads one byte from an I/O port; faults on kvm-pvm like outb(). */
static inline uint8_t inb(uint16_t port)
{
	uint8_t val;

	__asm__ volatile("inb %1, %0" : "=a"(val) : "Nd"(port) : "memory");
	return val;
}

/* Tells the CPU we are spinning (`pause`); also a compiler barrier. */
static inline void cpu_relax(void)
{
	__asm__ volatile("pause" : : : "memory");
}

/* Executes CPUID for a leaf (subleaf 0); any output pointer may be NULL. */
static inline void cpu_cpuid(uint32_t leaf, uint32_t *eax, uint32_t *ebx, uint32_t *ecx,
			     uint32_t *edx)
{
	uint32_t a, b, c, d;

	__asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(leaf), "c"(0));
	if (eax)
		*eax = a;
	if (ebx)
		*ebx = b;
	if (ecx)
		*ecx = c;
	if (edx)
		*edx = d;
}

/*
 * Atomics. All are sequentially consistent unless the name says otherwise: a payload is a
 * test, not a fast path, and the strongest ordering keeps every cross-vCPU check simple.
 */

/* Adds val to *p and returns the new value. */
static inline uint32_t atomic_add_u32(uint32_t *p, uint32_t val)
{
	return __atomic_add_fetch(p, val, __ATOMIC_SEQ_CST);
}

/* ORs val into *p and returns the new value. */
static inline uint64_t atomic_or_u64(uint64_t *p, uint64_t val)
{
	return __atomic_or_fetch(p, val, __ATOMIC_SEQ_CST);
}

/* Loads *p; later loads are not hoisted above it (acquire). */
static inline uint32_t atomic_load_acquire_u32(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/* Loads *p; later loads are not hoisted above it (acquire). */
static inline uint64_t atomic_load_acquire_u64(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/* Stores val to *p; earlier stores are visible before it (release). */
static inline void atomic_store_release_u32(uint32_t *p, uint32_t val)
{
	__atomic_store_n(p, val, __ATOMIC_RELEASE);
}

/*
 * Writes one byte to the UART (its MMIO window, PAYLOAD_UART_GPA), waiting a bounded time for
 * its transmitter to be ready.
 */
void uart_putc(char c);

/* Writes a NUL-terminated string to the UART, "\n" as is (the console wants no "\r"). */
void uart_puts(const char *s);

/* Writes val in lower-case hex, no "0x" prefix, no leading zeros ("0" for zero). */
void uart_put_hex(uint64_t val);

/* Writes val in decimal. */
void uart_put_dec(uint64_t val);

/* Asks the VMM to end the VM (i8042 reset through its MMIO window, exit status 0). */
__attribute__((noreturn)) void poweroff(void);

/* Spins with `pause` forever: how a vCPU with nothing left to do waits for the end. */
__attribute__((noreturn)) void cpu_spin_forever(void);

/*
 * Checks info's magic and version. On a mismatch prints "<who>: FAIL bad payload_info
 * magic=0x.. version=..\n" and returns -1; returns 0 when they match.
 */
int rt_check_info(const struct payload_info *info, const char *who);

/*
 * The four functions GCC may emit calls to even in freestanding code (struct copies, large
 * initialisers). Standard semantics.
 */
void *memcpy(void *dst, const void *src, size_t len);
void *memmove(void *dst, const void *src, size_t len);
void *memset(void *dst, int c, size_t len);
int memcmp(const void *a, const void *b, size_t len);

#endif

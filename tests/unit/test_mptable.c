/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vmm/mptable.c: the MP table, read back from fake guest RAM the way Linux's mpparse does:
 * find the floating pointer, follow physptr, check both checksums, walk the entries.
 * The structures are restated here from the MP spec 1.4, independently of mptable.c.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "fake_mem.h"
#include "layout.h"
#include "vmm.h"

struct t_mpf {
	char signature[4];
	uint32_t physptr;
	uint8_t length;
	uint8_t spec_rev;
	uint8_t checksum;
	uint8_t feature[5];
} __attribute__((packed));

struct t_mpc {
	char signature[4];
	uint16_t length;
	uint8_t spec_rev;
	uint8_t checksum;
	char oem[8];
	char product[12];
	uint32_t oem_ptr;
	uint16_t oem_size;
	uint16_t count;
	uint32_t lapic_addr;
	uint16_t ext_length;
	uint8_t ext_checksum;
	uint8_t reserved;
} __attribute__((packed));

struct t_cpu {
	uint8_t type, apic_id, apic_ver, flags;
	uint32_t signature, features, reserved[2];
} __attribute__((packed));

struct t_ioapic {
	uint8_t type, apic_id, apic_ver, flags;
	uint32_t addr;
} __attribute__((packed));

struct t_intsrc {
	uint8_t type, irq_type;
	uint16_t irq_flags;
	uint8_t src_bus, src_irq, dst_apic, dst_pin;
} __attribute__((packed));

_Static_assert(sizeof(struct t_mpf) == 16, "MP floating pointer");
_Static_assert(sizeof(struct t_mpc) == 44, "MP config table header");
_Static_assert(sizeof(struct t_cpu) == 20, "MP processor entry");
_Static_assert(sizeof(struct t_ioapic) == 8, "MP IOAPIC entry");
_Static_assert(sizeof(struct t_intsrc) == 8, "MP interrupt entry");

enum { MP_PROC, MP_BUS, MP_IOAPIC, MP_INTSRC, MP_LINTSRC };
#define CPU_ENABLED 1
#define CPU_BSP	    2
#define IRQ_INT	    0
#define IRQ_NMI	    1
#define IRQ_EXTINT  3

static uint8_t sum(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint8_t s = 0;

	while (len--)
		s += *b++;
	return s;
}

/* What one walk of the table found. */
struct mp_found {
	unsigned ncpu, nbus, nioapic, nint, nlint;
	uint8_t ioapic_id;
	int pin_of_isa_irq[16]; /* IOAPIC pin of each ISA IRQ routed as INT, -1 if none */
	int extint_pin;
	int lint_nmi_pin, lint_extint_pin;
	size_t total_len; /* floating pointer + config table */
};

static void check_table(const uint8_t *ram, unsigned ncpus, struct mp_found *f)
{
	const struct t_mpf *mpf = (const void *)(ram + MPTABLE_GPA);
	const struct t_mpc *mpc;
	const uint8_t *p, *end;

	memset(f, 0, sizeof(*f));
	for (int i = 0; i < 16; i++)
		f->pin_of_isa_irq[i] = -1;
	f->extint_pin = f->lint_nmi_pin = f->lint_extint_pin = -1;

	/* The floating pointer: 16-byte aligned in the last KiB of base memory. */
	cr_assert(eq(u64, MPTABLE_GPA % 16, 0));
	cr_assert(eq(int, memcmp(mpf->signature, "_MP_", 4), 0));
	cr_assert(eq(u8, mpf->length, 1));
	cr_assert(eq(u8, mpf->spec_rev, 4));
	cr_assert(eq(u8, sum(mpf, 16), 0), "floating pointer checksum");
	cr_assert(eq(u8, mpf->feature[0], 0), "a default configuration instead of our table");
	cr_assert(ge(u32, mpf->physptr, MPTABLE_GPA + 16));
	cr_assert(lt(u32, mpf->physptr, LOWMEM_END_GPA));

	/* The configuration table. */
	mpc = (const void *)(ram + mpf->physptr);
	cr_assert(eq(int, memcmp(mpc->signature, "PCMP", 4), 0));
	cr_assert(eq(u8, mpc->spec_rev, 4));
	cr_assert(le(u64, mpf->physptr + mpc->length, LOWMEM_END_GPA), "table runs past 640 KiB");
	cr_assert(eq(u8, sum(mpc, mpc->length), 0), "config table checksum");
	cr_assert(eq(u32, mpc->lapic_addr, (uint32_t)LAPIC_GPA));
	cr_assert(eq(u16, mpc->ext_length, 0));
	cr_assert(eq(u16, mpc->count, ncpus + 1 + 1 + 15 + 2));
	cr_assert(eq(u16, mpc->length, 44 + ncpus * 20 + (1 + 1 + 15 + 2) * 8));
	f->total_len = mpf->physptr - MPTABLE_GPA + mpc->length;

	p = (const uint8_t *)(mpc + 1);
	end = (const uint8_t *)mpc + mpc->length;
	for (unsigned i = 0; i < mpc->count; i++) {
		cr_assert(lt(ptr, (void *)p, (void *)end), "entry %u past the table's length", i);
		switch (p[0]) {
		case MP_PROC: {
			const struct t_cpu *c = (const void *)p;

			/* Processor entries come first, in APIC id order. */
			cr_assert(eq(u32, f->ncpu, i));
			cr_assert(eq(u8, c->apic_id, f->ncpu));
			cr_assert(eq(u8, c->flags & CPU_ENABLED, CPU_ENABLED));
			cr_assert(eq(u8, c->flags & CPU_BSP, f->ncpu == 0 ? CPU_BSP : 0),
				  "BSP flag on cpu %u", f->ncpu);
			cr_assert(ge(u8, c->apic_ver, 0x10), "an integrated APIC");
			f->ncpu++;
			p += sizeof(*c);
			break;
		}
		case MP_BUS:
			cr_assert(eq(u8, p[1], 0), "bus id");
			cr_assert(eq(int, memcmp(p + 2, "ISA   ", 6), 0));
			f->nbus++;
			p += 8;
			break;
		case MP_IOAPIC: {
			const struct t_ioapic *io = (const void *)p;

			cr_assert(eq(u8, io->flags & 1, 1), "IOAPIC enabled");
			cr_assert(eq(u32, io->addr, (uint32_t)IOAPIC_GPA));
			f->ioapic_id = io->apic_id;
			f->nioapic++;
			p += sizeof(*io);
			break;
		}
		case MP_INTSRC: {
			const struct t_intsrc *s = (const void *)p;

			cr_assert(eq(u8, f->nioapic, 1), "interrupt entry before the IOAPIC");
			cr_assert(eq(u8, s->dst_apic, f->ioapic_id));
			cr_assert(eq(u8, s->src_bus, 0));
			cr_assert(lt(u8, s->dst_pin, 24));
			cr_assert(lt(u8, s->src_irq, 16));
			if (s->irq_type == IRQ_EXTINT) {
				cr_assert(eq(int, f->extint_pin, -1), "two ExtINT entries");
				f->extint_pin = s->dst_pin;
			} else {
				cr_assert(eq(u8, s->irq_type, IRQ_INT));
				cr_assert(eq(int, f->pin_of_isa_irq[s->src_irq], -1),
					  "IRQ %u routed twice", s->src_irq);
				f->pin_of_isa_irq[s->src_irq] = s->dst_pin;
			}
			f->nint++;
			p += sizeof(*s);
			break;
		}
		case MP_LINTSRC: {
			const struct t_intsrc *s = (const void *)p;

			cr_assert(eq(u8, s->dst_apic, 0xff), "local interrupt for every CPU");
			if (s->irq_type == IRQ_NMI)
				f->lint_nmi_pin = s->dst_pin;
			else if (s->irq_type == IRQ_EXTINT)
				f->lint_extint_pin = s->dst_pin;
			f->nlint++;
			p += sizeof(*s);
			break;
		}
		default:
			cr_fatal("entry %u has unknown type %u", i, p[0]);
		}
	}
	cr_assert(eq(ptr, (void *)p, (void *)end), "entries do not fill the table's length");
}

static void check_ncpus(unsigned ncpus)
{
	struct guest_mem mem;
	uint8_t *ram = fake_mem_create(&mem, 1 * MIB, 0xcc);
	struct mp_found f;

	cr_assert(eq(int, mptable_write(&mem, ncpus), 0));
	check_table(ram, ncpus, &f);
	cr_assert(eq(u32, f.ncpu, ncpus));
	cr_assert(eq(u32, f.nbus, 1));
	cr_assert(eq(u32, f.nioapic, 1));
	/* The IOAPIC takes the first id after the CPUs'. */
	cr_assert(eq(u8, f.ioapic_id, ncpus));
	cr_assert(eq(u32, f.nint, 15));
	cr_assert(eq(u32, f.nlint, 2));
	/* The routing KVM's irqchip implements: the PIT (IRQ 0) on pin 2, IRQ 2 (the cascade)
	 * nowhere, every other ISA IRQ on its own pin; no ExtINT on the IOAPIC (KVM does not
	 * wire the PIC there: it reaches the CPUs through LINT0). */
	cr_assert(eq(int, f.extint_pin, -1));
	cr_assert(eq(int, f.pin_of_isa_irq[0], 2));
	cr_assert(eq(int, f.pin_of_isa_irq[2], -1));
	for (int irq = 1; irq < 16; irq++)
		if (irq != 2)
			cr_assert(eq(int, f.pin_of_isa_irq[irq], irq), "IRQ %d", irq);
	cr_assert(eq(int, f.lint_extint_pin, 0));
	cr_assert(eq(int, f.lint_nmi_pin, 1));
	/* Nothing written outside the table. */
	cr_assert(fake_mem_all(ram, MPTABLE_GPA, 0xcc), "below the table");
	cr_assert(fake_mem_all(ram + MPTABLE_GPA + f.total_len, 1 * MIB - MPTABLE_GPA - f.total_len,
			       0xcc),
		  "after the table");
	fake_mem_destroy(&mem);
}

Test(mptable, one_cpu)
{
	check_ncpus(1);
}
Test(mptable, two_cpus)
{
	check_ncpus(2);
}
Test(mptable, four_cpus)
{
	check_ncpus(4);
}
Test(mptable, max_cpus)
{
	check_ncpus(VCPU_MAX);
}

Test(mptable, every_count_in_range)
{
	for (unsigned n = 1; n <= VCPU_MAX; n++)
		check_ncpus(n);
}

Test(mptable, bad_cpu_counts_refused_ram_untouched)
{
	static const unsigned bad[] = {0, VCPU_MAX + 1, 255, 256, UINT32_MAX};
	struct guest_mem mem;
	uint8_t *ram = fake_mem_create(&mem, 1 * MIB, 0xcc);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert(eq(int, mptable_write(&mem, bad[i]), -EINVAL), "ncpus %u", bad[i]);
		cr_assert(fake_mem_all(ram, 1 * MIB, 0xcc), "ncpus %u wrote RAM", bad[i]);
	}
	fake_mem_destroy(&mem);
}

Test(mptable, ram_ending_inside_the_table)
{
	struct guest_mem mem;

	fake_mem_create(&mem, MPTABLE_GPA + 32, 0);
	cr_assert(eq(int, mptable_write(&mem, 1), -EFAULT));
	fake_mem_destroy(&mem);
}

Test(mptable, checksum_sums_bytes_mod_256)
{
	static const uint8_t a[] = {1, 2, 3};
	static const uint8_t b[] = {0xff, 0x02, 0x80, 0x80};
	uint8_t c[300];

	cr_assert(eq(u8, mptable_checksum(a, 0), 0));
	cr_assert(eq(u8, mptable_checksum(a, sizeof(a)), 6));
	cr_assert(eq(u8, mptable_checksum(b, sizeof(b)), 1));
	for (size_t i = 0; i < sizeof(c); i++)
		c[i] = (uint8_t)i;
	cr_assert(eq(u8, mptable_checksum(c, sizeof(c)), sum(c, sizeof(c))));
}

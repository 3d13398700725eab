/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Intel MultiProcessor Specification 1.4 table: how a guest without ACPI learns its CPUs,
 * its IOAPIC and the ISA interrupt routing. Linux finds the floating pointer by scanning the
 * last KiB of base memory (MPTABLE_GPA). Checksums make each structure sum to zero.
 */
#include <errno.h>
#include <string.h>

#include "layout.h"
#include "vmm.h"

struct mpf_intel {
	char signature[4]; /* "_MP_" */
	uint32_t physptr;  /* the config table */
	uint8_t length;	   /* in 16-byte units */
	uint8_t spec_rev;
	uint8_t checksum;
	uint8_t feature[5];
} __attribute__((packed));

struct mpc_table {
	char signature[4]; /* "PCMP" */
	uint16_t length;   /* base table, header included */
	uint8_t spec_rev;
	uint8_t checksum;
	char oem[8];
	char product[12];
	uint32_t oem_ptr;
	uint16_t oem_size;
	uint16_t count; /* entries */
	uint32_t lapic_addr;
	uint16_t ext_length;
	uint8_t ext_checksum;
	uint8_t reserved;
} __attribute__((packed));

struct mpc_cpu {
	uint8_t type; /* 0 */
	uint8_t apic_id;
	uint8_t apic_ver;
	uint8_t flags;
	uint32_t signature;
	uint32_t features;
	uint32_t reserved[2];
} __attribute__((packed));

struct mpc_bus {
	uint8_t type; /* 1 */
	uint8_t bus_id;
	char bus_type[6];
} __attribute__((packed));

struct mpc_ioapic {
	uint8_t type; /* 2 */
	uint8_t apic_id;
	uint8_t apic_ver;
	uint8_t flags;
	uint32_t addr;
} __attribute__((packed));

struct mpc_intsrc {
	uint8_t type; /* 3 (IOAPIC input) or 4 (local APIC input) */
	uint8_t irq_type;
	uint16_t irq_flags;
	uint8_t src_bus;
	uint8_t src_irq;
	uint8_t dst_apic;
	uint8_t dst_pin;
} __attribute__((packed));

_Static_assert(sizeof(struct mpf_intel) == 16, "mpf_intel");
_Static_assert(sizeof(struct mpc_table) == 44, "mpc_table");
_Static_assert(sizeof(struct mpc_cpu) == 20, "mpc_cpu");
_Static_assert(sizeof(struct mpc_bus) == 8, "mpc_bus");
_Static_assert(sizeof(struct mpc_ioapic) == 8, "mpc_ioapic");
_Static_assert(sizeof(struct mpc_intsrc) == 8, "mpc_intsrc");

#define MP_SPEC_REV	  4
#define MP_CPU_ENABLED	  1
#define MP_CPU_BSP	  2
#define MP_APIC_VERSION	  0x14
#define MP_IOAPIC_VERSION 0x11
#define MP_IRQ_INT	  0
#define MP_IRQ_NMI	  1
#define MP_IRQ_EXTINT	  3
#define MP_ISA_IRQS	  16
#define MP_TABLE_MAX                                                                               \
	(sizeof(struct mpf_intel) + sizeof(struct mpc_table) + VCPU_MAX * sizeof(struct mpc_cpu) + \
	 (2 + MP_ISA_IRQS + 2) * 8)
_Static_assert(MP_TABLE_MAX <= LOWMEM_END_GPA - MPTABLE_GPA, "MP table fits below 640 KiB");

uint8_t mptable_checksum(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint8_t sum = 0;

	while (len--)
		sum += *p++;
	return sum;
}

static void mptable_add_int(uint8_t **p, uint8_t type, uint8_t irq_type, uint8_t src_irq,
			    uint8_t dst_apic, uint8_t dst_pin)
{
	struct mpc_intsrc e = {.type = type,
			       .irq_type = irq_type,
			       .src_bus = 0,
			       .src_irq = src_irq,
			       .dst_apic = dst_apic,
			       .dst_pin = dst_pin};

	memcpy(*p, &e, sizeof(e));
	*p += sizeof(e);
}

int mptable_write(const struct guest_mem *mem, unsigned ncpus)
{
	uint8_t buf[MP_TABLE_MAX], *p;
	struct mpf_intel *mpf = (struct mpf_intel *)buf;
	struct mpc_table *mpc = (struct mpc_table *)(mpf + 1);
	uint8_t ioapic_id = (uint8_t)ncpus;
	uint16_t count = 0;

	if (ncpus == 0 || ncpus > VCPU_MAX)
		return -EINVAL;
	memset(buf, 0, sizeof(buf));
	p = (uint8_t *)(mpc + 1);
	for (unsigned i = 0; i < ncpus; i++) {
		struct mpc_cpu cpu = {
			.type = 0,
			.apic_id = (uint8_t)i,
			.apic_ver = MP_APIC_VERSION,
			.flags = MP_CPU_ENABLED | (i == 0 ? MP_CPU_BSP : 0),
			.signature = 0x600, /* family 6 */
			.features = 0x201,  /* FPU, APIC */
		};
		memcpy(p, &cpu, sizeof(cpu));
		p += sizeof(cpu);
		count++;
	}
	struct mpc_bus bus = {.type = 1, .bus_id = 0, .bus_type = {'I', 'S', 'A', ' ', ' ', ' '}};
	memcpy(p, &bus, sizeof(bus));
	p += sizeof(bus);
	count++;
	struct mpc_ioapic ioapic = {.type = 2,
				    .apic_id = ioapic_id,
				    .apic_ver = MP_IOAPIC_VERSION,
				    .flags = 1,
				    .addr = (uint32_t)IOAPIC_GPA};
	memcpy(p, &ioapic, sizeof(ioapic));
	p += sizeof(ioapic);
	count++;
	/* As KVM routes GSIs: ISA IRQ 0 (the PIT) on pin 2, every other ISA IRQ on its own pin.
	 * IRQ 2 is the PIC cascade: not routed. No ExtINT on pin 0: KVM's IOAPIC does not wire
	 * the PIC there (Linux warns "ExtINT not setup in hardware" when a table claims it); the
	 * PIC reaches the CPUs through LINT0 below. */
	mptable_add_int(&p, 3, MP_IRQ_INT, 0, ioapic_id, 2);
	count++;
	for (uint8_t irq = 1; irq < MP_ISA_IRQS; irq++) {
		if (irq == 2)
			continue;
		mptable_add_int(&p, 3, MP_IRQ_INT, irq, ioapic_id, irq);
		count++;
	}
	/* Local APIC inputs of every CPU (0xff): LINT0 ExtINT, LINT1 NMI. */
	mptable_add_int(&p, 4, MP_IRQ_EXTINT, 0, 0xff, 0);
	mptable_add_int(&p, 4, MP_IRQ_NMI, 0, 0xff, 1);
	count += 2;

	memcpy(mpc->signature, "PCMP", 4);
	mpc->length = (uint16_t)(p - (uint8_t *)mpc);
	mpc->spec_rev = MP_SPEC_REV;
	memcpy(mpc->oem, "SANDBOX ", 8);
	memcpy(mpc->product, "SANDBOX-VMM ", 12);
	mpc->count = count;
	mpc->lapic_addr = (uint32_t)LAPIC_GPA;
	mpc->checksum = (uint8_t)-mptable_checksum(mpc, mpc->length);

	memcpy(mpf->signature, "_MP_", 4);
	mpf->physptr = (uint32_t)(MPTABLE_GPA + sizeof(*mpf));
	mpf->length = 1;
	mpf->spec_rev = MP_SPEC_REV;
	mpf->checksum = (uint8_t)-mptable_checksum(mpf, sizeof(*mpf));

	return mem_write(mem, MPTABLE_GPA, buf, (uint64_t)(p - buf));
}

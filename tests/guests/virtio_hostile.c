/* SPDX-License-Identifier: Apache-2.0 */
/*
 * payload-virtio-hostile: a hostile virtio-blk driver against the real device.
 *
 * vCPU 0 drives the first virtio-mmio window (info->mmio_base_gpa) from ring 3 through real
 * MMIO exits: the whole virtio 1.x initialisation, a 16-entry split queue in this payload's
 * .bss (identity-mapped), requests built by hand. The device serves a queue synchronously in
 * the QueueNotify exit, so when the notify write returns the used ring and the status byte
 * are final. Each case breaks the protocol in one way and checks that the VMM survives and
 * answers with DEVICE_NEEDS_RESET (Status bit 0x40) or a failed request (IOERR / UNSUPP),
 * then resets the device (Status = 0) before the next case.
 *
 * Expects a read-only disk whose first bytes are HOSTILE_MAGIC (tests/integration/
 * virtio_hostile.sh makes one). Prints one "hostile: <case>: ok" or "hostile: <case>: FAIL
 * <why>" per case, then "hostile: all <n> cases ok" or "hostile: <k> of <n> cases FAIL".
 */
#include <stdbool.h>

/* The 16 entries the cases are written for: case 3 chains all of them, case 13 puts
 * avail->idx 1000 ahead. */
#define VQ_SIZE 16

#include "rt.h"
#include "vq.h"

#define VIO_ID_BLOCK	 2u
#define HOSTILE_FEATURES (1ull << VIO_F_INDIRECT_DESC | 1ull << VIO_F_VERSION_1)

#define BLK_T_IN     0u
#define BLK_T_OUT    1u
#define BLK_S_OK     0u
#define BLK_S_IOERR  1u
#define BLK_S_UNSUPP 2u

#define SECTOR_LEN    512u
/* The disk's first bytes, as virtio_hostile.sh writes them; the rest of sector 0 is zeros. */
#define HOSTILE_MAGIC "SBOX-HOSTILE-DISK-0123456789"

struct blk_hdr {
	uint32_t type;
	uint32_t ioprio;
	uint64_t sector;
};
_Static_assert(sizeof(struct blk_hdr) == 16, "request header layout");

/* The queue and the request buffers, in .bss: zero at start, identity-mapped guest RAM. */
static struct vq q;
/* Two indirect tables: [0] the outer, [1] the one nested in it. */
static struct vq_desc vq_indirect[2][4] __attribute__((aligned(64)));
static struct blk_hdr req_hdr __attribute__((aligned(16)));
static uint8_t req_data[SECTOR_LEN] __attribute__((aligned(512)));
static uint8_t req_status __attribute__((aligned(16)));

static uint64_t vio_base;      /* the device's register window */
static uint64_t low_ram_end;   /* the end of the RAM range holding address 0 */
static uint64_t disk_capacity; /* sectors, from the config space */

/* The reason and value of the current case's failure, printed by the runner. */
static uint64_t fail_val;
static bool fail_has_val;

/* Records the value shown with a failure and returns why. */
static const char *fail_with(const char *why, uint64_t val)
{
	fail_val = val;
	fail_has_val = true;
	return why;
}

/* Resets the device (Status = 0) and the driver's copy of the queue. NULL or why not. */
static const char *hostile_reset(void)
{
	uint32_t status;

	vio_write(vio_base, VIO_STATUS, 0);
	status = vio_read(vio_base, VIO_STATUS);
	if (status != 0)
		return fail_with("status after reset is not 0:", status);
	memset(&q, 0, sizeof(q));
	memset(vq_indirect, 0, sizeof(vq_indirect));
	q.avail.flags = AVAIL_F_NO_INTERRUPT; /* IF is 0 anyway: no interrupt is ever taken */
	return NULL;
}

/*
 * Resets the device and initialises it as a driver does, up to FEATURES_OK and queue 0
 * configured with desc_gpa (our avail and used rings): Status = ACK | DRIVER | FEATURES_OK,
 * QueueReady written 1. The caller checks QueueReady and sets DRIVER_OK. NULL or why not.
 */
static const char *hostile_setup_queue(uint64_t desc_gpa)
{
	const char *why = hostile_reset();

	if (!why)
		why = vio_init(vio_base, VIO_ID_BLOCK, HOSTILE_FEATURES);
	if (!why)
		why = vio_queue_at(vio_base, 0, desc_gpa, (uint64_t)(uintptr_t)&q.avail,
				   (uint64_t)(uintptr_t)&q.used);
	return why;
}

/* The full initialisation with our own rings, through DRIVER_OK. NULL or why not. */
static const char *hostile_init(void)
{
	const char *why = hostile_reset();

	if (!why)
		why = vio_init(vio_base, VIO_ID_BLOCK, HOSTILE_FEATURES);
	if (!why)
		why = vio_queue(vio_base, 0, &q);
	if (!why)
		why = vio_driver_ok(vio_base);
	return why;
}

/* Sets descriptor i of `table`. */
static void desc_set(struct vq_desc *table, unsigned i, uint64_t addr, uint32_t len, uint16_t flags,
		     uint16_t next)
{
	table[i] = (struct vq_desc){.addr = addr, .len = len, .flags = flags, .next = next};
}

/* Fills the header and poisons the data and status, so only the device can set them. */
static void req_prepare(uint32_t type, uint64_t sector)
{
	req_hdr = (struct blk_hdr){.type = type, .ioprio = 0, .sector = sector};
	memset(req_data, 0xa5, sizeof(req_data));
	req_status = 0xee;
}

/*
 * Builds the usual three-descriptor request at descriptors 0..2 of `table`: the header, the
 * data (device-writable for a read, readable for a write) with data_gpa/data_len, and the
 * status byte.
 */
static void req_chain(struct vq_desc *table, bool data_write, uint64_t data_gpa, uint32_t data_len)
{
	desc_set(table, 0, (uint64_t)(uintptr_t)&req_hdr, sizeof(req_hdr), DESC_F_NEXT, 1);
	desc_set(table, 1, data_gpa, data_len,
		 (uint16_t)(DESC_F_NEXT | (data_write ? DESC_F_WRITE : 0)), 2);
	desc_set(table, 2, (uint64_t)(uintptr_t)&req_status, 1, DESC_F_WRITE, 0);
}

/*
 * Kick queue 0 and wait, bounded, until the used index moves past `used_before` or the device
 * gives up on us: the kick may be served on the VMM's I/O thread (ioeventfd), after the
 * QueueNotify write returns. A kick the device must ignore waits the whole bound (~0.1 s).
 * Status is an MMIO exit: it is looked at only now and then.
 */
static void vq_kick_wait(uint16_t used_before)
{
	vq_notify(vio_base, 0);
	for (uint32_t spin = 0; spin < (1u << 22); spin++) {
		/* Acquire: what the device wrote with the used entry is read after it. */
		if (__atomic_load_n(&q.used.idx, __ATOMIC_ACQUIRE) != used_before)
			return;
		if ((spin & 1023) == 1023 && (vio_read(vio_base, VIO_STATUS) & VIO_S_RESET))
			return;
		cpu_relax();
	}
}

/* Offers the chain at descriptor `head`, kicks queue 0 and waits for it (vq_kick_wait). */
static void vq_submit(uint16_t head)
{
	/* Acquire, like every look at the used index (vq_kick_wait waits for it to move). */
	uint16_t used_before = __atomic_load_n(&q.used.idx, __ATOMIC_ACQUIRE);

	vq_offer(&q, head);
	vq_publish(&q);
	vq_kick_wait(used_before);
}

/* Checks that the device now wants a reset and returned nothing. NULL or why not. */
static const char *expect_needs_reset(uint16_t used_before)
{
	uint32_t status = vio_read(vio_base, VIO_STATUS);
	uint16_t used_idx = __atomic_load_n(&q.used.idx, __ATOMIC_ACQUIRE);

	if (!(status & VIO_S_RESET))
		return fail_with("no NEEDS_RESET: status", status);
	if (used_idx != used_before)
		return fail_with("the bad chain was returned: used idx", used_idx);
	return NULL;
}

/*
 * Checks that the chain at `head` came back as request number used_before + 1 with status
 * byte `want` and `written` bytes, and that the device is still fine. NULL or why not.
 */
static const char *expect_request(uint16_t used_before, uint16_t head, uint8_t want,
				  uint32_t written)
{
	uint16_t used_idx = __atomic_load_n(&q.used.idx, __ATOMIC_ACQUIRE);
	const struct vq_used_elem *e = &q.used.ring[used_before % VQ_SIZE];
	uint32_t status = vio_read(vio_base, VIO_STATUS);

	if (status & VIO_S_RESET)
		return fail_with("device wants a reset: status", status);
	if (used_idx != (uint16_t)(used_before + 1))
		return fail_with("request not returned: used idx", used_idx);
	if (e->id != head)
		return fail_with("used element names another chain:", e->id);
	if (req_status != want)
		return fail_with("status byte", req_status);
	if (e->len != written)
		return fail_with("used len", e->len);
	return NULL;
}

/* Checks that req_data holds sector 0 of the disk: HOSTILE_MAGIC, then zeros. */
static const char *check_sector0(void)
{
	size_t n = sizeof(HOSTILE_MAGIC) - 1;

	if (memcmp(req_data, HOSTILE_MAGIC, n) != 0)
		return fail_with("sector 0 does not start with the magic; first bytes",
				 *(const uint64_t *)req_data);
	for (size_t i = n; i < SECTOR_LEN; i++) {
		if (req_data[i] != 0)
			return fail_with("sector 0 not zero after the magic at offset", i);
	}
	return NULL;
}

/* A good read of sector 0 on the queue as it is (no reset). NULL or why it failed. */
static const char *good_read(void)
{
	uint16_t used_before = q.used.idx;
	const char *why;

	req_prepare(BLK_T_IN, 0);
	req_chain(q.desc, true, (uint64_t)(uintptr_t)req_data, SECTOR_LEN);
	vq_submit(0);
	why = expect_request(used_before, 0, BLK_S_OK, SECTOR_LEN + 1);
	return why ? why : check_sector0();
}

/* (1) A good read of sector 0 returns the disk's bytes. */
static const char *case_good_read(void)
{
	const char *why = hostile_init();

	return why ? why : good_read();
}

/*
 * The usual read request with descriptor 1 (the data) replaced by addr/len/flags: for the
 * cases whose only fault is that one buffer. Expects NEEDS_RESET.
 */
static const char *bad_data_buffer(uint64_t addr, uint32_t len, uint16_t flags)
{
	const char *why = hostile_init();

	if (why)
		return why;
	req_prepare(BLK_T_IN, 0);
	req_chain(q.desc, true, (uint64_t)(uintptr_t)req_data, SECTOR_LEN);
	desc_set(q.desc, 1, addr, len, flags, 2);
	vq_submit(0);
	return expect_needs_reset(0);
}

/* (2) A descriptor whose next is itself. */
static const char *case_desc_loop(void)
{
	const char *why = hostile_init();

	if (why)
		return why;
	req_prepare(BLK_T_IN, 0);
	desc_set(q.desc, 0, (uint64_t)(uintptr_t)&req_hdr, sizeof(req_hdr), DESC_F_NEXT, 0);
	vq_submit(0);
	return expect_needs_reset(0);
}

/*
 * (3) A chain longer than the queue: all 16 descriptors (valid, device-readable buffers)
 * chained in order and the last pointing back to the first, so the walk reaches a 17th hop
 * without any descriptor being bad by itself. In a split ring a chain can only outgrow the
 * queue by coming back to a descriptor; unlike (2) this one is a cycle through the whole table.
 */
static const char *case_chain_too_long(void)
{
	const char *why = hostile_init();

	if (why)
		return why;
	req_prepare(BLK_T_IN, 0);
	for (unsigned i = 0; i < VQ_SIZE; i++)
		desc_set(q.desc, i, (uint64_t)(uintptr_t)&req_hdr, sizeof(req_hdr), DESC_F_NEXT,
			 (uint16_t)((i + 1) % VQ_SIZE));
	vq_submit(0);
	return expect_needs_reset(0);
}

/* (4) A buffer far outside guest RAM. */
static const char *case_buffer_outside_ram(void)
{
	return bad_data_buffer(0x7f0000000000ull, SECTOR_LEN, DESC_F_NEXT | DESC_F_WRITE);
}

/*
 * (5) A buffer that starts in RAM and ends past the RAM range holding address 0: into the
 * MMIO hole when that range is the full 3 GiB, into unbacked space below it for a small guest.
 */
static const char *case_buffer_straddles_ram_end(void)
{
	return bad_data_buffer(low_ram_end - 256, SECTOR_LEN, DESC_F_NEXT | DESC_F_WRITE);
}

/* (6) addr + len wraps around 2^64. */
static const char *case_buffer_len_overflow(void)
{
	return bad_data_buffer(0xfffffffffffff000ull, 0x2000, DESC_F_NEXT | DESC_F_WRITE);
}

/*
 * (7) An indirect descriptor inside an indirect table. First a good read through one level
 * of indirection, so the failure cannot be indirect descriptors not working at all; then the
 * same request with its data and status moved into a second, nested table.
 */
static const char *case_indirect_in_indirect(void)
{
	struct vq_desc *outer = vq_indirect[0], *inner = vq_indirect[1];
	const char *why = hostile_init();

	if (why)
		return why;
	req_prepare(BLK_T_IN, 0);
	req_chain(outer, true, (uint64_t)(uintptr_t)req_data, SECTOR_LEN);
	desc_set(q.desc, 0, (uint64_t)(uintptr_t)outer, 3 * sizeof(struct vq_desc), DESC_F_INDIRECT,
		 0);
	vq_submit(0);
	why = expect_request(0, 0, BLK_S_OK, SECTOR_LEN + 1);
	if (!why)
		why = check_sector0();
	if (why)
		return why;

	/* outer: the header, then an indirect descriptor to inner: the data and the status. */
	req_prepare(BLK_T_IN, 0);
	desc_set(inner, 0, (uint64_t)(uintptr_t)req_data, SECTOR_LEN, DESC_F_NEXT | DESC_F_WRITE,
		 1);
	desc_set(inner, 1, (uint64_t)(uintptr_t)&req_status, 1, DESC_F_WRITE, 0);
	desc_set(outer, 0, (uint64_t)(uintptr_t)&req_hdr, sizeof(req_hdr), DESC_F_NEXT, 1);
	desc_set(outer, 1, (uint64_t)(uintptr_t)inner, 2 * sizeof(struct vq_desc), DESC_F_INDIRECT,
		 0);
	desc_set(q.desc, 1, (uint64_t)(uintptr_t)outer, 2 * sizeof(struct vq_desc), DESC_F_INDIRECT,
		 0);
	vq_submit(1);
	return expect_needs_reset(1);
}

/* (8) A zero-length data buffer. */
static const char *case_zero_length_buffer(void)
{
	return bad_data_buffer((uint64_t)(uintptr_t)req_data, 0, DESC_F_NEXT | DESC_F_WRITE);
}

/* (9) The status descriptor without WRITE: a readable buffer after a writable one. */
static const char *case_status_read_only(void)
{
	const char *why = hostile_init();

	if (why)
		return why;
	req_prepare(BLK_T_IN, 0);
	req_chain(q.desc, true, (uint64_t)(uintptr_t)req_data, SECTOR_LEN);
	desc_set(q.desc, 2, (uint64_t)(uintptr_t)&req_status, 1, 0, 0);
	vq_submit(0);
	why = expect_needs_reset(0);
	if (!why && req_status != 0xee)
		why = fail_with("the read-only status byte was written:", req_status);
	return why;
}

/* (10) A read at the first sector past the end: IOERR, and the queue goes on working. */
static const char *case_sector_beyond_capacity(void)
{
	const char *why = hostile_init();

	if (why)
		return why;
	req_prepare(BLK_T_IN, disk_capacity);
	req_chain(q.desc, true, (uint64_t)(uintptr_t)req_data, SECTOR_LEN);
	vq_submit(0);
	why = expect_request(0, 0, BLK_S_IOERR, 1);
	if (why)
		return why;
	return good_read();
}

/* (11) A write to the read-only disk: IOERR, and sector 0 is unchanged after it. */
static const char *case_write_read_only_disk(void)
{
	const char *why = hostile_init();

	if (why)
		return why;
	req_prepare(BLK_T_OUT, 0);
	/* req_data is all 0xa5: what the disk would hold if the write went through. */
	req_chain(q.desc, false, (uint64_t)(uintptr_t)req_data, SECTOR_LEN);
	vq_submit(0);
	why = expect_request(0, 0, BLK_S_IOERR, 1);
	return why ? why : good_read();
}

/* (12) An unknown request type: UNSUPP. */
static const char *case_unknown_type(void)
{
	const char *why = hostile_init();

	if (why)
		return why;
	req_prepare(0x99, 0);
	req_chain(q.desc, true, (uint64_t)(uintptr_t)req_data, SECTOR_LEN);
	vq_submit(0);
	return expect_request(0, 0, BLK_S_UNSUPP, 1);
}

/* (13) avail->idx 1000 ahead of the device on a 16-entry queue. */
static const char *case_avail_idx_jump(void)
{
	const char *why = hostile_init();

	if (why)
		return why;
	req_prepare(BLK_T_IN, 0);
	req_chain(q.desc, true, (uint64_t)(uintptr_t)req_data, SECTOR_LEN);
	for (unsigned i = 0; i < VQ_SIZE; i++)
		q.avail.ring[i] = 0;
	__atomic_store_n(&q.avail.idx, 1000, __ATOMIC_RELEASE);
	vq_kick_wait(0);
	return expect_needs_reset(0);
}

/*
 * (14) A descriptor table outside RAM at QueueReady. mmio.c checks the rings there
 * (virtq_configure): QueueReady stays 0 and the device is marked NEEDS_RESET at once; a
 * DRIVER_OK written without that bit is refused (status bits only clear through a reset),
 * and a kick serves nothing and touches nothing.
 */
static const char *case_rings_outside_ram(void)
{
	const uint32_t feat = VIO_S_ACK | VIO_S_DRIVER | VIO_S_FEAT_OK;
	const char *why = hostile_setup_queue(0x7f0000000000ull);
	uint32_t status, ready;

	if (why)
		return why;
	ready = vio_read(vio_base, VIO_QUEUE_READY);
	if (ready != 0)
		return fail_with("queue became ready with rings outside RAM: QueueReady", ready);
	status = vio_read(vio_base, VIO_STATUS);
	if (status != (feat | VIO_S_RESET))
		return fail_with("status after the refused QueueReady", status);
	vio_write(vio_base, VIO_STATUS, feat | VIO_S_DRV_OK);
	status = vio_read(vio_base, VIO_STATUS);
	if (status != (feat | VIO_S_RESET))
		return fail_with("status after DRIVER_OK", status);
	if (vio_read(vio_base, VIO_QUEUE_READY) != 0)
		return "queue 0 ready after DRIVER_OK";
	/* A request in our own (valid) rings: the device must not look at them. */
	req_prepare(BLK_T_IN, 0);
	req_chain(q.desc, true, (uint64_t)(uintptr_t)req_data, SECTOR_LEN);
	vq_submit(0);
	if (q.used.idx != 0 || req_status != 0xee)
		return fail_with("the unconfigured queue was served: used idx", q.used.idx);
	status = vio_read(vio_base, VIO_STATUS);
	if (status != (feat | VIO_S_RESET))
		return fail_with("status after the kick", status);
	return NULL;
}

struct hostile_case {
	const char *name;
	const char *(*run)(void);
};

static const struct hostile_case hostile_cases[] = {
	{"good-read", case_good_read},
	{"desc-loop", case_desc_loop},
	{"chain-longer-than-queue", case_chain_too_long},
	{"buffer-outside-ram", case_buffer_outside_ram},
	{"buffer-straddles-ram-end", case_buffer_straddles_ram_end},
	{"buffer-len-overflow", case_buffer_len_overflow},
	{"indirect-in-indirect", case_indirect_in_indirect},
	{"zero-length-buffer", case_zero_length_buffer},
	{"status-read-only", case_status_read_only},
	{"sector-beyond-capacity", case_sector_beyond_capacity},
	{"write-read-only-disk", case_write_read_only_disk},
	{"unknown-type", case_unknown_type},
	{"avail-idx-jump", case_avail_idx_jump},
	{"rings-outside-ram", case_rings_outside_ram},
};

#define HOSTILE_NCASES (sizeof(hostile_cases) / sizeof(hostile_cases[0]))

/* Checks the window holds a virtio-mmio v2 block device and reads its capacity. */
static const char *hostile_probe(void)
{
	uint32_t v;

	if ((v = vio_read(vio_base, VIO_MAGIC_VALUE)) != VIO_MAGIC)
		return fail_with("no virtio-mmio device: magic", v);
	if ((v = vio_read(vio_base, VIO_VERSION)) != 2)
		return fail_with("not virtio-mmio version 2:", v);
	if ((v = vio_read(vio_base, VIO_DEVICE_ID)) != VIO_ID_BLOCK)
		return fail_with("not a block device: id", v);
	disk_capacity =
		vio_read(vio_base, VIO_CONFIG) | (uint64_t)vio_read(vio_base, VIO_CONFIG + 4) << 32;
	if (disk_capacity == 0)
		return "disk capacity is 0";
	return NULL;
}

/* Prints "hostile: <name>: ok" or "... FAIL <why>[ 0x<value>]"; returns 1 on a failure. */
static unsigned hostile_report(const char *name, const char *why)
{
	uart_puts("hostile: ");
	uart_puts(name);
	if (!why) {
		uart_puts(": ok\n");
		return 0;
	}
	uart_puts(": FAIL ");
	uart_puts(why);
	if (fail_has_val) {
		uart_puts(" 0x");
		uart_put_hex(fail_val);
	}
	uart_puts("\n");
	return 1;
}

void payload_main(uint32_t cpu, uint32_t ncpus, const struct payload_info *info)
{
	unsigned failed = 0;
	const char *why;

	(void)ncpus;
	if (cpu != 0)
		cpu_spin_forever();
	if (rt_check_info(info, "hostile") != 0)
		poweroff();
	vio_base = info->mmio_base_gpa;
	for (uint32_t i = 0; i < info->nranges && i < PAYLOAD_MAX_RANGES; i++) {
		if (info->ram[i].gpa == 0)
			low_ram_end = info->ram[i].len;
	}
	if (low_ram_end == 0 || (why = hostile_probe()) != NULL) {
		hostile_report("probe", low_ram_end ? why : "no RAM range at address 0");
		poweroff();
	}
	for (size_t i = 0; i < HOSTILE_NCASES; i++) {
		const char *name = hostile_cases[i].name;
		unsigned bad;

		fail_has_val = false;
		why = hostile_cases[i].run();
		bad = hostile_report(name, why);
		/* Leave the device clean for the next case, whatever this one did. */
		fail_has_val = false;
		why = hostile_reset();
		if (why)
			bad |= hostile_report(name, why);
		failed += bad;
	}
	uart_puts("hostile: ");
	if (failed == 0) {
		uart_puts("all ");
		uart_put_dec(HOSTILE_NCASES);
		uart_puts(" cases ok\n");
	} else {
		uart_put_dec(failed);
		uart_puts(" of ");
		uart_put_dec(HOSTILE_NCASES);
		uart_puts(" cases FAIL\n");
	}
	poweroff();
}

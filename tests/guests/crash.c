/* SPDX-License-Identifier: Apache-2.0 */
/*
 * payload-crash: the guest half of the crash-consistency test (tests/integration/crash.sh,
 * issue 13). It reads the seed from sector 0 of its virtio-blk disk (the first virtio-mmio
 * window), then carries out crash_plan.h's rounds: every request of a round in flight at once,
 * then a FLUSH, then "crash: flushed R" on the console once the FLUSH has completed. The host
 * marks its log at each such line, and its checker then holds every power-cut image after the
 * mark to round R's writes. At the end the guest reads the whole disk back and checks it
 * against the plan ("crash: done sectors=N"), so the plan and the device agree before any
 * image is judged.
 */
#include "crash_plan.h"
#include "rt.h"
#include "vq.h"

#define VIO_ID_BLOCK	   2u
#define BLK_F_FLUSH	   9
#define BLK_F_WRITE_ZEROES 14
#define BLK_T_IN	   0u
#define BLK_T_OUT	   1u
#define BLK_T_FLUSH	   4u
#define BLK_T_WRITE_ZEROES 13u
#define CRASH_SECTORS_MAX  65536u /* 32 MiB */
#define OP_BYTES	   (CRASH_OP_SECTORS * CRASH_SECTOR_LEN)
#define FLUSH_DESC	   (3u * CRASH_OPS_MAX)

struct blk_hdr {
	uint32_t type;
	uint32_t ioprio;
	uint64_t sector;
};

struct blk_zeroes {
	uint64_t sector;
	uint32_t num_sectors;
	uint32_t flags;
};

static struct vq q;
static uint64_t base;
static uint8_t bufs[CRASH_OPS_MAX][OP_BYTES] __attribute__((aligned(4096)));
static struct blk_hdr hdrs[CRASH_OPS_MAX + 1];
static struct blk_zeroes zeroes[CRASH_OPS_MAX];
static uint8_t status[CRASH_OPS_MAX + 1];
static struct crash_op ops[CRASH_OPS_MAX];
/* After the last round: the round that last wrote each sector, and whether with zeros. */
static uint8_t last_round[CRASH_SECTORS_MAX];
static uint8_t last_zero[CRASH_SECTORS_MAX];

static __attribute__((noreturn)) void crash_fail(const char *why, uint64_t a, uint64_t b)
{
	uart_puts("crash: FAIL ");
	uart_puts(why);
	uart_puts(" ");
	uart_put_dec(a);
	uart_puts(" ");
	uart_put_dec(b);
	uart_puts("\n");
	poweroff();
}

static void desc(unsigned i, const void *addr, uint32_t len, uint16_t flags, unsigned next)
{
	q.desc[i] = (struct vq_desc){(uint64_t)(uintptr_t)addr, len, flags, (uint16_t)next};
}

/* Wait for `n` chains back; each status byte must be OK. */
static void wait_used(unsigned n)
{
	uint16_t id;

	for (unsigned got = 0; got < n;) {
		if (!vq_next_used(&q, &id, 0)) {
			cpu_relax();
			continue;
		}
		if (id % 3 || id / 3 > CRASH_OPS_MAX)
			crash_fail("used id", id, 0);
		if (status[id / 3] != 0)
			crash_fail("request failed: slot, status", id / 3, status[id / 3]);
		got++;
	}
}

/* Slot `i`'s chain at descriptors 3i..3i+2: header, data (or the zeroes range), status. */
static void offer_rw(unsigned i, uint32_t type, uint64_t sector, void *data, uint32_t len)
{
	hdrs[i] = (struct blk_hdr){type, 0, sector};
	status[i] = 0xff;
	desc(3 * i, &hdrs[i], sizeof(hdrs[i]), DESC_F_NEXT, 3 * i + 1);
	desc(3 * i + 1, data, len, (uint16_t)(DESC_F_NEXT | (type == BLK_T_IN ? DESC_F_WRITE : 0)),
	     3 * i + 2);
	desc(3 * i + 2, &status[i], 1, DESC_F_WRITE, 0);
	vq_offer(&q, (uint16_t)(3 * i));
}

static void read_sectors(uint64_t sector, uint32_t count)
{
	offer_rw(0, BLK_T_IN, sector, bufs[0], count * CRASH_SECTOR_LEN);
	vq_kick(base, 0, &q);
	wait_used(1);
}

static void flush(void)
{
	unsigned i = CRASH_OPS_MAX;

	hdrs[i] = (struct blk_hdr){BLK_T_FLUSH, 0, 0};
	status[i] = 0xff;
	desc(FLUSH_DESC, &hdrs[i], sizeof(hdrs[i]), DESC_F_NEXT, FLUSH_DESC + 2);
	desc(FLUSH_DESC + 2, &status[i], 1, DESC_F_WRITE, 0);
	vq_offer(&q, FLUSH_DESC);
	vq_kick(base, 0, &q);
	wait_used(1);
}

static void run_round(uint64_t seed, uint32_t round, uint32_t sectors, uint32_t cs)
{
	unsigned n = crash_plan(seed, round, sectors, cs, ops);

	for (unsigned i = 0; i < n; i++) {
		const struct crash_op *op = &ops[i];

		if (op->kind == CRASH_ZEROES) {
			zeroes[i] = (struct blk_zeroes){op->sector, op->count, 0};
			offer_rw(i, BLK_T_WRITE_ZEROES, 0, &zeroes[i], sizeof(zeroes[i]));
			q.desc[3 * i + 1].flags = DESC_F_NEXT; /* device-readable */
		} else {
			for (uint32_t s = 0; s < op->count; s++)
				crash_fill(seed, round, op->sector + s,
					   (uint32_t *)(bufs[i] + s * CRASH_SECTOR_LEN));
			offer_rw(i, BLK_T_OUT, op->sector, bufs[i], op->count * CRASH_SECTOR_LEN);
		}
		for (uint32_t s = 0; s < op->count; s++) {
			last_round[op->sector + s] = (uint8_t)round;
			last_zero[op->sector + s] = op->kind == CRASH_ZEROES;
		}
	}
	vq_kick(base, 0, &q);
	wait_used(n);
	flush();
	uart_puts("crash: flushed ");
	uart_put_dec(round);
	uart_puts("\n");
}

/* Read the whole disk back: every sector as the plan left it. */
static void check_all(uint64_t seed, uint32_t sectors)
{
	uint32_t want[CRASH_WORDS];

	for (uint32_t s = 1; s < sectors; s += CRASH_OP_SECTORS) {
		uint32_t count = sectors - s < CRASH_OP_SECTORS ? sectors - s : CRASH_OP_SECTORS;

		read_sectors(s, count);
		for (uint32_t k = 0; k < count; k++) {
			const uint8_t *got = bufs[0] + k * CRASH_SECTOR_LEN;

			if (last_zero[s + k])
				memset(want, 0, sizeof(want));
			else
				crash_fill(seed, last_round[s + k], s + k, want);
			if (memcmp(got, want, sizeof(want)))
				crash_fail("read back: sector, its last round", s + k,
					   last_round[s + k]);
		}
	}
}

void payload_main(uint32_t cpu, uint32_t ncpus, const struct payload_info *info)
{
	struct crash_seed sd;
	const char *why;
	uint64_t want = 1ull << VIO_F_VERSION_1 | 1ull << BLK_F_FLUSH | 1ull << BLK_F_WRITE_ZEROES;

	(void)ncpus;
	if (cpu != 0)
		cpu_spin_forever();
	if (rt_check_info(info, "crash") < 0)
		poweroff();
	base = info->mmio_base_gpa;
	if ((why = vio_init(base, VIO_ID_BLOCK, want)) || (why = vio_queue(base, 0, &q)) ||
	    (why = vio_driver_ok(base))) {
		uart_puts("crash: FAIL ");
		uart_puts(why);
		uart_puts("\n");
		poweroff();
	}
	read_sectors(0, 1);
	memcpy(&sd, bufs[0], sizeof(sd));
	if (sd.magic != CRASH_SEED_MAGIC || sd.sectors < 4 || sd.sectors > CRASH_SECTORS_MAX ||
	    !sd.cluster_sectors)
		crash_fail("sector 0 holds no seed: sectors, cluster", sd.sectors,
			   sd.cluster_sectors);
	uart_puts("crash: seed ");
	uart_put_hex(sd.seed);
	uart_puts(" sectors ");
	uart_put_dec(sd.sectors);
	uart_puts("\n");
	for (uint32_t r = 1; r <= CRASH_ROUNDS; r++)
		run_round(sd.seed, r, sd.sectors, sd.cluster_sectors);
	check_all(sd.seed, sd.sectors);
	uart_puts("crash: done sectors=");
	uart_put_dec(sd.sectors);
	uart_puts("\n");
	poweroff();
}

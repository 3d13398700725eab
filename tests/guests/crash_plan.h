/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The crash-consistency test's plan (issue 13): what payload-crash writes, round by round,
 * and what every sector it writes holds. Shared by the guest (tests/guests/crash.c), which
 * carries the plan out over virtio-blk, and the host's checker (tests/crash/crash_check.c),
 * which rebuilds it to judge each power-cut image. Freestanding: integers only.
 *
 * The disk is a raw base image under one layer. Sector 0 of the base holds the seed
 * (struct crash_seed) and is never written; every other base sector holds a pattern of its
 * own (round 0). Round r (1..CRASH_ROUNDS) is a set of non-overlapping requests, writes and
 * write-zeroes, all in flight at once, then a FLUSH; the guest says "crash: flushed r" once
 * the FLUSH has completed. A sector written in round r holds crash_fill(seed, r, sector): its
 * round and number in the first words, so a checker tells every version of it apart.
 */
#ifndef SANDBOX_GUESTS_CRASH_PLAN_H
#define SANDBOX_GUESTS_CRASH_PLAN_H

#include <stdint.h>

#define CRASH_SECTOR_LEN 512u
#define CRASH_WORDS	 (CRASH_SECTOR_LEN / 4u)
#define CRASH_ROUNDS	 40u
#define CRASH_OPS_MAX	 24u	     /* requests per round */
#define CRASH_OP_SECTORS 256u	     /* sectors per request at most (128 KiB) */
#define CRASH_MAGIC	 0x48535243u /* "CRSH": a sector some round wrote */
#define CRASH_BASE_MAGIC 0x45534142u /* "BASE": the base image's pattern */
#define CRASH_SEED_MAGIC 0x44454553u /* "SEED": sector 0 */

enum crash_kind {
	CRASH_WRITE = 1,
	CRASH_ZEROES = 2, /* VIRTIO_BLK_T_WRITE_ZEROES: the sectors read as zeros */
};

struct crash_op {
	uint32_t kind;	 /* enum crash_kind */
	uint32_t sector; /* first sector, >= 1 */
	uint32_t count;	 /* sectors, 1..CRASH_OP_SECTORS */
};

/* Sector 0 of the base image. */
struct crash_seed {
	uint32_t magic; /* CRASH_SEED_MAGIC */
	uint32_t sectors;
	uint32_t cluster_sectors; /* the layer's cluster, so the plan hits whole clusters too */
	uint32_t reserved;
	uint64_t seed;
};

/* splitmix64's finaliser: a well-mixed 64-bit function of x. */
static inline uint64_t crash_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* The 512 bytes sector `sector` holds once round `round` wrote it (round 0: the base). */
static inline void crash_fill(uint64_t seed, uint32_t round, uint32_t sector,
			      uint32_t out[CRASH_WORDS])
{
	uint64_t h = crash_mix(seed ^ ((uint64_t)round << 40) ^ sector);

	out[0] = round ? CRASH_MAGIC : CRASH_BASE_MAGIC;
	out[1] = round;
	out[2] = sector;
	out[3] = (uint32_t)seed;
	for (uint32_t i = 4; i < CRASH_WORDS; i += 2) {
		h = crash_mix(h);
		out[i] = (uint32_t)h;
		out[i + 1] = (uint32_t)(h >> 32);
	}
}

static inline int crash_overlaps(const struct crash_op *ops, unsigned n, uint32_t s, uint32_t c)
{
	for (unsigned i = 0; i < n; i++)
		if (s < ops[i].sector + ops[i].count && ops[i].sector < s + c)
			return 1;
	return 0;
}

/*
 * Round `round`'s requests into ops[CRASH_OPS_MAX]; returns how many. Mostly writes of 1 to
 * 64 sectors anywhere (partial clusters: the layer copies the rest up from the base), some of
 * up to CRASH_OP_SECTORS, and one in ten a write-zeroes, half of those of whole clusters (the
 * layer punches a hole).
 */
static inline unsigned crash_plan(uint64_t seed, uint32_t round, uint32_t sectors,
				  uint32_t cluster_sectors, struct crash_op *ops)
{
	uint64_t st = crash_mix(seed ^ 0x5eedull ^ ((uint64_t)round << 20));
	unsigned want, n = 0;

	st = crash_mix(st);
	want = 1 + (unsigned)(st % CRASH_OPS_MAX);
	for (unsigned tries = 0; n < want && tries < 8 * CRASH_OPS_MAX; tries++) {
		uint32_t kind = CRASH_WRITE, s, c;

		st = crash_mix(st);
		if (st % 10 == 0)
			kind = CRASH_ZEROES;
		st = crash_mix(st);
		if (kind == CRASH_ZEROES && (st & 1) && sectors / cluster_sectors > 2) {
			s = (uint32_t)(1 + (st >> 1) % (sectors / cluster_sectors - 1)) *
			    cluster_sectors;
			c = cluster_sectors * (uint32_t)(1 + (st >> 33) % 2);
		} else {
			s = 1 + (uint32_t)((st >> 1) % (sectors - 1));
			c = 1 + (uint32_t)((st >> 33) % ((st >> 45) % 4 ? 64 : CRASH_OP_SECTORS));
		}
		if (c > CRASH_OP_SECTORS)
			c = CRASH_OP_SECTORS;
		if (s >= sectors)
			continue;
		if (c > sectors - s)
			c = sectors - s;
		if (crash_overlaps(ops, n, s, c))
			continue;
		ops[n++] = (struct crash_op){kind, s, c};
	}
	return n;
}

#endif

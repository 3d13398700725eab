/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vmm/virtio/queue.c: split virtqueues against a fake guest. The fake guest lays its rings out
 * in fake RAM (fake_mem.h) the way a driver would, posts chains, and then misbehaves in every
 * way the device must survive: each hostile chain has to end in -EPROTO with a reason, never
 * in a stray access (ASan and UBSan watch every test).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <linux/virtio_ring.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "fake_driver.h"
#include "fake_mem.h"
#include "layout.h"
#include "virtio/queue.h"
#include "vmm.h"

/* Where the fake driver puts things: room for the largest queue (32768 entries). */
#define DESC_GPA     0x10000ull	 /* up to 512 KiB */
#define AVAIL_GPA    0x90000ull	 /* up to 64 KiB + 6 */
#define USED_GPA     0xa1000ull	 /* up to 256 KiB + 6 */
#define TABLE_GPA    0xe2000ull	 /* indirect tables */
#define TABLE2_GPA   0xf0000ull	 /* a second indirect table */
#define BUF_GPA	     0x100000ull /* data buffers */
#define FG_RAM_LEN   (2 * MIB)
#define FG_QUEUE_LEN 16u

#define F_NEXT	   VRING_DESC_F_NEXT
#define F_WRITE	   VRING_DESC_F_WRITE
#define F_INDIRECT VRING_DESC_F_INDIRECT

/* A fake guest: its RAM, the device's queue and the driver's side of it (queue 0 of drv, with
 * no transport: the test calls the queue's functions itself). */
struct fake_guest {
	struct guest_mem mem;
	struct virtq q;
	struct fake_driver drv;
};

/* Large enough to keep off the criterion worker's stack. */
static struct virtq_chain chain;

/* Host address of guest range [gpa, gpa+len); the test fails if it is not RAM. */
static uint8_t *fg_hva(struct fake_guest *g, gpa_t gpa, uint64_t len)
{
	uint8_t *p = mem_gpa_to_hva(&g->mem, gpa, len);

	cr_assert(p != NULL, "fake guest: gpa 0x%llx+%llu is not RAM", (unsigned long long)gpa,
		  (unsigned long long)len);
	return p;
}

/* Little-endian guest fields (the host is x86, so a plain copy). */
static void fg_write16(struct fake_guest *g, gpa_t gpa, uint16_t v)
{
	memcpy(fg_hva(g, gpa, 2), &v, 2);
}

static uint16_t fg_read16(struct fake_guest *g, gpa_t gpa)
{
	uint16_t v;

	memcpy(&v, fg_hva(g, gpa, 2), 2);
	return v;
}

/* Fake RAM of `ram_len` bytes, a queue of `size` entries configured at the usual place. */
static void fg_init(struct fake_guest *g, uint64_t ram_len, unsigned size)
{
	memset(g, 0, sizeof(*g));
	fake_mem_create(&g->mem, ram_len, 0);
	fdrv_init(&g->drv, NULL, &g->mem, NULL);
	fdrv_queue_place(&g->drv, 0, size, DESC_GPA, AVAIL_GPA, USED_GPA);
	virtq_init(&g->q, &g->mem);
	cr_assert(eq(int, virtq_configure(&g->q, size, DESC_GPA, AVAIL_GPA, USED_GPA), 0));
	memset(&chain, 0xa5, sizeof(chain));
}

/* Free the fake RAM. */
static void fg_destroy(struct fake_guest *g)
{
	fake_mem_destroy(&g->mem);
}

/* Write descriptor `i` of the table at `table_gpa`. */
static void fg_desc_at(struct fake_guest *g, gpa_t table_gpa, unsigned i, uint64_t addr,
		       uint32_t len, uint16_t flags, uint16_t next)
{
	struct vring_desc d = {.addr = addr, .len = len, .flags = flags, .next = next};

	memcpy(fg_hva(g, table_gpa + 16ull * i, 16), &d, 16);
}

/* Write descriptor `i` of the queue's descriptor table. */
static void fg_desc(struct fake_guest *g, unsigned i, uint64_t addr, uint32_t len, uint16_t flags,
		    uint16_t next)
{
	fg_desc_at(g, DESC_GPA, i, addr, len, flags, next);
}

/* Move the driver's avail index to `idx` and publish it, chains or not (a restored queue, or a
 * driver that lies). */
static void fg_set_avail_idx(struct fake_guest *g, uint16_t idx)
{
	g->drv.q[0].avail_idx = idx;
	fdrv_publish(&g->drv, 0);
}

/* The driver's used_event (the last entry of the avail ring). */
static void fg_set_used_event(struct fake_guest *g, uint16_t v)
{
	fg_write16(g, AVAIL_GPA + 4 + 2ull * g->drv.q[0].size, v);
}

/* Entry `slot` of the used ring, by slot (fdrv_next_used would take them in order). */
static void fg_used_elem(struct fake_guest *g, unsigned slot, uint32_t *id, uint32_t *len)
{
	*id = fdrv_used(&g->drv, 0)->ring[slot].id;
	*len = fdrv_used(&g->drv, 0)->ring[slot].len;
}

/* Pop must fail with -EPROTO for a reason containing `why`, and leave the queue broken. */
static void fg_expect_broken(struct fake_guest *g, const char *why)
{
	uint16_t last = g->q.last_avail_idx;

	cr_assert(eq(int, virtq_pop(&g->q, &chain), -EPROTO));
	cr_assert(g->q.broken);
	cr_assert(g->q.error != NULL);
	cr_assert(strstr(g->q.error, why) != NULL, "error \"%s\", expected \"%s\"", g->q.error,
		  why);
	cr_assert(eq(u16, g->q.last_avail_idx, last), "a bad chain is not consumed");
	/* Broken stays broken, whatever the guest does next. */
	cr_assert(eq(int, virtq_pop(&g->q, &chain), -EPROTO));
	cr_assert(not(virtq_has_work(&g->q)));
	cr_assert(eq(int, virtq_push(&g->q, 0, 0), -EPROTO));
}

/* ---- configuration ---- */

Test(virtq, configure_accepts_powers_of_two_up_to_32768)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, 1);
	for (unsigned size = 1; size <= VIRTQ_SIZE_MAX; size <<= 1) {
		cr_assert(eq(int, virtq_configure(&g.q, size, DESC_GPA, AVAIL_GPA, USED_GPA), 0),
			  "size %u", size);
		cr_assert(g.q.ready);
		cr_assert(eq(u16, g.q.size, size));
		cr_assert(eq(ptr, g.q.desc_hva, g.mem.base + DESC_GPA));
		cr_assert(eq(ptr, g.q.avail_hva, g.mem.base + AVAIL_GPA));
		cr_assert(eq(ptr, g.q.used_hva, g.mem.base + USED_GPA));
	}
	fg_destroy(&g);
}

Test(virtq, configure_rejects_bad_sizes)
{
	static const unsigned bad[] = {0, 3, 6, 100, 32767, 65536, 65535, 1u << 20};
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert(eq(int, virtq_configure(&g.q, bad[i], DESC_GPA, AVAIL_GPA, USED_GPA),
			     -EPROTO),
			  "size %u", bad[i]);
		cr_assert(not(g.q.ready));
		cr_assert(strstr(g.q.error, "size") != NULL);
		cr_assert(eq(int, virtq_pop(&g.q, &chain), -EAGAIN));
	}
	fg_destroy(&g);
}

Test(virtq, configure_rejects_misaligned_rings)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	cr_assert(eq(int, virtq_configure(&g.q, 16, DESC_GPA + 8, AVAIL_GPA, USED_GPA), -EPROTO));
	cr_assert(strstr(g.q.error, "descriptor table not 16-byte aligned") != NULL);
	cr_assert(eq(int, virtq_configure(&g.q, 16, DESC_GPA, AVAIL_GPA + 1, USED_GPA), -EPROTO));
	cr_assert(strstr(g.q.error, "avail ring not 2-byte aligned") != NULL);
	cr_assert(eq(int, virtq_configure(&g.q, 16, DESC_GPA, AVAIL_GPA, USED_GPA + 2), -EPROTO));
	cr_assert(strstr(g.q.error, "used ring not 4-byte aligned") != NULL);
	cr_assert(not(g.q.ready));
	/* The smallest alignments the spec allows are enough. */
	cr_assert(
		eq(int, virtq_configure(&g.q, 16, DESC_GPA + 16, AVAIL_GPA + 2, USED_GPA + 4), 0));
	fg_destroy(&g);
}

Test(virtq, configure_rejects_rings_outside_ram)
{
	struct fake_guest g;
	gpa_t end = FG_RAM_LEN;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	/* Each ring ends one byte past the end of RAM: 16*16, 6+2*16, 6+8*16 bytes long. */
	cr_assert(eq(int, virtq_configure(&g.q, 16, end - 256 + 16, AVAIL_GPA, USED_GPA), -EPROTO));
	cr_assert(strstr(g.q.error, "descriptor table not in guest RAM") != NULL);
	cr_assert(eq(int, virtq_configure(&g.q, 16, DESC_GPA, end - 38 + 2, USED_GPA), -EPROTO));
	cr_assert(strstr(g.q.error, "avail ring not in guest RAM") != NULL);
	cr_assert(eq(int, virtq_configure(&g.q, 16, DESC_GPA, AVAIL_GPA, end - 136 + 4), -EPROTO));
	cr_assert(strstr(g.q.error, "used ring not in guest RAM") != NULL);
	/* Wholly outside, and at an address where gpa + len wraps. */
	cr_assert(eq(int, virtq_configure(&g.q, 16, DESC_GPA, AVAIL_GPA, 0xfffffffffffffff0ull),
		     -EPROTO));
	/* Flush with the end of RAM is fine (a used ring of 134 bytes cannot be: 4-aligned). */
	cr_assert(eq(int, virtq_configure(&g.q, 16, end - 256, end - 38, end - 512), 0));
	cr_assert(eq(int, virtq_configure(&g.q, 16, DESC_GPA, AVAIL_GPA, end - 136), 0));
	fg_destroy(&g);
}

Test(virtq, configure_rejects_a_ring_across_the_mmio_hole)
{
	struct fake_guest g;

	fg_init(&g, 5 * GIB, FG_QUEUE_LEN);
	/* The descriptor table would run from below 3 GiB into the hole. */
	cr_assert(eq(int, virtq_configure(&g.q, 16, MMIO_HOLE_GPA - 128, AVAIL_GPA, USED_GPA),
		     -EPROTO));
	/* Rings above 4 GiB are fine. */
	cr_assert(eq(int,
		     virtq_configure(&g.q, 16, MMIO_HOLE_END_GPA, MMIO_HOLE_END_GPA + 0x1000,
				     MMIO_HOLE_END_GPA + 0x2000),
		     0));
	cr_assert(eq(ptr, g.q.desc_hva, g.mem.base + MMIO_HOLE_GPA));
	fg_destroy(&g);
}

Test(virtq, reset_forgets_everything_but_memory)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	virtq_set_event_idx(&g.q, true);
	g.q.last_avail_idx = 7;
	virtq_reset(&g.q);
	cr_assert(not(g.q.ready));
	cr_assert(not(g.q.event_idx));
	cr_assert(eq(u16, g.q.size, 0));
	cr_assert(eq(u16, g.q.last_avail_idx, 0));
	cr_assert(eq(ptr, (void *)g.q.mem, &g.mem));
	cr_assert(eq(int, virtq_pop(&g.q, &chain), -EAGAIN));
	cr_assert(eq(int, virtq_push(&g.q, 0, 0), -EINVAL));
	cr_assert(not(virtq_has_work(&g.q)));
	fg_destroy(&g);
}

/* avail->idx as the driver left it, whatever was popped; 0 for a queue not ready. */
Test(virtq, avail_idx_reads_the_drivers_index)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	cr_assert(eq(u16, virtq_avail_idx(&g.q), 0));
	fg_set_avail_idx(&g, 0xfffe);
	cr_assert(eq(u16, virtq_avail_idx(&g.q), 0xfffe));
	cr_assert(eq(u16, g.q.last_avail_idx, 0), "nothing popped");
	virtq_reset(&g.q);
	cr_assert(eq(u16, virtq_avail_idx(&g.q), 0));
	fg_destroy(&g);
}

/* ---- good chains ---- */

Test(virtq, empty_queue_has_no_work)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	cr_assert(not(virtq_has_work(&g.q)));
	cr_assert(eq(int, virtq_pop(&g.q, &chain), -EAGAIN));
	cr_assert(not(g.q.broken));
	fg_destroy(&g);
}

Test(virtq, pops_a_direct_chain)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	/* A block request's shape: header (read), data (read), status (write). */
	fg_desc(&g, 5, BUF_GPA, 16, F_NEXT, 2);
	fg_desc(&g, 2, BUF_GPA + 0x1000, 512, F_NEXT, 9);
	fg_desc(&g, 9, BUF_GPA + 0x2000, 1, F_WRITE, 0xffff); /* next is ignored without NEXT */
	fdrv_offer(&g.drv, 0, 5);
	cr_assert(virtq_has_work(&g.q));
	cr_assert(eq(int, virtq_pop(&g.q, &chain), 0));
	cr_assert(eq(u16, chain.head, 5));
	cr_assert(eq(u32, chain.nsegs, 3));
	cr_assert(eq(u32, chain.nread, 2));
	cr_assert(eq(u64, chain.read_len, 528));
	cr_assert(eq(u64, chain.write_len, 1));
	cr_assert(eq(ptr, chain.segs[0].hva, g.mem.base + BUF_GPA));
	cr_assert(eq(u32, chain.segs[0].len, 16));
	cr_assert(not(chain.segs[0].write));
	cr_assert(eq(ptr, chain.segs[1].hva, g.mem.base + BUF_GPA + 0x1000));
	cr_assert(eq(u32, chain.segs[1].len, 512));
	cr_assert(not(chain.segs[1].write));
	cr_assert(eq(ptr, chain.segs[2].hva, g.mem.base + BUF_GPA + 0x2000));
	cr_assert(eq(u32, chain.segs[2].len, 1));
	cr_assert(chain.segs[2].write);
	cr_assert(eq(u16, g.q.last_avail_idx, 1));
	cr_assert(not(virtq_has_work(&g.q)));
	cr_assert(eq(int, virtq_pop(&g.q, &chain), -EAGAIN));
	fg_destroy(&g);
}

Test(virtq, pops_write_only_and_read_only_chains)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	fg_desc(&g, 0, BUF_GPA, 100, F_WRITE | F_NEXT, 1);
	fg_desc(&g, 1, BUF_GPA + 100, 200, F_WRITE, 0);
	fg_desc(&g, 2, BUF_GPA + 300, 50, 0, 0);
	fdrv_offer(&g.drv, 0, 0);
	fdrv_offer(&g.drv, 0, 2);
	cr_assert(eq(int, virtq_pop(&g.q, &chain), 0));
	cr_assert(eq(u32, chain.nsegs, 2));
	cr_assert(eq(u32, chain.nread, 0));
	cr_assert(eq(u64, chain.write_len, 300));
	cr_assert(eq(int, virtq_pop(&g.q, &chain), 0));
	cr_assert(eq(u16, chain.head, 2));
	cr_assert(eq(u32, chain.nsegs, 1));
	cr_assert(eq(u32, chain.nread, 1));
	cr_assert(eq(u64, chain.write_len, 0));
	fg_destroy(&g);
}

Test(virtq, pops_an_indirect_chain)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	/* The WRITE flag on the descriptor that points to the table is ignored (spec 2.7.5.3.2). */
	fg_desc(&g, 3, TABLE_GPA, 4 * 16, F_INDIRECT | F_WRITE, 0);
	fg_desc_at(&g, TABLE_GPA, 0, BUF_GPA, 16, F_NEXT, 2);
	fg_desc_at(&g, TABLE_GPA, 2, BUF_GPA + 0x100, 4096, F_NEXT, 1);
	fg_desc_at(&g, TABLE_GPA, 1, BUF_GPA + 0x2000, 4096, F_WRITE | F_NEXT, 3);
	fg_desc_at(&g, TABLE_GPA, 3, BUF_GPA + 0x3000, 1, F_WRITE, 0);
	fdrv_offer(&g.drv, 0, 3);
	cr_assert(eq(int, virtq_pop(&g.q, &chain), 0));
	cr_assert(eq(u16, chain.head, 3));
	cr_assert(eq(u32, chain.nsegs, 4));
	cr_assert(eq(u32, chain.nread, 2));
	cr_assert(eq(u64, chain.read_len, 16 + 4096));
	cr_assert(eq(u64, chain.write_len, 4096 + 1));
	cr_assert(eq(ptr, chain.segs[1].hva, g.mem.base + BUF_GPA + 0x100));
	cr_assert(eq(ptr, chain.segs[3].hva, g.mem.base + BUF_GPA + 0x3000));
	cr_assert(chain.segs[2].write);
	fg_destroy(&g);
}

Test(virtq, pops_direct_descriptors_followed_by_an_indirect_one)
{
	struct fake_guest g;

	/* Unusual but valid (spec 2.7.5.3.2): the device MUST handle it. */
	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	fg_desc(&g, 0, BUF_GPA, 16, F_NEXT, 1);
	fg_desc(&g, 1, TABLE_GPA, 2 * 16, F_INDIRECT, 0);
	fg_desc_at(&g, TABLE_GPA, 0, BUF_GPA + 16, 32, F_NEXT, 1);
	fg_desc_at(&g, TABLE_GPA, 1, BUF_GPA + 64, 8, F_WRITE, 0);
	fdrv_offer(&g.drv, 0, 0);
	cr_assert(eq(int, virtq_pop(&g.q, &chain), 0));
	cr_assert(eq(u32, chain.nsegs, 3));
	cr_assert(eq(u32, chain.nread, 2));
	cr_assert(eq(u64, chain.read_len, 48));
	cr_assert(eq(u64, chain.write_len, 8));
	fg_destroy(&g);
}

Test(virtq, chain_of_queue_size_and_of_chain_max_segments)
{
	struct fake_guest g;

	/* Every descriptor of the table in one chain: exactly the hop limit. */
	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	for (unsigned i = 0; i < FG_QUEUE_LEN; i++)
		fg_desc(&g, i, BUF_GPA + i, 1, i + 1 < FG_QUEUE_LEN ? F_NEXT : 0,
			(uint16_t)(i + 1));
	fdrv_offer(&g.drv, 0, 0);
	cr_assert(eq(int, virtq_pop(&g.q, &chain), 0));
	cr_assert(eq(u32, chain.nsegs, FG_QUEUE_LEN));
	/* An indirect table of VIRTQ_CHAIN_MAX entries, larger than this queue: accepted. */
	fg_desc(&g, 0, TABLE_GPA, VIRTQ_CHAIN_MAX * 16, F_INDIRECT, 0);
	for (unsigned i = 0; i < VIRTQ_CHAIN_MAX; i++)
		fg_desc_at(&g, TABLE_GPA, i, BUF_GPA + i, 1, i + 1 < VIRTQ_CHAIN_MAX ? F_NEXT : 0,
			   (uint16_t)(i + 1));
	fdrv_offer(&g.drv, 0, 0);
	cr_assert(eq(int, virtq_pop(&g.q, &chain), 0));
	cr_assert(eq(u32, chain.nsegs, VIRTQ_CHAIN_MAX));
	cr_assert(eq(u64, chain.read_len, VIRTQ_CHAIN_MAX));
	fg_destroy(&g);
}

/* ---- the used ring ---- */

Test(virtq, push_writes_the_used_element_then_idx)
{
	struct fake_guest g;
	uint32_t id, len;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	fg_desc(&g, 4, BUF_GPA, 16, F_NEXT, 7);
	fg_desc(&g, 7, BUF_GPA + 16, 512, F_WRITE, 0);
	fg_desc(&g, 1, BUF_GPA + 0x1000, 64, F_WRITE, 0);
	fdrv_offer(&g.drv, 0, 4);
	fdrv_offer(&g.drv, 0, 1);
	cr_assert(eq(int, virtq_pop(&g.q, &chain), 0));
	cr_assert(eq(int, virtq_pop(&g.q, &chain), 0));
	/* Completed out of order: the used ring says which chain, whatever the order. */
	cr_assert(eq(int, virtq_push(&g.q, 1, 64), 0));
	cr_assert(eq(u16, fdrv_used(&g.drv, 0)->idx, 1));
	fg_used_elem(&g, 0, &id, &len);
	cr_assert(eq(u32, id, 1));
	cr_assert(eq(u32, len, 64));
	cr_assert(eq(int, virtq_push(&g.q, 4, 300), 0));
	cr_assert(eq(u16, fdrv_used(&g.drv, 0)->idx, 2));
	cr_assert(eq(u16, g.q.used_idx, 2));
	fg_used_elem(&g, 1, &id, &len);
	cr_assert(eq(u32, id, 4));
	cr_assert(eq(u32, len, 300));
	/* Nothing is outstanding any more. */
	cr_assert(eq(int, virtq_push(&g.q, 4, 0), -EINVAL));
	cr_assert(eq(u16, fdrv_used(&g.drv, 0)->idx, 2));
	fg_destroy(&g);
}

Test(virtq, push_rejects_a_head_out_of_range)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	fg_desc(&g, 0, BUF_GPA, 16, 0, 0);
	fdrv_offer(&g.drv, 0, 0);
	cr_assert(eq(int, virtq_pop(&g.q, &chain), 0));
	cr_assert(eq(int, virtq_push(&g.q, FG_QUEUE_LEN, 0), -EINVAL));
	cr_assert(eq(u16, fdrv_used(&g.drv, 0)->idx, 0));
	cr_assert(not(g.q.broken));
	fg_destroy(&g);
}

Test(virtq, indexes_wrap_at_65536)
{
	struct fake_guest g;
	uint32_t id, len;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	/* As after a restore of a queue that has seen 65534 chains. */
	g.q.last_avail_idx = 65534;
	g.q.used_idx = 65534;
	fg_write16(&g, USED_GPA + 2, 65534);
	fg_set_avail_idx(&g, 65534);
	for (unsigned i = 0; i < 4; i++) {
		fg_desc(&g, i, BUF_GPA + 0x100 * i, 8, F_WRITE, 0);
		fdrv_offer(&g.drv, 0, (uint16_t)i);
	}
	cr_assert(eq(u16, g.drv.q[0].avail_idx, 2));
	for (unsigned i = 0; i < 4; i++) {
		cr_assert(virtq_has_work(&g.q));
		cr_assert(eq(int, virtq_pop(&g.q, &chain), 0), "pop %u", i);
		cr_assert(eq(u16, chain.head, i));
		cr_assert(eq(int, virtq_push(&g.q, chain.head, 10 + i), 0));
	}
	cr_assert(not(virtq_has_work(&g.q)));
	cr_assert(eq(u16, g.q.last_avail_idx, 2));
	cr_assert(eq(u16, fdrv_used(&g.drv, 0)->idx, 2));
	/* Free-running 65534, 65535, 0, 1 land in slots 14, 15, 0, 1. */
	fg_used_elem(&g, 14, &id, &len);
	cr_assert(eq(u32, id, 0));
	cr_assert(eq(u32, len, 10));
	fg_used_elem(&g, 15, &id, &len);
	cr_assert(eq(u32, id, 1));
	fg_used_elem(&g, 0, &id, &len);
	cr_assert(eq(u32, id, 2));
	fg_used_elem(&g, 1, &id, &len);
	cr_assert(eq(u32, id, 3));
	cr_assert(eq(u32, len, 13));
	/* A full ring across the wrap (16 ahead) is fine; see avail_idx_too_far_ahead. */
	for (unsigned i = 0; i < FG_QUEUE_LEN; i++)
		fdrv_offer(&g.drv, 0, (uint16_t)(i % 4));
	for (unsigned i = 0; i < FG_QUEUE_LEN; i++)
		cr_assert(eq(int, virtq_pop(&g.q, &chain), 0));
	cr_assert(eq(int, virtq_pop(&g.q, &chain), -EAGAIN));
	fg_destroy(&g);
}

/* ---- notifications ---- */

/* Pop and push `n` one-descriptor chains; returns the used idx from before. */
static uint16_t fg_complete(struct fake_guest *g, unsigned n)
{
	uint16_t old = g->q.used_idx;

	for (unsigned i = 0; i < n; i++) {
		fg_desc(g, 0, BUF_GPA, 8, F_WRITE, 0);
		fdrv_offer(&g->drv, 0, 0);
		cr_assert(eq(int, virtq_pop(&g->q, &chain), 0));
		cr_assert(eq(int, virtq_push(&g->q, chain.head, 8), 0));
	}
	return old;
}

Test(virtq, notify_follows_no_interrupt_without_event_idx)
{
	struct fake_guest g;
	uint16_t old;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	/* Nothing pushed, nothing to say. */
	cr_assert(not(virtq_should_notify(&g.q, g.q.used_idx)));
	old = fg_complete(&g, 1);
	cr_assert(virtq_should_notify(&g.q, old));
	fg_write16(&g, AVAIL_GPA, VRING_AVAIL_F_NO_INTERRUPT);
	old = fg_complete(&g, 2);
	cr_assert(not(virtq_should_notify(&g.q, old)));
	/* used_event means nothing without the feature. */
	fg_write16(&g, AVAIL_GPA, 0);
	fg_set_used_event(&g, 1000);
	old = fg_complete(&g, 1);
	cr_assert(virtq_should_notify(&g.q, old));
	fg_destroy(&g);
}

Test(virtq, notify_follows_used_event_with_event_idx)
{
	struct fake_guest g;
	uint16_t old;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	virtq_set_event_idx(&g.q, true);
	/* The flags' NO_INTERRUPT bit is ignored with EVENT_IDX. */
	fg_write16(&g, AVAIL_GPA, VRING_AVAIL_F_NO_INTERRUPT);
	fg_set_used_event(&g, 0);
	old = fg_complete(&g, 1); /* used idx 0 -> 1: entry 0 written, used_event 0 */
	cr_assert(virtq_should_notify(&g.q, old));
	old = fg_complete(&g, 1); /* 1 -> 2: entry 1, the driver wanted 0 */
	cr_assert(not(virtq_should_notify(&g.q, old)));
	fg_set_used_event(&g, 4);
	old = fg_complete(&g, 2); /* 2 -> 4: entries 2 and 3 */
	cr_assert(not(virtq_should_notify(&g.q, old)));
	old = fg_complete(&g, 3); /* 4 -> 7: entry 4 among them */
	cr_assert(virtq_should_notify(&g.q, old));
	cr_assert(not(virtq_should_notify(&g.q, g.q.used_idx)));
	fg_destroy(&g);
}

Test(virtq, notify_with_event_idx_across_the_wrap)
{
	struct fake_guest g;
	uint16_t old;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	virtq_set_event_idx(&g.q, true);
	g.q.last_avail_idx = 65534;
	g.q.used_idx = 65534;
	fg_set_avail_idx(&g, 65534);
	fg_set_used_event(&g, 0);
	old = fg_complete(&g, 4); /* 65534 -> 2 passes entry 0 */
	cr_assert(eq(u16, old, 65534));
	cr_assert(virtq_should_notify(&g.q, old));
	fg_set_used_event(&g, 65535);
	old = fg_complete(&g, 1); /* 2 -> 3: 65535 is long past */
	cr_assert(not(virtq_should_notify(&g.q, old)));
	fg_destroy(&g);
}

Test(virtq, set_avail_event_writes_the_end_of_the_used_ring)
{
	struct fake_guest g;
	gpa_t avail_event_gpa = USED_GPA + 4 + 8ull * FG_QUEUE_LEN;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	/* Without EVENT_IDX the field is not ours to write. */
	virtq_set_avail_event(&g.q, 77);
	cr_assert(eq(u16, fg_read16(&g, avail_event_gpa), 0));
	virtq_set_event_idx(&g.q, true);
	virtq_set_avail_event(&g.q, 77);
	cr_assert(eq(u16, fg_read16(&g, avail_event_gpa), 77));
	/* The used ring's elements are untouched. */
	cr_assert(fake_mem_all(g.mem.base + USED_GPA, 4 + 8ull * FG_QUEUE_LEN, 0));
	fg_destroy(&g);
}

/* ---- chain helpers ---- */

Test(virtq, check_chain_wants_enough_of_each_direction)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	fg_desc(&g, 0, BUF_GPA, 16, F_NEXT, 1);
	fg_desc(&g, 1, BUF_GPA + 16, 1, F_WRITE, 0);
	fdrv_offer(&g.drv, 0, 0);
	cr_assert(eq(int, virtq_pop(&g.q, &chain), 0));
	cr_assert(eq(int, virtq_check_chain(&chain, 16, 1), 0));
	cr_assert(eq(int, virtq_check_chain(&chain, 17, 1), -EPROTO));
	cr_assert(eq(int, virtq_check_chain(&chain, 16, 2), -EPROTO));
	fg_destroy(&g);
}

Test(virtq, check_chain_rejects_writable_where_readable_is_required)
{
	struct fake_guest g;

	/* A request whose header the driver marked device-writable: it has no readable bytes. */
	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	fg_desc(&g, 0, BUF_GPA, 16, F_WRITE | F_NEXT, 1);
	fg_desc(&g, 1, BUF_GPA + 16, 1, F_WRITE, 0);
	fdrv_offer(&g.drv, 0, 0);
	cr_assert(eq(int, virtq_pop(&g.q, &chain), 0));
	cr_assert(eq(u32, chain.nread, 0));
	cr_assert(eq(int, virtq_check_chain(&chain, 16, 1), -EPROTO));
	cr_assert(eq(int, virtq_check_chain(&chain, 0, 17), 0));
	fg_destroy(&g);
}

Test(virtq, copies_across_segments)
{
	struct fake_guest g;
	uint8_t out[8], in[6] = {1, 2, 3, 4, 5, 6};
	uint8_t *buf;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	buf = fg_hva(&g, BUF_GPA, 0x100);
	for (unsigned i = 0; i < 0x100; i++)
		buf[i] = (uint8_t)i;
	fg_desc(&g, 0, BUF_GPA, 3, F_NEXT, 1);
	fg_desc(&g, 1, BUF_GPA + 0x10, 4, F_NEXT, 2);
	fg_desc(&g, 2, BUF_GPA + 0x80, 2, F_WRITE | F_NEXT, 3);
	fg_desc(&g, 3, BUF_GPA + 0xc0, 8, F_WRITE, 0);
	fdrv_offer(&g.drv, 0, 0);
	cr_assert(eq(int, virtq_pop(&g.q, &chain), 0));
	/* Readable bytes: 00 01 02 | 10 11 12 13 */
	cr_assert(eq(int, virtq_copy_from_chain(&chain, 1, out, 5), 0));
	cr_assert(eq(u8, out[0], 0x01));
	cr_assert(eq(u8, out[1], 0x02));
	cr_assert(eq(u8, out[2], 0x10));
	cr_assert(eq(u8, out[4], 0x12));
	cr_assert(eq(int, virtq_copy_from_chain(&chain, 0, out, 7), 0));
	cr_assert(eq(u8, out[6], 0x13));
	cr_assert(eq(int, virtq_copy_from_chain(&chain, 3, out, 5), -EPROTO));
	cr_assert(eq(int, virtq_copy_from_chain(&chain, UINT64_MAX, out, 1), -EPROTO));
	cr_assert(eq(int, virtq_copy_from_chain(&chain, 1, out, UINT64_MAX), -EPROTO));
	/* Writable bytes: two at 0x80, eight at 0xc0. */
	cr_assert(eq(int, virtq_copy_to_chain(&chain, 1, in, 6), 0));
	cr_assert(eq(u8, buf[0x80], 0x80));
	cr_assert(eq(u8, buf[0x81], 1));
	cr_assert(eq(u8, buf[0xc0], 2));
	cr_assert(eq(u8, buf[0xc4], 6));
	cr_assert(eq(u8, buf[0xc5], 0xc5));
	cr_assert(eq(int, virtq_copy_to_chain(&chain, 5, in, 6), -EPROTO));
	cr_assert(eq(u8, buf[0xc5], 0xc5), "a copy that does not fit writes nothing");
	fg_destroy(&g);
}

/* ---- hostile guests ---- */

Test(virtq, rejects_a_descriptor_loop)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	fg_desc(&g, 0, BUF_GPA, 16, F_NEXT, 1);
	fg_desc(&g, 1, BUF_GPA + 16, 16, F_NEXT, 2);
	fg_desc(&g, 2, BUF_GPA + 32, 16, F_NEXT, 1);
	fdrv_offer(&g.drv, 0, 0);
	fg_expect_broken(&g, "chain loops or is longer than the queue");
	fg_destroy(&g);
}

Test(virtq, rejects_a_descriptor_pointing_to_itself)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	fg_desc(&g, 3, BUF_GPA, 16, F_WRITE | F_NEXT, 3);
	fdrv_offer(&g.drv, 0, 3);
	fg_expect_broken(&g, "chain loops or is longer than the queue");
	fg_destroy(&g);
}

Test(virtq, rejects_a_loop_in_an_indirect_table)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	fg_desc(&g, 0, TABLE_GPA, 3 * 16, F_INDIRECT, 0);
	fg_desc_at(&g, TABLE_GPA, 0, BUF_GPA, 16, F_NEXT, 1);
	fg_desc_at(&g, TABLE_GPA, 1, BUF_GPA, 16, F_NEXT, 2);
	fg_desc_at(&g, TABLE_GPA, 2, BUF_GPA, 16, F_NEXT, 0);
	fdrv_offer(&g.drv, 0, 0);
	fg_expect_broken(&g, "indirect chain loops or is longer than its table");
	fg_destroy(&g);
}

Test(virtq, rejects_a_chain_of_more_than_chain_max_segments)
{
	struct fake_guest g;
	unsigned n = VIRTQ_CHAIN_MAX + 1;

	/* A queue of 2048 allows a direct chain of 1025 hops, but not that many segments. */
	fg_init(&g, FG_RAM_LEN, 2048);
	for (unsigned i = 0; i < n; i++)
		fg_desc(&g, i, BUF_GPA + i, 1, i + 1 < n ? F_NEXT : 0, (uint16_t)(i + 1));
	fdrv_offer(&g.drv, 0, 0);
	fg_expect_broken(&g, "more than VIRTQ_CHAIN_MAX buffers");
	fg_destroy(&g);
}

Test(virtq, rejects_direct_plus_indirect_beyond_chain_max_segments)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	fg_desc(&g, 0, BUF_GPA, 1, F_NEXT, 1);
	fg_desc(&g, 1, TABLE_GPA, VIRTQ_CHAIN_MAX * 16, F_INDIRECT, 0);
	for (unsigned i = 0; i < VIRTQ_CHAIN_MAX; i++)
		fg_desc_at(&g, TABLE_GPA, i, BUF_GPA + i, 1, i + 1 < VIRTQ_CHAIN_MAX ? F_NEXT : 0,
			   (uint16_t)(i + 1));
	fdrv_offer(&g.drv, 0, 0);
	fg_expect_broken(&g, "more than VIRTQ_CHAIN_MAX buffers");
	fg_destroy(&g);
}

Test(virtq, rejects_a_next_index_out_of_range)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	fg_desc(&g, 0, BUF_GPA, 16, F_NEXT, FG_QUEUE_LEN);
	fdrv_offer(&g.drv, 0, 0);
	fg_expect_broken(&g, "next index outside the queue");
	fg_destroy(&g);
}

Test(virtq, rejects_a_next_index_outside_the_indirect_table)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	fg_desc(&g, 0, TABLE_GPA, 2 * 16, F_INDIRECT, 0);
	fg_desc_at(&g, TABLE_GPA, 0, BUF_GPA, 16, F_NEXT, 2);
	fg_desc_at(&g, TABLE_GPA, 2, BUF_GPA, 16, 0, 0); /* past the table's declared length */
	fdrv_offer(&g.drv, 0, 0);
	fg_expect_broken(&g, "next index outside the indirect table");
	fg_destroy(&g);
}

Test(virtq, rejects_a_head_out_of_range)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	fdrv_offer(&g.drv, 0, FG_QUEUE_LEN);
	fg_expect_broken(&g, "avail ring entry is not a descriptor index");
	fg_destroy(&g);
}

Test(virtq, rejects_avail_idx_too_far_ahead)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	fg_desc(&g, 0, BUF_GPA, 16, 0, 0);
	/* Exactly a full ring is allowed... */
	fg_set_avail_idx(&g, FG_QUEUE_LEN);
	cr_assert(eq(int, virtq_pop(&g.q, &chain), 0));
	/* ...one more than the ring can hold is not (15 pending + 2 new = 17). */
	fg_set_avail_idx(&g, FG_QUEUE_LEN + 2);
	cr_assert(virtq_has_work(&g.q));
	fg_expect_broken(&g, "avail idx moved more than the queue size ahead");
	fg_destroy(&g);
}

Test(virtq, rejects_avail_idx_going_backwards)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	fg_desc(&g, 0, BUF_GPA, 16, 0, 0);
	fdrv_offer(&g.drv, 0, 0);
	cr_assert(eq(int, virtq_pop(&g.q, &chain), 0));
	/* Going back by one looks like 65535 new chains. */
	fg_set_avail_idx(&g, 0);
	fg_expect_broken(&g, "avail idx moved more than the queue size ahead");
	fg_destroy(&g);
}

Test(virtq, rejects_a_buffer_outside_ram)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	fg_desc(&g, 0, FG_RAM_LEN, 1, 0, 0);
	fdrv_offer(&g.drv, 0, 0);
	fg_expect_broken(&g, "buffer not in guest RAM");
	fg_destroy(&g);
}

Test(virtq, rejects_a_buffer_across_the_end_of_ram)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	/* The last 16 bytes of RAM are fine, 17 are not. */
	fg_desc(&g, 0, FG_RAM_LEN - 16, 16, F_WRITE, 0);
	fdrv_offer(&g.drv, 0, 0);
	cr_assert(eq(int, virtq_pop(&g.q, &chain), 0));
	fg_desc(&g, 0, FG_RAM_LEN - 16, 17, F_WRITE, 0);
	fdrv_offer(&g.drv, 0, 0);
	fg_expect_broken(&g, "buffer not in guest RAM");
	fg_destroy(&g);
}

Test(virtq, rejects_a_length_that_wraps_the_address_space)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	/* addr + len wraps to 0x10, inside RAM for a check that only looks at the end. */
	fg_desc(&g, 0, 0xfffffffffffffff0ull, 0x20, 0, 0);
	fdrv_offer(&g.drv, 0, 0);
	fg_expect_broken(&g, "buffer not in guest RAM");
	fg_destroy(&g);
}

Test(virtq, rejects_a_huge_length)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	fg_desc(&g, 0, BUF_GPA, UINT32_MAX, F_WRITE, 0);
	fdrv_offer(&g.drv, 0, 0);
	fg_expect_broken(&g, "buffer not in guest RAM");
	fg_destroy(&g);
}

Test(virtq, rejects_a_buffer_across_the_mmio_hole)
{
	struct fake_guest g;

	fg_init(&g, 5 * GIB, FG_QUEUE_LEN);
	/* Up to the hole, and from 4 GiB, are RAM (two host-contiguous regions)... */
	fg_desc(&g, 0, MMIO_HOLE_GPA - 16, 16, F_NEXT, 1);
	fg_desc(&g, 1, MMIO_HOLE_END_GPA, 16, 0, 0);
	fdrv_offer(&g.drv, 0, 0);
	cr_assert(eq(int, virtq_pop(&g.q, &chain), 0));
	cr_assert(eq(ptr, chain.segs[1].hva, g.mem.base + MMIO_HOLE_GPA));
	/* ...but one buffer may not run from one into the hole, even though the host mapping
	 * behind it is contiguous. */
	fg_desc(&g, 0, MMIO_HOLE_GPA - 16, 32, 0, 0);
	fdrv_offer(&g.drv, 0, 0);
	fg_expect_broken(&g, "buffer not in guest RAM");
	fg_destroy(&g);
}

Test(virtq, rejects_a_buffer_in_the_mmio_hole_and_past_high_ram)
{
	struct fake_guest g;

	fg_init(&g, 5 * GIB, FG_QUEUE_LEN);
	fg_desc(&g, 0, VIRTIO_MMIO_GPA, 4, 0, 0);
	fdrv_offer(&g.drv, 0, 0);
	fg_expect_broken(&g, "buffer not in guest RAM");
	virtq_reset(&g.q);
	cr_assert(eq(int, virtq_configure(&g.q, FG_QUEUE_LEN, DESC_GPA, AVAIL_GPA, USED_GPA), 0));
	g.drv.q[0].avail_idx = 0;
	fg_desc(&g, 0, 6 * GIB - 8, 16, F_WRITE, 0); /* RAM ends at 6 GiB */
	fdrv_offer(&g.drv, 0, 0);
	fg_expect_broken(&g, "buffer not in guest RAM");
	fg_destroy(&g);
}

Test(virtq, rejects_an_indirect_table_inside_an_indirect_table)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	fg_desc(&g, 0, TABLE_GPA, 2 * 16, F_INDIRECT, 0);
	fg_desc_at(&g, TABLE_GPA, 0, BUF_GPA, 16, F_NEXT, 1);
	fg_desc_at(&g, TABLE_GPA, 1, TABLE2_GPA, 16, F_INDIRECT, 0);
	fg_desc_at(&g, TABLE2_GPA, 0, BUF_GPA, 16, 0, 0);
	fdrv_offer(&g.drv, 0, 0);
	fg_expect_broken(&g, "indirect table inside an indirect table");
	fg_destroy(&g);
}

Test(virtq, rejects_an_indirect_table_of_bad_length)
{
	static const uint32_t bad[] = {0, 8, 24, 17, 16 * VIRTQ_CHAIN_MAX + 16};
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		virtq_reset(&g.q);
		cr_assert(eq(int,
			     virtq_configure(&g.q, FG_QUEUE_LEN, DESC_GPA, AVAIL_GPA, USED_GPA),
			     0));
		g.drv.q[0].avail_idx = 0;
		fg_desc(&g, 0, TABLE_GPA, bad[i], F_INDIRECT, 0);
		fdrv_offer(&g.drv, 0, 0);
		fg_expect_broken(&g, "indirect table");
		const char *want = bad[i] > 16 * VIRTQ_CHAIN_MAX
					   ? "more than VIRTQ_CHAIN_MAX entries"
					   : "not a non-zero multiple of 16";

		cr_assert(strstr(g.q.error, want) != NULL, "len %u: %s", bad[i], g.q.error);
	}
	fg_destroy(&g);
}

Test(virtq, rejects_an_indirect_descriptor_with_next)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	fg_desc(&g, 0, TABLE_GPA, 16, F_INDIRECT | F_NEXT, 1);
	fg_desc(&g, 1, BUF_GPA, 16, 0, 0);
	fg_desc_at(&g, TABLE_GPA, 0, BUF_GPA, 16, 0, 0);
	fdrv_offer(&g.drv, 0, 0);
	fg_expect_broken(&g, "indirect descriptor with NEXT");
	fg_destroy(&g);
}

Test(virtq, rejects_an_indirect_table_outside_ram_accepts_any_alignment)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	fg_desc(&g, 0, FG_RAM_LEN - 16, 32, F_INDIRECT, 0);
	fdrv_offer(&g.drv, 0, 0);
	fg_expect_broken(&g, "indirect table not in guest RAM");
	virtq_reset(&g.q);
	cr_assert(eq(int, virtq_configure(&g.q, FG_QUEUE_LEN, DESC_GPA, AVAIL_GPA, USED_GPA), 0));
	g.drv.q[0].avail_idx = 0;
	/* Any alignment is accepted (the spec requires none; Linux's are 8-byte aligned). */
	for (unsigned off = 8; off >= 1; off /= 2) {
		fg_desc(&g, 0, TABLE_GPA + off, 32, F_INDIRECT, 0);
		fg_desc_at(&g, TABLE_GPA + off, 0, BUF_GPA, 16, F_NEXT, 1);
		fg_desc_at(&g, TABLE_GPA + off, 1, BUF_GPA + 0x100, 1, F_WRITE, 0);
		fdrv_offer(&g.drv, 0, 0);
		cr_assert(eq(int, virtq_pop(&g.q, &chain), 0), "table at +%u", off);
		cr_assert(eq(u32, chain.nsegs, 2));
		cr_assert(eq(ptr, chain.segs[1].hva, g.mem.base + BUF_GPA + 0x100));
		cr_assert(eq(int, virtq_push(&g.q, 0, 1), 0));
	}
	fg_destroy(&g);
}

Test(virtq, rejects_a_zero_length_buffer)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	fg_desc(&g, 0, BUF_GPA, 16, F_NEXT, 1);
	fg_desc(&g, 1, BUF_GPA + 16, 0, F_WRITE, 0);
	fdrv_offer(&g.drv, 0, 0);
	fg_expect_broken(&g, "zero-length buffer");
	fg_destroy(&g);
}

Test(virtq, rejects_a_zero_length_buffer_in_an_indirect_table)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	fg_desc(&g, 0, TABLE_GPA, 16, F_INDIRECT, 0);
	fg_desc_at(&g, TABLE_GPA, 0, BUF_GPA, 0, 0, 0);
	fdrv_offer(&g.drv, 0, 0);
	fg_expect_broken(&g, "zero-length buffer");
	fg_destroy(&g);
}

Test(virtq, rejects_readable_after_writable)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	fg_desc(&g, 0, BUF_GPA, 16, F_NEXT, 1);
	fg_desc(&g, 1, BUF_GPA + 16, 16, F_WRITE | F_NEXT, 2);
	fg_desc(&g, 2, BUF_GPA + 32, 16, 0, 0);
	fdrv_offer(&g.drv, 0, 0);
	fg_expect_broken(&g, "device-readable buffer after a device-writable one");
	fg_destroy(&g);
}

Test(virtq, rejects_readable_after_writable_across_the_indirect_switch)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	fg_desc(&g, 0, BUF_GPA, 16, F_WRITE | F_NEXT, 1);
	fg_desc(&g, 1, TABLE_GPA, 16, F_INDIRECT, 0);
	fg_desc_at(&g, TABLE_GPA, 0, BUF_GPA + 16, 16, 0, 0);
	fdrv_offer(&g.drv, 0, 0);
	fg_expect_broken(&g, "device-readable buffer after a device-writable one");
	fg_destroy(&g);
}

Test(virtq, reset_and_reconfigure_recovers_a_broken_queue)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	fdrv_offer(&g.drv, 0, 0xffff);
	fg_expect_broken(&g, "avail ring entry is not a descriptor index");
	/* The driver resets the device and starts over. */
	virtq_reset(&g.q);
	cr_assert(not(g.q.broken));
	cr_assert(g.q.error == NULL);
	cr_assert(eq(int, virtq_configure(&g.q, FG_QUEUE_LEN, DESC_GPA, AVAIL_GPA, USED_GPA), 0));
	g.drv.q[0].avail_idx = 0;
	fg_desc(&g, 0, BUF_GPA, 16, 0, 0);
	fdrv_offer(&g.drv, 0, 0);
	cr_assert(eq(int, virtq_pop(&g.q, &chain), 0));
	cr_assert(eq(int, virtq_push(&g.q, chain.head, 0), 0));
	fg_destroy(&g);
}

/* A driver that moves avail idx on while the device works cannot hand it more chains than the
 * queue holds: with `size` popped and none pushed, the next pop is a protocol error (a
 * device's per-queue arrays, virtio-net's rx heads, are sized by the queue). */
Test(virtq, rejects_more_chains_outstanding_than_the_queue_holds)
{
	struct fake_guest g;

	fg_init(&g, FG_RAM_LEN, FG_QUEUE_LEN);
	fg_desc(&g, 0, BUF_GPA, 16, 0, 0);
	for (unsigned i = 0; i < FG_QUEUE_LEN; i++)
		fdrv_offer(&g.drv, 0, 0);
	for (unsigned i = 0; i < FG_QUEUE_LEN; i++)
		cr_assert(eq(int, virtq_pop(&g.q, &chain), 0), "pop %u", i);
	/* All popped, none pushed: the driver posts more, as if they had been returned. */
	for (unsigned i = 0; i < 4; i++)
		fdrv_offer(&g.drv, 0, 0);
	fg_expect_broken(&g, "more chains outstanding than the queue holds");
	fg_destroy(&g);
}

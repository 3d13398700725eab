/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for vmm/virtio/queue.c: the input is a hostile guest. Its first
 * FUZZ_HDR_LEN bytes choose the queue (size, ring addresses, EVENT_IDX, starting index), the
 * rest is the content of guest RAM: descriptors, rings, indirect tables, all attacker data.
 * The device side then pops, uses and pushes chains until the queue runs dry or reports a
 * protocol error, checking on the way that every segment it was handed lies inside guest RAM.
 *
 * Guest RAM has two regions, like a guest above 3 GiB: [0, 64 KiB) and [4 GiB, 4 GiB + 16 KiB),
 * each its own malloc, so an access that runs off a region (into the MMIO hole, or past the end
 * of RAM) is an ASan report rather than a silent read of the neighbouring region.
 *
 * Built and run by tests/fuzz/run.sh virtq (clang -fsanitize=fuzzer,address,undefined); seeds
 * (a few well-formed guests: chained, indirect, wrapping queues) in tests/fuzz/corpus/virtq/.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/virtio_ring.h>

#include "virtio/queue.h"
#include "vmm.h"

#define FUZZ_LOW_LEN	(64u << 10)
#define FUZZ_HIGH_GPA	0x100000000ull
#define FUZZ_HIGH_LEN	(16u << 10)
#define FUZZ_HDR_LEN	16u
#define FUZZ_GPA_HIGH	0x80000000u /* in a header address: the offset is into high RAM */
#define FUZZ_MAX_ROUNDS (2 * VIRTQ_SIZE_MAX)

/* The header, little-endian on the wire (x86 hosts only: it is copied as is). */
struct fuzz_hdr {
	uint8_t size_log2; /* size = 1 << (size_log2 & 15); bit 7: use raw_size instead */
	uint8_t flags;	   /* bit 0: EVENT_IDX */
	uint16_t raw_size;
	uint16_t start_idx; /* last_avail_idx and used_idx to start from (exercises the wrap) */
	uint16_t desc_off;
	uint32_t avail_off;
	uint32_t used_off;
};
_Static_assert(sizeof(struct fuzz_hdr) == FUZZ_HDR_LEN, "fuzz header layout");

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct virtq_chain chain;

/* Die loudly (libFuzzer keeps the input) when an invariant of queue.c does not hold. */
#define fuzz_check(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_virtq: %s:%d: %s\n", __FILE__, __LINE__, #cond);     \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* A header address: the low 31 bits are an offset, bit 31 picks the region above 4 GiB. */
static gpa_t fuzz_gpa(uint32_t off)
{
	if (off & FUZZ_GPA_HIGH)
		return FUZZ_HIGH_GPA + (off & ~FUZZ_GPA_HIGH);
	return off;
}

/* True when [p, p+len) lies wholly inside one of the RAM regions. */
static int fuzz_in_ram(const struct guest_mem *mem, const uint8_t *p, uint64_t len)
{
	for (unsigned i = 0; i < mem->nregions; i++) {
		const struct mem_region *r = &mem->regions[i];

		if (p >= r->hva && p < r->hva + r->len && len <= (uint64_t)(r->hva + r->len - p))
			return 1;
	}
	return 0;
}

/* Check a popped chain against what queue.h promises, then use it as a device would. */
static uint32_t fuzz_use_chain(const struct guest_mem *mem)
{
	uint64_t read_len = 0, write_len = 0;
	uint8_t tmp[64], sum = 0;

	fuzz_check(chain.nsegs >= 1 && chain.nsegs <= VIRTQ_CHAIN_MAX);
	fuzz_check(chain.nread <= chain.nsegs);
	for (unsigned i = 0; i < chain.nsegs; i++) {
		const struct virtq_seg *s = &chain.segs[i];

		fuzz_check(s->len > 0);
		fuzz_check(fuzz_in_ram(mem, s->hva, s->len));
		fuzz_check(s->write == (i >= chain.nread));
		if (s->write) {
			write_len += s->len;
			memset(s->hva, 0xa5, s->len);
		} else {
			read_len += s->len;
			for (uint32_t j = 0; j < s->len; j++)
				sum += ((const uint8_t *)s->hva)[j];
		}
	}
	fuzz_check(read_len == chain.read_len && write_len == chain.write_len);
	fuzz_check(virtq_check_chain(&chain, read_len, write_len) == 0);
	fuzz_check(virtq_check_chain(&chain, read_len + 1, 0) == -EPROTO);
	fuzz_check(virtq_check_chain(&chain, 0, write_len + 1) == -EPROTO);
	if (read_len) {
		uint64_t n = read_len < sizeof(tmp) ? read_len : sizeof(tmp);

		fuzz_check(virtq_copy_from_chain(&chain, read_len - n, tmp, n) == 0);
		fuzz_check(virtq_copy_from_chain(&chain, read_len - n + 1, tmp, n) == -EPROTO);
	}
	if (write_len) {
		uint64_t n = write_len < sizeof(tmp) ? write_len : sizeof(tmp);

		memset(tmp, sum, sizeof(tmp));
		fuzz_check(virtq_copy_to_chain(&chain, write_len - n, tmp, n) == 0);
		fuzz_check(virtq_copy_to_chain(&chain, write_len - n + 1, tmp, n) == -EPROTO);
	}
	return write_len > UINT32_MAX ? UINT32_MAX : (uint32_t)write_len;
}

/* One hostile guest: lay out RAM from `data`, then serve the queue until it stops. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_hdr hdr;
	struct guest_mem mem;
	struct virtq q;
	uint8_t *low, *high;
	size_t n;
	unsigned qsize;

	if (size < FUZZ_HDR_LEN)
		return 0;
	memcpy(&hdr, data, FUZZ_HDR_LEN);
	data += FUZZ_HDR_LEN;
	size -= FUZZ_HDR_LEN;

	low = calloc(1, FUZZ_LOW_LEN);
	high = calloc(1, FUZZ_HIGH_LEN);
	if (!low || !high)
		abort();
	n = size < FUZZ_LOW_LEN ? size : FUZZ_LOW_LEN;
	memcpy(low, data, n);
	if (size > n)
		memcpy(high, data + n, size - n < FUZZ_HIGH_LEN ? size - n : FUZZ_HIGH_LEN);
	memset(&mem, 0, sizeof(mem));
	mem.regions[0] = (struct mem_region){.gpa = 0, .len = FUZZ_LOW_LEN, .hva = low};
	mem.regions[1] =
		(struct mem_region){.gpa = FUZZ_HIGH_GPA, .len = FUZZ_HIGH_LEN, .hva = high};
	mem.nregions = 2;
	mem.ram_len = FUZZ_LOW_LEN + FUZZ_HIGH_LEN;
	mem.fd = -1;

	qsize = hdr.size_log2 & 0x80 ? hdr.raw_size : 1u << (hdr.size_log2 & 15);
	virtq_init(&q, &mem);
	virtq_set_event_idx(&q, hdr.flags & 1);
	if (virtq_configure(&q, qsize, hdr.desc_off, fuzz_gpa(hdr.avail_off),
			    fuzz_gpa(hdr.used_off)) != 0) {
		fuzz_check(!q.ready && q.error != NULL);
		goto out;
	}
	q.last_avail_idx = hdr.start_idx;
	q.used_idx = hdr.start_idx;

	for (unsigned round = 0; round < FUZZ_MAX_ROUNDS; round++) {
		bool work = virtq_has_work(&q);
		uint16_t old_used = q.used_idx;
		int err = virtq_pop(&q, &chain);

		if (err == -EAGAIN) {
			fuzz_check(!work);
			break;
		}
		if (err) {
			fuzz_check(err == -EPROTO && q.broken && q.error != NULL);
			fuzz_check(virtq_pop(&q, &chain) == -EPROTO);
			fuzz_check(virtq_push(&q, 0, 0) == -EPROTO);
			break;
		}
		fuzz_check(work);
		fuzz_check(chain.head < q.size);
		fuzz_check(virtq_push(&q, chain.head, fuzz_use_chain(&mem)) == 0);
		fuzz_check(virtq_push(&q, chain.head, 0) == -EINVAL); /* nothing outstanding */
		(void)virtq_should_notify(&q, old_used);
		virtq_set_avail_event(&q, q.last_avail_idx);
	}
out:
	free(low);
	free(high);
	return 0;
}

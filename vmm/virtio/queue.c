/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Split virtqueues, device side (virtio 1.2, section 2.7). See queue.h for the contract.
 *
 * The rings are in guest RAM and the guest is hostile: another vCPU may rewrite a descriptor
 * or an index while we read it. So every field is loaded exactly once with an __atomic load
 * into a local (a plain load could be repeated by the compiler after our check, handing us a
 * different value than the one we checked), every address goes through mem_gpa_to_hva, and
 * every walk has a hop limit. A guest that breaks the protocol gets -EPROTO and a reason; it
 * never gets us to touch memory outside its RAM.
 *
 * Fields are little-endian in virtio 1.x; the le*toh calls cost nothing on x86 and keep the
 * code honest.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include <linux/virtio_ring.h>

#include "virtio/queue.h"

#define VIRTQ_DESC_LEN 16u

/* The avail ring: le16 flags, le16 idx, le16 ring[size], le16 used_event. */
#define AVAIL_FLAGS_OFF	     0u
#define AVAIL_IDX_OFF	     2u
#define AVAIL_RING_OFF(i)    (4u + 2u * (uint32_t)(i))
#define AVAIL_LEN(size)	     (6u + 2u * (uint64_t)(size))
/* The used ring: le16 flags, le16 idx, {le32 id, le32 len} ring[size], le16 avail_event. */
#define USED_IDX_OFF	     2u
#define USED_RING_OFF(i)     (4u + 8u * (uint32_t)(i))
#define USED_LEN(size)	     (6u + 8u * (uint64_t)(size))
#define DESC_TABLE_LEN(size) (VIRTQ_DESC_LEN * (uint64_t)(size))

/* A descriptor copied out of guest memory, in host byte order. */
struct virtq_desc_copy {
	uint64_t addr;
	uint32_t len;
	uint16_t flags;
	uint16_t next;
};

/* Load a little-endian u16 of guest memory once. `p` is 2-byte aligned (the rings are). */
static uint16_t virtq_load16(const uint8_t *p)
{
	return le16toh(__atomic_load_n((const uint16_t *)p, __ATOMIC_RELAXED));
}

/* Store a little-endian u16 into guest memory in one access (the guest may read it meanwhile). */
static void virtq_store16(uint8_t *p, uint16_t v)
{
	__atomic_store_n((uint16_t *)p, htole16(v), __ATOMIC_RELAXED);
}

/* Store a little-endian u32 into guest memory in one access. */
static void virtq_store32(uint8_t *p, uint32_t v)
{
	__atomic_store_n((uint32_t *)p, htole32(v), __ATOMIC_RELAXED);
}

/*
 * Read the descriptor at `p` into `d`, once. Where `p` is 8-byte aligned (the ring's table
 * always is, and Linux's indirect tables are kmalloc'ed), two relaxed 8-byte loads: the
 * address, then len/flags/next together, so len, flags and next always come from one
 * consistent snapshot of the second word. The spec sets no alignment for an indirect table,
 * so any other address is copied bytewise instead; a guest racing with that copy only tears
 * its own descriptor. Everything after this works on the copy; the guest rewriting the
 * descriptor meanwhile cannot change what we checked.
 */
static void virtq_read_desc(const uint8_t *p, struct virtq_desc_copy *d)
{
	uint64_t addr, word;

	if ((uintptr_t)p % 8 == 0) {
		addr = __atomic_load_n((const uint64_t *)p, __ATOMIC_RELAXED);
		word = __atomic_load_n((const uint64_t *)(p + 8), __ATOMIC_RELAXED);
	} else {
		memcpy(&addr, p, 8);
		memcpy(&word, p + 8, 8);
	}
	addr = le64toh(addr);
	word = le64toh(word);

	d->addr = addr;
	d->len = (uint32_t)word;
	d->flags = (uint16_t)(word >> 32);
	d->next = (uint16_t)(word >> 48);
}

/* Mark the queue broken with `why`; every later pop and push fails until virtq_reset. */
static int virtq_fail(struct virtq *q, const char *why)
{
	q->broken = true;
	q->error = why;
	return -EPROTO;
}

/* Attach `q` to guest RAM, reset. */
void virtq_init(struct virtq *q, const struct guest_mem *mem)
{
	q->mem = mem;
	virtq_reset(q);
}

/* Back to the state after a device reset; only the guest_mem stays. */
void virtq_reset(struct virtq *q)
{
	const struct guest_mem *mem = q->mem;

	memset(q, 0, sizeof(*q));
	q->mem = mem;
}

/* Record whether VIRTIO_F_EVENT_IDX was negotiated. */
void virtq_set_event_idx(struct virtq *q, bool on)
{
	q->event_idx = on;
}

/* Translate one ring of `len` bytes at `gpa` with alignment `align`; NULL and `*why` if bad. */
static uint8_t *virtq_map_ring(const struct virtq *q, gpa_t gpa, uint64_t len, uint64_t align,
			       const char *misaligned, const char *outside, const char **why)
{
	uint8_t *hva;

	if (gpa & (align - 1)) {
		*why = misaligned;
		return NULL;
	}
	hva = mem_gpa_to_hva(q->mem, gpa, len);
	if (!hva)
		*why = outside;
	return hva;
}

/* Check the driver's queue layout and enable the queue. */
int virtq_configure(struct virtq *q, unsigned size, gpa_t desc_gpa, gpa_t avail_gpa, gpa_t used_gpa)
{
	const char *why = NULL;
	uint8_t *desc, *avail, *used;
	int err = -EPROTO;

	q->ready = false;
	if (size == 0 || size > VIRTQ_SIZE_MAX || (size & (size - 1))) {
		why = "queue size is not a power of 2 in [1, 32768]";
		goto out;
	}
	desc = virtq_map_ring(q, desc_gpa, DESC_TABLE_LEN(size), VRING_DESC_ALIGN_SIZE,
			      "descriptor table not 16-byte aligned",
			      "descriptor table not in guest RAM", &why);
	if (!desc)
		goto out;
	avail = virtq_map_ring(q, avail_gpa, AVAIL_LEN(size), VRING_AVAIL_ALIGN_SIZE,
			       "avail ring not 2-byte aligned", "avail ring not in guest RAM",
			       &why);
	if (!avail)
		goto out;
	used = virtq_map_ring(q, used_gpa, USED_LEN(size), VRING_USED_ALIGN_SIZE,
			      "used ring not 4-byte aligned", "used ring not in guest RAM", &why);
	if (!used)
		goto out;

	q->size = (uint16_t)size;
	q->desc_gpa = desc_gpa;
	q->avail_gpa = avail_gpa;
	q->used_gpa = used_gpa;
	q->desc_hva = desc;
	q->avail_hva = avail;
	q->used_hva = used;
	q->last_avail_idx = 0;
	q->used_idx = 0;
	q->broken = false;
	q->error = NULL;
	q->ready = true;
	err = 0;
out:
	if (err)
		q->error = why;
	return err;
}

/* Whether avail->idx has moved past what we popped. */
bool virtq_has_work(const struct virtq *q)
{
	if (!q->ready || q->broken)
		return false;
	return virtq_load16(q->avail_hva + AVAIL_IDX_OFF) != q->last_avail_idx;
}

uint16_t virtq_avail_idx(const struct virtq *q)
{
	if (!q->ready)
		return 0;
	/* Acquire: the driver moves the index after what it did with the buffer (vsock: after
	 * handling the event in it); a device acting on the new index must come after that. */
	return le16toh(__atomic_load_n((const uint16_t *)(q->avail_hva + AVAIL_IDX_OFF),
				       __ATOMIC_ACQUIRE));
}

/* Check descriptor `d` and append it to `chain` as a segment; NULL or the reason it is bad. */
static const char *virtq_add_seg(const struct virtq *q, struct virtq_chain *chain,
				 const struct virtq_desc_copy *d)
{
	bool write = d->flags & VRING_DESC_F_WRITE;
	void *hva;

	if (d->len == 0)
		return "zero-length buffer";
	/* mem_gpa_to_hva checks gpa + len for overflow and for crossing a region's end (the
	 * MMIO hole, the end of RAM). */
	hva = mem_gpa_to_hva(q->mem, d->addr, d->len);
	if (!hva)
		return "buffer not in guest RAM";
	if (!write && chain->nsegs > chain->nread)
		return "device-readable buffer after a device-writable one";
	if (chain->nsegs == VIRTQ_CHAIN_MAX)
		return "chain has more than VIRTQ_CHAIN_MAX buffers";
	chain->segs[chain->nsegs++] = (struct virtq_seg){.hva = hva, .len = d->len, .write = write};
	if (write) {
		chain->write_len += d->len;
	} else {
		chain->nread++;
		chain->read_len += d->len;
	}
	return NULL;
}

/*
 * Walk the chain starting at descriptor `head` of the ring's table into `chain`: NULL, or the
 * reason the guest's chain is invalid. The walk starts in the descriptor table (hop limit:
 * the queue size) and may switch once, at its last descriptor, to an indirect table (hop
 * limit: that table's entries). Every hop counts, so a loop ends as "longer than the table".
 */
static const char *virtq_walk_chain(const struct virtq *q, uint16_t head, struct virtq_chain *chain)
{
	const uint8_t *table = q->desc_hva;
	uint32_t table_len = q->size; /* entries */
	uint32_t hops = 0, idx = head;
	bool indirect = false;
	struct virtq_desc_copy d;
	const char *why;

	for (;;) {
		if (hops++ == table_len)
			return indirect ? "indirect chain loops or is longer than its table"
					: "chain loops or is longer than the queue";
		virtq_read_desc(table + (uint64_t)idx * VIRTQ_DESC_LEN, &d);

		if (d.flags & VRING_DESC_F_INDIRECT) {
			/* Its WRITE flag is ignored, as the spec requires. */
			if (indirect)
				return "indirect table inside an indirect table";
			if (d.flags & VRING_DESC_F_NEXT)
				return "indirect descriptor with NEXT";
			if (d.len == 0 || d.len % VIRTQ_DESC_LEN)
				return "indirect table length not a non-zero multiple of 16";
			if (d.len / VIRTQ_DESC_LEN > VIRTQ_CHAIN_MAX)
				return "indirect table has more than VIRTQ_CHAIN_MAX entries";
			/* No alignment check: the spec requires none for indirect tables, and
			 * Linux guests do post tables that are 8- but not 16-byte aligned. */
			table = mem_gpa_to_hva(q->mem, d.addr, d.len);
			if (!table)
				return "indirect table not in guest RAM";
			table_len = d.len / VIRTQ_DESC_LEN;
			indirect = true;
			hops = 0;
			idx = 0;
			continue;
		}

		why = virtq_add_seg(q, chain, &d);
		if (why)
			return why;
		if (!(d.flags & VRING_DESC_F_NEXT))
			return NULL;
		idx = d.next;
		if (idx >= table_len)
			return indirect ? "next index outside the indirect table"
					: "next index outside the queue";
	}
}

/* Take the next available chain, checked and translated. */
int virtq_pop(struct virtq *q, struct virtq_chain *chain)
{
	uint16_t avail_idx, pending, head;
	const char *why;

	if (!q->ready)
		return -EAGAIN;
	if (q->broken)
		return -EPROTO;
	avail_idx = virtq_load16(q->avail_hva + AVAIL_IDX_OFF);
	pending = (uint16_t)(avail_idx - q->last_avail_idx);
	if (pending == 0)
		return -EAGAIN;
	/* The driver can only have `size` chains outstanding; more is a corrupt index. */
	if (pending > q->size)
		return virtq_fail(q, "avail idx moved more than the queue size ahead");
	/* Nor can the device hold more than `size` chains popped and not yet pushed: a driver
	 * that moves avail idx on while the device works would otherwise hand it more, and a
	 * device's per-queue arrays (net's rx heads) are sized by the queue. */
	if ((uint16_t)(q->last_avail_idx - q->used_idx) >= q->size)
		return virtq_fail(q, "more chains outstanding than the queue holds");
	/*
	 * Acquire, pairs with the driver's write barrier before its avail->idx update: the
	 * ring entry and descriptors we read below were written before the idx we just read,
	 * and must not be read before it (or we could see stale ones).
	 */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	head = virtq_load16(q->avail_hva + AVAIL_RING_OFF(q->last_avail_idx & (q->size - 1)));
	if (head >= q->size)
		return virtq_fail(q, "avail ring entry is not a descriptor index");

	memset(chain, 0, offsetof(struct virtq_chain, segs));
	chain->head = head;
	why = virtq_walk_chain(q, head, chain);
	if (why)
		return virtq_fail(q, why);
	q->last_avail_idx++;
	return 0;
}

/* Put `head` into the used ring and publish it. */
int virtq_push(struct virtq *q, uint16_t head, uint32_t written_len)
{
	uint8_t *elem;

	if (!q->ready || head >= q->size)
		return -EINVAL;
	if (q->broken)
		return -EPROTO;
	/* Every pushed chain was popped: used_idx never passes last_avail_idx. */
	if (q->used_idx == q->last_avail_idx)
		return -EINVAL;
	elem = q->used_hva + USED_RING_OFF(q->used_idx & (q->size - 1));
	virtq_store32(elem, head);
	virtq_store32(elem + 4, written_len);
	q->used_idx++;
	/*
	 * Release, pairs with the driver's read barrier after it reads used->idx: the element
	 * above (and the data the device wrote into the chain's buffers before calling us) must
	 * be visible before the idx that hands them to the driver.
	 */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	virtq_store16(q->used_hva + USED_IDX_OFF, q->used_idx);
	return 0;
}

/* Whether the driver asked for a used-buffer notification for the chains since `old_used_idx`. */
int virtq_push_many(struct virtq *q, const uint16_t *heads, const uint32_t *lens, unsigned n)
{
	if (!q->ready)
		return -EINVAL;
	if (q->broken)
		return -EPROTO;
	/* Every pushed chain was popped: used_idx never passes last_avail_idx. */
	if (n > (uint16_t)(q->last_avail_idx - q->used_idx))
		return -EINVAL;
	for (unsigned i = 0; i < n; i++)
		if (heads[i] >= q->size)
			return -EINVAL;
	for (unsigned i = 0; i < n; i++) {
		uint8_t *elem =
			q->used_hva + USED_RING_OFF((uint16_t)(q->used_idx + i) & (q->size - 1));

		virtq_store32(elem, heads[i]);
		virtq_store32(elem + 4, lens[i]);
	}
	q->used_idx = (uint16_t)(q->used_idx + n);
	/* Release, as in virtq_push: every element (and the data in the chains) before the idx
	 * that hands them all to the driver at once. */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	virtq_store16(q->used_hva + USED_IDX_OFF, q->used_idx);
	return 0;
}

bool virtq_should_notify(const struct virtq *q, uint16_t old_used_idx)
{
	uint16_t used_event;

	if (!q->ready || q->used_idx == old_used_idx)
		return false;
	/*
	 * Full barrier, pairs with the driver's between its write of used_event (or flags) and
	 * its re-read of used->idx: our store of used->idx must be visible before we load what
	 * the driver wants. With only release/acquire a store-load reorder could let both sides
	 * miss each other's update: we skip the interrupt and the driver sleeps forever.
	 */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!q->event_idx)
		return !(virtq_load16(q->avail_hva + AVAIL_FLAGS_OFF) & VRING_AVAIL_F_NO_INTERRUPT);
	used_event = virtq_load16(q->avail_hva + AVAIL_RING_OFF(q->size));
	return vring_need_event(used_event, q->used_idx, old_used_idx);
}

/* Ask for an available-buffer notification once avail->idx passes `avail_idx`. */
void virtq_set_avail_event(struct virtq *q, uint16_t avail_idx)
{
	if (!q->ready || !q->event_idx)
		return;
	virtq_store16(q->used_hva + USED_RING_OFF(q->size), avail_idx);
	/*
	 * Full barrier, pairs with the driver's between its avail->idx update and its read of
	 * avail_event: our store must be visible before the caller re-reads avail->idx
	 * (virtq_has_work), or a chain added in between would get neither a kick nor a look.
	 */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* Whether the chain is big enough for the device's minimum request. */
int virtq_check_chain(const struct virtq_chain *chain, uint64_t read_len, uint64_t write_len)
{
	if (chain->read_len < read_len || chain->write_len < write_len)
		return -EPROTO;
	return 0;
}

/* Copy `len` bytes between segments [first, last) of `chain`, `offset` bytes into them, and a
 * host buffer: into `to` when it is not NULL, else out of `from`. */
static __must_check int virtq_copy_segs(const struct virtq_chain *chain, unsigned first,
					unsigned last, uint64_t offset, uint8_t *to,
					const uint8_t *from, uint64_t len)
{
	for (unsigned i = first; i < last && len; i++) {
		const struct virtq_seg *s = &chain->segs[i];
		uint8_t *seg = (uint8_t *)s->hva;
		uint64_t n;

		if (offset >= s->len) {
			offset -= s->len;
			continue;
		}
		n = s->len - offset < len ? s->len - offset : len;
		if (to) {
			memcpy(to, seg + offset, n);
			to += n;
		} else {
			memcpy(seg + offset, from, n);
			from += n;
		}
		len -= n;
		offset = 0;
	}
	return len ? -EPROTO : 0;
}

/* Copy out of the readable segments. */
int virtq_copy_from_chain(const struct virtq_chain *chain, uint64_t offset, void *dst, uint64_t len)
{
	if (len > chain->read_len || offset > chain->read_len - len)
		return -EPROTO;
	return virtq_copy_segs(chain, 0, chain->nread, offset, dst, NULL, len);
}

/* Copy into the writable segments. */
int virtq_copy_to_chain(const struct virtq_chain *chain, uint64_t offset, const void *src,
			uint64_t len)
{
	if (len > chain->write_len || offset > chain->write_len - len)
		return -EPROTO;
	return virtq_copy_segs(chain, chain->nread, chain->nsegs, offset, NULL, src, len);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * payload-dos-*: guests that try to deny the VMM its I/O thread (issue 13), one flood each,
 * chosen at build time by DOS_CASE (tests/guests/meson.build builds the four):
 *
 *  - DOS_BLK (payload-dos-blk): the first virtio-mmio window is a virtio-blk disk; its queue
 *    is kept full of GET_ID requests, which the device answers at once, for ever.
 *  - DOS_BLK_READ (payload-dos-blk-read): the virtio-blk queue kept full of reads of 64 MiB
 *    each (1022 segments of 64 KiB, all the same buffer) of sector 0, from the page cache.
 *  - DOS_VSOCK_CID (payload-dos-vsock-cid): a virtio-vsock device; its tx queue is kept full
 *    of packets from a source CID that is not the guest's, which the device drops, for ever.
 *  Both make each request as dear to the device and as cheap to the guest as the protocol
 *  allows: every avail entry is one indirect descriptor to the same table of VIRTQ_CHAIN_MAX
 *  (1024) entries, the header and then 1023 one-byte buffers, which the device walks and
 *  translates at every pop while the guest only puts the head back. A device without a budget
 *  never sees its queue empty.
 *  - DOS_VSOCK_CONNS (payload-dos-vsock-conns): a virtio-vsock device; every connection the
 *    host asks for is accepted (OP_RESPONSE), and none is ever closed: the SHUTDOWNs and RSTs
 *    that come are counted and otherwise ignored.
 *  - DOS_CONSOLE (payload-dos-console): the UART's transmit register, written as fast as the
 *    vCPU can, for ever.
 *
 * The floods never end: the host (tests/integration/dos.py) measures the VMM meanwhile and
 * stops it with SIGTERM. Each prints "dos: <case> flooding" once it has started, and the
 * vsock-conns case "dos: conns requests=N shutdowns=M resets=K" every 256 events, so the host
 * can tell the guest went on. The driver takes VERSION_1 and INDIRECT_DESC (no EVENT_IDX),
 * with interrupts off: used rings are polled.
 *
 * The device works on the VMM's I/O thread while this vCPU runs, so the ring updates are
 * ordered with real fences: the descriptors and buffers before avail->idx (release), avail->idx
 * before the kick and before reading used->idx again (a full fence: the device must see the
 * new index before we decide it has nothing to do).
 */
#include <stdbool.h>

#include "rt.h"
#include "vq.h"

#define DOS_BLK		1
#define DOS_VSOCK_CID	2
#define DOS_VSOCK_CONNS 3
#define DOS_CONSOLE	4
#define DOS_BLK_READ	5

#ifndef DOS_CASE
#error "build with -DDOS_CASE=DOS_BLK, DOS_BLK_READ, DOS_VSOCK_CID, DOS_VSOCK_CONNS or DOS_CONSOLE"
#endif

#define VIO_ID_BLOCK	 2u
#define VIO_ID_VSOCK	 19u
#define CHAIN_MAX	 1024u /* the VMM's VIRTQ_CHAIN_MAX */
#define BLK_T_GET_ID	 8u
#define VSOCK_HDR_LEN	 44u
#define VSOCK_OP_REQUEST 1u
#define VSOCK_OP_RESP	 2u
#define VSOCK_OP_RST	 3u
#define VSOCK_OP_SHUT	 4u
#define VSOCK_TYPE_STR	 1u
#define VSOCK_RX_LEN	 (VSOCK_HDR_LEN + 256u) /* each rx buffer */

struct vsock_hdr {
	uint64_t src_cid;
	uint64_t dst_cid;
	uint32_t src_port;
	uint32_t dst_port;
	uint32_t len;
	uint16_t type;
	uint16_t op;
	uint32_t flags;
	uint32_t buf_alloc;
	uint32_t fwd_cnt;
} __attribute__((packed));
_Static_assert(sizeof(struct vsock_hdr) == VSOCK_HDR_LEN, "vsock header layout");

struct blk_hdr {
	uint32_t type;
	uint32_t ioprio;
	uint64_t sector;
};

/* The virtio driver below serves three of the four cases: unused in the console's. */
#define DOS_HELPER static __attribute__((unused))

static uint64_t vio_base;

DOS_HELPER __attribute__((noreturn)) void dos_fail(const char *why)
{
	uart_puts("dos: FAIL ");
	uart_puts(why);
	uart_puts("\n");
	poweroff();
}

/* Reset the device in window 0 and take it to FEATURES_OK with VERSION_1 and
 * INDIRECT_DESC. */
DOS_HELPER void dos_init(uint64_t base, uint32_t device_id)
{
	const char *why;

	vio_base = base;
	if ((why = vio_init(base, device_id,
			    1ull << VIO_F_INDIRECT_DESC | 1ull << VIO_F_VERSION_1)))
		dos_fail(why);
}

/* Configure queue `qi` on `q` (size VQ_SIZE, interrupts off). */
DOS_HELPER void dos_queue(unsigned qi, struct vq *q)
{
	const char *why = vio_queue(vio_base, qi, q);

	if (why)
		dos_fail(why);
}

DOS_HELPER void dos_driver_ok(void)
{
	const char *why = vio_driver_ok(vio_base);

	if (why)
		dos_fail(why);
}

/* Give back every chain the device returned, each published at once so that a device
 * serving the queue never finds it empty; kick every 64 chains, and whenever the device has
 * returned nothing new since chains were offered (it may have stopped for want of work).
 * Called in a loop: the queue stays full for ever. */
DOS_HELPER void vq_recycle(unsigned qi, struct vq *q)
{
	static unsigned since_kick;
	bool any = false;
	uint16_t id;

	while (vq_next_used(q, &id, NULL)) {
		vq_offer(q, id);
		vq_publish(q);
		any = true;
		if (++since_kick == 64) {
			vq_notify(vio_base, qi);
			since_kick = 0;
		}
	}
	if (!any && since_kick) {
		vq_notify(vio_base, qi);
		since_kick = 0;
	}
}

/* The indirect table every flood request points at: [0] the header (`hdr_len` bytes at
 * `hdr`), [1, CHAIN_MAX) one byte each of `bytes`, device-writable when `writable`. */
static struct vq_desc table[CHAIN_MAX] __attribute__((aligned(16), unused));
static uint8_t table_bytes[CHAIN_MAX] __attribute__((unused));

DOS_HELPER void dos_fill_table(const void *hdr, uint32_t hdr_len, bool writable)
{
	table[0] = (struct vq_desc){(uint64_t)(uintptr_t)hdr, hdr_len, DESC_F_NEXT, 1};
	for (unsigned i = 1; i < CHAIN_MAX; i++)
		table[i] = (struct vq_desc){(uint64_t)(uintptr_t)&table_bytes[i], 1,
					    (uint16_t)((writable ? DESC_F_WRITE : 0) |
						       (i + 1u < CHAIN_MAX ? DESC_F_NEXT : 0)),
					    (uint16_t)(i + 1)};
}

/* Fill queue `q` with VQ_SIZE chains of the one indirect table, publish them and kick. */
DOS_HELPER void dos_offer_all(unsigned qi, struct vq *q)
{
	for (uint16_t i = 0; i < VQ_SIZE; i++) {
		q->desc[i] = (struct vq_desc){(uint64_t)(uintptr_t)table, sizeof(table),
					      DESC_F_INDIRECT, 0};
		vq_offer(q, i);
	}
	vq_kick(vio_base, qi, q);
}

/* Queue 0 (blk's requests, vsock's rx) and queue 1 (vsock's tx). */
static struct vq vq0 __attribute__((unused)), vq1 __attribute__((unused));

#if DOS_CASE == DOS_BLK
/* GET_ID: the header, then 1023 writable bytes (the id in the first 20, the status byte
 * last). */
static struct blk_hdr blk_hdr;

static void dos_run(const struct payload_info *info)
{
	dos_init(info->mmio_base_gpa, VIO_ID_BLOCK);
	dos_queue(0, &vq0);
	dos_driver_ok();
	blk_hdr = (struct blk_hdr){.type = BLK_T_GET_ID};
	dos_fill_table(&blk_hdr, sizeof(blk_hdr), true);
	dos_offer_all(0, &vq0);
	uart_puts("dos: blk flooding\n");
	for (;;)
		vq_recycle(0, &vq0);
}
#elif DOS_CASE == DOS_BLK_READ
/* READ of sector 0: the header, then 1022 writable segments of 64 KiB each, all the same
 * buffer (64 MiB of the disk's page cache copied per request), then the status byte. */
#define READ_SEG_LEN (64u * 1024)
static struct blk_hdr read_hdr;
static uint8_t read_buf[READ_SEG_LEN] __attribute__((aligned(4096)));
static uint8_t read_status;

static void dos_run(const struct payload_info *info)
{
	dos_init(info->mmio_base_gpa, VIO_ID_BLOCK);
	dos_queue(0, &vq0);
	dos_driver_ok();
	read_hdr = (struct blk_hdr){.type = 0 /* IN */};
	table[0] =
		(struct vq_desc){(uint64_t)(uintptr_t)&read_hdr, sizeof(read_hdr), DESC_F_NEXT, 1};
	for (unsigned i = 1; i < CHAIN_MAX - 1; i++)
		table[i] = (struct vq_desc){(uint64_t)(uintptr_t)read_buf, READ_SEG_LEN,
					    DESC_F_WRITE | DESC_F_NEXT, (uint16_t)(i + 1)};
	table[CHAIN_MAX - 1] =
		(struct vq_desc){(uint64_t)(uintptr_t)&read_status, 1, DESC_F_WRITE, 0};
	dos_offer_all(0, &vq0);
	uart_puts("dos: blk-read flooding\n");
	for (;;)
		vq_recycle(0, &vq0);
}
#elif DOS_CASE == DOS_VSOCK_CID
/* Every tx descriptor is one packet: a REQUEST from CID 7, which is not the guest's (3). */
static struct vsock_hdr cid_pkt;

static void dos_run(const struct payload_info *info)
{
	dos_init(info->mmio_base_gpa, VIO_ID_VSOCK);
	dos_queue(1, &vq1);
	dos_driver_ok();
	cid_pkt = (struct vsock_hdr){.src_cid = 7,
				     .dst_cid = 2,
				     .src_port = 5000,
				     .dst_port = 5000,
				     .type = VSOCK_TYPE_STR,
				     .op = VSOCK_OP_REQUEST,
				     .buf_alloc = 65536};
	dos_fill_table(&cid_pkt, VSOCK_HDR_LEN, false);
	dos_offer_all(1, &vq1);
	uart_puts("dos: vsock-cid flooding\n");
	for (;;)
		vq_recycle(1, &vq1);
}
#elif DOS_CASE == DOS_VSOCK_CONNS
static uint8_t rx_buf[VQ_SIZE][VSOCK_RX_LEN];
static struct vsock_hdr tx_pkt[VQ_SIZE];
static uint16_t tx_free[VQ_SIZE]; /* a stack of free tx descriptors */
static unsigned tx_nfree;
static uint64_t n_requests, n_shutdowns, n_resets, n_events;

static void conns_report(void)
{
	uart_puts("dos: conns requests=");
	uart_put_dec(n_requests);
	uart_puts(" shutdowns=");
	uart_put_dec(n_shutdowns);
	uart_puts(" resets=");
	uart_put_dec(n_resets);
	uart_puts("\n");
}

/* Answer the host's OP_REQUEST `h` with OP_RESPONSE (dropped when no tx slot is free: the
 * host then gives up on that connection after its handshake timeout). */
static bool conns_respond(const struct vsock_hdr *h)
{
	uint16_t i;

	if (!tx_nfree)
		return false;
	i = tx_free[--tx_nfree];
	tx_pkt[i] = (struct vsock_hdr){.src_cid = 3,
				       .dst_cid = 2,
				       .src_port = h->dst_port,
				       .dst_port = h->src_port,
				       .type = VSOCK_TYPE_STR,
				       .op = VSOCK_OP_RESP,
				       .buf_alloc = 65536};
	vq_post(&vq1, i, &tx_pkt[i], VSOCK_HDR_LEN, 0);
	return true;
}

static void dos_run(const struct payload_info *info)
{
	dos_init(info->mmio_base_gpa, VIO_ID_VSOCK);
	dos_queue(0, &vq0);
	dos_queue(1, &vq1);
	dos_driver_ok();
	for (uint16_t i = 0; i < VQ_SIZE; i++) {
		vq_post(&vq0, i, rx_buf[i], VSOCK_RX_LEN, DESC_F_WRITE);
		tx_free[tx_nfree++] = i;
	}
	vq_kick(vio_base, 0, &vq0);
	uart_puts("dos: vsock-conns flooding\n");
	for (;;) {
		unsigned rx_back = 0, tx_added = 0;
		uint16_t id;
		uint32_t len;

		while (vq_next_used(&vq1, &id, NULL))
			tx_free[tx_nfree++] = id;
		while (vq_next_used(&vq0, &id, &len)) {
			const struct vsock_hdr *h = (const struct vsock_hdr *)rx_buf[id % VQ_SIZE];

			if (len >= VSOCK_HDR_LEN) {
				if (h->op == VSOCK_OP_REQUEST) {
					n_requests++;
					tx_added += conns_respond(h);
				} else if (h->op == VSOCK_OP_SHUT) {
					n_shutdowns++; /* ignored: the guest never closes */
				} else if (h->op == VSOCK_OP_RST) {
					n_resets++;
				}
				if (++n_events % 256 == 0)
					conns_report();
			}
			vq_offer(&vq0, id);
			rx_back++;
		}
		if (tx_added)
			vq_kick(vio_base, 1, &vq1);
		if (rx_back)
			vq_kick(vio_base, 0, &vq0);
	}
}
#elif DOS_CASE == DOS_CONSOLE
static void dos_run(const struct payload_info *info)
{
	uart_puts("dos: console flooding\n");
	for (unsigned n = 0;; n++)
		mmio_write8(PAYLOAD_UART_GPA, (n % 64 == 63) ? '\n' : (uint8_t)('a' + n % 26));
}
#else
#error "unknown DOS_CASE"
#endif

void payload_main(uint32_t cpu, uint32_t ncpus, const struct payload_info *info)
{
	if (cpu != 0)
		cpu_spin_forever();
	if (rt_check_info(info, "dos") < 0)
		poweroff();
	dos_run(info);
	poweroff();
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * payload-snap: the guest of the snapshot, restore and fork tests and of their benchmark.
 *
 * vCPU 0 fills guest RAM from SNAP_FILL_GPA to the end of the first RAM range (below 3 GiB
 * and below the vCPU stacks, rounded down to a MiB) with a pattern, every 8-byte word at
 * guest-physical g holding g ^ seed, and prints "snap: ready mib=<n> seed=<hex>". vCPU 1
 * counts in a loop forever (with one vCPU, vCPU 0 counts in its polling loop); others spin.
 *
 * vCPU 0 then serves virtio-vsock port SNAP_PORT on the first virtio-mmio window, polling
 * (IF is 0 and there is no IDT), with VERSION_1 only: three 16-entry queues in .bss, rx and
 * event kept full. A host client connects through the VMM's unix socket ("CONNECT 1234\n")
 * and sends lines, each answered by one line:
 *   ping        -> pong counter=<decimal> seed=<hex>
 *   check       -> check ok mib=<n> | check bad at=<hex gpa> got=<hex> want=<hex>
 *   seed <hex>  -> seed ok <hex> (the whole pattern rewritten with the new seed)
 *   rand        -> rand <16 hex digits> (rdrand) | rand rdtsc <16 hex digits>
 *   otherwise   -> error unknown command (error bad seed, error line too long)
 * Hex is lower case without "0x" (a seed may be given with one). Up to SNAP_CONN_MAX clients
 * at once; a client's SHUTDOWN or RST ends its connection.
 *
 * TRANSPORT_RESET on the event queue (what a restore sends) prints "snap: transport reset"
 * and forgets every connection, as a driver must; the queues and their buffers stay (the
 * VMM's snapshot gives back the rx buffers its device held). Whatever
 * the device hands back is checked before use: a bad used element is skipped with a
 * "snap: warn ..." line; a broken used ring or NEEDS_RESET also gets the device set up again.
 */
#include <stdbool.h>

/* Each queue's size: rx and event are kept full, so this bounds the packets in flight. */
#define VQ_SIZE 16

#include "rt.h"
#include "vq.h"

#define VIO_ID_VSOCK 19u

/* virtio-vsock (virtio 1.2, 5.10; <linux/virtio_vsock.h>). */
#define VSOCK_HOST_CID		    2u
#define VSOCK_GUEST_CID		    3u
#define VSOCK_TYPE_STREAM	    1u
#define VSOCK_OP_REQUEST	    1u
#define VSOCK_OP_RESPONSE	    2u
#define VSOCK_OP_RST		    3u
#define VSOCK_OP_SHUTDOWN	    4u
#define VSOCK_OP_RW		    5u
#define VSOCK_OP_CREDIT_UPDATE	    6u
#define VSOCK_OP_CREDIT_REQUEST	    7u
#define VSOCK_EVENT_TRANSPORT_RESET 0u
#define VSOCK_RX_Q		    0u
#define VSOCK_TX_Q		    1u
#define VSOCK_EVENT_Q		    2u
#define VSOCK_NQUEUES		    3u

#define SNAP_PORT	  1234u
#define SNAP_RX_DATA_LEN  4096u
#define SNAP_TX_DATA_LEN  128u /* the longest reply is 73 bytes */
#define SNAP_EVENT_LEN	  8u
#define SNAP_BUF_ALLOC	  (64u * 1024) /* our buf_alloc: we consume every byte at once */
#define SNAP_CONN_MAX	  8u
#define SNAP_LINE_MAX	  128u
#define SNAP_WARN_MAX	  32u	     /* warnings printed; later ones are not */
#define SNAP_TX_WAIT	  (1u << 24) /* polls for a free tx buffer (about a second) */
#define SNAP_STATUS_EVERY (1u << 18) /* polling passes between two looks at Status */

#define SNAP_FILL_GPA	0x4000000ull  /* 64 MiB */
#define SNAP_FILL_MIN	0x4800000ull  /* 72 MiB: a fill range ending below is left empty */
#define SNAP_FILL_LIMIT 0xc0000000ull /* 3 GiB */
#define SNAP_SEED	0x5eed000000000000ull
#define MIB		(1ull << 20)

/* struct virtio_vsock_hdr: little-endian like x86, so its fields are used as they are. */
struct vsock_hdr {
	uint64_t src_cid, dst_cid;
	uint32_t src_port, dst_port, len;
	uint16_t type, op;
	uint32_t flags, buf_alloc, fwd_cnt;
} __attribute__((packed));
_Static_assert(sizeof(struct vsock_hdr) == 44, "the packet header is 44 bytes");

struct snap_rx_buf {
	struct vsock_hdr hdr;
	uint8_t data[SNAP_RX_DATA_LEN];
} __attribute__((packed));

struct snap_tx_buf {
	struct vsock_hdr hdr;
	char data[SNAP_TX_DATA_LEN];
} __attribute__((packed));

/* A connection from the host, found by its port (the host is CID 2, we are SNAP_PORT). */
struct snap_conn {
	bool open;
	bool line_long; /* the line passed SNAP_LINE_MAX: dropped up to its newline */
	uint32_t peer_port;
	uint32_t peer_buf_alloc, peer_fwd_cnt; /* the host's credit, from its last packet */
	uint32_t tx_cnt;		       /* payload bytes we sent */
	uint32_t fwd_cnt, fwd_cnt_sent;	       /* payload bytes consumed; the host heard */
	uint32_t line_len;
	char line[SNAP_LINE_MAX];
};

/* A reply being built. */
struct snap_out {
	uint32_t len;
	char buf[SNAP_TX_DATA_LEN];
};

static struct vq snap_vqs[VSOCK_NQUEUES];
static struct snap_rx_buf snap_rx[VQ_SIZE] __attribute__((aligned(64)));
static struct snap_tx_buf snap_tx[VQ_SIZE] __attribute__((aligned(64)));
static uint64_t snap_events[VQ_SIZE];
static struct snap_conn snap_conns[SNAP_CONN_MAX];

static uint64_t vio_base;
static uint64_t fill_end_gpa; /* the pattern covers [SNAP_FILL_GPA, fill_end_gpa) */
static uint64_t snap_seed = SNAP_SEED;
static uint64_t snap_counter; /* written by one vCPU only */
static unsigned snap_warns;
static const char *snap_broken; /* why the device must be set up again, or NULL */
static bool snap_event_reset;	/* TRANSPORT_RESET came: set the device up again */

extern char __payload_end[]; /* rt/payload.ld */

/* Prints "snap: warn <what> 0x<val>", the first SNAP_WARN_MAX times. */
static void snap_warn(const char *what, uint64_t val)
{
	if (snap_warns >= SNAP_WARN_MAX)
		return;
	uart_puts("snap: warn ");
	uart_puts(what);
	uart_puts(" 0x");
	uart_put_hex(val);
	uart_puts(++snap_warns == SNAP_WARN_MAX ? "\nsnap: warn (no more warnings)\n" : "\n");
}

/* Prints "snap: FAIL <why>" and ends the VM. */
__attribute__((noreturn)) static void snap_fail(const char *why)
{
	uart_puts("snap: FAIL ");
	uart_puts(why);
	uart_puts("\n");
	poweroff();
}

/* Appends s to the reply (cut at its end: every reply fits). */
static void out_str(struct snap_out *o, const char *s)
{
	while (*s && o->len < SNAP_TX_DATA_LEN)
		o->buf[o->len++] = *s++;
}

/* Appends val in base 10 or 16, at least `width` digits (zero-padded). */
static void out_num(struct snap_out *o, uint64_t val, unsigned base, int width)
{
	char s[21]; /* 2^64 - 1 has 20 decimal digits */
	int n = 20;

	s[n] = '\0';
	do {
		s[--n] = "0123456789abcdef"[val % base];
		val /= base;
	} while (val || 20 - n < width);
	out_str(o, s + n);
}

/* Writes the pattern for `seed` over the whole fill range, a word at a time. */
static void snap_fill(uint64_t seed)
{
	for (uint64_t g = SNAP_FILL_GPA; g < fill_end_gpa; g += 8)
		*(volatile uint64_t *)g = g ^ seed;
}

/* Checks the pattern for the current seed: 0, or -1 with the first bad word. */
static int snap_check(uint64_t *bad_gpa, uint64_t *got)
{
	for (uint64_t g = SNAP_FILL_GPA; g < fill_end_gpa; g += 8) {
		uint64_t v = *(volatile const uint64_t *)g;

		if (v != (g ^ snap_seed)) {
			*bad_gpa = g;
			*got = v;
			return -1;
		}
	}
	return 0;
}

/*
 * Takes the next used element of queue qi (vq_take_used): 1 with *id and *len, 0 when none
 * waits, -1 for a bad element (warned; a used index ahead of what we offered also sets
 * snap_broken).
 */
static int snap_take_used(unsigned qi, uint32_t *id, uint32_t *len)
{
	const char *why;
	int r = vq_take_used(&snap_vqs[qi], id, len, &why);

	if (r == VQ_USED_BROKEN) {
		snap_warn(why, qi);
		snap_broken = "a used ring broke";
	} else if (r == VQ_USED_BAD) {
		snap_warn(why, *id);
	}
	return r < 0 ? -1 : r;
}

/* Notifies the device of queue qi if buffers were offered since the last time. */
static void snap_kick(unsigned qi)
{
	vq_kick(vio_base, qi, &snap_vqs[qi]);
}

/* Offers rx buffer i (again). */
static void snap_rx_post(uint16_t i)
{
	vq_post(&snap_vqs[VSOCK_RX_Q], i, &snap_rx[i], sizeof(snap_rx[i]), DESC_F_WRITE);
}

/* Offers event buffer i (again), poisoned so that only the device makes it an event. */
static void snap_event_post(uint16_t i)
{
	snap_events[i] = ~0ull;
	vq_post(&snap_vqs[VSOCK_EVENT_Q], i, &snap_events[i], SNAP_EVENT_LEN, DESC_F_WRITE);
}

/*
 * Resets the device and brings it up as a driver does: VERSION_1 only, the three queues,
 * every rx and event buffer offered, DRIVER_OK. Every connection is forgotten, and every
 * buffer is ours again. NULL or why not.
 */
static const char *snap_dev_init(void)
{
	const char *why;

	memset(snap_conns, 0, sizeof(snap_conns));
	snap_broken = NULL;
	snap_event_reset = false;
	if ((why = vio_init(vio_base, VIO_ID_VSOCK, 1ull << VIO_F_VERSION_1)) != NULL)
		return why;
	if (vio_read(vio_base, VIO_CONFIG) != VSOCK_GUEST_CID ||
	    vio_read(vio_base, VIO_CONFIG + 4) != 0)
		return "guest_cid is not 3";
	for (unsigned qi = 0; qi < VSOCK_NQUEUES; qi++) {
		if ((why = vio_queue(vio_base, qi, &snap_vqs[qi])) != NULL)
			return why;
	}
	for (uint16_t i = 0; i < VQ_SIZE; i++) {
		snap_rx_post(i);
		snap_event_post(i);
	}
	if ((why = vio_driver_ok(vio_base)) != NULL)
		return why;
	snap_kick(VSOCK_RX_Q);
	snap_kick(VSOCK_EVENT_Q);
	return NULL;
}

/* A free tx descriptor, waiting a bounded time for the device to give one back; or -1. */
static int snap_tx_slot(void)
{
	uint32_t id, len;

	for (uint32_t spin = 0; spin < SNAP_TX_WAIT && !snap_broken; spin++) {
		int free = vq_free_id(&snap_vqs[VSOCK_TX_Q]);

		if (free >= 0)
			return free;
		snap_take_used(VSOCK_TX_Q, &id, &len);
		cpu_relax();
	}
	return -1;
}

/*
 * Sends one packet from our port src_port to host port dst_port with len bytes of data and
 * our buf_alloc and fwd_cnt, and kicks the tx queue. 0, or -1 when no tx buffer came free
 * (warned: the packet is lost).
 */
static int snap_send(uint32_t src_port, uint32_t dst_port, uint16_t op, uint32_t fwd_cnt,
		     const char *data, uint32_t len)
{
	int slot = snap_tx_slot();
	struct snap_tx_buf *b = &snap_tx[slot < 0 ? 0 : slot];

	if (slot < 0) {
		snap_warn("no tx buffer came back: dropped a packet of op", op);
		return -1;
	}
	b->hdr = (struct vsock_hdr){
		.src_cid = VSOCK_GUEST_CID,
		.dst_cid = VSOCK_HOST_CID,
		.src_port = src_port,
		.dst_port = dst_port,
		.len = len,
		.type = VSOCK_TYPE_STREAM,
		.op = op,
		.buf_alloc = SNAP_BUF_ALLOC,
		.fwd_cnt = fwd_cnt,
	};
	if (len)
		memcpy(b->data, data, len);
	vq_post(&snap_vqs[VSOCK_TX_Q], (uint16_t)slot, b, (uint32_t)sizeof(b->hdr) + len, 0);
	snap_kick(VSOCK_TX_Q);
	return 0;
}

/* Sends a control packet (op, no data) on c, or forgets c when it cannot be sent. */
static void snap_conn_ctl(struct snap_conn *c, uint16_t op)
{
	c->fwd_cnt_sent = c->fwd_cnt;
	if (snap_send(SNAP_PORT, c->peer_port, op, c->fwd_cnt, NULL, 0) < 0)
		c->open = false; /* the stream is broken: let the host time out */
}

/* Ends c with an RST and forgets it. */
static void snap_conn_reset(struct snap_conn *c)
{
	snap_conn_ctl(c, VSOCK_OP_RST);
	c->open = false;
}

/* Sends the line in o, a newline appended, on c within the host's credit; or resets c. */
static void snap_conn_reply(struct snap_conn *c, struct snap_out *o)
{
	uint32_t in_flight = c->tx_cnt - c->peer_fwd_cnt;
	uint32_t credit = in_flight >= c->peer_buf_alloc ? 0 : c->peer_buf_alloc - in_flight;

	out_str(o, "\n");
	if (credit < o->len) {
		snap_warn("the host has no credit for a reply: reset port", c->peer_port);
		snap_conn_reset(c);
		return;
	}
	c->fwd_cnt_sent = c->fwd_cnt;
	if (snap_send(SNAP_PORT, c->peer_port, VSOCK_OP_RW, c->fwd_cnt, o->buf, o->len) < 0)
		c->open = false;
	else
		c->tx_cnt += o->len;
}

/* Whether line (len bytes) is exactly word. */
static bool line_is(const char *line, uint32_t len, const char *word)
{
	uint32_t n = 0;

	while (word[n])
		n++;
	return len == n && memcmp(line, word, n) == 0;
}

/* Parses s[0..len) as 1-16 hex digits after an optional "0x". 0 or -1. */
static int parse_hex(const char *s, uint32_t len, uint64_t *val)
{
	if (len > 2 && s[0] == '0' && (s[1] | 0x20) == 'x') {
		s += 2;
		len -= 2;
	}
	if (len == 0 || len > 16)
		return -1;
	*val = 0;
	for (uint32_t i = 0; i < len; i++) {
		char ch = (char)(s[i] | 0x20); /* lower case for letters; digits unchanged */

		if (ch >= '0' && ch <= '9')
			*val = *val << 4 | (uint64_t)(ch - '0');
		else if (ch >= 'a' && ch <= 'f')
			*val = *val << 4 | (uint64_t)(ch - 'a' + 10);
		else
			return -1;
	}
	return 0;
}

/* 64 bits from rdrand; false when CPUID says there is none or it keeps failing. */
static bool snap_rdrand(uint64_t *val)
{
	uint32_t ecx;
	uint8_t ok = 0;

	cpu_cpuid(1, NULL, NULL, &ecx, NULL);
	for (int i = 0; (ecx & (1u << 30)) && !ok && i < 10; i++)
		__asm__ volatile("rdrand %0; setc %1" : "=r"(*val), "=qm"(ok));
	return ok;
}

/* Runs one command (line, len bytes, its newline cut) and answers it on c. */
static void snap_conn_command(struct snap_conn *c, const char *line, uint32_t len)
{
	struct snap_out o = {0};
	uint64_t gpa = 0, got = 0, val;
	uint32_t lo, hi;

	if (line_is(line, len, "ping")) {
		out_str(&o, "pong counter=");
		out_num(&o, __atomic_load_n(&snap_counter, __ATOMIC_RELAXED), 10, 1);
		out_str(&o, " seed=");
		out_num(&o, snap_seed, 16, 1);
	} else if (line_is(line, len, "check")) {
		if (snap_check(&gpa, &got) == 0) {
			out_str(&o, "check ok mib=");
			out_num(&o, (fill_end_gpa - SNAP_FILL_GPA) / MIB, 10, 1);
		} else {
			out_str(&o, "check bad at=");
			out_num(&o, gpa, 16, 1);
			out_str(&o, " got=");
			out_num(&o, got, 16, 1);
			out_str(&o, " want=");
			out_num(&o, gpa ^ snap_seed, 16, 1);
		}
	} else if (len >= 5 && memcmp(line, "seed ", 5) == 0) {
		if (parse_hex(line + 5, len - 5, &val) == 0) {
			snap_seed = val;
			snap_fill(snap_seed);
			out_str(&o, "seed ok ");
			out_num(&o, snap_seed, 16, 1);
		} else {
			out_str(&o, "error bad seed");
		}
	} else if (line_is(line, len, "rand")) {
		if (snap_rdrand(&val)) {
			out_str(&o, "rand ");
		} else {
			__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
			val = (uint64_t)hi << 32 | lo;
			out_str(&o, "rand rdtsc ");
		}
		out_num(&o, val, 16, 16);
	} else {
		out_str(&o, "error unknown command");
	}
	snap_conn_reply(c, &o);
}

/* Takes len bytes of c's stream: each line completed is run. */
static void snap_conn_data(struct snap_conn *c, const uint8_t *data, uint32_t len)
{
	c->fwd_cnt += len; /* consumed now: copied into the line or dropped */
	for (uint32_t i = 0; i < len && c->open; i++) {
		if (data[i] != '\n') {
			if (c->line_len < SNAP_LINE_MAX)
				c->line[c->line_len++] = (char)data[i];
			else
				c->line_long = true;
			continue;
		}
		if (c->line_len && c->line[c->line_len - 1] == '\r')
			c->line_len--;
		if (c->line_long) {
			struct snap_out o = {0};

			out_str(&o, "error line too long");
			snap_conn_reply(c, &o);
		} else {
			snap_conn_command(c, c->line, c->line_len);
		}
		c->line_len = 0;
		c->line_long = false;
	}
	/* No reply told the host of the room freed, and it may run short: tell it now. */
	if (c->open && c->fwd_cnt - c->fwd_cnt_sent >= SNAP_BUF_ALLOC / 2)
		snap_conn_ctl(c, VSOCK_OP_CREDIT_UPDATE);
}

/*
 * The open connection from host port `port`, or NULL. With `open`, a fresh connection instead
 * (replacing the one that port had), or NULL when the table is full.
 */
static struct snap_conn *snap_conn_get(uint32_t port, bool open)
{
	struct snap_conn *c = NULL;

	for (unsigned i = 0; i < SNAP_CONN_MAX; i++) {
		if (snap_conns[i].open && snap_conns[i].peer_port == port) {
			c = &snap_conns[i];
			break;
		}
		if (open && !c && !snap_conns[i].open)
			c = &snap_conns[i];
	}
	if (c && open)
		*c = (struct snap_conn){.open = true, .peer_port = port};
	return c;
}

/* One packet the device put in rx buffer b, used_len bytes of it. */
static void snap_rx_packet(const struct snap_rx_buf *b, uint32_t used_len)
{
	struct vsock_hdr h = b->hdr;
	bool request = h.op == VSOCK_OP_REQUEST && h.dst_port == SNAP_PORT;
	struct snap_conn *c;

	if (used_len < sizeof(h) || used_len > sizeof(*b) || h.len > used_len - sizeof(h)) {
		snap_warn("rx packet longer than its used len, or that than the buffer:", used_len);
		return;
	}
	if (h.src_cid != VSOCK_HOST_CID || h.dst_cid != VSOCK_GUEST_CID ||
	    h.type != VSOCK_TYPE_STREAM) {
		snap_warn("rx packet not a host-to-guest stream packet: op", h.op);
		return;
	}
	c = h.dst_port == SNAP_PORT ? snap_conn_get(h.src_port, request) : NULL;
	if (!c) {
		/* Nobody listens there, the table is full, or the connection is gone. */
		if (request)
			snap_warn("connection table full: refused host port", h.src_port);
		if (h.op != VSOCK_OP_RST)
			snap_send(h.dst_port, h.src_port, VSOCK_OP_RST, 0, NULL, 0);
		return;
	}
	c->peer_buf_alloc = h.buf_alloc;
	c->peer_fwd_cnt = h.fwd_cnt;
	switch (h.op) {
	case VSOCK_OP_REQUEST:
		snap_conn_ctl(c, VSOCK_OP_RESPONSE);
		break;
	case VSOCK_OP_RW:
		snap_conn_data(c, b->data, h.len);
		break;
	case VSOCK_OP_CREDIT_UPDATE:
		break; /* the credit fields above were the point */
	case VSOCK_OP_CREDIT_REQUEST:
		snap_conn_ctl(c, VSOCK_OP_CREDIT_UPDATE);
		break;
	case VSOCK_OP_RST:
		c->open = false;
		break;
	default: /* SHUTDOWN (every reply is sent already), RESPONSE, unknown ops */
		if (h.op != VSOCK_OP_SHUTDOWN)
			snap_warn("unexpected op: reset, op", h.op);
		snap_conn_reset(c);
		break;
	}
}

/* An event the device put in event buffer i, len bytes of it. */
static void snap_event(uint32_t i, uint32_t len)
{
	if (len < 4 || len > SNAP_EVENT_LEN)
		snap_warn("event used len out of bounds:", len);
	else if ((uint32_t)snap_events[i] == VSOCK_EVENT_TRANSPORT_RESET)
		snap_event_reset = true;
	else
		snap_warn("unknown event id", (uint32_t)snap_events[i]);
}

/*
 * One polling pass over the used rings, at most a queue's worth of each: tx buffers are free
 * again, rx packets served and their buffers offered again, events noted (and offered again).
 */
static void snap_poll(void)
{
	/* Events first, and the connections forgotten before rx is looked at again: the event
	 * buffer goes back (snap_event_post) before the forgetting, and the VMM sends the
	 * requests of host clients that connected after a restore only once it has come back
	 * (vmm/virtio/vsock.c, vsock_reset_ack_check), so they are taken after it. That, not
	 * this order, is what keeps them: a restored vCPU resumes where the snapshot paused it,
	 * often in the rx loop below (after a kick), with this pass's look at events behind it. */
	static const unsigned order[VSOCK_NQUEUES] = {VSOCK_EVENT_Q, VSOCK_RX_Q, VSOCK_TX_Q};
	uint32_t id, len;

	for (unsigned o = 0; o < VSOCK_NQUEUES; o++) {
		unsigned qi = order[o];

		if (qi == VSOCK_RX_Q && snap_event_reset && !snap_broken) {
			snap_event_reset = false;
			memset(snap_conns, 0, sizeof(snap_conns));
			uart_puts("snap: transport reset\n");
		}
		for (unsigned n = 0; n < VQ_SIZE && !snap_broken; n++) {
			int r = snap_take_used(qi, &id, &len);

			if (r == 0)
				break;
			if (r < 0 || qi == VSOCK_TX_Q)
				continue;
			if (qi == VSOCK_RX_Q) {
				snap_rx_packet(&snap_rx[id], len);
				snap_rx_post((uint16_t)id);
			} else {
				snap_event(id, len);
				snap_event_post((uint16_t)id);
			}
		}
		snap_kick(qi);
	}
}

/*
 * vCPU 0 from now on: polls forever (counting too with one vCPU) and now and then looks
 * whether the device wants a reset. TRANSPORT_RESET (a restore) drops every connection; a
 * broken ring or NEEDS_RESET gets the device reset and set up again.
 */
__attribute__((noreturn)) static void snap_serve(bool count)
{
	const char *why;

	for (uint32_t pass = 1;; pass++) {
		if (count)
			__atomic_store_n(&snap_counter, snap_counter + 1, __ATOMIC_RELAXED);
		snap_poll();
		if (!snap_broken && pass % SNAP_STATUS_EVERY == 0 &&
		    (vio_read(vio_base, VIO_STATUS) & VIO_S_RESET))
			snap_broken = "the device wants a reset";
		if (snap_broken) {
			snap_warn(snap_broken, 0);
			if ((why = snap_dev_init()) != NULL)
				snap_fail(why);
		}
		cpu_relax();
	}
}

/* vCPU 1: the counter, forever. */
__attribute__((noreturn)) static void snap_count_forever(void)
{
	for (;;) {
		__atomic_store_n(&snap_counter,
				 __atomic_load_n(&snap_counter, __ATOMIC_RELAXED) + 1,
				 __ATOMIC_RELAXED);
		cpu_relax();
	}
}

/*
 * Where the pattern ends: the end of the first RAM range, below 3 GiB, the vCPU stacks and
 * the identity map, rounded down to a MiB; SNAP_FILL_GPA (nothing) below SNAP_FILL_MIN.
 */
static uint64_t snap_fill_end(const struct payload_info *info)
{
	uint64_t end = info->ram[0].gpa + info->ram[0].len;

	if (info->nranges == 0 || info->ram[0].gpa > SNAP_FILL_GPA)
		return SNAP_FILL_GPA;
	if (end > SNAP_FILL_LIMIT)
		end = SNAP_FILL_LIMIT;
	if (end > info->stacks_gpa)
		end = info->stacks_gpa;
	if (end > info->map_end)
		end = info->map_end;
	end &= ~(MIB - 1);
	return end < SNAP_FILL_MIN ? SNAP_FILL_GPA : end;
}

void payload_main(uint32_t cpu, uint32_t ncpus, const struct payload_info *info)
{
	const char *why;

	if (cpu == 1)
		snap_count_forever();
	if (cpu != 0)
		cpu_spin_forever();
	if (rt_check_info(info, "snap") != 0)
		poweroff();
	if ((uintptr_t)__payload_end > SNAP_FILL_GPA)
		snap_fail("the payload reaches into the fill range");
	vio_base = info->mmio_base_gpa;
	if (!vio_base)
		snap_fail("no vsock device");
	if ((why = snap_dev_init()) != NULL)
		snap_fail(why);
	fill_end_gpa = snap_fill_end(info);
	snap_fill(snap_seed);
	uart_puts("snap: ready mib=");
	uart_put_dec((fill_end_gpa - SNAP_FILL_GPA) / MIB);
	uart_puts(" seed=");
	uart_put_hex(snap_seed);
	uart_puts("\n");
	snap_serve(ncpus < 2);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * payload-soak: the guest of the vsock soak (tools/bench/vsock_soak.c, tests/integration/
 * vsock_many.py). vCPU 0 serves virtio-vsock port SOAK_PORT on the first virtio-mmio window,
 * polling (IF is 0, no IDT), VERSION_1 only, with SOAK_CONN_MAX connections at once; other
 * vCPUs spin. The commands (SEND, RECV, ECHO) and the checksum are soak_wire.h's.
 *
 * Built for throughput as far as a polling ring-3 driver goes: 64 KiB rx and tx buffers
 * (VSOCK_PKT_MAX, the most one packet carries), VQ_SIZE (32) of each, and a 256 KiB buf_alloc
 * per connection. Data the host streams for RECV is consumed as it comes; for ECHO it waits
 * in the connection's ring until it is sent back, and fwd_cnt (the host's credit) advances
 * only then, so the ring cannot overflow unless the host ignores our credit (then: RST).
 *
 * Prints "soak: ready port=5000" once the device is up. Whatever the device hands back is
 * checked before use; a bad used element is skipped with a "soak: warn ..." line, a broken
 * ring or NEEDS_RESET gets the device set up again (every connection lost).
 */
#include <stdbool.h>

/* Each queue's size: rx and tx buffers of 64 KiB each, 2 MiB of them in flight each way. */
#define VQ_SIZE 32

#include "rt.h"
#include "soak_wire.h"
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

#define SOAK_DATA_LEN	  (64u * 1024) /* an rx or tx buffer's payload: VSOCK_PKT_MAX */
#define SOAK_EVENT_LEN	  8u
#define SOAK_BUF_ALLOC	  (256u * 1024) /* our buf_alloc, and an ECHO ring's size */
#define SOAK_CONN_MAX	  8u
#define SOAK_WARN_MAX	  32u	     /* warnings printed; later ones are not */
#define SOAK_TX_WAIT	  (1u << 24) /* polls for a free tx buffer for a control packet */
#define SOAK_STATUS_EVERY (1u << 18) /* polling passes between two looks at Status */

_Static_assert((SOAK_BUF_ALLOC & (SOAK_BUF_ALLOC - 1)) == 0, "the echo ring wraps by mask");

/* struct virtio_vsock_hdr: little-endian like x86, so its fields are used as they are. */
struct vsock_hdr {
	uint64_t src_cid, dst_cid;
	uint32_t src_port, dst_port, len;
	uint16_t type, op;
	uint32_t flags, buf_alloc, fwd_cnt;
} __attribute__((packed));
_Static_assert(sizeof(struct vsock_hdr) == 44, "the packet header is 44 bytes");

/* An rx or a tx buffer: one descriptor, header and payload. */
struct soak_buf {
	struct vsock_hdr hdr;
	uint8_t data[SOAK_DATA_LEN];
} __attribute__((packed));

enum soak_mode {
	SOAK_LINE, /* reading a command line */
	SOAK_SEND, /* sending `left` bytes of the pattern */
	SOAK_RECV, /* taking `left` bytes */
	SOAK_ECHO, /* taking `left` bytes and sending them back */
};

/* What each mode's answer line starts with (soak_wire.h). */
static const char *const soak_answer[] = {
	[SOAK_SEND] = "SENT",
	[SOAK_RECV] = "RECVD",
	[SOAK_ECHO] = "ECHOED",
};

/* A connection from the host, found by its port (the host is CID 2, we are SOAK_PORT). */
struct soak_conn {
	bool open;
	enum soak_mode mode;
	uint32_t peer_port;
	uint32_t peer_buf_alloc, peer_fwd_cnt; /* the host's credit, from its last packet */
	uint32_t tx_cnt;		       /* payload bytes we sent */
	uint32_t fwd_cnt, fwd_cnt_sent;	       /* payload bytes consumed; the host heard */
	uint64_t n, left;		       /* the command's byte count, what is left of it */
	uint64_t seed, sent;		       /* SEND: the pattern, the bytes sent of it */
	struct soak_sum sum;
	uint32_t line_len;
	char line[SOAK_LINE_MAX];
	uint32_t reply_len; /* an answer owed, sent when credit allows */
	char reply[SOAK_LINE_MAX];
	uint32_t ring_head, ring_len; /* ECHO: bytes waiting in ring[], from ring_head */
	uint8_t ring[SOAK_BUF_ALLOC];
};

static struct vq soak_vqs[VSOCK_NQUEUES];
static struct soak_buf soak_rx[VQ_SIZE] __attribute__((aligned(64)));
static struct soak_buf soak_tx[VQ_SIZE] __attribute__((aligned(64)));
static uint64_t soak_events[VQ_SIZE];
static struct soak_conn soak_conns[SOAK_CONN_MAX];

static uint64_t vio_base;
static unsigned soak_warns;
static const char *soak_broken; /* why the device must be set up again, or NULL */

/* Prints "soak: warn <what> 0x<val>", the first SOAK_WARN_MAX times. */
static void soak_warn(const char *what, uint64_t val)
{
	if (soak_warns >= SOAK_WARN_MAX)
		return;
	uart_puts("soak: warn ");
	uart_puts(what);
	uart_puts(" 0x");
	uart_put_hex(val);
	uart_puts(++soak_warns == SOAK_WARN_MAX ? "\nsoak: warn (no more warnings)\n" : "\n");
}

/* Prints "soak: FAIL <why>" and ends the VM. */
__attribute__((noreturn)) static void soak_fail(const char *why)
{
	uart_puts("soak: FAIL ");
	uart_puts(why);
	uart_puts("\n");
	poweroff();
}

/*
 * Takes the next used element of queue qi (vq_take_used): 1 with *id and *len, 0 when none
 * waits, -1 for a bad element (warned; a used index ahead of what we offered also sets
 * soak_broken).
 */
static int soak_take_used(unsigned qi, uint32_t *id, uint32_t *len)
{
	const char *why;
	int r = vq_take_used(&soak_vqs[qi], id, len, &why);

	if (r == VQ_USED_BROKEN) {
		soak_warn(why, qi);
		soak_broken = "a used ring broke";
	} else if (r == VQ_USED_BAD) {
		soak_warn(why, *id);
	}
	return r < 0 ? -1 : r;
}

/* Notifies the device of queue qi if buffers were offered since the last time. */
static void soak_kick(unsigned qi)
{
	vq_kick(vio_base, qi, &soak_vqs[qi]);
}

/* Offers rx buffer i (again). */
static void soak_rx_post(uint16_t i)
{
	vq_post(&soak_vqs[VSOCK_RX_Q], i, &soak_rx[i], sizeof(soak_rx[i]), DESC_F_WRITE);
}

/* Offers event buffer i (again), poisoned so that only the device makes it an event. */
static void soak_event_post(uint16_t i)
{
	soak_events[i] = ~0ull;
	vq_post(&soak_vqs[VSOCK_EVENT_Q], i, &soak_events[i], SOAK_EVENT_LEN, DESC_F_WRITE);
}

/* Forgets every connection. */
static void soak_conns_forget(void)
{
	for (unsigned i = 0; i < SOAK_CONN_MAX; i++)
		soak_conns[i].open = false;
}

/*
 * Resets the device and brings it up as a driver does: VERSION_1 only, the three queues,
 * every rx and event buffer offered, DRIVER_OK. Every connection is forgotten, and every
 * buffer is ours again. NULL or why not.
 */
static const char *soak_dev_init(void)
{
	const char *why;

	soak_conns_forget();
	soak_broken = NULL;
	if ((why = vio_init(vio_base, VIO_ID_VSOCK, 1ull << VIO_F_VERSION_1)) != NULL)
		return why;
	if (vio_read(vio_base, VIO_CONFIG) != VSOCK_GUEST_CID ||
	    vio_read(vio_base, VIO_CONFIG + 4) != 0)
		return "guest_cid is not 3";
	for (unsigned qi = 0; qi < VSOCK_NQUEUES; qi++) {
		if ((why = vio_queue(vio_base, qi, &soak_vqs[qi])) != NULL)
			return why;
	}
	for (uint16_t i = 0; i < VQ_SIZE; i++) {
		soak_rx_post(i);
		soak_event_post(i);
	}
	if ((why = vio_driver_ok(vio_base)) != NULL)
		return why;
	soak_kick(VSOCK_RX_Q);
	soak_kick(VSOCK_EVENT_Q);
	return NULL;
}

/*
 * A free tx buffer now (taking back what the device used), or -1. Not past a broken ring:
 * its used index stays ahead, and taking would fail the same way for ever.
 */
static int soak_tx_try(void)
{
	int free = vq_free_id(&soak_vqs[VSOCK_TX_Q]);
	uint32_t id, len;

	while (free < 0 && !soak_broken && soak_take_used(VSOCK_TX_Q, &id, &len) != 0)
		free = vq_free_id(&soak_vqs[VSOCK_TX_Q]);
	return free;
}

/* A free tx buffer, waiting a bounded time for the device to give one back; or -1. */
static int soak_tx_wait(void)
{
	for (uint32_t spin = 0; spin < SOAK_TX_WAIT && !soak_broken; spin++) {
		int slot = soak_tx_try();

		if (slot >= 0)
			return slot;
		cpu_relax();
	}
	return -1;
}

/* Fills tx buffer slot's header for a packet on c (or to a port pair) and sends it. */
static void soak_tx_send(int slot, uint32_t src_port, uint32_t dst_port, uint16_t op,
			 uint32_t fwd_cnt, uint32_t len)
{
	struct soak_buf *b = &soak_tx[slot];

	b->hdr = (struct vsock_hdr){
		.src_cid = VSOCK_GUEST_CID,
		.dst_cid = VSOCK_HOST_CID,
		.src_port = src_port,
		.dst_port = dst_port,
		.len = len,
		.type = VSOCK_TYPE_STREAM,
		.op = op,
		.buf_alloc = SOAK_BUF_ALLOC,
		.fwd_cnt = fwd_cnt,
	};
	vq_post(&soak_vqs[VSOCK_TX_Q], (uint16_t)slot, b, (uint32_t)sizeof(b->hdr) + len, 0);
	soak_kick(VSOCK_TX_Q);
}

/* Sends a control packet (no data) from port src to port dst, waiting a bounded time for a
 * tx buffer. 0, or -1 (warned: the packet is lost). */
static int soak_send_ctl(uint32_t src, uint32_t dst, uint16_t op, uint32_t fwd_cnt)
{
	int slot = soak_tx_wait();

	if (slot < 0) {
		soak_warn("no tx buffer came back: dropped a packet of op", op);
		return -1;
	}
	soak_tx_send(slot, src, dst, op, fwd_cnt, 0);
	return 0;
}

/* Sends a control packet on c, or forgets c when it cannot be sent. */
static void soak_conn_ctl(struct soak_conn *c, uint16_t op)
{
	c->fwd_cnt_sent = c->fwd_cnt;
	if (soak_send_ctl(SOAK_PORT, c->peer_port, op, c->fwd_cnt) < 0)
		c->open = false; /* the stream is broken: let the host time out */
}

/* Ends c with an RST and forgets it. */
static void soak_conn_reset(struct soak_conn *c, const char *why)
{
	soak_warn(why, c->peer_port);
	soak_conn_ctl(c, VSOCK_OP_RST);
	c->open = false;
}

/* The host's credit for c's data: bytes we may send now. */
static uint32_t soak_conn_credit(const struct soak_conn *c)
{
	uint32_t in_flight = c->tx_cnt - c->peer_fwd_cnt;

	return in_flight >= c->peer_buf_alloc ? 0 : c->peer_buf_alloc - in_flight;
}

/* Appends s to c's reply (cut at SOAK_LINE_MAX: every reply fits). */
static void reply_str(struct soak_conn *c, const char *s)
{
	while (*s && c->reply_len < SOAK_LINE_MAX)
		c->reply[c->reply_len++] = *s++;
}

/* Appends val in base 10 or 16, at least `width` digits (zero-padded). */
static void reply_num(struct soak_conn *c, uint64_t val, unsigned base, int width)
{
	char s[21]; /* 2^64 - 1 has 20 decimal digits */
	int n = 20;

	s[n] = '\0';
	do {
		s[--n] = "0123456789abcdef"[val % base];
		val /= base;
	} while (val || 20 - n < width);
	reply_str(c, s + n);
}

/* Owes the answer "<word> <n> <sum>" to the command that just ended, and a line next. */
static void soak_conn_done(struct soak_conn *c, const char *word)
{
	reply_str(c, word);
	reply_str(c, " ");
	reply_num(c, c->n, 10, 1);
	reply_str(c, " ");
	reply_num(c, soak_sum_final(&c->sum), 16, 16);
	reply_str(c, "\n");
	c->mode = SOAK_LINE;
}

/* Parses one decimal (base 10) or hex (base 16) field from *s (up to end), moving *s past it
 * and one space. 0 or -1. */
static int parse_field(const char **s, const char *end, unsigned base, uint64_t *val)
{
	const char *p = *s;

	*val = 0;
	for (; p < end && *p != ' '; p++) {
		char ch = (char)(*p | 0x20);
		unsigned d;

		if (ch >= '0' && ch <= '9')
			d = (unsigned)(ch - '0');
		else if (base == 16 && ch >= 'a' && ch <= 'f')
			d = (unsigned)(ch - 'a' + 10);
		else
			return -1;
		if (p - *s >= (base == 16 ? 16 : 19))
			return -1; /* too many digits for 64 bits */
		*val = *val * base + d;
	}
	if (p == *s)
		return -1;
	*s = p < end ? p + 1 : p;
	return 0;
}

/* Runs the command in c's line (its newline cut): a mode for the bytes that follow, or an
 * ERROR answer. */
static void soak_conn_command(struct soak_conn *c)
{
	const char *p = c->line, *end = c->line + c->line_len;
	uint64_t n = 0, seed = 0;
	enum soak_mode mode;

	if (c->line_len > 5 && memcmp(p, "SEND ", 5) == 0)
		mode = SOAK_SEND;
	else if (c->line_len > 5 && memcmp(p, "RECV ", 5) == 0)
		mode = SOAK_RECV;
	else if (c->line_len > 5 && memcmp(p, "ECHO ", 5) == 0)
		mode = SOAK_ECHO;
	else {
		reply_str(c, "ERROR unknown command\n");
		return;
	}
	p += 5;
	if (parse_field(&p, end, 10, &n) < 0 || n > SOAK_N_MAX ||
	    (mode == SOAK_SEND && parse_field(&p, end, 16, &seed) < 0) || p != end) {
		reply_str(c, "ERROR bad arguments\n");
		return;
	}
	c->mode = mode;
	c->n = c->left = n;
	c->seed = seed;
	c->sent = 0;
	soak_sum_init(&c->sum);
	if (n == 0) /* nothing to move: the answer at once */
		soak_conn_done(c, soak_answer[mode]);
}

/* Takes len bytes of a command line (up to and with its newline): 0, or -1 (c was reset). */
static int soak_conn_line(struct soak_conn *c, const uint8_t *data, uint32_t len)
{
	for (uint32_t i = 0; i < len; i++) {
		if (data[i] != '\n') {
			if (c->line_len + 1 >= SOAK_LINE_MAX) {
				soak_conn_reset(c, "command line too long: reset port");
				return -1;
			}
			c->line[c->line_len++] = (char)data[i];
			continue;
		}
		if (c->reply_len) {
			soak_conn_reset(c, "command before the last answer: reset port");
			return -1;
		}
		soak_conn_command(c);
		c->line_len = 0;
	}
	return 0;
}

/* Takes len bytes of c's stream, as its mode wants them. */
static void soak_conn_data(struct soak_conn *c, const uint8_t *data, uint32_t len)
{
	while (len && c->open) {
		uint32_t take = len, at, first;

		switch (c->mode) {
		case SOAK_LINE:
			for (take = 0; take < len && data[take] != '\n';)
				take++;
			take += take < len; /* with its newline */
			c->fwd_cnt += take;
			if (soak_conn_line(c, data, take) < 0)
				return;
			break;
		case SOAK_SEND:
			soak_conn_reset(c, "data while we send: reset port");
			return;
		case SOAK_RECV:
			if (take > c->left)
				take = (uint32_t)c->left;
			c->fwd_cnt += take;
			soak_sum_update(&c->sum, data, take);
			if ((c->left -= take) == 0)
				soak_conn_done(c, soak_answer[SOAK_RECV]);
			break;
		case SOAK_ECHO:
			if (c->left == 0) {
				/* All taken, not all sent back and answered yet. */
				soak_conn_reset(c, "data before the echo's answer: reset port");
				return;
			}
			if (take > c->left)
				take = (uint32_t)c->left;
			if (take > SOAK_BUF_ALLOC - c->ring_len) {
				soak_conn_reset(c, "echo data beyond our credit: reset port");
				return;
			}
			soak_sum_update(&c->sum, data, take);
			at = (c->ring_head + c->ring_len) & (SOAK_BUF_ALLOC - 1);
			first = SOAK_BUF_ALLOC - at < take ? SOAK_BUF_ALLOC - at : take;
			memcpy(c->ring + at, data, first);
			memcpy(c->ring, data + first, take - first);
			c->ring_len += take;
			c->left -= take; /* fwd_cnt moves when the bytes are sent back */
			break;
		}
		data += take;
		len -= take;
	}
}

/*
 * The open connection from host port `port`, or NULL. With `open`, a fresh connection instead
 * (replacing the one that port had), or NULL when the table is full.
 */
static struct soak_conn *soak_conn_get(uint32_t port, bool open)
{
	struct soak_conn *c = NULL;

	for (unsigned i = 0; i < SOAK_CONN_MAX; i++) {
		if (soak_conns[i].open && soak_conns[i].peer_port == port) {
			c = &soak_conns[i];
			break;
		}
		if (open && !c && !soak_conns[i].open)
			c = &soak_conns[i];
	}
	if (c && open) {
		/* Not the whole struct: its ring needs no clearing. */
		c->open = true;
		c->mode = SOAK_LINE;
		c->peer_port = port;
		c->tx_cnt = c->fwd_cnt = c->fwd_cnt_sent = 0;
		c->line_len = c->reply_len = 0;
		c->ring_head = c->ring_len = 0;
	}
	return c;
}

/* One packet the device put in rx buffer b, used_len bytes of it. */
static void soak_rx_packet(const struct soak_buf *b, uint32_t used_len)
{
	struct vsock_hdr h = b->hdr;
	bool request = h.op == VSOCK_OP_REQUEST && h.dst_port == SOAK_PORT;
	struct soak_conn *c;

	if (used_len < sizeof(h) || used_len > sizeof(*b) || h.len > used_len - sizeof(h)) {
		soak_warn("rx packet longer than its used len, or that than the buffer:", used_len);
		return;
	}
	if (h.src_cid != VSOCK_HOST_CID || h.dst_cid != VSOCK_GUEST_CID ||
	    h.type != VSOCK_TYPE_STREAM) {
		soak_warn("rx packet not a host-to-guest stream packet: op", h.op);
		return;
	}
	c = h.dst_port == SOAK_PORT ? soak_conn_get(h.src_port, request) : NULL;
	if (!c) {
		/* Nobody listens there, the table is full, or the connection is gone. */
		if (request)
			soak_warn("connection table full: refused host port", h.src_port);
		if (h.op != VSOCK_OP_RST)
			soak_send_ctl(h.dst_port, h.src_port, VSOCK_OP_RST, 0);
		return;
	}
	c->peer_buf_alloc = h.buf_alloc;
	c->peer_fwd_cnt = h.fwd_cnt;
	switch (h.op) {
	case VSOCK_OP_REQUEST:
		soak_conn_ctl(c, VSOCK_OP_RESPONSE);
		break;
	case VSOCK_OP_RW:
		soak_conn_data(c, b->data, h.len);
		break;
	case VSOCK_OP_CREDIT_UPDATE:
		break; /* the credit fields above were the point */
	case VSOCK_OP_CREDIT_REQUEST:
		soak_conn_ctl(c, VSOCK_OP_CREDIT_UPDATE);
		break;
	case VSOCK_OP_RST:
		c->open = false;
		break;
	case VSOCK_OP_SHUTDOWN:
		/* The client is done: whatever it did not wait for is lost to it anyway. */
		soak_conn_ctl(c, VSOCK_OP_RST);
		c->open = false;
		break;
	default:
		soak_conn_reset(c, "unexpected op: reset port");
		break;
	}
}

/*
 * Sends what c owes and the host has credit for, as far as tx buffers are free: the pattern
 * (SEND) or the ring (ECHO), then the answer line; a credit update when the host may run
 * short of credit otherwise.
 */
static void soak_conn_pump(struct soak_conn *c)
{
	while (c->open) {
		uint32_t credit = soak_conn_credit(c), len = 0;
		int slot;

		if (c->mode == SOAK_SEND && c->left)
			len = c->left < SOAK_DATA_LEN ? (uint32_t)c->left : SOAK_DATA_LEN;
		else if (c->mode == SOAK_ECHO && c->ring_len)
			len = c->ring_len < SOAK_DATA_LEN ? c->ring_len : SOAK_DATA_LEN;
		else if (c->reply_len)
			len = c->reply_len;
		else
			break;
		if (len > credit) {
			if (c->reply_len && c->mode == SOAK_LINE)
				break; /* an answer goes whole */
			len = credit;
		}
		if (len == 0 || (slot = soak_tx_try()) < 0)
			break;
		if (c->mode == SOAK_SEND && c->left) {
			soak_pattern(c->seed, c->sent, soak_tx[slot].data, len);
			soak_sum_update(&c->sum, soak_tx[slot].data, len);
			c->sent += len;
			if ((c->left -= len) == 0)
				soak_conn_done(c, soak_answer[SOAK_SEND]);
		} else if (c->mode == SOAK_ECHO && c->ring_len) {
			uint32_t first = SOAK_BUF_ALLOC - c->ring_head;

			if (first > len)
				first = len;
			memcpy(soak_tx[slot].data, c->ring + c->ring_head, first);
			memcpy(soak_tx[slot].data + first, c->ring, len - first);
			c->ring_head = (c->ring_head + len) & (SOAK_BUF_ALLOC - 1);
			c->ring_len -= len;
			c->fwd_cnt += len;
			if (c->left == 0 && c->ring_len == 0)
				soak_conn_done(c, soak_answer[SOAK_ECHO]);
		} else {
			memcpy(soak_tx[slot].data, c->reply, len);
			c->reply_len = 0;
		}
		c->tx_cnt += len;
		c->fwd_cnt_sent = c->fwd_cnt;
		soak_tx_send(slot, SOAK_PORT, c->peer_port, VSOCK_OP_RW, c->fwd_cnt, len);
	}
	/* Nothing we sent told the host of the room freed, and it may run short: tell it now. */
	if (c->open && c->fwd_cnt - c->fwd_cnt_sent >= SOAK_BUF_ALLOC / 4)
		soak_conn_ctl(c, VSOCK_OP_CREDIT_UPDATE);
}

/* An event the device put in event buffer i, len bytes of it. */
static void soak_event(uint32_t i, uint32_t len)
{
	if (len < 4 || len > SOAK_EVENT_LEN) {
		soak_warn("event used len out of bounds:", len);
	} else if ((uint32_t)soak_events[i] == VSOCK_EVENT_TRANSPORT_RESET) {
		uart_puts("soak: transport reset\n");
		soak_conns_forget();
	} else {
		soak_warn("unknown event id", (uint32_t)soak_events[i]);
	}
}

/*
 * One polling pass: events, then rx packets served and their buffers offered again, then
 * every connection's sending (tx buffers are taken back as they are needed).
 */
static void soak_poll(void)
{
	uint32_t id, len;

	for (unsigned n = 0; n < VQ_SIZE && !soak_broken; n++) {
		int r = soak_take_used(VSOCK_EVENT_Q, &id, &len);

		if (r == 0)
			break;
		if (r > 0) {
			soak_event(id, len);
			soak_event_post((uint16_t)id);
		}
	}
	soak_kick(VSOCK_EVENT_Q);
	for (unsigned n = 0; n < VQ_SIZE && !soak_broken; n++) {
		int r = soak_take_used(VSOCK_RX_Q, &id, &len);

		if (r == 0)
			break;
		if (r > 0) {
			soak_rx_packet(&soak_rx[id], len);
			soak_rx_post((uint16_t)id);
		}
	}
	soak_kick(VSOCK_RX_Q);
	for (unsigned i = 0; i < SOAK_CONN_MAX && !soak_broken; i++)
		soak_conn_pump(&soak_conns[i]);
}

void payload_main(uint32_t cpu, uint32_t ncpus, const struct payload_info *info)
{
	const char *why;

	(void)ncpus;
	if (cpu != 0)
		cpu_spin_forever();
	if (rt_check_info(info, "soak") != 0)
		poweroff();
	vio_base = info->mmio_base_gpa;
	if (!vio_base)
		soak_fail("no vsock device");
	if ((why = soak_dev_init()) != NULL)
		soak_fail(why);
	uart_puts("soak: ready port=");
	uart_put_dec(SOAK_PORT);
	uart_puts("\n");
	for (uint32_t pass = 1;; pass++) {
		soak_poll();
		if (!soak_broken && pass % SOAK_STATUS_EVERY == 0 &&
		    (vio_read(vio_base, VIO_STATUS) & VIO_S_RESET))
			soak_broken = "the device wants a reset";
		if (soak_broken) {
			soak_warn(soak_broken, 0);
			if ((why = soak_dev_init()) != NULL)
				soak_fail(why);
		}
		cpu_relax();
	}
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * virtio-vsock's insides, shared by its two files and nobody else (other files see vsock_add
 * in virtio.h): vsock.c is the device (queues, packets from and to the guest), vsock_conn.c
 * the connections (their table, the host's unix sockets, buffering and credit).
 *
 * Threads: everything here runs on the I/O thread under dev->lock, except the transport's
 * reset and activate (vCPU threads, under the same lock), which only flip flags and kick
 * kick_fd so that the I/O thread does the work.
 *
 * Flow control (virtio 1.2, 5.10.6.3), per connection:
 * - guest to host: we advertise buf_alloc = VSOCK_BUF_LEN and fwd_cnt = the bytes written to
 *   the unix socket. Bytes the socket does not take at once wait in `buf`, at most
 *   VSOCK_BUF_LEN of them; a guest that sends more than its credit is reset. All the `buf`s
 *   of a device together hold at most VSOCK_BUF_TOTAL: a connection that needs one beyond
 *   that is reset (its guest floods many connections whose clients do not read).
 * - host to guest: we read from the unix socket only into rx buffers the guest gave us, and
 *   never more than the guest's credit (peer_buf_alloc - (tx_cnt - peer_fwd_cnt)). When the
 *   guest does not read, we stop reading the socket, and the client's writes block in the
 *   kernel: the VMM buffers nothing in this direction.
 *
 * Per-packet costs (each one is a syscall, a ring update and, unless suppressed, an exit or
 * an interrupt, ~50 us in a nested host): the guest may have a whole VSOCK_BUF_LEN in flight
 * before it hears from us, so its next packets overlap our write of the last; Linux's rx
 * buffers are 4 KiB, so one recvmsg fills up to VSOCK_RX_BATCH of them at once.
 */
#ifndef SANDBOX_VIRTIO_VSOCK_H
#define SANDBOX_VIRTIO_VSOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>
#include <sys/un.h>

#include <linux/virtio_vsock.h>

#include "virtio/virtio.h"

#define VSOCK_HOST_CID	    2u
#define VSOCK_GUEST_CID	    3u
#define VSOCK_HDR_LEN	    sizeof(struct virtio_vsock_hdr)
#define VSOCK_RX_Q	    0u
#define VSOCK_TX_Q	    1u
#define VSOCK_EVENT_Q	    2u
#define VSOCK_NQUEUES	    3u
#define VSOCK_QUEUE_MAX	    256u
/* Connections at once, host clients still writing their CONNECT line included; a request
 * beyond gets RST (from the guest) or a closed socket (from the host). */
#define VSOCK_CONN_MAX	    1024u
#define VSOCK_HASH_LEN	    256u /* buckets of the (local port, peer port) table */
/* Our receive buffer per connection (buf_alloc), allocated when the socket first pushes back
 * and kept while the connection lives. 256 KiB, as Linux's own default: with 64 KiB the guest
 * had one 64 KiB packet in flight and then waited a round trip for credit. */
#define VSOCK_BUF_LEN	    (256u * 1024)
/* The most all of a device's `buf`s hold together, however the guest floods. */
#define VSOCK_BUF_TOTAL	    (64u * 1024 * 1024)
/* rx buffers filled by one read from a socket (at most VSOCK_PKT_MAX bytes in all). */
#define VSOCK_RX_BATCH	    16u
/* The most payload one packet carries either way (Linux's VIRTIO_VSOCK_MAX_PKT_BUF_SIZE). */
#define VSOCK_PKT_MAX	    (64u * 1024)
/* RSTs owed for connections that no longer (or never did) exist; more are dropped. */
#define VSOCK_RST_MAX	    128u
/* Host-initiated connections take local ports counting up from here ("OK <port>\n"). */
#define VSOCK_PORT_FIRST    1024u
#define VSOCK_PORT_LAST	    0xfffffffeu /* 0xffffffff is VMADDR_PORT_ANY */
/* "CONNECT 4294967295\n" is 19 bytes; a longer line is refused. */
#define VSOCK_LINE_MAX	    32u
/* A host client has this long from its connect to the guest's answer (its CONNECT line, then
 * the guest's RESPONSE or RST); then it is closed (and the guest reset). */
#define VSOCK_HANDSHAKE_MS  10000u
/* A connection the host side has finished (the client closed both ways and the guest was
 * told with SHUTDOWN, every byte for it delivered) is the guest's to close with an RST. One
 * that ignores the SHUTDOWN would keep the connection, and its fd, for ever: after this long
 * we send the RST ourselves and close it. Linux's own transport gives a peer 8 s
 * (VSOCK_CLOSE_TIMEOUT); a guest that read the SHUTDOWN answers in microseconds, and nothing
 * it could still send has anyone to read it. */
#define VSOCK_CLOSE_MS	    5000u
/* After a restore's TRANSPORT_RESET, host clients' requests wait until the guest has handled
 * it (it gave the event buffer back), or until this long after the reset for a guest that
 * keeps the buffer (its timer ticks every second: at most a second more). Under
 * VSOCK_HANDSHAKE_MS, so that a client connected at the restore is still answered. A guest
 * handles the event as soon as it runs: Linux's event work, a payload's next polling pass. */
#define VSOCK_RESET_ACK_MS  5000u
/* Packets served per pass of the event loop, each way: a guest that keeps its tx queue full
 * of cheap packets (or a flood of work for rx) cannot keep the I/O thread from the rest of
 * the loop (the API socket, other devices, the timeout, signals). As virtio-net's 64. */
#define VSOCK_TX_BUDGET	    64u
#define VSOCK_RX_BUDGET	    64u
/* File descriptors the VMM wants beyond one per connection (its own, the devices', the API's):
 * vsock_add raises the soft RLIMIT_NOFILE (towards the hard one) to VSOCK_CONN_MAX + this. */
#define VSOCK_FDS_SPARE	    128u
#define VSOCK_SHUTDOWN_BOTH (VIRTIO_VSOCK_SHUTDOWN_RCV | VIRTIO_VSOCK_SHUTDOWN_SEND)

_Static_assert(sizeof(struct virtio_vsock_hdr) == 44, "the packet header is 44 bytes");
_Static_assert(sizeof(struct virtio_vsock_config) == 8, "the config space is 8 bytes");

/* An intrusive doubly-linked list; an empty list's head points at itself. */
struct vsock_link {
	struct vsock_link *prev, *next;
};

enum vsock_state {
	VSOCK_LINE,	 /* a host client connected; reading its "CONNECT <port>\n" */
	VSOCK_REQUESTED, /* we owe or sent the guest OP_REQUEST; waiting for its answer */
	VSOCK_CONNECTED, /* data flows */
};

/* Control packets a connection owes the guest (conn->ctl). */
#define VSOCK_CTL_REQUEST  (1u << 0)
#define VSOCK_CTL_RESPONSE (1u << 1)
#define VSOCK_CTL_CREDIT   (1u << 2)

struct vsock_dev;

struct vsock_conn {
	struct vsock_dev *dev;
	struct vsock_link all;	   /* dev->conns */
	struct vsock_link pending; /* dev->pending while it owes the guest a packet */
	bool queued;		   /* on dev->pending */
	bool hashed;		   /* in dev->hash (it has its ports) */
	struct vsock_conn *hash_next;
	enum vsock_state state;
	uint32_t local_port; /* the host's (CID 2) */
	uint32_t peer_port;  /* the guest's */
	int fd;		     /* the unix socket */
	struct ev_source src;
	uint32_t events;	/* what src waits for now */
	unsigned ctl;		/* VSOCK_CTL_* owed */
	bool readable;		/* the socket may have data or EOF for us */
	bool host_eof;		/* the client will send no more (read returned 0) */
	bool host_hup;		/* the client will read no more (EPOLLHUP) */
	bool wr_shut;		/* we passed the guest's SHUTDOWN_SEND on: shutdown(SHUT_WR) */
	uint32_t shut_sent;	/* VIRTIO_VSOCK_SHUTDOWN_* we told the guest */
	uint32_t peer_shutdown; /* VIRTIO_VSOCK_SHUTDOWN_* the guest told us */
	/* Guest to host. buf is a ring of VSOCK_BUF_LEN bytes; buf_used == rx_cnt - fwd_cnt. */
	uint8_t *buf;
	uint32_t buf_head, buf_used;
	uint32_t rx_cnt;       /* payload bytes the guest sent */
	uint32_t fwd_cnt;      /* of which written to the socket */
	uint32_t fwd_cnt_sent; /* the fwd_cnt the guest last heard */
	/* Host to guest. */
	uint32_t tx_cnt; /* payload bytes sent to the guest */
	uint32_t peer_buf_alloc, peer_fwd_cnt;
	/* VSOCK_LINE and VSOCK_REQUESTED: when the handshake is given up (CLOCK_MONOTONIC). */
	uint64_t handshake_deadline_ms;
	/* VSOCK_CONNECTED, once the host side finished (shut_sent is both): when we reset it if
	 * the guest has not closed it (VSOCK_CLOSE_MS); 0 before. */
	uint64_t close_deadline_ms;
	/* VSOCK_LINE only: the part of the line read so far. */
	uint8_t line_len;
	char line[VSOCK_LINE_MAX];
};

/* An RST owed for a connection we have no struct for. */
struct vsock_rst {
	uint64_t src_cid; /* the CID the guest addressed */
	uint32_t src_port, dst_port;
};

struct vsock_dev {
	pthread_mutex_t lock; /* everything below */
	struct vm *vm;
	struct virtio_dev *vdev;
	bool active;	    /* DRIVER_OK and not reset or broken since */
	bool reset_pending; /* the driver reset the device: drop everything on the I/O thread */
	bool event_pending; /* a TRANSPORT_RESET event waits for an event buffer */
	bool irq;	    /* used buffers were pushed: interrupt once unlocked */
	const char *fail;   /* the guest broke the protocol: NEEDS_RESET once unlocked */
	/* A TRANSPORT_RESET is owed or posted and the guest has not handled it yet: host clients'
	 * OP_REQUESTs wait (vsock_reset_ack_check), or the guest, forgetting its connections,
	 * would drop one it accepted after the reset. Until the event queue's avail idx moves
	 * from reset_avail_idx (the buffer given back) or reset_ack_deadline_ms passes. */
	bool reset_unacked;
	uint16_t reset_avail_idx;
	uint64_t reset_ack_deadline_ms;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int listen_fd; /* the unix socket at `path` */
	int kick_fd;   /* eventfd: work for the I/O thread (reset, activate, MMIO kicks) */
	int timer_fd;  /* timerfd: ticks every second while a handshake or close is pending */
	bool timer_armed;
	struct ev_source listen_src, kick_src, timer_src;
	struct vsock_conn *hash[VSOCK_HASH_LEN];
	struct vsock_link conns;
	struct vsock_link pending;
	unsigned nconns;
	uint32_t buf_total; /* bytes of the connections' `buf`s allocated now */
	uint32_t next_port;
	struct vsock_rst rst[VSOCK_RST_MAX];
	unsigned rst_head, rst_len;
	/* rx chains popped and not filled yet: rx[(rx_first + i) % VSOCK_RX_BATCH], i < rx_held */
	unsigned rx_first, rx_held;
	struct log_ratelimit rl;
	struct log_ratelimit conn_rl; /* "connections open: refusing" */
	struct virtio_vsock_config config;
	struct iovec iov[VIRTQ_CHAIN_MAX];
	struct virtq_chain rx[VSOCK_RX_BATCH]; /* rx buffers waiting for packets */
	struct virtq_chain chain;	       /* the tx or event chain being served */
};

/* ---- vsock_conn.c ---- */

/* The connection with these ports, or NULL. */
struct vsock_conn *vsock_conn_find(struct vsock_dev *d, uint32_t local_port, uint32_t peer_port);
/* Accept clients on the listening socket (its event handler). */
void vsock_conn_listen_event(struct ev_source *src, uint32_t events);
/* The guest asked to connect to host port `local_port` from `peer_port`: connect to the
 * unix socket `path`_`local_port` and owe it OP_RESPONSE, or owe it OP_RST. */
void vsock_conn_from_guest_request(struct vsock_dev *d, uint32_t local_port, uint32_t peer_port,
				   uint32_t buf_alloc, uint32_t fwd_cnt);
/* The guest answered our OP_REQUEST: tell the client "OK <port>\n". */
int vsock_conn_established(struct vsock_conn *c) __must_check;
/* OP_RW: take `len` payload bytes at `offset` of the chain's readable part for the socket.
 * -ECONNRESET when that closed the connection (the guest overran its credit, the socket
 * broke). */
int vsock_conn_write(struct vsock_conn *c, const struct virtq_chain *chain, uint64_t offset,
		     uint32_t len) __must_check;
/* Recompute what the connection waits for and owes after any change: shutdowns passed on,
 * credit updates owed, epoll interest, its place on dev->pending. May close it (both sides
 * are done): then -ECONNRESET, and `c` is gone (callers that do not touch it again may
 * ignore the result). */
int vsock_conn_update(struct vsock_conn *c);
/* The VSOCK_CTL_* packets c may send the guest now: all it owes, but an OP_REQUEST while
 * the guest has not handled a TRANSPORT_RESET (dev->reset_unacked). */
unsigned vsock_conn_ctl_due(const struct vsock_conn *c);
/* Whether the socket's bytes may go to the guest (connected, no EOF, the guest still
 * receives), credit aside. */
bool vsock_conn_may_read(const struct vsock_conn *c);
/* The VIRTIO_VSOCK_SHUTDOWN_* flags the guest should have heard from us by now. */
uint32_t vsock_conn_shut_due(const struct vsock_conn *c);
/* Bytes the guest can take now (its credit). */
uint32_t vsock_conn_credit(const struct vsock_conn *c);
/* Fill the header of a packet from `c` to the guest (its credit fields included: the guest
 * hears our fwd_cnt, so no credit update is owed any more). */
void vsock_conn_hdr(struct vsock_conn *c, struct virtio_vsock_hdr *h, uint16_t op, uint32_t len,
		    uint32_t flags);
/* Read at most `len` bytes from the socket into `iov`: > 0 bytes read, 0 nothing now
 * (EAGAIN: the socket is no longer marked readable), -EPIPE at EOF (host_eof is set),
 * other -errno when the socket broke. */
ssize_t vsock_conn_read(struct vsock_conn *c, struct iovec *iov, unsigned niov);
/* Close the connection and free it; with `rst`, owe the guest an RST for it. */
void vsock_conn_close(struct vsock_conn *c, bool rst);
/* Close the connections whose handshake, or whose wait for the guest to close what the host
 * finished, is past its deadline at `now_ms` (the latter with an RST); stop the timer when no
 * deadline is left. Called with the lock held. */
void vsock_conn_expire(struct vsock_dev *d, uint64_t now_ms);
/* The timerfd's callback. */
void vsock_conn_timer_event(struct ev_source *src, uint32_t events);
/* Close every connection without telling the guest (reset, broken driver, destroy). */
void vsock_conn_close_all(struct vsock_dev *d);
/* Owe the guest an RST from (src_cid, src_port) to dst_port; dropped when VSOCK_RST_MAX are
 * already owed. */
void vsock_rst_push(struct vsock_dev *d, uint64_t src_cid, uint32_t src_port, uint32_t dst_port);

/* ---- vsock.c ---- */

/* Serve whatever can be served: a pending reset, the tx queue, events, the rx queue. */
void vsock_run(struct vsock_dev *d);
/* Unlock dev->lock, then raise the interrupt or NEEDS_RESET the work asked for (outside the
 * lock: the transport holds its own lock while it calls our reset). */
void vsock_unlock(struct vsock_dev *d);
/* Build the iovec for `len` bytes at `offset` of the chain's readable or writable part into
 * d->iov from entry `at` on; returns the number of entries. The caller checked that the part
 * is long enough and that d->iov has room for all of the part's segments after `at`. */
unsigned vsock_chain_iov(struct vsock_dev *d, unsigned at, const struct virtq_chain *c,
			 bool writable, uint64_t offset, uint64_t len);

/* The list helpers. */
static inline void vsock_list_init(struct vsock_link *l)
{
	l->prev = l->next = l;
}

static inline bool vsock_list_empty(const struct vsock_link *l)
{
	return l->next == l;
}

static inline void vsock_list_add_tail(struct vsock_link *head, struct vsock_link *n)
{
	n->prev = head->prev;
	n->next = head;
	head->prev->next = n;
	head->prev = n;
}

static inline void vsock_list_del(struct vsock_link *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = n;
}

#define vsock_conn_of(link, member)                                                                \
	((struct vsock_conn *)((char *)(link)-offsetof(struct vsock_conn, member)))

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inside one intercepted connection: the state mitm.c (requests, responses) and mitm_io.c (the
 * socket BIO, TLS I/O with every wait bounded, body relaying) share. Functions return 0 or
 * -errno and, on failure, have put a short reason in the connection's stats.
 */
#ifndef SANDBOX_PROXY_MITM_CONN_H
#define SANDBOX_PROXY_MITM_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

#include "http1.h"
#include "mitm.h"

#define __must_check __attribute__((warn_unused_result))

#define MITM_REQUESTS_MAX 1000
#define MITM_INTERIM_MAX  8  /* 1xx responses before the final one */
#define MITM_LEADING_CRLF 16 /* empty lines tolerated before a request line */
#define MITM_IN_CAP	  HTTP1_HEAD_MAX

/* The state of one socket's BIO (custom, so that the peeked bytes come first and egress counts). */
struct mitm_bio {
	int fd;
	const unsigned char *peek;
	size_t npeek, peek_off;
	_Atomic int64_t *budget; /* upstream only */
	bool budget_out;
	uint64_t *bytes_in, *bytes_out; /* upstream only */
};

/* One side of the connection: TLS over the socket, and the bytes read but not consumed yet. */
struct mitm_end {
	const char *who; /* "guest" or "upstream", for messages */
	SSL *ssl;
	int fd, fd_flags;
	struct mitm_bio bio;
	char in[MITM_IN_CAP];
	size_t off, len; /* in[off..len) is unread */
};

struct mitm_conn {
	struct mitm_end guest, up;
	const char *name;
	const struct mitm_rule *rule;
	SSL_CTX *up_ctx;
	unsigned idle_ms;
	struct mitm_stats *stats;
	bool up_ready;	  /* upstream TLS is established */
	bool replied;	  /* bytes of a response to this request reached the guest */
	bool guest_clean; /* the guest may get a close_notify */
	struct http1_head req, resp;
};

/* Keep the first failure's reason (later ones are its consequences); returns err. */
int mitm_conn_fail(struct mitm_conn *c, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* A BIO on m->fd that returns m's peeked bytes first and counts and budgets what m says; NULL
 * when out of memory. */
BIO *mitm_bio_new(struct mitm_bio *m);

static inline size_t mitm_end_avail(const struct mitm_end *e)
{
	return e->len - e->off;
}

/* The TLS handshake on e (its SSL set up for accept or connect). */
int mitm_end_handshake(struct mitm_conn *c, struct mitm_end *e) __must_check;
/*
 * Read more into e->in: >0 bytes added, 0 on a clean end (close_notify), -EPIPE on a TCP end
 * without close_notify (the caller decides whether that truncates something), other -errno.
 */
int mitm_end_fill(struct mitm_conn *c, struct mitm_end *e) __must_check;
/* Write all of buf. */
int mitm_end_write(struct mitm_conn *c, struct mitm_end *e, const void *buf,
		   size_t len) __must_check;
/* Have some unread bytes buffered; an end of e here is in the middle of `what`: an error. */
int mitm_end_need(struct mitm_conn *c, struct mitm_end *e, const char *what) __must_check;
/* A CRLF-terminated line of at most max bytes (CRLF not counted), consumed; *line points into
 * e->in until the next read. */
int mitm_end_line(struct mitm_conn *c, struct mitm_end *e, size_t max, const char **line,
		  size_t *len, const char *what) __must_check;

/* n bytes from one end to the other. */
int mitm_relay_length(struct mitm_conn *c, struct mitm_end *from, struct mitm_end *to,
		      uint64_t n) __must_check;
/* A chunked body, re-encoded: sizes written afresh, extensions and trailers dropped. */
int mitm_relay_chunked(struct mitm_conn *c, struct mitm_end *from,
		       struct mitm_end *to) __must_check;
/* Upstream to the guest until upstream closes; a close without close_notify is passed on. */
int mitm_relay_until_close(struct mitm_conn *c) __must_check;

#endif

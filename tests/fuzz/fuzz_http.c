/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the proxy's HTTP/1.x parsers (proxy/http1.c) and the plain-HTTP relay
 * that frames requests with them (proxy/http_relay.c). The first byte picks one (modulo 8);
 * the rest is the input.
 *   0  http1_head_find and http1_parse_request: a guest's request head
 *   1  http1_parse_response: an upstream's response head
 *   2  http1_chunk_size: a chunk-size line
 *   3, 7  http_relay: the guest sends the input and then ends, upstream ends at once; the
 *      relay must stop at a refusal, and what it sent upstream must parse again, request by
 *      request, strictly, each for the decided host, chunked bodies re-encoded with no
 *      trailer (fuzz_check_upstream): it never passes on what it did not parse
 *   4  http_relay_gated: the same input as a server-first connection's first bytes; what the
 *      gate takes for HTTP (sniff_classify) must come out as in 3, what it takes for something
 *      else (TLS, positively not HTTP) unchanged
 *   5  http1_trailer_line: a trailer line; one taken holds no CR, LF or NUL
 *   6  http1_parse_proxy_request and http1_origin_head: an explicit proxy's absolute-form
 *      request rewritten in origin form must parse again as one, for the URI's host
 * Pointers into the head must stay inside it; nothing may read past the input (ASan).
 *
 * Built and run by tests/fuzz/run.sh http; seeds in tests/fuzz/corpus/http/.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http1.h"
#include "proxy.h"

#define FUZZ_HOST "a.example.test"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Whether [p, p + len) lies inside [base, base + n). */
static int fuzz_inside(const char *p, size_t len, const char *base, size_t n)
{
	return p >= base && len <= n && (size_t)(p - base) <= n - len;
}

static void fuzz_head(int request, const char *p, size_t n)
{
	struct http1_head *h;
	const char *reason;
	size_t head_len;
	int status;

	if (http1_head_find(p, n, HTTP1_HEAD_MAX, &head_len, &reason) != 0)
		return;
	if (head_len > n)
		abort();
	h = malloc(sizeof(*h));
	if (!h)
		abort();
	if (request) {
		if (http1_parse_request(p, head_len, h, &status, &reason) == 0) {
			if (h->host && !fuzz_inside(h->host, h->host_len, p, head_len))
				abort();
			if (!fuzz_inside(h->target, h->target_len, p, head_len))
				abort();
			(void)http1_host_matches(h->host ? h->host : "", h->host_len, FUZZ_HOST);
		}
	} else if (http1_parse_response(p, head_len, h, &reason) == 0) {
		if (h->nfields > HTTP1_RESP_FIELDS_MAX)
			abort();
		for (unsigned i = 0; i < h->nfields; i++)
			if (!fuzz_inside(h->fields[i].value, h->fields[i].value_len, p, head_len))
				abort();
	}
	free(h);
}

/*
 * What upstream got from the relay: complete heads that parse strictly with Host FUZZ_HOST,
 * each followed by its body, a chunked one as the relay writes it (sizes in lower-case hex
 * without extensions, the last chunk followed by the empty line and no trailer); the stream
 * may end inside a body (the guest stopped there), never inside a head.
 */
static void fuzz_check_upstream(const char *got, size_t have)
{
	struct http1_head *h = malloc(sizeof(*h));
	size_t off = 0;

	if (!h)
		abort();
	while (off < have) {
		const char *reason;
		size_t head_len;
		int status;

		if (http1_head_find(got + off, have - off, HTTP1_HEAD_MAX, &head_len, &reason) ||
		    http1_parse_request(got + off, head_len, h, &status, &reason) ||
		    !http1_host_matches(h->host, h->host_len, FUZZ_HOST))
			abort();
		off += head_len;
		if (h->content_length > 0) {
			if ((uint64_t)h->content_length >= have - off)
				break; /* the stream ends in this body */
			off += (size_t)h->content_length;
			continue;
		}
		while (h->chunked) {
			uint64_t size = 0;
			size_t i = off;

			for (; i < have && ((got[i] >= '0' && got[i] <= '9') ||
					    (got[i] >= 'a' && got[i] <= 'f'));
			     i++)
				size = size << 4 |
				       (uint64_t)(got[i] <= '9' ? got[i] - '0' : got[i] - 'a' + 10);
			if (i == have && i == off)
				goto end; /* the stream ends before this chunk */
			/* the relay writes each size line whole: "%llx\r\n" */
			if (i == off || (got[off] == '0' && i - off > 1) || have - i < 2 ||
			    memcmp(got + i, "\r\n", 2))
				abort();
			off = i + 2;
			if (size == 0) {
				/* "0\r\n\r\n" is written whole: no trailer between */
				if (have - off < 2 || memcmp(got + off, "\r\n", 2))
					abort();
				off += 2;
				break;
			}
			if (size + 2 > have - off)
				goto end; /* the stream ends in this chunk */
			if (memcmp(got + off + size, "\r\n", 2))
				abort();
			off += (size_t)size + 2;
		}
	}
end:
	free(h);
}

/* The relay between two socket pairs; the guest's bytes are all in `pre` (or, `gated`, sent
 * on its socket before the gate reads them). */
static void fuzz_relay(const char *p, size_t n, bool gated)
{
	int g[2], u[2];
	_Atomic int64_t budget = 1 << 30;
	uint64_t up = 0, down = 0;
	const char *why;
	char *got, name[NAME_MAX_TEXT];
	enum sniff_kind k = SNIFF_HTTP;
	ssize_t w;
	size_t have = 0;
	int err;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, g) < 0)
		abort();
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, u) < 0)
		abort();
	shutdown(u[1], SHUT_WR); /* upstream answers nothing */
	if (gated) {
		/* the first bytes as the gate reads them (whole: the input is below a socket
		 * buffer and CONN_PEEK_MAX is more than libFuzzer's default length) */
		k = sniff_classify((const uint8_t *)p, n < CONN_PEEK_MAX ? n : CONN_PEEK_MAX, name,
				   sizeof(name));
		if (n && ((w = send(g[1], p, n, MSG_DONTWAIT)) < 0 || (size_t)w != n))
			goto out;
		shutdown(g[1], SHUT_WR);
		err = http_relay_gated(g[0], u[0], FUZZ_HOST, true, 1000, &budget, &up, &down,
				       &why);
	} else {
		shutdown(g[1], SHUT_WR); /* the guest sends nothing beyond pre */
		err = http_relay(g[0], u[0], p, n, FUZZ_HOST, 1000, &budget, &up, &down, &why);
	}
	if (err == -E2BIG)
		goto out;
	got = malloc(n + 1);
	if (!got)
		abort();
	while ((w = recv(u[1], got + have, n + 1 - have, MSG_DONTWAIT)) > 0)
		have += (size_t)w;
	if (have != up || have > n || down != 0)
		abort();
	if (k == SNIFF_TLS || k == SNIFF_OTHER) {
		if (memcmp(got, p, have) != 0)
			abort(); /* raw: unchanged */
	} else {
		fuzz_check_upstream(got, have);
	}
	free(got);
out:
	close(g[0]);
	close(g[1]);
	close(u[0]);
	close(u[1]);
}

/* An absolute-form request, rewritten as conn_absolute does, parses again in origin form. */
static void fuzz_proxy_request(const char *p, size_t n)
{
	struct http1_head *h = malloc(sizeof(*h)), *o = malloc(sizeof(*o));
	size_t head_len, out_len, alen, cap = n + 4096;
	const char *reason, *auth, *path;
	char *out = malloc(cap);
	int status;

	if (!h || !o || !out)
		abort();
	if (http1_head_find(p, n, HTTP1_HEAD_MAX, &head_len, &reason) != 0 ||
	    http1_parse_proxy_request(p, head_len, h, &status, &reason) != 0)
		goto done;
	auth = h->target + 7;
	path = memchr(auth, '/', h->target_len - 7);
	alen = path ? (size_t)(path - auth) : h->target_len - 7;
	if (http1_origin_head(h, auth, alen, path ? path : "/", path ? h->target_len - 7 - alen : 1,
			      out, cap, &out_len) != 0)
		abort();
	if (http1_parse_request(out, out_len, o, &status, &reason) != 0) {
		if (strcmp(reason, "too many headers") != 0)
			abort();
	} else if (o->host_len != alen || memcmp(o->host, auth, alen) != 0 ||
		   o->content_length != h->content_length || o->chunked != h->chunked ||
		   !o->close) {
		abort();
	}
done:
	free(out);
	free(o);
	free(h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *reason;
	char *copy;
	uint64_t sz;

	if (size < 1)
		return 0;
	/* An exact-size copy: a read one past the input is an ASan report. */
	copy = malloc(size - 1 ? size - 1 : 1);
	if (!copy)
		return 0;
	memcpy(copy, data + 1, size - 1);
	switch (data[0] % 8) {
	case 0:
	case 1:
		fuzz_head(data[0] % 8 == 0, copy, size - 1);
		break;
	case 2:
		(void)!http1_chunk_size(copy, size - 1, &sz);
		break;
	case 3:
	case 7:
		fuzz_relay(copy, size - 1, false);
		break;
	case 4:
		fuzz_relay(copy, size - 1, true);
		break;
	case 5:
		if (http1_trailer_line(copy, size - 1, &reason) == 0 &&
		    (memchr(copy, '\r', size - 1) || memchr(copy, '\n', size - 1) ||
		     memchr(copy, 0, size - 1)))
			abort();
		break;
	case 6:
		fuzz_proxy_request(copy, size - 1);
		break;
	}
	free(copy);
	return 0;
}

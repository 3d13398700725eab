/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the proxy's HTTP/1.x parsers (proxy/http1.c) and the plain-HTTP relay
 * that frames requests with them (proxy/http_relay.c). The first byte picks one; the rest is
 * the input.
 *   0  http1_head_find and http1_parse_request: a guest's request head
 *   1  http1_parse_response: an upstream's response head
 *   2  http1_chunk_size: a chunk-size line
 *   3  http_relay: the guest sends the input and then ends, upstream ends at once; the relay
 *      must stop at a refusal, and what it sent upstream must be exactly the guest's first
 *      bytes (it forwards, it never invents)
 * Pointers into the head must stay inside it; nothing may read past the input (ASan).
 *
 * Built and run by tests/fuzz/run.sh http; seeds in tests/fuzz/corpus/http/.
 */
#include <errno.h>
#include <stdatomic.h>
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

/* The relay between two socket pairs; the guest's bytes are all in `pre`. */
static void fuzz_relay(const char *p, size_t n)
{
	int g[2], u[2];
	_Atomic int64_t budget = 1 << 30;
	uint64_t up = 0, down = 0;
	const char *why;
	char *got;
	ssize_t k;
	size_t have = 0;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, g) < 0)
		abort();
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, u) < 0)
		abort();
	shutdown(g[1], SHUT_WR); /* the guest sends nothing beyond pre */
	shutdown(u[1], SHUT_WR); /* upstream answers nothing */
	if (http_relay(g[0], u[0], p, n, FUZZ_HOST, 1000, &budget, &up, &down, &why) == -E2BIG)
		goto out;
	got = malloc(n + 1);
	if (!got)
		abort();
	while ((k = recv(u[1], got + have, n + 1 - have, MSG_DONTWAIT)) > 0)
		have += (size_t)k;
	if (have != up || have > n || memcmp(got, p, have) != 0 || down != 0)
		abort();
	free(got);
out:
	close(g[0]);
	close(g[1]);
	close(u[0]);
	close(u[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy;
	uint64_t sz;

	if (size < 1)
		return 0;
	/* An exact-size copy: a read one past the input is an ASan report. */
	copy = malloc(size - 1 ? size - 1 : 1);
	if (!copy)
		return 0;
	memcpy(copy, data + 1, size - 1);
	switch (data[0] % 4) {
	case 0:
	case 1:
		fuzz_head(data[0] % 4 == 0, copy, size - 1);
		break;
	case 2:
		(void)!http1_chunk_size(copy, size - 1, &sz);
		break;
	case 3:
		fuzz_relay(copy, size - 1);
		break;
	}
	free(copy);
	return 0;
}

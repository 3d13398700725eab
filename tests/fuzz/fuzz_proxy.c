/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the proxy's parsers of guest and upstream bytes: the first byte picks
 * one, the rest is its input.
 *   0  sniff_classify: a connection's first bytes (TLS ClientHello records or an HTTP head)
 *   1  dns_parse_query, then dns_build_response: a guest's DNS query and our answer to it
 *   2  dns_parse_answer: an upstream resolver's reply to a query for "a.example.test"
 *   3  http1_head_find and http1_parse_request: a guest's request head (interception, relay)
 *   4  http1_parse_response: an upstream's response head
 *   5  http1_chunk_size: a chunk-size line
 * Whatever the bytes, nothing may read or write out of bounds (ASan, UBSan) and the results
 * must be self-consistent (the name NUL-terminated inside its buffer, lengths within input).
 *
 * Built and run by tests/fuzz/run.sh proxy. With -DFUZZ_SEEDS it writes a few valid inputs.
 */
#include <arpa/inet.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http1.h"
#include "proxy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_proxy_one(uint8_t kind, const uint8_t *p, size_t n)
{
	char name[NAME_MAX_TEXT];
	struct http1_head *h;
	const char *reason;
	size_t head_len;
	int status;

	switch (kind % 6) {
	case 0:
		sniff_classify(p, n, name, sizeof(name));
		if (strnlen(name, sizeof(name)) == sizeof(name))
			abort();
		break;
	case 1: {
		struct dns_query q;
		uint8_t out[DNS_MAX_PKT + 512];
		struct in_addr a = {htonl(0x0a800001)};

		if (dns_parse_query(p, n, &q) == 0) {
			if (q.qend > n || strnlen(q.name, sizeof(q.name)) == sizeof(q.name))
				abort();
			int r = dns_build_response(p, &q, 0, &a, out, sizeof(out));
			if (r > (int)sizeof(out))
				abort();
		}
		break;
	}
	case 2: {
		struct in_addr addrs[DNS_MAX_ADDRS];
		unsigned na = 0, rcode = 0;
		uint32_t ttl = 0;

		if (n >= 2 &&
		    dns_parse_answer(p, n, (uint16_t)(p[0] << 8 | p[1]), "a.example.test", addrs,
				     DNS_MAX_ADDRS, &na, &ttl, &rcode) == 0 &&
		    na > DNS_MAX_ADDRS)
			abort();
		break;
	}
	case 3:
	case 4:
		if (http1_head_find((const char *)p, n, HTTP1_HEAD_MAX, &head_len, &reason) != 0)
			break;
		if (head_len > n)
			abort();
		h = malloc(sizeof(*h));
		if (!h)
			abort();
		if (kind % 6 == 3) {
			if (http1_parse_request((const char *)p, head_len, h, &status, &reason) ==
				    0 &&
			    h->host &&
			    (h->host < (const char *)p ||
			     h->host + h->host_len > (const char *)p + head_len))
				abort();
		} else {
			(void)!http1_parse_response((const char *)p, head_len, h, &reason);
		}
		free(h);
		break;
	case 5: {
		uint64_t sz;

		(void)!http1_chunk_size((const char *)p, n, &sz);
		break;
	}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy;

	if (size < 1)
		return 0;
	/* An exact-size copy: a read one past the input is an ASan report. */
	copy = malloc(size - 1 ? size - 1 : 1);
	if (!copy)
		return 0;
	memcpy(copy, data + 1, size - 1);
	fuzz_proxy_one(data[0], copy, size - 1);
	free(copy);
	return 0;
}

#ifdef FUZZ_SEEDS
static void seed(const char *dir, int i, uint8_t kind, const void *p, size_t n)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/seed-%d", dir, i);
	f = fopen(path, "wb");
	if (!f)
		return;
	fputc(kind, f);
	fwrite(p, 1, n, f);
	fclose(f);
}

int main(int argc, char **argv)
{
	static const char req[] = "GET /x HTTP/1.1\r\nHost: a.example.test\r\nContent-Length: 3"
				  "\r\n\r\nabc";
	static const char resp[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
	uint8_t q[512];
	int n;

	if (argc != 2)
		return 2;
	seed(argv[1], 0, 0, req, sizeof(req) - 1);
	n = dns_build_query(q, sizeof(q), 0x1234, "a.example.test", 1);
	if (n > 0) {
		seed(argv[1], 1, 1, q, (size_t)n);
		seed(argv[1], 2, 2, q, (size_t)n);
	}
	seed(argv[1], 3, 3, req, sizeof(req) - 1);
	seed(argv[1], 4, 4, resp, sizeof(resp) - 1);
	seed(argv[1], 5, 5, "1a;ext", 6);
	return 0;
}
#endif

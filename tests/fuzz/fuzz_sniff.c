/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for proxy/sniff.c: the input is a connection's first bytes from a hostile
 * guest, a TLS ClientHello in records or an HTTP/1.x request head, classified as the proxy
 * does before it decides where the connection may go (sniff_classify: the maybe-HTTP detector,
 * then the strict parser of http1.c), and the pieces the explicit proxy parses on their own
 * (sniff_request_line, sniff_split_hostport). The name found must be NUL-terminated inside its
 * buffer, the head length within the input, a refusal must say why, and a decision must not
 * change when more bytes come (what was "other" and relayed raw never turns out HTTP).
 *
 * Built and run by tests/fuzz/run.sh sniff; seeds in tests/fuzz/corpus/sniff/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_sniff(const uint8_t *p, size_t n)
{
	char name[NAME_MAX_TEXT], method[16], target[2048], host[NAME_MAX_TEXT];
	const char *why;
	enum sniff_kind k;
	size_t head_len = 0;
	uint16_t port;

	k = sniff_classify(p, n, name, sizeof(name));
	if (k > SNIFF_BAD_HTTP || strnlen(name, sizeof(name)) == sizeof(name))
		abort();
	k = sniff_http(p, n, name, sizeof(name), &head_len, &why);
	if (k == SNIFF_HTTP && (head_len > n || strnlen(name, sizeof(name)) == sizeof(name)))
		abort();
	if ((k == SNIFF_BAD_HTTP) != (why != NULL))
		abort(); /* a refusal always says why, and only a refusal */
	/* The decision never changes with more bytes: "other" (relayed raw) is never a prefix
	 * of what would have been an attempt at HTTP. */
	if (n > 1 && p[0] != 22) {
		enum sniff_kind whole = sniff_classify(p, n, name, sizeof(name));
		enum sniff_kind half = sniff_classify(p, n / 2, name, sizeof(name));

		if (half != SNIFF_MORE && half != whole)
			abort();
	}
	if (sniff_request_line(p, n, method, sizeof(method), target, sizeof(target)) == 0 &&
	    (strnlen(method, sizeof(method)) == sizeof(method) ||
	     strnlen(target, sizeof(target)) == sizeof(target)))
		abort();
	if (sniff_split_hostport((const char *)p, n, host, sizeof(host), 80, &port) == 0 &&
	    strnlen(host, sizeof(host)) == sizeof(host))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* An exact-size copy: a read one past the input is an ASan report. */
	uint8_t *copy = malloc(size ? size : 1);

	if (!copy)
		return 0;
	memcpy(copy, data, size);
	fuzz_sniff(copy, size);
	free(copy);
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for proxy/dns.c's parsers: the first byte picks one, the rest is a packet.
 *   even  dns_parse_query, then dns_build_response to it: a guest's query and our answer
 *   odd   dns_parse_answer: an upstream resolver's reply to our query for "a.example.test"
 *         (its id is the packet's first two bytes, so the fuzzer need not guess it)
 * Whatever the bytes, nothing may read or write out of bounds (ASan, UBSan); the name parsed is
 * NUL-terminated inside its buffer, the question ends inside the packet, the answer fits.
 *
 * Built and run by tests/fuzz/run.sh dns; seeds in tests/fuzz/corpus/dns/.
 */
#include <arpa/inet.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_dns(uint8_t kind, const uint8_t *p, size_t n)
{
	if (kind % 2 == 0) {
		struct dns_query q;
		uint8_t out[DNS_MAX_PKT + 512];
		struct in_addr a = {htonl(0x0a800001)};
		int r;

		if (dns_parse_query(p, n, &q) != 0)
			return;
		if (q.qend > n || strnlen(q.name, sizeof(q.name)) == sizeof(q.name))
			abort();
		r = dns_build_response(p, &q, kind & 2 ? 3 : 0, kind & 4 ? NULL : &a, out,
				       sizeof(out));
		if (r > (int)sizeof(out))
			abort();
	} else {
		struct in_addr addrs[DNS_MAX_ADDRS];
		unsigned na = 0, rcode = 0;
		uint32_t ttl = 0;

		if (n >= 2 &&
		    dns_parse_answer(p, n, (uint16_t)(p[0] << 8 | p[1]), "a.example.test", addrs,
				     DNS_MAX_ADDRS, &na, &ttl, &rcode) == 0 &&
		    na > DNS_MAX_ADDRS)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy;

	if (size < 1)
		return 0;
	/* An exact-size copy: a read one past the packet is an ASan report. */
	copy = malloc(size - 1 ? size - 1 : 1);
	if (!copy)
		return 0;
	memcpy(copy, data + 1, size - 1);
	fuzz_dns(data[0], copy, size - 1);
	free(copy);
	return 0;
}

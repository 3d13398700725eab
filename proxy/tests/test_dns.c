/* SPDX-License-Identifier: Apache-2.0 */
/* proxy/dns.c: hostile queries, answers with CNAME chains, the synthetic map. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proxy.h"

static const uint8_t hdr_query[12] = {0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};

static size_t mk(uint8_t *buf, const void *body, size_t blen)
{
	memcpy(buf, hdr_query, 12);
	memcpy(buf + 12, body, blen);
	return 12 + blen;
}

Test(dns, good_query)
{
	uint8_t pkt[512], out[600];
	static const uint8_t body[] = {1, 'A', 7,   'E', 'x', 'a', 'm', 'p', 'l', 'e',
				       4, 't', 'e', 's', 't', 0,   0,	1,   0,	  1};
	size_t len = mk(pkt, body, sizeof(body));
	struct dns_query q;
	struct in_addr a = {.s_addr = htonl(0x0a008005)};
	int n;

	cr_assert_eq(dns_parse_query(pkt, len, &q), 0);
	cr_assert_str_eq(q.name, "a.example.test");
	cr_assert_eq(q.qtype, 1);
	cr_assert_eq(q.id, 0x1234);
	n = dns_build_response(pkt, &q, 0, &a, out, sizeof(out));
	cr_assert_eq(n, (int)len + 16);
	cr_assert_eq(out[2] & 0x80, 0x80);
	cr_assert_eq(out[7], 1);
	cr_assert_eq(memcmp(out + n - 4, &a, 4), 0);
}

Test(dns, hostile_queries)
{
	uint8_t pkt[600];
	struct dns_query q;
	/* A pointer to itself, a pointer forward, a pointer into the header. */
	static const uint8_t loop[] = {0xc0, 12, 0, 1, 0, 1};
	static const uint8_t fwd[] = {0xc0, 14, 1, 'a', 0, 0, 1, 0, 1};
	static const uint8_t hdr[] = {0xc0, 2, 0, 1, 0, 1};
	/* A label running past the end, no terminator, the reserved label types. */
	static const uint8_t past[] = {20, 'a', 'b'};
	static const uint8_t noterm[] = {1, 'a', 1, 'b'};
	static const uint8_t ext[] = {0x41, 'a', 0, 0, 1, 0, 1};
	static const uint8_t badchar[] = {3, 'a', '.', 'b', 0, 0, 1, 0, 1};
	static const uint8_t noq[] = {1, 'a', 0, 0, 1};
	uint8_t longname[320];
	size_t o = 0;

	cr_assert_eq(dns_parse_query(pkt, mk(pkt, loop, sizeof(loop)), &q), -EINVAL);
	cr_assert_eq(dns_parse_query(pkt, mk(pkt, fwd, sizeof(fwd)), &q), -EINVAL);
	cr_assert_eq(dns_parse_query(pkt, mk(pkt, hdr, sizeof(hdr)), &q), -EINVAL);
	cr_assert_eq(dns_parse_query(pkt, mk(pkt, past, sizeof(past)), &q), -EINVAL);
	cr_assert_eq(dns_parse_query(pkt, mk(pkt, noterm, sizeof(noterm)), &q), -EINVAL);
	cr_assert_eq(dns_parse_query(pkt, mk(pkt, ext, sizeof(ext)), &q), -EINVAL);
	cr_assert_eq(dns_parse_query(pkt, mk(pkt, badchar, sizeof(badchar)), &q), -EINVAL);
	cr_assert_eq(dns_parse_query(pkt, mk(pkt, noq, sizeof(noq)), &q), -EINVAL);
	cr_assert_eq(dns_parse_query(pkt, 11, &q), -EINVAL);
	/* Five 60-byte labels: over 255 bytes. */
	for (int i = 0; i < 5; i++) {
		longname[o++] = 60;
		memset(longname + o, 'a', 60);
		o += 60;
	}
	longname[o++] = 0;
	memcpy(longname + o, "\0\1\0\1", 4);
	o += 4;
	cr_assert_eq(dns_parse_query(pkt, mk(pkt, longname, o), &q), -EINVAL);
	/* Two questions; a response. */
	mk(pkt, noq, sizeof(noq));
	pkt[5] = 2;
	cr_assert_eq(dns_parse_query(pkt, 12 + sizeof(noq), &q), -EINVAL);
	mk(pkt, noq, sizeof(noq));
	pkt[2] |= 0x80;
	cr_assert_eq(dns_parse_query(pkt, 12 + sizeof(noq), &q), -EINVAL);
}

Test(dns, answer_follows_cname)
{
	uint8_t pkt[512];
	int n = dns_build_query(pkt, sizeof(pkt), 0xbeef, "www.example.test", 1);
	struct in_addr addrs[4];
	unsigned na, rcode;
	uint32_t ttl;
	size_t o;
	/* www CNAME cdn.example.test (TTL 300), cdn A 203.0.113.10 (TTL 60), other A 10.0.0.1. */
	static const uint8_t ans[] = {
		0xc0, 12,  0,	 5,   0, 1, 0, 0, 1, 44, 0, 6,	3,  'c', 'd', 'n', 0xc0, 16, 3, 'c',
		'd',  'n', 0xc0, 16,  0, 1, 0, 1, 0, 0,	 0, 60, 0,  4,	 203, 0,   113,	 10, 5, 'o',
		't',  'h', 'e',	 'r', 0, 0, 1, 0, 1, 0,	 0, 0,	60, 0,	 4,   10,  0,	 0,  1,
	};

	cr_assert_gt(n, 0);
	o = (size_t)n;
	memcpy(pkt + o, ans, sizeof(ans));
	o += sizeof(ans);
	pkt[2] = 0x81;
	pkt[3] = 0x80;
	pkt[7] = 3;
	cr_assert_eq(
		dns_parse_answer(pkt, o, 0xbeef, "www.example.test", addrs, 4, &na, &ttl, &rcode),
		0);
	cr_assert_eq(na, 1);
	cr_assert_eq(ntohl(addrs[0].s_addr), 0xcb00710a);
	cr_assert_eq(ttl, 60);
	cr_assert_eq(rcode, 0);
	/* The wrong id, the wrong name, truncated. */
	cr_assert_eq(
		dns_parse_answer(pkt, o, 0xbeee, "www.example.test", addrs, 4, &na, &ttl, &rcode),
		-EINVAL);
	cr_assert_eq(
		dns_parse_answer(pkt, o, 0xbeef, "www.example.tes", addrs, 4, &na, &ttl, &rcode),
		-EINVAL);
	for (size_t cut = 12; cut < o; cut++) {
		int e = dns_parse_answer(pkt, cut, 0xbeef, "www.example.test", addrs, 4, &na, &ttl,
					 &rcode);

		cr_assert(e == -EINVAL || (e == 0 && na == 0), "cut %zu", cut);
	}
}

Test(dns, synthetic_map_persists)
{
	char dir[] = "/tmp/test_dns_XXXXXX", path[64], name[NAME_MAX_TEXT];
	struct in_addr a, b, c;
	struct dns_state *d;
	char err[128];

	cr_assert(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/dns.map", dir);
	d = dns_state_new(path, err, sizeof(err));
	cr_assert(d, "%s", err);
	cr_assert_eq(dns_synth_get(d, "a.example.test", &a), 0);
	cr_assert_eq(dns_synth_get(d, "b.example.test", &b), 0);
	cr_assert_eq(dns_synth_get(d, "a.example.test", &c), 0);
	cr_assert_eq(a.s_addr, c.s_addr);
	cr_assert_neq(a.s_addr, b.s_addr);
	cr_assert_eq(ntohl(a.s_addr) & SYNTH_MASK, SYNTH_NET);
	dns_state_free(d);
	d = dns_state_new(path, err, sizeof(err));
	cr_assert(d, "%s", err);
	cr_assert_eq(dns_synth_name(d, b, name, sizeof(name)), 0);
	cr_assert_str_eq(name, "b.example.test");
	cr_assert_eq(dns_synth_get(d, "a.example.test", &c), 0);
	cr_assert_eq(a.s_addr, c.s_addr);
	c.s_addr = htonl(0x0a000201);
	cr_assert_eq(dns_synth_name(d, c, name, sizeof(name)), -ENOENT);
	dns_state_free(d);
	unlink(path);
	rmdir(dir);
}

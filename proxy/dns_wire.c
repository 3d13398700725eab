/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The DNS wire format of the sandbox's DNS (dns.c; docs/network.md "Decisions"): the guest's
 * queries parsed, the proxy's answers and its upstream queries built, the resolver's answers
 * parsed. Pure functions over buffers: no state, no I/O (fuzzed by tests/fuzz/fuzz_dns.c).
 *
 * Every packet is hostile: names are read with bounds on every label and pointer, pointers only
 * go backwards (no loops), sizes are capped; anything malformed is -EINVAL.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy.h"

#define DNS_HDR	       12
#define DNS_TYPE_CNAME 5
#define DNS_MAX_RR     64 /* answer records read from one upstream answer */
#define DNS_ANSWER_TTL 60 /* the TTL of the synthetic address the guest gets */

static uint16_t dns_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void dns_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

int dns_read_name(const uint8_t *pkt, size_t len, size_t *off, char *out, size_t outlen)
{
	size_t pos = *off, o = 0, limit = pos; /* a pointer must point below `limit` */
	bool jumped = false;
	unsigned hops = 0;

	if (outlen == 0)
		return -EINVAL;
	for (;;) {
		uint8_t l;

		if (pos >= len)
			return -EINVAL;
		l = pkt[pos];
		if ((l & 0xc0) == 0xc0) {
			size_t to;

			if (pos + 1 >= len || ++hops > 64)
				return -EINVAL;
			to = (size_t)(l & 0x3f) << 8 | pkt[pos + 1];
			/* Strictly backwards and past the header: no loops. */
			if (to < DNS_HDR || to >= limit)
				return -EINVAL;
			if (!jumped)
				*off = pos + 2;
			jumped = true;
			limit = to;
			pos = to;
			continue;
		}
		if (l & 0xc0)
			return -EINVAL; /* the 0x40 and 0x80 label types */
		if (l == 0) {
			if (!jumped)
				*off = pos + 1;
			break;
		}
		if (pos + 1 + l > len || o + l + 1 > 255 || o + l + 1 >= outlen)
			return -EINVAL;
		if (o)
			out[o++] = '.';
		for (unsigned i = 0; i < l; i++) {
			char c = (char)pkt[pos + 1 + i];

			if (c >= 'A' && c <= 'Z')
				c = (char)(c - 'A' + 'a');
			if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
			      c == '_'))
				return -EINVAL;
			out[o++] = c;
		}
		pos += 1 + l;
	}
	out[o] = 0;
	return 0;
}

int dns_parse_query(const uint8_t *pkt, size_t len, struct dns_query *q)
{
	size_t off = DNS_HDR;

	if (len < DNS_HDR || len > DNS_RECV_MAX)
		return -EINVAL;
	q->id = dns_get16(pkt);
	q->flags = dns_get16(pkt + 2);
	if (q->flags & 0x8000)
		return -EINVAL; /* a response */
	if (dns_get16(pkt + 4) != 1 || dns_get16(pkt + 6) != 0 || dns_get16(pkt + 8) != 0)
		return -EINVAL;
	if (dns_read_name(pkt, len, &off, q->name, sizeof(q->name)) < 0)
		return -EINVAL;
	if (off + 4 > len)
		return -EINVAL;
	q->qtype = dns_get16(pkt + off);
	q->qclass = dns_get16(pkt + off + 2);
	q->qend = off + 4;
	return 0;
}

/* Encode dotted `name` as labels at buf; the length or -EINVAL. */
static int dns_put_name(uint8_t *buf, size_t len, const char *name)
{
	size_t o = 0;

	while (*name) {
		const char *dot = strchr(name, '.');
		size_t l = dot ? (size_t)(dot - name) : strlen(name);

		if (l == 0 || l > 63 || o + 1 + l + 1 > len || o + 1 + l > 254)
			return -EINVAL;
		buf[o++] = (uint8_t)l;
		memcpy(buf + o, name, l);
		o += l;
		name += l + (dot ? 1 : 0);
	}
	if (o + 1 > len)
		return -EINVAL;
	buf[o++] = 0;
	return (int)o;
}

int dns_build_query(uint8_t *buf, size_t len, uint16_t id, const char *name, uint16_t qtype)
{
	int n;

	if (len < DNS_HDR + 4)
		return -EINVAL;
	memset(buf, 0, DNS_HDR);
	dns_put16(buf, id);
	dns_put16(buf + 2, 0x0100); /* RD */
	dns_put16(buf + 4, 1);
	n = dns_put_name(buf + DNS_HDR, len - DNS_HDR - 4, name);
	if (n < 0)
		return n;
	dns_put16(buf + DNS_HDR + n, qtype);
	dns_put16(buf + DNS_HDR + n + 2, DNS_CLASS_IN);
	return DNS_HDR + n + 4;
}

int dns_parse_answer(const uint8_t *pkt, size_t len, uint16_t id, const char *name,
		     struct in_addr *addrs, unsigned max, unsigned *naddrs, uint32_t *ttl,
		     unsigned *rcode)
{
	struct {
		char owner[NAME_MAX_TEXT];
		uint16_t type;
		uint32_t ttl;
		union {
			struct in_addr a;
			char target[NAME_MAX_TEXT];
		} u;
	} *rr = NULL;
	char qname[NAME_MAX_TEXT], cur[NAME_MAX_TEXT];
	size_t off = DNS_HDR;
	unsigned an, nrr = 0, n = 0;
	uint32_t minttl = UINT32_MAX;
	int err = -EINVAL;

	*naddrs = 0;
	if (len < DNS_HDR || dns_get16(pkt) != id || !(dns_get16(pkt + 2) & 0x8000) ||
	    dns_get16(pkt + 4) != 1)
		return -EINVAL;
	*rcode = dns_get16(pkt + 2) & 0xf;
	an = dns_get16(pkt + 6);
	if (dns_read_name(pkt, len, &off, qname, sizeof(qname)) < 0 || strcmp(qname, name) != 0 ||
	    off + 4 > len || dns_get16(pkt + off) != DNS_TYPE_A ||
	    dns_get16(pkt + off + 2) != DNS_CLASS_IN)
		return -EINVAL;
	off += 4;
	if (an > DNS_MAX_RR)
		an = DNS_MAX_RR;
	rr = calloc(an ? an : 1, sizeof(*rr));
	if (!rr)
		return -ENOMEM;
	for (unsigned i = 0; i < an; i++) {
		uint16_t type, cls, rdlen;
		uint32_t t;

		if (dns_read_name(pkt, len, &off, rr[nrr].owner, sizeof(rr[nrr].owner)) < 0 ||
		    off + 10 > len)
			goto out;
		type = dns_get16(pkt + off);
		cls = dns_get16(pkt + off + 2);
		t = (uint32_t)dns_get16(pkt + off + 4) << 16 | dns_get16(pkt + off + 6);
		rdlen = dns_get16(pkt + off + 8);
		off += 10;
		if (off + rdlen > len)
			goto out;
		rr[nrr].type = type;
		rr[nrr].ttl = t;
		if (cls == DNS_CLASS_IN && type == DNS_TYPE_A && rdlen == 4) {
			memcpy(&rr[nrr].u.a, pkt + off, 4);
			nrr++;
		} else if (cls == DNS_CLASS_IN && type == DNS_TYPE_CNAME) {
			size_t roff = off;

			if (dns_read_name(pkt, off + rdlen, &roff, rr[nrr].u.target,
					  sizeof(rr[nrr].u.target)) < 0)
				goto out;
			nrr++;
		}
		off += rdlen;
	}
	/* Follow the CNAME chain from the question, at most 8 links. */
	snprintf(cur, sizeof(cur), "%s", name);
	for (unsigned hop = 0; hop < 8 && n == 0; hop++) {
		const char *next = NULL;

		for (unsigned i = 0; i < nrr; i++) {
			if (strcmp(rr[i].owner, cur) != 0)
				continue;
			if (rr[i].type == DNS_TYPE_A && n < max) {
				addrs[n++] = rr[i].u.a;
				minttl = rr[i].ttl < minttl ? rr[i].ttl : minttl;
			} else if (rr[i].type == DNS_TYPE_CNAME && !next) {
				next = rr[i].u.target;
				minttl = rr[i].ttl < minttl ? rr[i].ttl : minttl;
			}
		}
		if (n || !next)
			break;
		snprintf(cur, sizeof(cur), "%s", next);
	}
	*naddrs = n;
	*ttl = minttl == UINT32_MAX ? 0 : minttl;
	err = 0;
out:
	free(rr);
	return err;
}

int dns_build_response(const uint8_t *pkt, const struct dns_query *q, unsigned rcode,
		       const struct in_addr *a, uint8_t *out, size_t outlen)
{
	size_t n = q->qend;

	if (q->qend < DNS_HDR || n + 16 > outlen)
		return -EINVAL;
	memcpy(out, pkt, q->qend);
	/* QR, the query's opcode and RD, AA, RA, the rcode. */
	dns_put16(out + 2,
		  (uint16_t)(0x8000 | (q->flags & 0x7900) | 0x0400 | 0x0080 | (rcode & 0xf)));
	dns_put16(out + 4, 1);
	dns_put16(out + 6, a ? 1 : 0);
	dns_put16(out + 8, 0);
	dns_put16(out + 10, 0);
	if (a) {
		dns_put16(out + n, 0xc000 | DNS_HDR);
		dns_put16(out + n + 2, DNS_TYPE_A);
		dns_put16(out + n + 4, DNS_CLASS_IN);
		dns_put16(out + n + 6, 0);
		dns_put16(out + n + 8, DNS_ANSWER_TTL);
		dns_put16(out + n + 10, 4);
		memcpy(out + n + 12, a, 4);
		n += 16;
	}
	return (int)n;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fakenet dns: the fake internet's authoritative UDP DNS server, and fakenet query, its
 * one-shot client. The zone is a list of "NAME A IPV4" lines; every query is logged as
 * "NAME TYPE" before it is answered, so a test can prove a name never reached it.
 */
#include "fakenet.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define DNS_HDR_LEN    12
#define DNS_NAME_MAX   255
#define DNS_UDP_MAX    512
#define ZONE_MAX       4096
#define ZONE_A_MAX     16 /* A records per name */
#define TYPE_A	       1
#define TYPE_AAAA      28
#define CLASS_IN       1
#define RCODE_FORMERR  1
#define RCODE_NXDOMAIN 3
#define RCODE_NOTIMP   4

struct zone_entry {
	char name[DNS_NAME_MAX + 1]; /* lower case, no trailing dot */
	struct in_addr a[ZONE_A_MAX];
	unsigned na;
};

struct zone {
	struct zone_entry *e;
	unsigned n;
};

static void name_normalize(char *name)
{
	size_t len = strlen(name);

	if (len > 0 && name[len - 1] == '.')
		name[--len] = 0;
	for (size_t i = 0; i < len; i++)
		name[i] = tolower((unsigned char)name[i]);
}

static struct zone_entry *zone_find(struct zone *z, const char *name)
{
	for (unsigned i = 0; i < z->n; i++)
		if (!strcmp(z->e[i].name, name))
			return &z->e[i];
	return NULL;
}

/* Read "NAME A IPV4" lines ('#' comments, blank lines skipped); errors name the line. */
static int zone_load(const char *path, struct zone *z)
{
	FILE *f = fopen(path, "r");
	char line[512];
	unsigned lineno = 0;
	int rc = 0;

	if (!f) {
		fakenet_err("cannot open zone %s: %s", path, strerror(errno));
		return -errno;
	}
	z->e = calloc(ZONE_MAX, sizeof(*z->e));
	z->n = 0;
	if (!z->e) {
		fclose(f);
		return -ENOMEM;
	}
	while (fgets(line, sizeof(line), f)) {
		char name[DNS_NAME_MAX + 2], type[16], ip[64], extra[2];
		struct zone_entry *e;
		struct in_addr a;
		char *hash = strchr(line, '#');
		int nf;

		lineno++;
		if (hash)
			*hash = 0;
		nf = sscanf(line, "%256s %15s %63s %1s", name, type, ip, extra);
		if (nf <= 0)
			continue;
		if (nf != 3 || strcasecmp(type, "A") || inet_pton(AF_INET, ip, &a) != 1 ||
		    strlen(name) > DNS_NAME_MAX) {
			fakenet_err("%s:%u: expected NAME A IPV4", path, lineno);
			rc = -EINVAL;
			break;
		}
		name_normalize(name);
		e = zone_find(z, name);
		if (!e) {
			if (z->n == ZONE_MAX) {
				fakenet_err("%s:%u: more than %d names", path, lineno, ZONE_MAX);
				rc = -E2BIG;
				break;
			}
			e = &z->e[z->n++];
			snprintf(e->name, sizeof(e->name), "%s", name);
		}
		if (e->na == ZONE_A_MAX) {
			fakenet_err("%s:%u: more than %d A records for %s", path, lineno,
				    ZONE_A_MAX, name);
			rc = -E2BIG;
			break;
		}
		e->a[e->na++] = a;
	}
	fclose(f);
	return rc;
}

/*
 * Decode the uncompressed name at pkt[*off] into out (dotted, as sent, "." for the root);
 * *off moves past it. -EPROTO if malformed or compressed.
 */
static int dns_read_name(const uint8_t *pkt, size_t len, size_t *off, char *out, size_t outlen)
{
	size_t o = *off, w = 0;

	for (;;) {
		unsigned l;

		if (o >= len)
			return -EPROTO;
		l = pkt[o++];
		if (l == 0)
			break;
		if (l > 63 || o + l > len || w + l + 2 > outlen)
			return -EPROTO;
		if (w)
			out[w++] = '.';
		for (unsigned i = 0; i < l; i++) {
			uint8_t c = pkt[o + i];

			/* Keep the log one line per query: no controls, spaces or dots in labels.
			 */
			out[w++] = (c > 0x20 && c < 0x7f && c != '.') ? (char)c : '?';
		}
		o += l;
	}
	if (w == 0)
		out[w++] = '.';
	out[w] = 0;
	*off = o;
	return 0;
}

static void type_name(unsigned type, char *buf, size_t len)
{
	static const struct {
		unsigned type;
		const char *name;
	} names[] = {{1, "A"},	  {2, "NS"},	{5, "CNAME"},  {6, "SOA"},
		     {12, "PTR"}, {15, "MX"},	{16, "TXT"},   {28, "AAAA"},
		     {33, "SRV"}, {64, "SVCB"}, {65, "HTTPS"}, {255, "ANY"}};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (names[i].type == type) {
			snprintf(buf, len, "%s", names[i].name);
			return;
		}
	}
	snprintf(buf, len, "TYPE%u", type);
}

static void put16(uint8_t *p, unsigned v)
{
	p[0] = v >> 8;
	p[1] = v & 0xff;
}

static unsigned get16(const uint8_t *p)
{
	return (unsigned)p[0] << 8 | p[1];
}

/* Build the answer to query q (qlen bytes) into r; its length, or 0 to send nothing. */
static size_t dns_answer(struct zone *z, const uint8_t *q, size_t qlen, uint8_t *r, char *peer)
{
	char name[DNS_NAME_MAX + 2], lname[DNS_NAME_MAX + 2], tname[16];
	size_t off = DNS_HDR_LEN, rlen;
	unsigned qtype, qclass, opcode, rcode = 0, nans = 0;
	struct zone_entry *e;

	if (qlen < DNS_HDR_LEN || (q[2] & 0x80)) /* too short, or a response */
		return 0;
	opcode = (q[2] >> 3) & 0xf;
	memcpy(r, q, 4);
	r[2] = 0x80 | (q[2] & 0x79) | 0x04; /* QR, opcode and RD kept, AA */
	r[3] = 0x80;			    /* RA */
	memset(r + 4, 0, 8);
	if (get16(q + 4) != 1 || dns_read_name(q, qlen, &off, name, sizeof(name)) ||
	    off + 4 > qlen) {
		fakenet_log("%s malformed query", peer);
		r[3] |= RCODE_FORMERR;
		return DNS_HDR_LEN;
	}
	qtype = get16(q + off);
	qclass = get16(q + off + 2);
	off += 4;
	type_name(qtype, tname, sizeof(tname));
	fakenet_log("%s %s", strcmp(name, ".") ? name : ".", tname);
	/* The question, copied back. */
	memcpy(r + DNS_HDR_LEN, q + DNS_HDR_LEN, off - DNS_HDR_LEN);
	put16(r + 4, 1);
	rlen = off;
	if (opcode != 0 || qclass != CLASS_IN) {
		r[3] |= RCODE_NOTIMP;
		return rlen;
	}
	snprintf(lname, sizeof(lname), "%s", name);
	name_normalize(lname);
	e = zone_find(z, lname);
	if (!e) {
		rcode = RCODE_NXDOMAIN;
	} else if (qtype == TYPE_A || qtype == 255) {
		for (unsigned i = 0; i < e->na && rlen + 16 <= DNS_UDP_MAX; i++, nans++) {
			uint8_t *a = r + rlen;

			put16(a, 0xc000 | DNS_HDR_LEN); /* the name: the question's */
			put16(a + 2, TYPE_A);
			put16(a + 4, CLASS_IN);
			put16(a + 6, 0);
			put16(a + 8, 60); /* TTL */
			put16(a + 10, 4);
			memcpy(a + 12, &e->a[i], 4);
			rlen += 16;
		}
		if (nans < e->na)
			r[2] |= 0x02; /* TC */
	}
	r[3] |= rcode;
	put16(r + 6, nans);
	return rlen;
}

int dns_main(int argc, char **argv)
{
	struct fakenet_opts opts;
	const char *zone_path = NULL;
	struct zone zone = {0};
	int fd;

	fakenet_opts_init(&opts);
	for (int i = 1; i < argc; i++) {
		int c = fakenet_parse_common(argc, argv, &i, &opts);

		if (c < 0)
			return 2;
		if (c > 0)
			continue;
		if (!strcmp(argv[i], "--zone") && i + 1 < argc) {
			zone_path = argv[++i];
		} else {
			fakenet_err("dns: unknown argument: %s", argv[i]);
			return 2;
		}
	}
	if (!opts.have_listen || !zone_path) {
		fakenet_err("dns: needs --listen IP:PORT and --zone FILE");
		return 2;
	}
	if (zone_load(zone_path, &zone) || fakenet_start(&opts))
		return 1;
	fd = fakenet_listen(&opts, SOCK_DGRAM);
	if (fd < 0 || fakenet_write_pidfile(&opts))
		return 1;
	for (;;) {
		uint8_t q[1500], r[DNS_UDP_MAX + 64];
		struct sockaddr_in peer;
		socklen_t plen = sizeof(peer);
		char paddr[32];
		ssize_t n = recvfrom(fd, q, sizeof(q), 0, (struct sockaddr *)&peer, &plen);
		size_t rlen;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			fakenet_err("dns: recvfrom: %s", strerror(errno));
			return 1;
		}
		fakenet_format_addr(&peer, paddr, sizeof(paddr));
		rlen = dns_answer(&zone, q, n, r, paddr);
		if (rlen)
			sendto(fd, r, rlen, 0, (struct sockaddr *)&peer, plen);
	}
}

/* Encode a dotted name; its length in out, or 0 if it does not fit. */
static size_t dns_put_name(const char *name, uint8_t *out, size_t outlen)
{
	size_t w = 0;
	const char *p = name;

	while (*p) {
		const char *dot = strchr(p, '.');
		size_t l = dot ? (size_t)(dot - p) : strlen(p);

		if (l == 0 || l > 63 || w + l + 2 > outlen)
			return 0;
		out[w++] = l;
		memcpy(out + w, p, l);
		w += l;
		p += l + (dot ? 1 : 0);
	}
	if (w + 1 > outlen)
		return 0;
	out[w++] = 0;
	return w;
}

int query_main(int argc, char **argv)
{
	static const char *rcodes[] = {"NOERROR",  "FORMERR", "SERVFAIL",
				       "NXDOMAIN", "NOTIMP",  "REFUSED"};
	struct fakenet_opts opts;
	const char *name = NULL, *type = "A";
	uint8_t q[DNS_UDP_MAX], r[1500];
	unsigned qtype, id, rcode, an;
	size_t nl, off;
	ssize_t n;
	int fd;

	fakenet_opts_init(&opts);
	opts.timeout_sec = 3;
	for (int i = 1; i < argc; i++) {
		int c = fakenet_parse_common(argc, argv, &i, &opts);

		if (c < 0)
			return 2;
		if (c > 0)
			continue;
		if (!name)
			name = argv[i];
		else
			type = argv[i];
	}
	if (!opts.have_listen || !name) {
		fakenet_err("query: needs --connect IP:PORT and NAME");
		return 2;
	}
	if (!strcasecmp(type, "A"))
		qtype = TYPE_A;
	else if (!strcasecmp(type, "AAAA"))
		qtype = TYPE_AAAA;
	else if ((qtype = strtoul(type, NULL, 10)) == 0) {
		fakenet_err("query: TYPE is A, AAAA or a number");
		return 2;
	}
	id = (unsigned)getpid() & 0xffff;
	memset(q, 0, DNS_HDR_LEN);
	put16(q, id);
	q[2] = 0x01; /* RD */
	put16(q + 4, 1);
	nl = dns_put_name(name, q + DNS_HDR_LEN, sizeof(q) - DNS_HDR_LEN - 4);
	if (nl == 0) {
		fakenet_err("query: bad name: %s", name);
		return 2;
	}
	off = DNS_HDR_LEN + nl;
	put16(q + off, qtype);
	put16(q + off + 2, CLASS_IN);
	off += 4;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&opts.listen, sizeof(opts.listen)))
		goto fail;
	fakenet_set_timeouts(fd, opts.timeout_sec);
	if (send(fd, q, off, 0) != (ssize_t)off)
		goto fail;
	do {
		n = recv(fd, r, sizeof(r), 0);
	} while (n >= 2 && get16(r) != id);
	if (n < 0)
		goto fail;
	if (n < DNS_HDR_LEN) {
		printf("malformed\n");
		return 1;
	}
	rcode = r[3] & 0xf;
	an = get16(r + 6);
	printf("rcode=%s\n", rcode < 6 ? rcodes[rcode] : "OTHER");
	off = DNS_HDR_LEN;
	for (unsigned i = get16(r + 4); i > 0; i--) { /* skip the question */
		char tmp[DNS_NAME_MAX + 2];

		if (dns_read_name(r, n, &off, tmp, sizeof(tmp)) || off + 4 > (size_t)n)
			return 1;
		off += 4;
	}
	for (unsigned i = 0; i < an; i++) {
		unsigned rtype, rdlen;
		char ip[INET_ADDRSTRLEN];

		/* The name: a pointer (2 bytes) or labels. */
		while (off < (size_t)n && r[off] && (r[off] & 0xc0) != 0xc0)
			off += r[off] + 1;
		off += (off < (size_t)n && r[off]) ? 2 : 1;
		if (off + 10 > (size_t)n)
			return 1;
		rtype = get16(r + off);
		rdlen = get16(r + off + 8);
		off += 10;
		if (off + rdlen > (size_t)n)
			return 1;
		if (rtype == TYPE_A && rdlen == 4)
			printf("A %s\n", inet_ntop(AF_INET, r + off, ip, sizeof(ip)));
		else
			printf("type%u rdlen=%u\n", rtype, rdlen);
		off += rdlen;
	}
	return 0;
fail:
	printf("error: %s\n", strerror(errno));
	return 1;
}

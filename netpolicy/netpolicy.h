/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The network policy's grammar, defined once (docs/network.md "Policy"): DNS names, domain
 * patterns, CIDRs and resolver addresses as sandboxctl's command line, job specs and the
 * proxy's policy file and command line all write them, and as the proxy checks the names it
 * sees on the wire; the special address ranges (ranges.c); and the text of the kernel's guard
 * on a jailed proxy's upstream connects (guard.c), written from those ranges; and the policy
 * REQUEST (request.c): the policy options' table, the one check of their values, and the
 * request file sandboxctl writes and `sandbox-proxy prepare --request` reads. Nothing here
 * decides a connection (the proxy's policy.c decides), and only the guard's writer prints, to
 * the stream it is given.
 */
#ifndef SANDBOX_NETPOLICY_H
#define SANDBOX_NETPOLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

/* A DNS name as text, with its NUL, without a trailing dot: 253 bytes and the NUL. */
#define NETPOL_NAME_TEXT 254

/* A CIDR, normalised: the address masked to its prefix. */
struct netpol_cidr {
	int family;	  /* AF_INET or AF_INET6 */
	uint8_t addr[16]; /* network order, masked */
	unsigned prefix;
	char text[64]; /* as normalised, "203.0.113.0/24" */
};

/* Normalise a DNS name into `out` (lower case, a trailing dot dropped) and check its syntax:
 * labels of 1-63 bytes of [a-z0-9_-], 253 bytes at most. False on a bad name (or `outlen`
 * too small). `out` may be `name`. */
bool netpol_name_norm(const char *name, char *out, size_t outlen);
/* The same for a domain pattern: a name, or "*." and a name (its subdomains). */
bool netpol_pattern_norm(const char *s, char *out, size_t outlen);
/* True when `name` (normalised) matches `pattern` (normalised: "example.test" or
 * "*.example.test", which matches names below example.test, not example.test itself). */
bool netpol_pattern_match(const char *pattern, const char *name);
/* Parse "ADDR/PREFIX" or a bare address (/32, /128), IPv4 or IPv6, into `c`: 0 or -EINVAL. */
int netpol_cidr_parse(const char *s, struct netpol_cidr *c) __attribute__((warn_unused_result));
/* Parse "IPv4[:PORT]", "[IPv6][:PORT]" or a bare IPv6 into `sa` (port `defport` when
 * absent; a port is 1-65535): 0 or -EINVAL. */
int netpol_hostport_parse(const char *s, uint16_t defport, struct sockaddr_storage *sa,
			  socklen_t *salen) __attribute__((warn_unused_result));
/* A port: 1-65535 in decimal, at most 5 digits. False on anything else. */
bool netpol_port_parse(const char *s, uint16_t *out);
/* A byte count: decimal digits, at most INT64_MAX (the proxy's budget is signed). */
bool netpol_bytes_parse(const char *s, uint64_t *out);
/* An HTTP header name: a token (RFC 9110) of 1 to 128 bytes. */
bool netpol_header_name_ok(const char *s);

/* ---- ranges.c: the special ranges (docs/network.md "Decisions") ---- */

/* A special range: `prefix` bits of `net` (4 or 16 bytes used, by `family`). An IPv6 range
 * with `v4_at` (a byte offset, never 0) carries an IPv4 address there and takes its class
 * (`what` NULL); else `what` is its class ("loopback", "link-local", ...). */
struct netpol_range {
	int family;
	uint8_t net[16];
	uint8_t prefix;
	uint8_t v4_at;
	const char *what;
};
/* The table for AF_INET or AF_INET6 and its length (*n 0, NULL for another family). IPv6's
 * is in lookup order: the first range that holds an address decides. */
const struct netpol_range *netpol_ranges(int family, size_t *n);
/* The class of the 4- or 16-byte address `addr` ("loopback", ...), NULL when not special. */
const char *netpol_special_class(const uint8_t *addr, unsigned len);
/* True when the first `prefix` bits of `a` and `b` are equal. */
bool netpol_prefix_eq(const uint8_t *a, const uint8_t *b, unsigned prefix);

/* ---- guard.c: the kernel's guard on jailed proxies' upstream connects ---- */

/* nftables' table in the namespace the proxies connect from (the host's): docs/hardening.md
 * "The proxy's jail". */
#define NETPOL_GUARD_TABLE "inet sandbox_guard"
/* What one proxy's guard lets through before the shared refusal: its policy's resolver
 * (udp and tcp to that address and port) and allow-cidr ranges. Every uid from `uid_lo` to
 * `uid_hi` (every sandbox's proxy, `uid` among them) without a guard is refused everything. */
struct netpol_guard {
	uint32_t uid, uid_lo, uid_hi;
	const struct sockaddr_storage *resolver; /* NULL: none */
	const struct netpol_cidr *cidrs;
	unsigned ncidrs;
};
/* Write the `nft -f` script that loads `g` (the shared table, made or refreshed, and this
 * uid's chain, replacing a stale one) to `out`. 0, or -EINVAL (a uid outside the range, an
 * address of another family) or -EIO (the stream failed). */
int netpol_guard_write(FILE *out, const struct netpol_guard *g) __attribute__((warn_unused_result));
/* The `nft -f` script that removes uid's guard (whether or not it is there) into `out`:
 * 0 or -E2BIG. */
int netpol_guard_remove_text(uint32_t uid, char *out, size_t len)
	__attribute__((warn_unused_result));

/* ---- request.c: the policy request (docs/network.md "The policy request") ---- */

/* The policy options of `sandboxctl create` and `sandbox-proxy prepare`, one table for both
 * (and for a job spec's network, which is turned into them). The order is create's getopt
 * order: its abbreviations (--allow- is --allow-cidr) and its "ambiguous" lists follow it. */
enum netpol_opt {
	NETPOL_POLICY, /* --policy FILE: a YAML policy, loaded before everything else */
	NETPOL_ALLOW,
	NETPOL_DENY,
	NETPOL_ALLOW_CIDR,
	NETPOL_ALLOW_PORT,
	NETPOL_CREDENTIAL, /* HOST:HEADER=ENVVAR: the value is read from $ENVVAR at prepare */
	NETPOL_EGRESS_BYTES,
	NETPOL_RESOLVER,
	NETPOL_CA_FILE,
	NETPOL_DENY_ALL, /* the only one without a value */
	NETPOL_NOPTS
};
struct netpol_option {
	const char *flag; /* "--allow-cidr"; the name is flag + 2 */
	bool has_value;
};
extern const struct netpol_option netpol_options[NETPOL_NOPTS];
/* The option spelt `flag` ("--allow", exactly), or -1. */
int netpol_option_find(const char *flag);

/* A checked value of one option (netpol_value_parse). */
union netpol_value {
	char pattern[NETPOL_NAME_TEXT + 2]; /* allow, deny: normalised */
	struct netpol_cidr cidr;	    /* allow-cidr */
	uint16_t port;			    /* allow-port */
	uint64_t bytes;			    /* egress-bytes */
	struct {			    /* resolver */
		struct sockaddr_storage sa;
		socklen_t len;
	} resolver;
	struct {			     /* credential */
		char host[NETPOL_NAME_TEXT]; /* normalised */
		char header[129];
		const char *var; /* in the text given */
	} cred;
};
/* Check `text` as the value of `opt` and give it in `v` (policy, ca-file and deny-all have
 * nothing to check). 0, or -EINVAL with the message sandbox-proxy prepare prints in `err`
 * ("--allow: bad domain pattern 'x'"; `err` may be NULL). The one check of a policy value:
 * the proxy's prepare and sandboxctl's job specs call it. */
int netpol_value_parse(enum netpol_opt opt, const char *text, union netpol_value *v, char *err,
		       size_t errlen) __attribute__((warn_unused_result));

/* A request: the policy options in the order given (the first bad one is the one reported,
 * a later scalar overrides an earlier one), values as given, unchecked: prepare checks each
 * as it applies it (netpol_value_parse). */
struct netpol_item {
	enum netpol_opt opt;
	char *value; /* NULL for deny-all */
};
struct netpol_request {
	struct netpol_item *items;
	unsigned nitems;
};
/* The request file's bound: above any command line (ARG_MAX is a quarter of the stack's
 * limit, 2 MiB by default), so that every create's options fit. */
#define NETPOL_REQUEST_MAX (16u << 20)
void netpol_request_free(struct netpol_request *r);
/* Append `opt` with a copy of `value` (NULL when it takes none): 0, -EINVAL (a value where
 * none is taken, or none where one is), -ENOMEM. */
int netpol_request_add(struct netpol_request *r, enum netpol_opt opt, const char *value)
	__attribute__((warn_unused_result));
/* Append the `n` command-line words at `words` ("--allow", "example.test", "--deny-all").
 * -EINVAL with "an option lacks its value" when a word other than --deny-all is the last one
 * (checked over all words first); -ENOENT with "unknown option WORD" at the first word the
 * table lacks, the words before it appended (prepare applies them, then reports it); -ENOMEM. */
int netpol_request_words(struct netpol_request *r, char *const *words, unsigned n, char *err,
			 size_t errlen) __attribute__((warn_unused_result));
/* The request file's text (malloc'ed, NUL-terminated, `len` bytes): docs/network.md. 0 or
 * -ENOMEM, -E2BIG past NETPOL_REQUEST_MAX. */
int netpol_request_format(const struct netpol_request *r, char **text, size_t *len)
	__attribute__((warn_unused_result));
/* Parse a request file's `len` bytes at `text` (named `path` in messages) and append its
 * items: 0, or -EINVAL with "PATH:LINE: message" in `err`, -ENOMEM. Hostile input: the header,
 * every name, every escape and the size are checked; the values are prepare's to check. */
int netpol_request_parse(struct netpol_request *r, const char *path, const char *text, size_t len,
			 char *err, size_t errlen) __attribute__((warn_unused_result));

#endif

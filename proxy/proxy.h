/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandbox-proxy's internal header (docs/network.md): the policy (policy.c), the audit log
 * (audit.c), the DNS server and stub resolver (dns.c, its wire format dns_wire.c), the
 * sniffing of a connection's first bytes (sniff.c), the connections (conn.c), the inbound
 * forwarder (forward.c) and small helpers (util.c). The TLS interception is mitm.h's.
 *
 * Functions return 0 or -errno and print nothing unless their comment says so.
 */
#ifndef SANDBOX_PROXY_H
#define SANDBOX_PROXY_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#define __must_check __attribute__((warn_unused_result))

#include "hostutil.h"
#include "netpolicy.h" /* the grammar of names, patterns, CIDRs and resolvers */ /* now_ms, write_all, write_file_atomic, read_file, parse_u64 */

#define PROXY_EXIT_ERR	 1 /* an error: the message says what */
#define PROXY_EXIT_USAGE 2 /* bad command line or policy */

/* The fixed addresses of every sandbox's namespace (docs/network.md "Addresses"). */
#define PROXY_GW_ADDR	    "10.0.2.1"
#define PROXY_PORT_EXPLICIT 3128
#define PROXY_PORT_TPROXY   15001
#define PROXY_PORT_DNS	    53
#define SYNTH_NET	    0x0a008000u /* 10.0.128.0/17, host order */
#define SYNTH_MASK	    0xffff8000u
#define SYNTH_SIZE	    32768u

#define NAME_MAX_TEXT NETPOL_NAME_TEXT /* a DNS name as text (netpolicy.h) */
#define RULE_LEN      192	       /* the "rule" text of a decision */

/* ---- util.c ---- */

/* "sandbox-proxy: " + the message + "\n" on stderr, one write. */
void proxy_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The address of `sa` as text (no port). */
void proxy_addr_text(const struct sockaddr *sa, char *out, size_t len);

/* ---- policy.c ---- */

/* One header of a credential rule. `value` is the secret (NULL until resolved); `source`
 * is what the policy file or the command line said it comes from. */
enum cred_source { CRED_TEMPLATE, CRED_FILE, CRED_ENV, CRED_LOADED };
struct pol_header {
	char *name;
	enum cred_source kind;
	char *source; /* the template "Bearer ${X}", the file path, or the variable name */
	char *value;
	unsigned line;
};

struct pol_cred {
	char *host; /* normalised: lower case, no trailing dot */
	struct pol_header *headers;
	unsigned nheaders;
};

#define POL_MAX_LIST 4096

struct policy {
	bool default_deny; /* "default: deny" (--deny-all) */
	char **allow, **deny;
	unsigned nallow, ndeny;
	struct netpol_cidr *cidrs;
	unsigned ncidrs;
	uint16_t *ports; /* empty: 80 and 443 */
	unsigned nports;
	uint64_t egress_bytes; /* 0: no budget */
	char *resolver;	       /* "IP:PORT" text; NULL: /etc/resolv.conf's first nameserver */
	struct sockaddr_storage resolver_sa;
	socklen_t resolver_salen;
	char *ca_file;
	struct pol_cred *creds;
	unsigned ncreds;
	/* The host's own addresses (getifaddrs at policy_host_addrs), special like loopback. */
	struct sockaddr_storage *own;
	unsigned nown;
};

/* An empty policy: default allow-public, ports 80 and 443. */
struct policy *policy_new(void);
void policy_free(struct policy *p);
/* Parse the YAML policy `text` (named `path` in messages) into `p`, adding to its lists.
 * On bad input, -EINVAL with "PATH:LINE: message" in err. */
int policy_parse(struct policy *p, const char *path, const char *text, size_t len, char *err,
		 size_t errlen) __must_check;
/* Read and parse a policy file (policy_parse). */
int policy_load(struct policy *p, const char *path, char *err, size_t errlen) __must_check;
/* Add one command-line item. -EINVAL with a message naming it on bad input. */
int policy_add_allow(struct policy *p, const char *pattern, char *err, size_t errlen) __must_check;
int policy_add_deny(struct policy *p, const char *pattern, char *err, size_t errlen) __must_check;
int policy_add_cidr(struct policy *p, const char *cidr, char *err, size_t errlen) __must_check;
int policy_add_port(struct policy *p, const char *port, char *err, size_t errlen) __must_check;
/* "--credential HOST:HEADER=ENVVAR": header HEADER on HOST gets $ENVVAR verbatim. */
int policy_add_cred_env(struct policy *p, const char *spec, char *err, size_t errlen) __must_check;
/* Apply one option of a request (netpolicy.h) with policy_add_* and the like; --policy is
 * prepare's to load, first. -EINVAL with the message prepare prints on a bad value. */
int policy_apply(struct policy *p, const struct netpol_item *it, char *err,
		 size_t errlen) __must_check;
/* Set the resolver from "IP[:PORT]". */
int policy_set_resolver(struct policy *p, const char *s, char *err, size_t errlen) __must_check;
/* When no resolver is set, take /etc/resolv.conf's (or `resolv_conf`'s) first nameserver.
 * 1 (and `err` says why) when there is none: the policy then has no resolver and no name
 * resolves. */
int policy_default_resolver(struct policy *p, const char *resolv_conf, char *err,
			    size_t errlen) __must_check;
/* Resolve every credential value: ${VAR} from the environment, {file: PATH} from the file
 * (one trailing newline dropped). A missing variable or file, or a value with CR, LF or NUL,
 * is -EINVAL with a message naming it. */
int policy_resolve_creds(struct policy *p, char *err, size_t errlen) __must_check;
/* The policy as normalised YAML (malloc'ed), credentials as names only. */
char *policy_format(const struct policy *p);
/* The credential values, one "HOST\tHEADER\tVALUE\n" a line (malloc'ed). */
char *policy_format_creds(const struct policy *p);
/* Fill in the values of `p`'s credential headers from policy_format_creds's text; a header
 * of the policy that the text lacks is -EINVAL. */
int policy_load_creds(struct policy *p, const char *text, char *err, size_t errlen) __must_check;
/* Read the host's own addresses (getifaddrs) into p->own. */
int policy_host_addrs(struct policy *p) __must_check;

/* Decide a name on a port (port 0: any port, for DNS). The rule that decided goes into
 * `rule`: "allow *.example.test", "deny *.evil.test", "deny (not on the allow list)",
 * "default allow-public", "deny port 22". */
bool policy_check_name(const struct policy *p, const char *name, uint16_t port, char *rule,
		       size_t rulelen);
/* Decide a raw address (no name) on a port: only a CIDR rule allows it. */
bool policy_check_addr(const struct policy *p, const struct sockaddr *sa, uint16_t port, char *rule,
		       size_t rulelen);
/* Decide an address that an allowed name resolved to: a special one is refused unless a
 * CIDR rule holds it ("deny private address 10.0.0.5"). */
bool policy_check_resolved(const struct policy *p, const struct sockaddr *sa, char *rule,
			   size_t rulelen);
/* The class of a special address ("loopback", "private", ...), NULL for a public one. The
 * host's own addresses come from `p` (may be NULL). */
const char *policy_special_class(const struct policy *p, const struct sockaddr *sa);
/* True when `sa` is inside `c`. */
bool policy_cidr_contains(const struct netpol_cidr *c, const struct sockaddr *sa);
/* The credential rule for a name, or NULL. */
const struct pol_cred *policy_find_cred(const struct policy *p, const char *name);

/* Internals shared by policy.c, policy_build.c and policy_file.c. */
/* Format a message into err; returns -EINVAL. */
int policy_errf(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A domain pattern ("name" or "*.name") normalised into a malloc'ed string; -EINVAL if bad. */
int policy_norm_pattern(const char *s, char **out) __must_check;
/* Append `s` (taken) to a list unless already there; -E2BIG past POL_MAX_LIST. */
int policy_push_str(char ***list, unsigned *n, char *s) __must_check;
int policy_push_cidr(struct policy *p, const struct netpol_cidr *c) __must_check;
int policy_push_port(struct policy *p, uint16_t port) __must_check;
/* The credential rule for `host` (normalised), made if missing; NULL when full or no memory. */
struct pol_cred *policy_cred_for(struct policy *p, const char *host);
/* Add or replace header `name` of `c`, taking `source`. */
int policy_cred_header(struct pol_cred *c, const char *name, enum cred_source kind, char *source,
		       unsigned line) __must_check;

/* ---- http_relay.c ---- */

/* Relay plain HTTP decided by the name `name`: every request the guest sends (the first is in
 * pre[0, npre)) is parsed strictly and must have Host `name`; bodies are framed, chunked ones
 * re-encoded with their trailers dropped. A refused request is answered (400, 403, 417, 501)
 * when nothing went upstream before it. Responses are copied back as they come. 0, -EACCES (a
 * request for another host), -EPROTO (a request the parser refuses), -EDQUOT (the egress
 * budget), -ETIMEDOUT, -errno; *why says which. */
int http_relay(int gfd, int ufd, const void *pre, size_t npre, const char *name, unsigned idle_ms,
	       _Atomic int64_t *budget, uint64_t *up, uint64_t *down,
	       const char **why) __must_check;
/* A connection opened before the guest sent a byte (a server-first port): upstream's bytes go
 * to the guest as they come, and the guest's first bytes, when they come, decide as
 * sniff_classify says: an attempt at HTTP is relayed as http_relay does (every request must
 * name `name`; without `http_ok`, a credentialed host's, refused: -EACCES), a ClientHello
 * that names a host must name `name` (-EACCES), a malformed one is -EBADMSG, bytes that are
 * positively something else are copied raw, and bytes that stop before they decide are
 * -EPROTO. Returns as http_relay. */
int http_relay_gated(int gfd, int ufd, const char *name, bool http_ok, unsigned idle_ms,
		     _Atomic int64_t *budget, uint64_t *up, uint64_t *down,
		     const char **why) __must_check;

/* ---- jail.c, seccomp.c: the proxy's jail (docs/hardening.md) ---- */

/* The limits of a jailed proxy: an fd a waiting connection (WAIT_MAX), two a served one
 * (CONN_MAX) and two more for its HTTP relay's splice pipe, its DNS workers' and a margin for
 * the listeners, the files and the epoll; the largest file it writes (dns.map's cap, or the
 * audit log past its rotation size by a second's lines) and a margin; its thread budget
 * (RLIMIT_NPROC counts the tasks of its uid: the proxy's own, shared only with its port
 * forwarders). */
#define PROXY_JAIL_NOFILE (WAIT_MAX + 4 * CONN_MAX + DNS_WORKERS_MAX + 64)
#define PROXY_JAIL_FSIZE  ((64u << 20) + (1u << 20))
#define PROXY_JAIL_NPROC  PROXY_THREADS_MAX

struct proxy_jail {
	bool on;   /* --jail given; else uid and gid are 0 */
	uid_t uid; /* the proxy's own, never the VMM's */
	gid_t gid;
	char root[4200]; /* DIR/proxy, absolute (jail_state_dir); "": an empty one (forward) */
};

/* Parse --jail's "uid=N,gid=N" (neither 0) into `j`, turned on. */
int jail_parse(const char *arg, struct proxy_jail *j) __must_check;
/* Close every fd but 0, 1, 2 and `keep_fd` (-1: none): a jailed proxy keeps nothing of its
 * launcher's but what it was given. */
int jail_close_inherited(int keep_fd) __must_check;
/* Make DIR/proxy the proxy's directory (j->root) and the current one: created 0700 if
 * missing, refused when it is a link or belongs to another uid than root and j->uid, then
 * made j->uid's (root's when not jailed). Every file the proxy writes at run time is there,
 * named relative to it. A message in `err` on failure. */
int jail_state_dir(const char *dir, struct proxy_jail *j, char *err, size_t errlen) __must_check;
/* With every fd open and no thread started: the pid, mount, ipc and uts namespaces, the
 * root j->root, the rlimits, uid and gid, no capabilities, no_new_privs, the seccomp filter.
 * A message in `err` on failure (then the process must exit). */
int jail_enter(const struct proxy_jail *j, char *err, size_t errlen) __must_check;
/* The filter of what a running proxy calls (proxy/seccomp.c); anything else kills it. */
int proxy_seccomp_install(void) __must_check;
/* `sandbox-proxy guard` (proxy/guard.c): the nftables script of the kernel's guard on a
 * jailed proxy's upstream connects, from DIR's policy, on stdout (or, --remove, the one that
 * removes it). Returns the exit status. */
int guard_command(int argc, char **argv);

/* ---- audit.c ---- */

struct audit_event {
	const char *proto; /* dns, http, tls, connect, tcp */
	const char *name;  /* may be NULL */
	const char *addr;  /* may be NULL */
	unsigned port;	   /* 0: left out */
	const char *decision;
	const char *rule;
	const char *error; /* may be NULL */
	uint64_t bytes_up, bytes_down;
	bool has_bytes;
};

/* Open (create, O_APPEND) the audit log; the fd is kept by the module. */
int audit_open(const char *path) __must_check;
void audit_close(void);
/* One JSON line into `buf` (NUL-terminated, "\n" included); the length, truncated lines end
 * well-formed. `time_ms` is milliseconds since the epoch. */
size_t audit_format(char *buf, size_t len, const struct audit_event *ev, uint64_t time_ms);
/* Append one line for `ev` (one write(2); thread-safe); dropped when no log is open. A
 * connection's allow and error lines are always written; denials and DNS lines past
 * AUDIT_SUMMARY_RATE in a second are counted, by protocol, decision and rule, into the next
 * second's "summary" line. */
void audit_log(const struct audit_event *ev);
/* Write the last second's summary when it is due (the proxy's main loop, once a second, so
 * a flood's count is said even when nothing else is logged after it). */
void audit_tick(void);
/* Write what is counted now, whatever the second (at exit). */
void audit_flush(void);
/* The size past which audit.log is rotated (0: AUDIT_FILE_MAX); for tests. */
void audit_set_file_max(uint64_t bytes);
#define AUDIT_FILE_MAX	  (32u << 20) /* bytes before audit.log becomes audit.log.1 */
#define AUDIT_GENERATIONS 8	      /* audit.log.1 .. .8 kept */
/* JSON-escape `s` into `out` (without quotes); returns the length, `out` NUL-terminated and cut
 * at a whole escape when too small. */
size_t audit_json_escape(const char *s, char *out, size_t len);

/* ---- dns_wire.c, dns.c ---- */

#define DNS_MAX_ADDRS	   16
#define DNS_MAX_PKT	   1232
#define DNS_RECV_MAX	   4096 /* a query or an answer read: larger ones are dropped */
#define DNS_TYPE_A	   1
#define DNS_CLASS_IN	   1
#define DNS_RCODE_OK	   0
#define DNS_RCODE_SERVFAIL 2
#define DNS_RCODE_NXDOMAIN 3
#define DNS_RCODE_NOTIMP   4
#define DNS_RCODE_REFUSED  5
/* The queries a sandbox's proxy sends its resolver (docs/network.md "Decisions"), a token
 * bucket: DNS_UPSTREAM_BURST at once, DNS_UPSTREAM_RATE a second after that. A query that
 * goes upstream is the one way a name leaves without a connection: unique names under a zone
 * whose nameserver the guest's owner runs carry up to 253 bytes each, so this bounds that
 * channel to about 5 KB a second. A page load or a package install asks tens of new names
 * (the burst) and a few a second after; a cached or already answered name takes nothing. */
#define DNS_UPSTREAM_RATE  20
#define DNS_UPSTREAM_BURST 100

struct dns_query {
	uint16_t id, flags, qtype, qclass;
	char name[NAME_MAX_TEXT]; /* as received, lower-cased, no trailing dot */
	size_t qend;		  /* offset just past the question */
};

/* Parse a query: header, one question. -EINVAL on anything malformed (a label past the end, a
 * compression pointer, a name over 255 bytes, a count other than one question). */
int dns_parse_query(const uint8_t *pkt, size_t len, struct dns_query *q) __must_check;
/* Read a (possibly compressed) name at *off into `out` as dotted text, lower-cased; *off is
 * moved past it. Pointers must point strictly backwards (no loops), at most 64 hops. */
int dns_read_name(const uint8_t *pkt, size_t len, size_t *off, char *out,
		  size_t outlen) __must_check;
/* Build a query for `name`'s A record with `id` into buf; the length or -errno. */
int dns_build_query(uint8_t *buf, size_t len, uint16_t id, const char *name, uint16_t qtype);
/* Parse an upstream answer to query `id` for `name`: the A records (following CNAMEs from
 * `name`), the smallest TTL; *rcode the response code. */
int dns_parse_answer(const uint8_t *pkt, size_t len, uint16_t id, const char *name,
		     struct in_addr *addrs, unsigned max, unsigned *naddrs, uint32_t *ttl,
		     unsigned *rcode) __must_check;
/* Build the response to `q` (echoing its question from `pkt`) with `rcode` and, if `a` is
 * non-NULL, one A record; the length or -errno. */
int dns_build_response(const uint8_t *pkt, const struct dns_query *q, unsigned rcode,
		       const struct in_addr *a, uint8_t *out, size_t outlen);

struct dns_state;
/* The synthetic map (loaded from and appended to `map_path`, may be NULL) and the cache. */
struct dns_state *dns_state_new(const char *map_path, char *err, size_t errlen);
void dns_state_free(struct dns_state *d);
/* The name's synthetic address (allocated if new); -ENOSPC when the pool is full. */
int dns_synth_get(struct dns_state *d, const char *name, struct in_addr *out) __must_check;
/* The name of a synthetic address; -ENOENT if none. */
int dns_synth_name(struct dns_state *d, struct in_addr a, char *name, size_t len) __must_check;
/* Resolve `name`'s A records through `resolver` (the cache first, which costs nothing): UDP,
 * random id and port, a 2 s timeout and one retry. Each query sent is first taken from `d`'s
 * rate (DNS_UPSTREAM_*) and its size from `budget` (the egress budget; NULL: none); without
 * them nothing is sent and the lookup is -EAGAIN (the rate) or -EDQUOT (the budget).
 * -ENOENT for NXDOMAIN or no address, -ETIMEDOUT, -EIO, -ENETUNREACH (no resolver). */
int dns_lookup(struct dns_state *d, const struct sockaddr *resolver, socklen_t rlen,
	       _Atomic int64_t *budget, const char *name, struct in_addr *addrs, unsigned max,
	       unsigned *n) __must_check;
/* The audit rule of a lookup refused before a query left (-EAGAIN: "deny (DNS rate limit)",
 * -EDQUOT: "deny (egress budget exhausted)"); NULL for any other result. */
const char *dns_refusal_rule(int err);

struct proxy;
/* Serve DNS on `fd` (UDP, bound) until the process ends. Runs on its own thread. */
void *dns_serve(void *proxy);

/* ---- sniff.c ---- */

enum sniff_kind {
	SNIFF_MORE,    /* not decided: read more */
	SNIFF_TLS,     /* a whole ClientHello */
	SNIFF_HTTP,    /* a whole HTTP/1.x request head */
	SNIFF_OTHER,   /* neither */
	SNIFF_BAD_TLS, /* looks like TLS, but malformed */
	SNIFF_BAD_HTTP /* looks like HTTP, but malformed or without Host */
};

/* Classify the first bytes of a connection; `name` gets the SNI (may stay empty: a
 * ClientHello without one) or the Host (without a port). SNIFF_OTHER only for bytes that are
 * positively neither TLS nor an attempt at HTTP (sniff_http); SNIFF_MORE while undecided (a
 * caller that stops waiting refuses what came, unless nothing came). */
enum sniff_kind sniff_classify(const uint8_t *buf, size_t len, char *name, size_t namelen);
/* The SNI of a ClientHello carried in TLS records at buf: SNIFF_TLS, SNIFF_MORE (truncated),
 * SNIFF_OTHER (not a handshake record) or SNIFF_BAD_TLS. */
enum sniff_kind sniff_tls(const uint8_t *buf, size_t len, char *name, size_t namelen);
/* An HTTP/1.x request head, parsed strictly (http1.c): SNIFF_HTTP with the Host's name (port
 * dropped) and `head_len` the length through the blank line; SNIFF_BAD_HTTP for anything that
 * could be an attempt at HTTP (any-case method, leading CR or LF, bare LF lines) but does not
 * parse, *why the parser's reason; SNIFF_MORE while the head is incomplete; SNIFF_OTHER for
 * bytes that are positively not HTTP. */
enum sniff_kind sniff_http(const uint8_t *buf, size_t len, char *name, size_t namelen,
			   size_t *head_len, const char **why);
/* An HTTP/1.x request line: METHOD (upper case) SP target SP HTTP/1.0|1.1. -EAGAIN when no
 * whole line is there yet, -EINVAL when malformed. */
int sniff_request_line(const uint8_t *buf, size_t len, char *method, size_t mlen, char *target,
		       size_t tlen) __must_check;
/* Split "host:port", "[v6]:port" or "host" into host text and port (`defport` if absent). */
int sniff_split_hostport(const char *s, size_t len, char *host, size_t hostlen, uint16_t defport,
			 uint16_t *port) __must_check;

/* ---- conn.c ---- */

#define CONN_MAX	    512 /* connections served at once: a thread each, two for HTTP */
#define DNS_WORKERS_MAX	    16	/* queries resolved at once (dns.c): a thread each */
/* Accepted connections that have not yet said where they go (waiting.c): an fd and a slot
 * each, no thread. Past this the oldest is closed: a flood of silent connections never
 * keeps a new one out. */
#define WAIT_MAX	    1024
/* The proxy's whole thread budget: two a served connection (its own and http_relay's), the
 * DNS workers, and its fixed ones (main, the waiting room, the DNS server; the parent that
 * waits when it forked into its pid namespace itself) with a margin. RLIMIT_NPROC of the
 * jailed proxy, and its share of the sandbox's pids.max: client.h's CGROUP_PIDS_PROXY says
 * the same number (tests/integration/proxy_flood.sh checks). */
#define PROXY_THREADS_FIXED 8
#define PROXY_THREADS_MAX   1048
_Static_assert(PROXY_THREADS_MAX == 2 * CONN_MAX + DNS_WORKERS_MAX + PROXY_THREADS_FIXED,
	       "the thread budget is the sum of its parts");
#define CONN_FIRST_MS	     10000 /* the client's first bytes */
#define CONN_SERVER_FIRST_MS 300   /* ... on a synthetic address off 80/443 */
#define CONN_CONNECT_MS	     5000
#define CONN_IDLE_MS	     600000
#define CONN_PEEK_MAX	     16384
/* Reads of a connection's first bytes before they must have decided: a client sends its
 * ClientHello or request head in a few writes; one dribbling a byte a read would make the
 * waiting room sniff the growing buffer again for each (CONN_PEEK_MAX times). */
#define CONN_TAKES_MAX	     64

struct mitm_ca;
struct ssl_ctx_st;

/* What `run` serves with: the policy, its state, its listeners. */
struct proxy {
	char dir[4096];
	struct policy *pol;
	struct dns_state *dns;
	struct mitm_ca *ca;
	struct ssl_ctx_st *upstream_ctx;
	_Atomic int64_t budget;	 /* egress bytes left, when pol->egress_bytes */
	_Atomic unsigned nconns; /* connections served now, a thread each (waiting.c) */
	int explicit_fd, tproxy_fd, dns_fd;
	unsigned idle_ms;
};

/* A guest's connection (conn.c), from its accept to its end. */
struct conn;
/* A connection just accepted (`fd` taken) on the explicit listener (the HTTP proxy
 * protocol) or the transparent one: 0 with *out and, in *deadline_ms, when its first bytes
 * must have come (CONN_FIRST_MS; CONN_SERVER_FIRST_MS where a server-first protocol is
 * known to go). -errno when refused at once (an unknown synthetic address): the line
 * written, `fd` closed. */
int conn_new(struct proxy *px, int fd, bool explicit, struct conn **out,
	     uint64_t *deadline_ms) __must_check;
/* Read what the guest sent so far, never blocking. 1 when the bytes decide (a whole
 * ClientHello or request head, or something else), the buffer is full, the guest ended
 * (*eof), or CONN_TAKES_MAX reads did not decide (conn_silent refuses it); 0 while more may
 * come. */
int conn_take(struct conn *c, bool *eof) __must_check;
/* At its deadline or end (`eof`), or once conn_take said 1: the refusal's rule when the
 * connection said nothing and its protocol needs the client's first bytes (or it closed), or
 * its first bytes came in more than CONN_TAKES_MAX reads without deciding, or the guest reset
 * it; else NULL: it is served. */
const char *conn_silent(const struct conn *c, bool eof);
/* Refuse: the deny line with `rule` (an explicit client that spoke gets a 503), the
 * connection closed and freed. */
void conn_refuse(struct conn *c, const char *rule);
/* Serve a connection the waiting room decided (on a thread of its own, which may start a
 * second: http_relay) until it ends; its line written, closed and freed. */
void conn_serve(struct conn *c);

/* ---- waiting.c ---- */

/* Before the jail: the epoll set with px's two listeners (made non-blocking). A message in
 * `err` on failure. */
int waiting_init(struct proxy *px, char *err, size_t errlen) __must_check;
/* Accept on both listeners and keep each connection in the epoll set, at no thread, until
 * conn_take decides it or its deadline passes; then a thread serves it (at most CONN_MAX at
 * once: the rest wait for one, up to CONN_FIRST_MS). Runs on its own thread (`proxy` unused:
 * waiting_init's) until the process ends. */
void *waiting_run(void *proxy);
/* Relay between two connected sockets (made non-blocking) until both sides closed, an error,
 * `idle_ms` without bytes or the budget ends; `pre` (the client's bytes already read) goes to
 * `b_fd` first. Each EOF is passed on as a half-close. Counts bytes each way; a non-NULL
 * `budget` is decremented by the bytes sent upstream (`b_fd`), -EDQUOT once exhausted. */
int conn_relay(int a_fd, int b_fd, const void *pre, size_t npre, unsigned idle_ms,
	       _Atomic int64_t *budget, uint64_t *up, uint64_t *down) __must_check;
/* Connect to `sa` within `ms` milliseconds (a blocking socket on success). */
int conn_connect(const struct sockaddr *sa, socklen_t len, unsigned ms, int *out_fd) __must_check;

/* ---- forward.c ---- */

/* `forward`: accept on `listen` (the host's loopback), connect to `to` from inside the
 * namespace `netns_path`, relay; "ready\n" on `ready_fd` (when >= 0) once it listens (and,
 * with `jail`, is jailed: jail->root is ""). Returns only on a setup error (the message
 * printed). */
int forward_run(const char *netns_path, const char *listen, const char *to, int ready_fd,
		const struct proxy_jail *jail) __must_check;

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TLS interception for credentialed hosts (docs/network.md, "Credentialed hosts"): the
 * sandbox's CA (ca.c) and the serving of one intercepted connection (mitm.c, with the HTTP/1.1
 * parser in http1.c). Functions return 0 or -errno unless the comment says otherwise. Nothing
 * here logs: failures come back as a message in the caller's buffer or in mitm_stats.error,
 * and no message ever holds a header value.
 */
#ifndef SANDBOX_PROXY_MITM_H
#define SANDBOX_PROXY_MITM_H

#include <openssl/ssl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stddef.h>

/* The sandbox's CA: cert + key, and a cache of leaf certificates. */
struct mitm_ca;

/*
 * Make a new CA (EC P-256, CN "sandbox <label> CA", 10 years, basicConstraints critical
 * CA:TRUE pathlen 0, keyUsage keyCertSign+cRLSign) at cert_path (0644) and key_path (0600);
 * files written atomically (tmp + fsync + rename, the tmp file beside its target). The label is
 * 1-48 characters of [A-Za-z0-9._-]. 0 or -errno.
 */
int mitm_ca_create(const char *cert_path, const char *key_path, const char *label);

/*
 * Load it; NULL with err filled on failure (file, and what is wrong): not PEM, not a CA, expired,
 * a key that is not the certificate's, a key file readable by group or others.
 */
struct mitm_ca *mitm_ca_load(const char *cert_path, const char *key_path, char *err, size_t errlen);
void mitm_ca_free(struct mitm_ca *ca);

/*
 * Sign a leaf certificate for dNSName `name` (and IP SAN when name is an IPv4 literal) with the
 * CA; PEM cert (the leaf alone) + PEM key written to cert_path (0644) / key_path (0600). For
 * test servers and tools.
 */
int mitm_ca_issue_files(struct mitm_ca *ca, const char *name, const char *cert_path,
			const char *key_path);

/*
 * The leaf for `name` (made once and cached; thread-safe): a reference to its certificate and
 * key that the caller frees (X509_free, EVP_PKEY_free). -EINVAL for a name that is not a host
 * name or IPv4 literal.
 */
int mitm_ca_leaf(struct mitm_ca *ca, const char *name, X509 **cert, EVP_PKEY **key)
	__attribute__((warn_unused_result));

/* The guest-facing TLS context of this CA (TLS 1.2+, ALPN http/1.1 only); owned by the CA. */
SSL_CTX *mitm_ca_guest_ctx(struct mitm_ca *ca);

struct mitm_header {
	const char *name;
	const char *value;
};
struct mitm_rule {
	const char *host;
	const struct mitm_header *headers;
	unsigned nheaders;
};
/* bytes_up/bytes_down: bytes on the upstream socket (TLS records, handshake included). */
struct mitm_stats {
	uint64_t bytes_up, bytes_down;
	unsigned requests;
	char error[128];
};

/*
 * SSL_CTX for upstream: verify the peer against ca_file (PEM bundle) or, when NULL, the default
 * store; TLS 1.2+, hostname checked (SSL_set1_host, by mitm_serve). NULL with err filled.
 */
SSL_CTX *mitm_upstream_ctx(const char *ca_file, char *err, size_t errlen);

/*
 * Serve one intercepted connection to completion (blocking, on this thread; many threads call it
 * at once): client_fd is the guest's TCP socket, whose first `npeek` bytes (`peek`, the start of
 * the ClientHello) were already read from it; `name` is the SNI, already allowed by the policy
 * (lower case, no trailing dot); upstream_fd is a TCP socket already connected to an address the
 * proxy resolved for `name`.
 *
 * Terminates TLS from the guest with the cached leaf for `name` (a ClientHello whose SNI names
 * another host is refused), ALPN http/1.1 only; reads HTTP/1.1 requests one after another
 * (keep-alive, at most 1000); a request whose Host (port stripped, case-insensitive, trailing
 * dot ignored) differs from `name` gets 421 and the connection closes, with nothing sent
 * upstream. The rule's headers replace every header of the same names (case-insensitive,
 * duplicates too). The upstream TLS connection (verified against `upstream`, SNI `name`,
 * hostname checked) is opened only once the first request has passed every check.
 *
 * Refused with 400 and closed: both Content-Length and Transfer-Encoding, a Transfer-Encoding
 * other than "chunked", several Content-Length or Host headers, obsolete line folding, bare CR
 * or LF, whitespace before a colon, control characters, header lines over 16 KiB, more than 100
 * headers or a head over 64 KiB, an absolute-form target, a version other than HTTP/1.0 or 1.1.
 * Chunked bodies (both ways) are re-encoded: chunk extensions and trailers are dropped.
 * "Expect: 100-continue" is answered by the proxy and not forwarded. Upgrades are refused: a
 * request with an Upgrade header gets 501, and a 101 from upstream closes the connection.
 * A malformed response gets 502 if nothing of it reached the guest yet.
 *
 * idle_ms bounds every wait. Returns 0 (the guest or upstream ended the exchange cleanly) or
 * -errno (-EPROTO malformed, -EACCES Host mismatch, -ETIMEDOUT idle, -EDQUOT budget, ...);
 * stats filled either way (error: a short reason). budget: if non-NULL, an atomic counter of
 * egress bytes left (bytes sent upstream decrement it; when it would go below 0, stop and close,
 * error "egress budget exhausted"). The fds stay the caller's: not closed, flags restored.
 */
int mitm_serve(struct mitm_ca *ca, SSL_CTX *upstream, int client_fd, const void *peek, size_t npeek,
	       const char *name, const struct mitm_rule *rule, int upstream_fd, unsigned idle_ms,
	       _Atomic int64_t *budget, struct mitm_stats *stats);

#endif

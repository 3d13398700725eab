/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One GET of a pull (oci.h) over libcurl: a registry that never answers, answers slowly or
 * answers too much is bounded, whoever it is. A connect timeout, a stall bound (curl's low
 * speed limit: less than 1 byte a second for stall_s ends the GET, from the request's start,
 * so a peer that accepts and says nothing is bounded too) and the pull's deadline (each GET's
 * timeout is what is left of it); a 2xx body bounded by g->max (Content-Length checked before
 * a byte is taken, and the bytes counted as they come), an error's body kept to its first
 * ERR_BODY_MAX bytes, the headers we keep bounded by their fields.
 *
 * Redirects are followed here, not by curl, so that each hop is checked the same way as the
 * first URL: http or https only, http only to a loopback host (unless the pull is insecure),
 * never to a loopback host unless the registry is on one itself (a registry elsewhere must not
 * make us reach this host's own services, through its realm or a redirect), at most
 * OCI_REDIRECTS_MAX, and the Authorization header (a token, or Basic credentials) sent
 * only to the origin (scheme, host, port) of the URL it was made for: a blob store that a
 * registry redirects to never sees it. No proxy for a loopback host. Curl's own error text
 * names hosts and causes, never a header: no credential reaches a message.
 */
#include <curl/curl.h>
#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "oci.h"

#define ERR_BODY_MAX (64u << 10) /* an error answer's body kept (its error code is read) */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

/* curl_global_init is not safe to race with itself: once per process, whichever thread. */
static void curl_init_once(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int oci_http_init(struct oci_http *h, struct oci_msg *m)
{
	pthread_once(&curl_once, curl_init_once);
	if (curl_init_rc != CURLE_OK)
		return oci_fail(m, -EIO, "libcurl: %s", curl_easy_strerror(curl_init_rc));
	if (!(h->curl = curl_easy_init()))
		return oci_fail(m, -ENOMEM, "libcurl: no handle");
	return 0;
}

void oci_http_free(struct oci_http *h)
{
	if (h->curl)
		curl_easy_cleanup(h->curl);
	h->curl = NULL;
}

/* The scheme, host and port of `url` into the three buffers; -EINVAL if it has none. */
static int url_origin(const char *url, char *scheme, size_t sl, char *host, size_t hl, char *port,
		      size_t pl)
{
	CURLU *u = curl_url();
	char *s = NULL, *h = NULL, *p = NULL;
	int err = -EINVAL;

	if (!u)
		return -ENOMEM;
	if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &s, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &h, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PORT, &p, CURLU_DEFAULT_PORT) != CURLUE_OK)
		goto out;
	if (strlen(s) >= sl || strlen(h) >= hl || strlen(p) >= pl)
		goto out;
	snprintf(scheme, sl, "%s", s);
	snprintf(host, hl, "%s", h);
	snprintf(port, pl, "%s", p);
	err = 0;
out:
	curl_free(s);
	curl_free(h);
	curl_free(p);
	curl_url_cleanup(u);
	return err;
}

/* Does `url` have userinfo (user:password@)? Never sent: a URL is shown in messages. */
static bool url_has_user(const char *url)
{
	CURLU *u = curl_url();
	char *user = NULL;
	bool has;

	if (!u)
		return true;
	has = curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	      curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK;
	curl_free(user);
	curl_url_cleanup(u);
	return has;
}

bool oci_http_url_allowed(const struct oci_http *h, const char *url)
{
	char scheme[16], host[300], port[16];

	if (url_origin(url, scheme, sizeof(scheme), host, sizeof(host), port, sizeof(port)) < 0 ||
	    url_has_user(url))
		return false;
	/* host is curl's: an IPv6 address in brackets, as oci_host_loopback takes it */
	if (oci_host_loopback(host) && !h->allow_loopback)
		return false;
	if (strcasecmp(scheme, "https") == 0)
		return true;
	return strcasecmp(scheme, "http") == 0 && (h->insecure || oci_host_loopback(host));
}

static bool same_origin(const char *a, const char *b)
{
	char s1[16], h1[300], p1[16], s2[16], h2[300], p2[16];

	return url_origin(a, s1, sizeof(s1), h1, sizeof(h1), p1, sizeof(p1)) == 0 &&
	       url_origin(b, s2, sizeof(s2), h2, sizeof(h2), p2, sizeof(p2)) == 0 &&
	       strcasecmp(s1, s2) == 0 && strcasecmp(h1, h2) == 0 && strcmp(p1, p2) == 0;
}

/* What one response's callbacks fill in. */
struct sink {
	struct oci_http_get *g;
	EVP_MD_CTX *md;
	size_t cap;
	bool too_big, write_failed;
	int write_errno;
};

static bool status_ok(long s)
{
	return s >= 200 && s < 300;
}

/* Keep `value` (`n` bytes, its CR LF dropped) in out, printable, if it fits. */
static void keep_header(char *out, size_t out_len, const char *value, size_t n)
{
	while (n && (*value == ' ' || *value == '\t'))
		value++, n--;
	while (n && (value[n - 1] == '\r' || value[n - 1] == '\n' || value[n - 1] == ' '))
		n--;
	if (n >= out_len)
		n = out_len - 1;
	memcpy(out, value, n);
	out[n] = '\0';
	printable(out, n, false);
}

static size_t on_header(char *data, size_t size, size_t nitems, void *arg)
{
	struct sink *k = arg;
	struct oci_http_get *g = k->g;
	size_t n = size * nitems;
	const char *colon = memchr(data, ':', n);
	size_t nl = colon ? (size_t)(colon - data) : 0;

	if (n >= 5 && strncmp(data, "HTTP/", 5) == 0) {
		/* a new response (after a 100 Continue): forget the last one's headers */
		const char *sp = memchr(data, ' ', n);
		size_t at = sp ? (size_t)(sp - data) + 1 : n;

		g->status = 0; /* three digits, read within the line (it is not NUL-terminated) */
		for (unsigned i = 0;
		     i < 3 && at + i < n && data[at + i] >= '0' && data[at + i] <= '9'; i++)
			g->status = g->status * 10 + (data[at + i] - '0');
		g->content_type[0] = g->docker_digest[0] = '\0';
		g->www_auth_len = 0;
		g->www_auth[0] = '\0';
		return n;
	}
	if (!colon)
		return n;
	if (nl == 12 && strncasecmp(data, "Content-Type", 12) == 0) {
		keep_header(g->content_type, sizeof(g->content_type), colon + 1, n - nl - 1);
	} else if (nl == 21 && strncasecmp(data, "Docker-Content-Digest", 21) == 0) {
		char d[80];

		keep_header(d, sizeof(d), colon + 1, n - nl - 1);
		if (oci_valid_digest(d))
			memcpy(g->docker_digest, d, 72); /* 71 bytes and its NUL */
		else
			g->docker_digest[0] = '\0';
	} else if (nl == 16 && strncasecmp(data, "WWW-Authenticate", 16) == 0) {
		char *v = g->www_auth + g->www_auth_len;
		size_t left = sizeof(g->www_auth) - g->www_auth_len, vl = n - nl - 1;
		const char *s = colon + 1;

		while (vl && (*s == ' ' || *s == '\t'))
			s++, vl--;
		while (vl && (s[vl - 1] == '\r' || s[vl - 1] == '\n'))
			vl--;
		if (vl + 3 > left) {
			k->too_big = true; /* a challenge we would cut is one we cannot read */
			return 0;
		}
		if (g->www_auth_len) {
			memcpy(v, ", ", 2);
			v += 2;
			g->www_auth_len += 2;
		}
		memcpy(v, s, vl);
		v[vl] = '\0';
		g->www_auth_len += vl;
	}
	return n;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct sink *k = arg;
	struct oci_http_get *g = k->g;
	size_t n = size * nmemb;

	if (!status_ok(g->status)) {
		size_t take = g->len < ERR_BODY_MAX ? ERR_BODY_MAX - g->len : 0;

		take = take < n ? take : n;
		if (!g->body && !(g->body = malloc(ERR_BODY_MAX + 1)))
			return 0;
		memcpy(g->body + g->len, data, take);
		g->len += take;
		g->body[g->len] = '\0';
		return n; /* the rest is drained, not kept */
	}
	if (n > g->max - g->got) {
		k->too_big = true;
		return 0;
	}
	g->got += n;
	EVP_DigestUpdate(k->md, data, n);
	if (g->fd >= 0) {
		for (size_t off = 0; off < n;) {
			ssize_t w = write(g->fd, data + off, n - off);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				k->write_failed = true;
				k->write_errno = w < 0 ? errno : EIO;
				return 0;
			}
			off += (size_t)w;
		}
		return n;
	}
	if (g->len + n + 1 > k->cap) {
		size_t cap = k->cap ? k->cap : 16384;
		char *nb;

		while (cap < g->len + n + 1)
			cap *= 2;
		if (!(nb = realloc(g->body, cap)))
			return 0;
		g->body = nb;
		k->cap = cap;
	}
	memcpy(g->body + g->len, data, n);
	g->len += n;
	g->body[g->len] = '\0';
	return n;
}

/* The options of one hop to `url`. */
static int setup(struct oci_http *h, struct oci_http_get *g, const char *url, bool send_auth,
		 struct sink *k, struct curl_slist **hdrs, char *errbuf, struct oci_msg *m,
		 const char *what)
{
	CURL *c = h->curl;
	uint64_t now = now_ms(), left;
	char scheme[16], host[300], port[16];
	struct curl_slist *l = NULL;

	if (now >= h->deadline_ms)
		return oci_fail(m, -ETIMEDOUT, "%s: the pull's deadline passed", what);
	left = h->deadline_ms - now;
	if (url_origin(url, scheme, sizeof(scheme), host, sizeof(host), port, sizeof(port)) < 0)
		return oci_fail(m, -EINVAL, "%s: not a URL", what);
	curl_easy_reset(c);
	if (g->accept) {
		char a[512];

		snprintf(a, sizeof(a), "Accept: %s", g->accept);
		if (!(l = curl_slist_append(l, a)))
			return -ENOMEM;
	}
	if (send_auth && g->auth_header) {
		struct curl_slist *n = curl_slist_append(l, g->auth_header);

		if (!n) {
			curl_slist_free_all(l);
			return -ENOMEM;
		}
		l = n;
	}
	*hdrs = l;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, l);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "sandbox-pull/1");
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)(left < h->connect_timeout_s * 1000ull
					? left
					: h->connect_timeout_s * 1000ull));
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(left ? left : 1));
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)h->stall_s);
	curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)g->max);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, k);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, k);
	curl_easy_setopt(c, CURLOPT_NETRC, (long)CURL_NETRC_IGNORED);
	if (h->ca_file)
		curl_easy_setopt(c, CURLOPT_CAINFO, h->ca_file);
	if (oci_host_loopback(host))
		curl_easy_setopt(c, CURLOPT_PROXY, "");
	return 0;
}

int oci_http_get(struct oci_http *h, struct oci_http_get *g, const char *what, struct oci_msg *m)
{
	char *url = strdup(g->url), errbuf[CURL_ERROR_SIZE];
	struct sink k = {.g = g};
	unsigned char md[32];
	unsigned mdlen;
	int err = 0;

	g->status = 0;
	g->body = NULL;
	g->len = 0;
	g->got = 0;
	g->sha256[0] = '\0';
	if (!url || !(k.md = EVP_MD_CTX_new()) || !EVP_DigestInit_ex(k.md, EVP_sha256(), NULL)) {
		err = -ENOMEM;
		goto out;
	}
	for (unsigned hop = 0;; hop++) {
		struct curl_slist *hdrs = NULL;
		bool send_auth = same_origin(url, g->url);
		CURLcode rc;
		char *next = NULL;

		if (!oci_http_url_allowed(h, url)) {
			err = oci_fail(m, -EPERM,
				       "%s: %s to a URL that is not https (http only to a loopback "
				       "host, unless insecure) or that holds a user name",
				       what, hop ? "redirected" : "asked");
			goto out;
		}
		errbuf[0] = '\0';
		if ((err = setup(h, g, url, send_auth, &k, &hdrs, errbuf, m, what)) < 0)
			goto out;
		free(g->body);
		g->body = NULL;
		g->len = 0;
		k.cap = 0;
		rc = curl_easy_perform(h->curl);
		curl_slist_free_all(hdrs);
		if (k.too_big || rc == CURLE_FILESIZE_EXCEEDED) {
			err = oci_fail(m, -EFBIG, "%s: the answer is larger than %llu bytes", what,
				       (unsigned long long)g->max);
			goto out;
		}
		if (k.write_failed) {
			err = oci_fail(m, -k.write_errno, "%s: writing it: %s", what,
				       strerror(k.write_errno));
			goto out;
		}
		if (rc == CURLE_OPERATION_TIMEDOUT) {
			bool deadline = now_ms() >= h->deadline_ms;

			err = oci_fail(m, -ETIMEDOUT, "%s: %s", what,
				       deadline ? "the pull's deadline passed"
						: "the registry stopped answering (no byte for the "
						  "stall bound, or no connection in time)");
			goto out;
		}
		if (rc != CURLE_OK) {
			char e[CURL_ERROR_SIZE];

			snprintf(e, sizeof(e), "%s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
			printable(e, strlen(e), false);
			err = oci_fail(m, -EIO, "%s: %s", what, e);
			goto out;
		}
		curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &g->status);
		if (g->status < 300 || g->status >= 400 || g->status == 304)
			break;
		if (curl_easy_getinfo(h->curl, CURLINFO_REDIRECT_URL, &next) != CURLE_OK || !next) {
			err = oci_fail(m, -EBADMSG, "%s: HTTP %ld without a Location", what,
				       g->status);
			goto out;
		}
		if (hop + 1 > OCI_REDIRECTS_MAX) {
			err = oci_fail(m, -ELOOP, "%s: more than %u redirects", what,
				       OCI_REDIRECTS_MAX);
			goto out;
		}
		free(url);
		if (!(url = strdup(next))) {
			err = -ENOMEM;
			goto out;
		}
		/* the digest covers the final body only */
		EVP_DigestInit_ex(k.md, EVP_sha256(), NULL);
		g->got = 0;
	}
	if (status_ok(g->status)) {
		EVP_DigestFinal_ex(k.md, md, &mdlen);
		oci_sha256_hex(md, g->sha256);
	}
out:
	if (h->curl) /* no pointer to this frame's buffers or the freed headers stays in it */
		curl_easy_reset(h->curl);
	EVP_MD_CTX_free(k.md);
	free(url);
	if (err < 0) {
		free(g->body);
		g->body = NULL;
		g->len = 0;
	}
	return err;
}

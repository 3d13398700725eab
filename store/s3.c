/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The S3 API over libcurl (store.h): path-style requests (ENDPOINT/BUCKET/KEY) signed with
 * Signature Version 4 by libcurl (CURLOPT_AWS_SIGV4). libcurl does not send
 * x-amz-content-sha256, which S3 requires for SigV4: we send it (the body's SHA-256, which the
 * store then checks; the empty string's for bodiless requests) and libcurl signs it. Keys are
 * limited to characters that need no escaping, so the path libcurl signs is the path sent.
 *
 * What the store answers is bounded: a body by the caller's max, an error body by
 * S3_ERROR_BODY_MAX (only its <Code> is kept, printable), a request by the configured timeout
 * and by a stall limit.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
#include <openssl/evp.h>

#include "store.h"

#define S3_ERROR_BODY_MAX (16u << 10)
#define S3_LIST_BODY_MAX  (2u << 20) /* a listing's page's answer at most */
#define S3_TIMEOUT_MS	  30000
#define S3_CONNECT_MS	  5000
#define S3_STALL_S	  10 /* under 1 byte/s this long: the peer stalls */
/* SHA-256 of no bytes: the x-amz-content-sha256 of a request without a body */
#define S3_EMPTY_SHA256	  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static pthread_once_t s3_once = PTHREAD_ONCE_INIT;

/* ASCII only, whatever the locale. */
static bool s3_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
static CURLcode s3_init_rc;

static void s3_global_init(void)
{
	s3_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static int s3_fail(struct s3 *s, int ret, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int s3_fail(struct s3 *s, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
	return ret;
}

bool s3_key_ok(const char *key)
{
	size_t n = strnlen(key, S3_KEY_MAX + 1);

	if (n == 0 || n > S3_KEY_MAX || key[0] == '/' || key[n - 1] == '/')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = key[i];

		if (!s3_alnum(c) && c != '.' && c != '_' && c != '-' && c != '/')
			return false;
		if (c == '/' && key[i + 1] == '/')
			return false;
		/* a part that is "." or ".." */
		if ((i == 0 || key[i - 1] == '/') && c == '.' &&
		    (key[i + 1] == '/' || key[i + 1] == 0 ||
		     (key[i + 1] == '.' && (key[i + 2] == '/' || key[i + 2] == 0))))
			return false;
	}
	return true;
}

static bool s3_bucket_ok(const char *b)
{
	size_t n = strnlen(b, 64);

	if (n < 3 || n > 63 || b[0] == '.' || b[0] == '-' || b[n - 1] == '.' || b[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' && b[i] <= '9')) &&
		    b[i] != '.' && b[i] != '-')
			return false;
	return true;
}

static bool s3_endpoint_ok(const char *e)
{
	const char *host = strncmp(e, "http://", 7) == 0    ? e + 7
			   : strncmp(e, "https://", 8) == 0 ? e + 8
							    : NULL;

	if (!host || !*host)
		return false;
	for (const char *p = host; *p; p++)
		if (!s3_alnum(*p) && *p != '.' && *p != '-' && *p != ':' && *p != '[' && *p != ']')
			return false; /* no path, no user info, no query */
	return true;
}

static bool s3_field_ok(const char *v, size_t cap, bool empty_ok)
{
	size_t n = strnlen(v, cap);

	if (n == cap || (!empty_ok && n == 0))
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)v[i] < 0x21 || (unsigned char)v[i] > 0x7e)
			return false;
	return true;
}

int s3_open(struct s3 *s, const struct s3_conf *c)
{
	memset(s, 0, sizeof(*s));
	if (strnlen(c->endpoint, sizeof(c->endpoint)) == sizeof(c->endpoint) ||
	    !s3_endpoint_ok(c->endpoint))
		return s3_fail(s, -EINVAL, "the store's endpoint must be http(s)://HOST[:PORT]");
	if (!s3_bucket_ok(c->bucket))
		return s3_fail(s, -EINVAL,
			       "the store's bucket must be 3 to 63 of a-z, 0-9, . and -");
	if (!s3_field_ok(c->region, sizeof(c->region), false) || strchr(c->region, ':') != NULL)
		return s3_fail(s, -EINVAL, "the store's region must be printable, without ':'");
	if (!s3_field_ok(c->access, sizeof(c->access), false) ||
	    !s3_field_ok(c->secret, sizeof(c->secret), false))
		return s3_fail(s, -EINVAL, "the store's access key and secret must be printable");
	if (!s3_field_ok(c->ca_file, sizeof(c->ca_file), true))
		return s3_fail(s, -EINVAL, "the store's CA file must be a path");
	pthread_once(&s3_once, s3_global_init);
	if (s3_init_rc != CURLE_OK)
		return s3_fail(s, -EIO, "libcurl: %s", curl_easy_strerror(s3_init_rc));
	s->conf = *c;
	if (!s->conf.timeout_ms)
		s->conf.timeout_ms = S3_TIMEOUT_MS;
	s->curl = curl_easy_init();
	if (!s->curl)
		return s3_fail(s, -ENOMEM, "libcurl: no handle");
	return 0;
}

void s3_close(struct s3 *s)
{
	if (s->curl)
		curl_easy_cleanup(s->curl);
	s->curl = NULL;
}

/* What one request sends and gets. */
struct s3_xfer {
	const uint8_t *up;
	size_t up_len, up_off;
	uint8_t *body;
	size_t len, cap, max; /* max: the most kept; over it, the transfer stops */
	bool too_big;
	CURL *curl;		 /* to read the status as the body comes */
	char content_range[100]; /* a ranged answer's Content-Range value */
};

static size_t s3_on_read(char *buf, size_t size, size_t n, void *arg)
{
	struct s3_xfer *x = arg;
	size_t want = size * n, left = x->up_len - x->up_off;

	if (want > left)
		want = left;
	memcpy(buf, x->up + x->up_off, want);
	x->up_off += want;
	return want;
}

static size_t s3_on_header(char *data, size_t size, size_t n, void *arg)
{
	struct s3_xfer *x = arg;
	size_t len = size * n;

	if (len > 14 && strncasecmp(data, "content-range:", 14) == 0) {
		size_t i = 14, o = 0;

		while (i < len && data[i] == ' ')
			i++;
		while (i < len && data[i] != '\r' && data[i] != '\n' &&
		       o + 1 < sizeof(x->content_range))
			x->content_range[o++] = data[i++];
		x->content_range[o] = 0;
	}
	return len;
}

static size_t s3_on_body(char *data, size_t size, size_t n, void *arg)
{
	struct s3_xfer *x = arg;
	size_t got = size * n, max = x->max;
	long status = 0;

	/* an error's body is read for its <Code>: S3_ERROR_BODY_MAX of it, whatever the caller
	 * would take of an object */
	curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &status);
	if (status / 100 != 2 && max > S3_ERROR_BODY_MAX)
		max = S3_ERROR_BODY_MAX;
	if (x->len > max || got > max - x->len) {
		x->too_big = true;
		return 0; /* stops the transfer */
	}
	if (x->len + got > x->cap) {
		size_t cap = x->cap ? x->cap : 16384;

		while (cap < x->len + got)
			cap = cap > x->max / 2 ? x->max : cap * 2;
		uint8_t *b = realloc(x->body, cap);

		if (!b)
			return 0;
		x->body = b;
		x->cap = cap;
	}
	memcpy(x->body + x->len, data, got);
	x->len += got;
	return got;
}

/* The S3 error <Code> of an error body, printable, in out. */
static void s3_error_code(const struct s3_xfer *x, char *out, size_t len)
{
	const char *b = (const char *)x->body, *p, *q;
	size_t n = 0;

	out[0] = 0;
	if (!b || !x->len)
		return;
	p = memmem(b, x->len, "<Code>", 6);
	if (!p)
		return;
	p += 6;
	q = memmem(p, x->len - (size_t)(p - b), "</Code>", 7);
	if (!q)
		return;
	for (; p < q && n + 1 < len && n < 64; p++)
		out[n++] = s3_alnum(*p) ? *p : '?';
	out[n] = 0;
}

/* libcurl's progress call (about once a second, and on every chunk of data): a set abort
 * flag ends the request. */
static int s3_on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
			  curl_off_t ulnow)
{
	const struct s3 *s = arg;

	(void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	return __atomic_load_n(s->abort, __ATOMIC_ACQUIRE) != 0;
}

/* Hex SHA-256 of data. */
static void s3_sha256_hex(const void *data, size_t len, char out[65])
{
	static const char hex[] = "0123456789abcdef";
	uint8_t md[32];
	unsigned mdlen = 0;

	EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL);
	for (int i = 0; i < 32; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[64] = 0;
}

/*
 * One request: method on key ("" for the bucket itself), with the body up (NULL: none), the
 * answer's body kept up to max in x. *status the HTTP status. -EIO with s->err when no answer
 * came (connect, timeout, a body over max: -EFBIG).
 */
static int s3_request(struct s3 *s, const char *method, const char *key, const char *query,
		      const void *up, size_t up_len, const char *range, struct s3_xfer *x,
		      long *status)
{
	CURL *c = s->curl;
	char url[1024], sha[65], hdr[100], sigv4[100];
	struct curl_slist *h = NULL, *h2;
	CURLcode rc;
	int n;

	if (key[0] && !s3_key_ok(key))
		return s3_fail(s, -EINVAL, "S3 %s: not a key this store takes: %.80s", method, key);
	n = snprintf(url, sizeof(url), "%s/%s%s%s%s%s", s->conf.endpoint, s->conf.bucket,
		     key[0] ? "/" : "", key, query ? "?" : "", query ? query : "");
	if (n < 0 || (size_t)n >= sizeof(url))
		return s3_fail(s, -ENAMETOOLONG, "S3 %s: the URL is too long", method);
	if (up)
		s3_sha256_hex(up, up_len, sha);
	else
		snprintf(sha, sizeof(sha), "%s", S3_EMPTY_SHA256);
	snprintf(hdr, sizeof(hdr), "x-amz-content-sha256: %s", sha);
	snprintf(sigv4, sizeof(sigv4), "aws:amz:%s:s3", s->conf.region);
	if (!(h2 = curl_slist_append(h, hdr)))
		return s3_fail(s, -ENOMEM, "S3 %s: out of memory", method);
	/* (no "Expect:" to drop 100-continue: libcurl 7.88 signs the header it then leaves out,
	 * and the store refuses the signature) */
	h = h2;
	x->up = up;
	x->up_len = up_len;
	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_PROXY, "");
	curl_easy_setopt(c, CURLOPT_NETRC, (long)CURL_NETRC_IGNORED);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "sandbox-store/1");
	s->curl_err[0] = 0;
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, s->curl_err); /* lives as long as the handle */
	curl_easy_setopt(c, CURLOPT_AWS_SIGV4, sigv4);
	curl_easy_setopt(c, CURLOPT_USERNAME, s->conf.access);
	curl_easy_setopt(c, CURLOPT_PASSWORD, s->conf.secret);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)S3_CONNECT_MS);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)s->conf.timeout_ms);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)S3_STALL_S);
	if (s->abort) {
		curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, s3_on_progress);
		curl_easy_setopt(c, CURLOPT_XFERINFODATA, s);
	}
	x->curl = c;
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, s3_on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, s3_on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
	/* a Content-Length over what is kept ends the transfer before its first byte (not a
	 * HEAD's: it tells the size of what is not sent) */
	if (strcmp(method, "HEAD") != 0)
		curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)x->max);
	if (s->conf.ca_file[0])
		curl_easy_setopt(c, CURLOPT_CAINFO, s->conf.ca_file);
	if (range)
		curl_easy_setopt(c, CURLOPT_RANGE, range);
	if (strcmp(method, "PUT") == 0) {
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, s3_on_read);
		curl_easy_setopt(c, CURLOPT_READDATA, x);
		curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)up_len);
	} else if (strcmp(method, "HEAD") == 0) {
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	} else if (strcmp(method, "GET") != 0) {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	}
	rc = curl_easy_perform(c);
	curl_slist_free_all(h);
	s->requests++;
	s->bytes_up += x->up_off;
	s->bytes_down += x->len;
	if (x->too_big || rc == CURLE_FILESIZE_EXCEEDED) {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
		if (*status / 100 != 2)
			return s3_fail(s, -EIO,
				       "S3 %s %s: HTTP %ld with an error body over %u bytes",
				       method, key, *status, S3_ERROR_BODY_MAX);
		return s3_fail(s, -EFBIG, "S3 %s %s: the answer is over %zu bytes", method, key,
			       x->max);
	}
	if (rc == CURLE_ABORTED_BY_CALLBACK)
		return s3_fail(s, -ECANCELED, "S3 %s %s: given up (the caller is done)", method,
			       key[0] ? key : s->conf.bucket);
	if (rc != CURLE_OK)
		return s3_fail(s, rc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -EIO,
			       "S3 %s %s: %s", method, key[0] ? key : s->conf.bucket,
			       s->curl_err[0] ? s->curl_err : curl_easy_strerror(rc));
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
	return 0;
}

/* -errno and s->err for an answer of status that is not a success. */
static int s3_status_fail(struct s3 *s, const char *method, const char *key, long status,
			  const struct s3_xfer *x)
{
	char code[72];
	int err = status == 404			   ? -ENOENT
		  : status == 403 || status == 401 ? -EACCES
		  : status == 416		   ? -ERANGE
		  : status >= 500		   ? -EIO
						   : -EPROTO;

	s3_error_code(x, code, sizeof(code));
	return s3_fail(s, err, "S3 %s %s/%s: HTTP %ld%s%s", method, s->conf.bucket, key, status,
		       code[0] ? " " : "", code);
}

int s3_bucket_create(struct s3 *s)
{
	struct s3_xfer x = {.max = S3_ERROR_BODY_MAX};
	long status = 0;
	int err = s3_request(s, "PUT", "", NULL, "", 0, NULL, &x, &status);
	char code[72];

	if (err == 0 && status / 100 != 2) {
		s3_error_code(&x, code, sizeof(code));
		if (status != 409 || strcmp(code, "BucketAlreadyOwnedByYou") != 0)
			err = s3_status_fail(s, "PUT", "", status, &x);
	}
	free(x.body);
	return err;
}

int s3_put(struct s3 *s, const char *key, const void *data, size_t len)
{
	struct s3_xfer x = {.max = S3_ERROR_BODY_MAX};
	long status = 0;
	int err;

	if (!key[0])
		return s3_fail(s, -EINVAL, "S3 PUT: no key");
	err = s3_request(s, "PUT", key, NULL, data ? data : "", len, NULL, &x, &status);
	if (err == 0 && status / 100 != 2)
		err = s3_status_fail(s, "PUT", key, status, &x);
	free(x.body);
	return err;
}

/* Whether the answer's Content-Range is "bytes FIRST-LAST/..." of the range asked. */
static bool s3_range_is(const struct s3_xfer *x, const char *range)
{
	size_t n = strlen(range);

	return strncmp(x->content_range, "bytes ", 6) == 0 &&
	       strncmp(x->content_range + 6, range, n) == 0 && x->content_range[6 + n] == '/';
}

int s3_get(struct s3 *s, const char *key, uint64_t off, size_t len, size_t max, uint8_t **out,
	   size_t *out_len)
{
	struct s3_xfer x = {.max = max > S3_ERROR_BODY_MAX ? max : S3_ERROR_BODY_MAX};
	char range[64];
	long status = 0;
	int err;

	*out = NULL;
	*out_len = 0;
	if (!key[0])
		return s3_fail(s, -EINVAL, "S3 GET: no key");
	if (len) {
		if (len > max || off > UINT64_MAX - len)
			return s3_fail(s, -EINVAL, "S3 GET %s: a range of %zu bytes over %zu", key,
				       len, max);
		snprintf(range, sizeof(range), "%llu-%llu", (unsigned long long)off,
			 (unsigned long long)(off + len - 1));
	}
	err = s3_request(s, "GET", key, NULL, NULL, 0, len ? range : NULL, &x, &status);
	if (err == 0 && status / 100 != 2)
		err = s3_status_fail(s, "GET", key, status, &x);
	else if (err == 0 && x.len > max)
		err = s3_fail(s, -EFBIG, "S3 GET %s: the object is over %zu bytes", key, max);
	else if (err == 0 && len && (status != 206 || x.len != len || !s3_range_is(&x, range)))
		err = s3_fail(s, -EBADMSG,
			      "S3 GET %s: asked bytes %s, got HTTP %ld with %zu bytes (%.60s)", key,
			      range, status, x.len, x.content_range);
	if (err < 0) {
		free(x.body);
		return err;
	}
	*out = x.body ? x.body : malloc(1);
	if (!*out)
		return s3_fail(s, -ENOMEM, "S3 GET %s: out of memory", key);
	*out_len = x.len;
	return 0;
}

int s3_head(struct s3 *s, const char *key, uint64_t *size)
{
	struct s3_xfer x = {.max = S3_ERROR_BODY_MAX};
	curl_off_t cl = -1;
	long status = 0;
	int err;

	if (!key[0])
		return s3_fail(s, -EINVAL, "S3 HEAD: no key");
	err = s3_request(s, "HEAD", key, NULL, NULL, 0, NULL, &x, &status);
	if (err == 0 && status / 100 != 2)
		err = s3_status_fail(s, "HEAD", key, status, &x);
	if (err == 0 && size) {
		curl_easy_getinfo(s->curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
		*size = cl < 0 ? 0 : (uint64_t)cl;
	}
	free(x.body);
	return err;
}

int s3_delete(struct s3 *s, const char *key)
{
	struct s3_xfer x = {.max = S3_ERROR_BODY_MAX};
	long status = 0;
	int err;

	if (!key[0])
		return s3_fail(s, -EINVAL, "S3 DELETE: no key");
	err = s3_request(s, "DELETE", key, NULL, NULL, 0, NULL, &x, &status);
	if (err == 0 && status / 100 != 2 && status != 404)
		err = s3_status_fail(s, "DELETE", key, status, &x);
	free(x.body);
	return err;
}

/* A query string's value: every byte but [A-Za-z0-9-._~] as %XX (upper case), as SigV4's
 * canonical query has it, so what libcurl signs is what is sent. */
static void s3_query_value(const char *v, char *out, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (; *v && o + 4 < len; v++) {
		if (s3_alnum(*v) || *v == '-' || *v == '.' || *v == '_' || *v == '~') {
			out[o++] = *v;
		} else {
			out[o++] = '%';
			out[o++] = hex[(uint8_t)*v >> 4];
			out[o++] = hex[(uint8_t)*v & 15];
		}
	}
	out[o] = 0;
}

/* The text of <tag>...</tag> between from and end (NUL-terminated into out), or false. */
static bool xml_field(const char *from, const char *end, const char *tag, char *out, size_t cap)
{
	char open[32], close[32];
	int on = snprintf(open, sizeof(open), "<%s>", tag),
	    cn = snprintf(close, sizeof(close), "</%s>", tag);
	const char *a = memmem(from, (size_t)(end - from), open, (size_t)on), *z;

	if (!a || !(z = memmem(a + on, (size_t)(end - a - on), close, (size_t)cn)) ||
	    (size_t)(z - a - on) >= cap)
		return false;
	memcpy(out, a + on, (size_t)(z - a - on));
	out[z - a - on] = 0;
	return true;
}

/* "2026-12-07T01:57:34.000Z" as seconds since the epoch; -1 when it is not one. */
static int64_t s3_time(const char *t)
{
	struct tm tm = {0};
	char *rest = strptime(t, "%Y-%m-%dT%H:%M:%S", &tm);

	if (!rest || (*rest != '.' && *rest != 'Z'))
		return -1;
	time_t v = timegm(&tm);

	return v < 0 ? -1 : (int64_t)v;
}

int s3_list(struct s3 *s, const char *prefix, char marker[S3_KEY_MAX + 1], unsigned max_keys,
	    int (*fn)(const struct s3_entry *e, void *arg), void *arg, bool *more)
{
	struct s3_xfer x = {.max = S3_LIST_BODY_MAX};
	char query[3 * 2 * (S3_KEY_MAX + 1) + 64], p[3 * S3_KEY_MAX + 1], m[3 * S3_KEY_MAX + 1];
	char key[S3_KEY_MAX + 1];
	const char *b, *end, *t;
	long status = 0;
	unsigned keys = 0;
	size_t n;
	int err;

	*more = false;
	if (!max_keys || max_keys > S3_LIST_KEYS)
		max_keys = S3_LIST_KEYS;
	/* a key's part, or one and a '/' */
	n = strlen(prefix);
	if (n > S3_KEY_MAX)
		return s3_fail(s, -EINVAL, "S3 list: a prefix over %u bytes", S3_KEY_MAX);
	memcpy(key, prefix, n + 1);
	if (n > 1 && key[n - 1] == '/')
		key[n - 1] = 0;
	if (!s3_key_ok(key))
		return s3_fail(s, -EINVAL, "S3 list: not a prefix this store takes: %.80s", prefix);
	s3_query_value(prefix, p, sizeof(p));
	s3_query_value(marker, m, sizeof(m));
	/* (names in order: SigV4's canonical query is sorted, and libcurl signs it as given) */
	snprintf(query, sizeof(query), "marker=%s&max-keys=%u&prefix=%s", m, max_keys, p);
	err = s3_request(s, "GET", "", query, NULL, 0, NULL, &x, &status);
	if (err == 0 && status / 100 != 2)
		err = s3_status_fail(s, "GET", "?list", status, &x);
	if (err < 0) {
		free(x.body);
		return err;
	}
	/* a listing says so: an answer without one (an error page of a proxy, a body cut short)
	 * is not "no keys", which a collector would take for "nothing is named" */
	if (!x.body || !memmem(x.body, x.len, "<ListBucketResult", 17) ||
	    !memmem(x.body, x.len, "</ListBucketResult>", 19)) {
		free(x.body);
		return s3_fail(s, -EBADMSG, "S3 list %s: an answer that is not a listing", prefix);
	}
	b = (const char *)x.body;
	end = b + x.len;
	/* <Key>...</Key> in order; a key that is not one of ours, or not under prefix, is the
	 * store's error: refused, not skipped (a listing that lies would hide chunks) */
	for (t = b; (t = memmem(t, (size_t)(end - t), "<Key>", 5)); keys++) {
		const char *q = memmem(t + 5, (size_t)(end - t - 5), "</Key>", 6);

		n = q ? (size_t)(q - t - 5) : 0;
		if (!q || !n || n > S3_KEY_MAX || keys >= max_keys) {
			free(x.body);
			return s3_fail(s, -EBADMSG, "S3 list %s: a malformed answer", prefix);
		}
		memcpy(key, t + 5, n);
		key[n] = 0;
		/* its entry's other fields: up to its </Contents> (or the next key, or the end) */
		const char *next = memmem(q + 6, (size_t)(end - q - 6), "</Contents>", 11),
			   *nk = memmem(q + 6, (size_t)(end - q - 6), "<Key>", 5);
		char field[64];
		struct s3_entry e = {.key = key, .modified = -1};

		if (!next || (nk && nk < next))
			next = nk ? nk : end;
		if (xml_field(q + 6, next, "LastModified", field, sizeof(field)))
			e.modified = s3_time(field);
		if (xml_field(q + 6, next, "Size", field, sizeof(field)))
			e.size = strtoull(field, NULL, 10);
		if (!s3_key_ok(key) || strncmp(key, prefix, strlen(prefix)) != 0 ||
		    strcmp(key, marker) <= 0) {
			free(x.body);
			return s3_fail(s, -EBADMSG, "S3 list %s: a key out of place: %.80s", prefix,
				       key);
		}
		if ((err = fn(&e, arg)) < 0) {
			free(x.body);
			return err;
		}
		snprintf(marker, S3_KEY_MAX + 1, "%s", key);
		t = q + 6;
	}
	*more = memmem(b, x.len, "<IsTruncated>true</IsTruncated>", 31) != NULL;
	if (*more && !keys) { /* more after nothing: the pages cannot go on */
		free(x.body);
		return s3_fail(s, -EBADMSG, "S3 list %s: a truncated page without keys", prefix);
	}
	free(x.body);
	return (int)keys;
}

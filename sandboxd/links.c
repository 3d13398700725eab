/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Download links and service URLs (docs/api.md, "Links"). A link's token is its claims
 * (kind, box id, expiry, path or port) and an HMAC-SHA256 of them under service/link.key,
 * base64url: no state to keep, nothing to guess, and a box's deletion ends its links (the
 * box id no longer resolves). A download link serves GET, HEAD and Range without a key and
 * wakes a stopped box; a service URL takes its token in X-Langsmith-Sandbox-Service-Token (or
 * ?token= for a browser) and is reverse-proxied to the guest's port (svc_proxy.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "hostutil.h"
#include "sandboxd.h"

#define LINK_TTL_MAX_S	  (365u * 86400)
#define SERVICE_TTL_MAX_S 86400u
#define SERVICE_TTL_DEF_S 600u
#define CLAIMS_MAX	  4400

static uint8_t link_key[32];
static bool have_key;

static int key_get(void)
{
	if (have_key)
		return 0;
	char path[4200], *text = NULL;
	size_t len;

	snprintf(path, sizeof(path), "%s/link.key", sd_dir());
	int err = read_file(path, 64, &text, &len);

	if (err == -ENOENT) {
		uint8_t k[32];

		if (getrandom(k, sizeof(k), 0) != sizeof(k))
			return -EIO;
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

		if (fd < 0)
			return errno == EEXIST ? key_get() : -errno;
		err = write_all(fd, k, sizeof(k));
		close(fd);
		if (err < 0)
			return err;
		memcpy(link_key, k, 32);
		have_key = true;
		return 0;
	}
	if (err < 0)
		return err;
	if (len != 32) {
		free(text);
		return -EBADMSG;
	}
	memcpy(link_key, text, 32);
	free(text);
	have_key = true;
	return 0;
}

static void b64url(const uint8_t *in, size_t len, char *out)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t o = 0;

	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0) |
			     (i + 2 < len ? in[i + 2] : 0);

		out[o++] = tab[v >> 18 & 63];
		out[o++] = tab[v >> 12 & 63];
		if (i + 1 < len)
			out[o++] = tab[v >> 6 & 63];
		if (i + 2 < len)
			out[o++] = tab[v & 63];
	}
	out[o] = 0;
}

static int unb64url(const char *in, uint8_t *out, size_t cap, size_t *len)
{
	uint32_t v = 0;
	int bits = 0;
	size_t o = 0;

	for (const char *p = in; *p; p++) {
		int c = *p >= 'A' && *p <= 'Z'	 ? *p - 'A'
			: *p >= 'a' && *p <= 'z' ? *p - 'a' + 26
			: *p >= '0' && *p <= '9' ? *p - '0' + 52
			: *p == '-'		 ? 62
			: *p == '_'		 ? 63
						 : -1;

		if (c < 0)
			return -EINVAL;
		v = v << 6 | (uint32_t)c;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (o >= cap)
				return -E2BIG;
			out[o++] = (uint8_t)(v >> bits);
		}
	}
	*len = o;
	return 0;
}

/* "kind\nbox\nexpiry\nextra" + HMAC, base64url. */
static int token_make(char kind, const char *box_id, uint64_t expiry, const char *extra, char *out,
		      size_t out_len)
{
	uint8_t buf[CLAIMS_MAX + 32];
	unsigned mac_len = 32;
	int n = snprintf((char *)buf, CLAIMS_MAX, "%c\n%s\n%" PRIu64 "\n%s", kind, box_id, expiry,
			 extra);

	if (n < 0 || n >= CLAIMS_MAX || key_get() < 0)
		return -E2BIG;
	HMAC(EVP_sha256(), link_key, 32, buf, (size_t)n, buf + n, &mac_len);
	if ((size_t)(n + 32) * 4 / 3 + 4 > out_len)
		return -E2BIG;
	b64url(buf, (size_t)n + 32, out);
	return 0;
}

/* Check a token: its claims into the out parameters. */
static int token_check(const char *token, char kind, char box_id[SD_ID_LEN + 1], char *extra,
		       size_t extra_len)
{
	uint8_t buf[CLAIMS_MAX + 64], mac[32];
	size_t len;
	unsigned mac_len = 32;

	if (strlen(token) > (CLAIMS_MAX + 32) * 4 / 3 + 4 || key_get() < 0 ||
	    unb64url(token, buf, sizeof(buf) - 1, &len) < 0 || len < 33)
		return -EACCES;
	HMAC(EVP_sha256(), link_key, 32, buf, len - 32, mac, &mac_len);
	if (CRYPTO_memcmp(mac, buf + len - 32, 32) != 0)
		return -EACCES;
	buf[len - 32] = 0;
	char *p = (char *)buf, *box = NULL, *exp = NULL, *rest = NULL;

	if (p[0] != kind || p[1] != '\n')
		return -EACCES;
	box = p + 2;
	exp = strchr(box, '\n');
	if (!exp)
		return -EACCES;
	*exp++ = 0;
	rest = strchr(exp, '\n');
	if (!rest)
		return -EACCES;
	*rest++ = 0;
	uint64_t e;

	if (!parse_u64(exp, 0, UINT64_MAX, &e) || (e && e < (uint64_t)time(NULL)))
		return -ETIMEDOUT;
	if (strlen(box) != SD_ID_LEN || strlen(rest) >= extra_len)
		return -EACCES;
	memcpy(box_id, box, SD_ID_LEN + 1);
	strcpy(extra, rest);
	return 0;
}

static json_t *expires_json(uint64_t expiry)
{
	char t[32];

	if (!expiry)
		return json_null();
	sd_iso(expiry * 1000, t);
	return json_string(t);
}

static void download_url(struct sd_req *q, struct box *b, json_t *o)
{
	const char *path = json_string_value(json_object_get(o, "path"));
	json_t *e = json_object_get(o, "expires_in_seconds");
	uint64_t expiry = 0;
	char token[8192], url[9000];

	if (!path || path[0] != '/' || strlen(path) > 4096 || strchr(path, '\n')) {
		req_reply_invalid(q, "path", "path must be an absolute path");
		return;
	}
	if (e && !json_is_null(e)) {
		if (!json_is_integer(e) || json_integer_value(e) < 1 ||
		    json_integer_value(e) > LINK_TTL_MAX_S) {
			req_reply_invalid(q, "expires_in_seconds", "from 1 to %u", LINK_TTL_MAX_S);
			return;
		}
		expiry = (uint64_t)time(NULL) + (uint64_t)json_integer_value(e);
	}
	if (token_make('d', b->id, expiry, path, token, sizeof(token)) < 0) {
		req_reply_error(q, 500, "InternalError", "cannot make the link");
		return;
	}
	snprintf(url, sizeof(url), "%s/files/%s", sd_conf.public_url, token);
	req_reply_json(q, 200,
		       json_pack("{s:s, s:s, s:o}", "download_url", url, "token", token,
				 "expires_at", expires_json(expiry)));
}

static void service_url(struct sd_req *q, struct box *b, json_t *o)
{
	json_t *p = json_object_get(o, "port"), *e = json_object_get(o, "expires_in_seconds");
	const char *access = json_string_value(json_object_get(o, "access"));
	uint64_t ttl = SERVICE_TTL_DEF_S;
	char token[8192], url[9000], port[16], browser[17300];

	if (!json_is_integer(p) || json_integer_value(p) < 1 || json_integer_value(p) > 65535) {
		req_reply_invalid(q, "port", "port must be from 1 to 65535");
		return;
	}
	if (e && !json_is_null(e)) {
		if (!json_is_integer(e) || json_integer_value(e) < 1 ||
		    json_integer_value(e) > SERVICE_TTL_MAX_S) {
			req_reply_invalid(q, "expires_in_seconds", "from 1 to %u",
					  SERVICE_TTL_MAX_S);
			return;
		}
		ttl = (uint64_t)json_integer_value(e);
	}
	if (access && strcmp(access, "restricted") != 0) {
		req_reply_error(q, 422, "SandboxConfig",
				"access '%.16s' is not supported: service URLs take their token",
				access);
		return;
	}
	uint64_t expiry = (uint64_t)time(NULL) + ttl;

	snprintf(port, sizeof(port), "%lld", (long long)json_integer_value(p));
	if (token_make('s', b->id, expiry, port, token, sizeof(token)) < 0) {
		req_reply_error(q, 500, "InternalError", "cannot make the link");
		return;
	}
	snprintf(url, sizeof(url), "%s/svc/%s-%s", sd_conf.public_url, b->id, port);
	snprintf(browser, sizeof(browser), "%s/?token=%s", url, token);
	req_reply_json(q, 200,
		       json_pack("{s:s, s:s, s:s, s:o, s:s, s:[]}", "service_url", url,
				 "browser_url", browser, "token", token, "expires_at",
				 expires_json(expiry), "embed_url", browser, "embed_origins"));
}

void links_make(struct sd_req *q, struct box *b, json_t *o)
{
	if (q->rt.kind == R_BOX_DOWNLOAD_URL)
		download_url(q, b, o);
	else if (q->rt.kind == R_BOX_SERVICE_URL)
		service_url(q, b, o);
	else if (q->method == M_GET) /* tokens are stateless: none to list */
		req_reply_json(q, 200, json_pack("{s:[]}", "items"));
	else
		req_reply_error(
			q, 422, "SandboxConfig",
			"service URLs end at their expiry; they cannot be revoked one by one");
}

static void file_link_then(struct sd_req *q, struct box *b)
{
	files_serve_path(q, b, q->link_path);
}

void links_handle(struct sd_req *q)
{
	char box_id[SD_ID_LEN + 1], extra[4200];

	if (auth_limited(q->peer)) {
		req_add_header(q, "retry-after:", "1");
		req_reply_error(q, 429, "TooManyRequests",
				"too many failed attempts from this address");
		return;
	}
	if (q->rt.kind == R_FILE_LINK) {
		int err = token_check(q->rt.arg, 'd', box_id, extra, sizeof(extra));
		struct box *b = err == 0 ? box_by_id(box_id) : NULL;

		if (!b || b->status == BOX_DELETING) {
			if (err == -EACCES)
				auth_failed(q->peer);
			req_reply_error(q, err == -ETIMEDOUT ? 410 : 404, "NotFound",
					err == -ETIMEDOUT ? "the link expired" : "no such link");
			return;
		}
		snprintf(q->link_path, sizeof(q->link_path), "%.4096s", extra);
		b->last_active_ms = sd_now_ms();
		box_wake_then(b, q, file_link_then);
		return;
	}
	/* R_SERVICE: /svc/<box id>-<port>/..., the token in a header or ?token= */
	char token[8192];
	const char *dash = strrchr(q->rt.arg, '-');

	if (req_header(q, "x-langsmith-sandbox-service-token:", token, sizeof(token)) <= 0 &&
	    req_query(q, "token", token, sizeof(token)) < 0) {
		req_reply_error(q, 401, "Unauthorized", "this service URL needs its token");
		return;
	}
	int err = token_check(token, 's', box_id, extra, sizeof(extra));

	if (err < 0 || !dash || (size_t)(dash - q->rt.arg) != SD_ID_LEN ||
	    strncmp(q->rt.arg, box_id, SD_ID_LEN) != 0 || strcmp(dash + 1, extra) != 0) {
		if (err != -ETIMEDOUT)
			auth_failed(q->peer);
		req_reply_error(q, 401, "Unauthorized",
				err == -ETIMEDOUT ? "the token expired"
						  : "the token is not this URL's");
		return;
	}
	struct box *b = box_by_id(box_id);

	if (!b || b->status == BOX_DELETING) {
		req_reply_error(q, 404, "NotFound", "no such service");
		return;
	}
	q->svc_port = (unsigned)atoi(extra);
	b->last_active_ms = sd_now_ms();
	box_wake_then(b, q, svc_proxy);
}

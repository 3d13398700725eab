/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandbox-transfer's calls to a service's API (transfer.h): libcurl, one handle kept (its
 * connection reused), the user's key in X-Api-Key, every answer bounded.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <curl/curl.h>
#include <openssl/crypto.h>

#include "client.h"
#include "transfer.h"

struct body {
	char *p;
	size_t len, max;
	bool over;
};

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
	struct body *b = arg;
	size_t len = size * n;

	if (len > b->max - b->len) {
		b->over = true;
		return 0;
	}
	char *np = realloc(b->p, b->len + len + 1);

	if (!np)
		return 0;
	b->p = np;
	memcpy(b->p + b->len, p, len);
	b->len += len;
	b->p[b->len] = 0;
	return len;
}

int svc_open(struct svc *a, const char *url, const char *key)
{
	size_t n = strlen(url);

	memset(a, 0, sizeof(*a));
	while (n && url[n - 1] == '/')
		n--;
	if (n >= sizeof(a->base) - 16 ||
	    (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)) {
		fprintf(stderr, "sandbox-transfer: the service's URL is http:// or https://\n");
		return -EINVAL;
	}
	/* the API's root: URL, or URL/v2/sandboxes when it does not end so */
	if (n >= 13 && strncmp(url + n - 13, "/v2/sandboxes", 13) == 0)
		snprintf(a->base, sizeof(a->base), "%.*s", (int)n, url);
	else
		snprintf(a->base, sizeof(a->base), "%.*s/v2/sandboxes", (int)n, url);
	if (strlen(key) > 512 || strpbrk(key, "\r\n")) {
		fprintf(stderr, "sandbox-transfer: that is not an API key\n");
		return -EINVAL;
	}
	snprintf(a->key_header, sizeof(a->key_header), "X-Api-Key: %s", key);
	if (!(a->curl = curl_easy_init()))
		return -ENOMEM;
	return 0;
}

int svc_clone(struct svc *dst, const struct svc *a)
{
	memset(dst, 0, sizeof(*dst));
	memcpy(dst->base, a->base, sizeof(dst->base));
	memcpy(dst->key_header, a->key_header, sizeof(dst->key_header));
	return (dst->curl = curl_easy_init()) ? 0 : -ENOMEM;
}

void svc_close(struct svc *a)
{
	if (a->curl)
		curl_easy_cleanup(a->curl);
	OPENSSL_cleanse(a->key_header, sizeof(a->key_header));
	a->curl = NULL;
}

static int svc_call_once(struct svc *a, const char *method, const char *path, const void *body,
			 size_t blen, const char *ctype, size_t max, struct svc_answer *out);

int svc_call(struct svc *a, const char *method, const char *path, const void *body, size_t blen,
	     const char *ctype, size_t max, struct svc_answer *out)
{
	int err;

	for (unsigned try = 1;; try++) {
		json_t *o;
		bool busy;

		err = svc_call_once(a, method, path, body, blen, ctype, max, out);
		if (err < 0 || out->status != 429 || try == SVC_BUSY_TRIES)
			return err;
		/* busy (refused before any work), not a quota's 429 */
		o = svc_json(out);
		busy = o &&
		       json_is_string(json_object_get(json_object_get(o, "detail"), "error")) &&
		       strcmp(json_string_value(
				      json_object_get(json_object_get(o, "detail"), "error")),
			      "TooManyRequests") == 0;
		json_decref(o);
		if (!busy)
			return err;
		svc_answer_free(out);
		sleep(1);
	}
}

static int svc_call_once(struct svc *a, const char *method, const char *path, const void *body,
			 size_t blen, const char *ctype, size_t max, struct svc_answer *out)
{
	char url[4200], ct[160], err[CURL_ERROR_SIZE] = "";
	struct curl_slist *h = NULL;
	struct body b = {.max = max};
	CURL *c = a->curl;
	CURLcode rc;

	memset(out, 0, sizeof(*out));
	if ((size_t)snprintf(url, sizeof(url), "%s%s", a->base, path) >= sizeof(url))
		return -ENAMETOOLONG;
	curl_easy_reset(c);
	h = curl_slist_append(h, a->key_header);
	snprintf(ct, sizeof(ct), "Content-Type: %s", ctype ? ctype : "application/json");
	h = curl_slist_append(h, ct);
	h = curl_slist_append(h, "Expect:");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 20L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 600L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, err);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	if (body || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)blen);
	}
	rc = curl_easy_perform(c);
	curl_slist_free_all(h);
	if (rc != CURLE_OK) {
		snprintf(out->error, sizeof(out->error), "%.200s: %s", url,
			 b.over	  ? "the answer is too large"
			 : err[0] ? err
				  : curl_easy_strerror(rc));
		free(b.p);
		return b.over ? -EFBIG : -EIO;
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
	out->body = b.p;
	out->len = b.len;
	if (out->status < 200 || out->status > 299) {
		/* the API's error: {"detail":{"error":T,"message":M}}, said as M */
		json_error_t je;
		json_t *o = b.p ? json_loadb(b.p, b.len, 0, &je) : NULL;
		const char *m =
			json_string_value(json_object_get(json_object_get(o, "detail"), "message"));

		snprintf(out->error, sizeof(out->error), "%s %.100s: %ld %.300s", method, path,
			 out->status, m ? m : "");
		json_decref(o);
		printable(out->error, strlen(out->error), false); /* (the service's words) */
	}
	return 0;
}

json_t *svc_json(const struct svc_answer *ans)
{
	json_error_t je;

	return ans->body ? json_loadb(ans->body, ans->len, 0, &je) : NULL;
}

void svc_answer_free(struct svc_answer *ans)
{
	free(ans->body);
	ans->body = NULL;
}

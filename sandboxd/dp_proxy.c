/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A box's dataplane through any host of a fleet (docs/fleet.md, "The dataplane"): its
 * dataplane_url stays the one it was made with across stops, starts and moves, so the host it
 * names may no longer hold it. A request for a box this host does not hold is sent on to the
 * box's owner over TCP (its advertised address), waking it first if it was released into the
 * store; the owner checks the key again, so a box of another workspace is a 404 there as here.
 * HTTP requests go by libcurl on a worker (bodies bounded as the API's); WebSockets are relayed
 * message by message (dp_relay.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>

#include "fleetd.h"

#define DP_TIMEOUT_S 600 /* an execute's answer comes at its exit */
#define DP_BODY_MAX  (SD_DOWNLOAD_MAX + (1u << 20))
static const char *const passed_in[] = {
	"x-api-key:",	  "content-type:", "range:",	      "if-range:",
	"if-none-match:", "accept:",	   "accept-encoding:"};
static const char *const passed_out[] = {
	"content-range:", "etag:", "accept-ranges:", "last-modified:", "content-disposition:"};

int dp_resolve(const char *workspace, const char *key_id, const char *id,
	       char addr[FLEETD_ADDR_MAX], bool *here, char *err, size_t len)
{
	char host[FLEET_ID_MAX + 1];
	int r = fleetd_owner_of(id, host, true);
	bool said = false; /* err holds the wake's reason */

	*here = false;
	/* this host's copy of the owners may lag a move: a box it names as this host's (which
	 * sent the request here, so it is not), or a released one whose record went (woken
	 * meanwhile), is read from the bucket itself, a few times */
	for (int tries = 1; r == 0 && tries <= FLEETD_MOVE_TRIES; tries++) {
		if (strcmp(host, FLEET_RELEASED) == 0) {
			r = fleetd_wake(workspace, key_id, id, host, err, len);
			said = r < 0;
			if (r == -EACCES) { /* another workspace's: as none, at once */
				r = -ENOENT;
				break;
			}
			if (r != -ENOENT)
				break;
		} else if (!fleetd_self(host) || tries > 1) {
			break;
		}
		r = fleetd_owner_fresh(id, host, FLEETD_MOVE_PAUSE_MS);
		said = false;
	}
	if (r == 0 && strcmp(host, FLEET_RELEASED) == 0)
		r = -ENOENT; /* released again and again: no record */
	if (r < 0 && (r == -ENOENT || !said))
		snprintf(err, len, r == -ENOENT ? "sandbox not found" : "the fleet did not answer");
	if (r < 0)
		return r;
	if (fleetd_self(host)) {
		*here = true;
		return 0;
	}
	if (fleetd_host_addr_ask(host, addr) < 0) {
		snprintf(err, len, "the sandbox's host %s is not live", host);
		return -EHOSTDOWN;
	}
	return 0;
}

struct dp_job {
	struct sd_job job;
	struct sd_pending *pending;
	char workspace[SD_WORKSPACE_MAX + 1];
	char key_id[SD_KEY_ID_LEN + 1];
	char id[SD_ID_LEN + 1];
	char path[9000]; /* path and query, as sent on */
	char method[8];
	char *body;
	size_t body_len;
	struct curl_slist *headers;
	/* out */
	bool here; /* the box is this host's now (woken here): served locally */
	long status;
	char ctype[128];
	char msg[600];
	char *resp;
	size_t resp_len;
	bool too_big;
	char hdr[5][200]; /* passed_out's, "" when absent */
	uint64_t length;  /* a HEAD's Content-Length */
};

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct dp_job *j = arg;
	size_t len = size * n;

	if (len > DP_BODY_MAX - j->resp_len) {
		j->too_big = true;
		return 0;
	}
	char *nr = realloc(j->resp, j->resp_len + len + 1);

	if (!nr)
		return 0;
	j->resp = nr;
	memcpy(j->resp + j->resp_len, p, len);
	j->resp_len += len;
	return len;
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
	struct dp_job *j = arg;
	size_t len = size * n;

	if (len > 15 && strncasecmp(p, "content-length:", 15) == 0)
		j->length = strtoull(p + 15, NULL, 10);
	for (size_t i = 0; i < sizeof(passed_out) / sizeof(passed_out[0]); i++) {
		size_t hl = strlen(passed_out[i]);

		if (len > hl && strncasecmp(p, passed_out[i], hl) == 0) {
			const char *v = p + hl;
			size_t vl = len - hl;

			while (vl && (*v == ' ' || *v == '\t'))
				v++, vl--;
			while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
				vl--;
			if (vl < sizeof(j->hdr[i]) && !memchr(v, '\r', vl) && !memchr(v, '\n', vl))
				snprintf(j->hdr[i], sizeof(j->hdr[i]), "%.*s", (int)vl, v);
		}
	}
	return len;
}

static void dp_run(struct sd_job *sj)
{
	struct dp_job *j = (struct dp_job *)sj;
	char addr[FLEETD_ADDR_MAX], url[9200];
	int r = dp_resolve(j->workspace, j->key_id, j->id, addr, &j->here, j->msg, sizeof(j->msg));

	if (r < 0) {
		j->status = r == -ENOENT ? -404 : -1;
		return;
	}
	if (j->here)
		return;
	snprintf(url, sizeof(url), "http://%s%s", addr, j->path);
	CURL *c = curl_easy_init();

	if (!c) {
		j->status = -1;
		snprintf(j->msg, sizeof(j->msg), "out of memory");
		return;
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, j->method);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, j->headers);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)DP_TIMEOUT_S);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, j);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, j);
	if (strcmp(j->method, "HEAD") == 0)
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	if (j->body_len) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, j->body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)j->body_len);
	}
	CURLcode rc = curl_easy_perform(c);

	if (rc != CURLE_OK) {
		j->status = -1;
		snprintf(j->msg, sizeof(j->msg), "the sandbox's host did not answer: %s",
			 j->too_big ? "its answer is too large" : curl_easy_strerror(rc));
	} else {
		char *ct = NULL;

		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &j->status);
		curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
		snprintf(j->ctype, sizeof(j->ctype), "%s", ct ? ct : "application/octet-stream");
		for (char *p = j->ctype; *p; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				*p = ' ';
	}
	curl_easy_cleanup(c);
}

static void dp_done(struct sd_job *sj)
{
	struct dp_job *j = (struct dp_job *)sj;
	struct sd_req *q = pending_take(j->pending);

	if (q && j->here) { /* woken here: served as any request for a box of this host */
		q->body = j->body;
		q->body_len = j->body_len;
		j->body = NULL;
		struct box *b = box_find(q->workspace, j->id);

		if (b && strcmp(b->id, j->id) == 0) {
			q->dp_remote = false;
			req_dispatch(q);
		} else {
			req_moved(q); /* a read that lagged its going: asked again, bounded */
		}
	} else if (q && j->status == -404) {
		req_reply_error(q, 404, "NotFound", "sandbox not found");
	} else if (q && (j->status < 100 || j->status > 599)) {
		req_reply_error(q, 502, "ConnectionError", "%s",
				j->msg[0] ? j->msg : "no HTTP answer");
	} else if (q) {
		for (size_t i = 0; i < sizeof(passed_out) / sizeof(passed_out[0]); i++)
			if (j->hdr[i][0])
				req_add_header(q, passed_out[i], j->hdr[i]);
		if (q->method == M_HEAD) /* the length of the GET it stands for */
			q->head_len = j->length;
		req_reply_raw(q, (int)j->status, j->ctype, j->resp, j->resp_len);
		j->resp = NULL;
	}
	free(j->resp);
	free(j->body);
	curl_slist_free_all(j->headers);
	free(j);
}

void dp_proxy(struct sd_req *q)
{
	static const char *const methods[] = {"GET",   "HEAD",	 "POST",    "PUT",
					      "PATCH", "DELETE", "OPTIONS", "GET"};
	struct dp_job *j = calloc(1, sizeof(*j));
	char frag[4096];

	if (!j) {
		req_reply_error(q, 503, "ServiceUnavailable", "out of memory");
		return;
	}
	snprintf(j->workspace, sizeof(j->workspace), "%s", q->workspace);
	snprintf(j->key_id, sizeof(j->key_id), "%s", q->key_id);
	snprintf(j->id, sizeof(j->id), "%.36s", q->rt.arg);
	snprintf(j->method, sizeof(j->method), "%s", methods[q->method]);
	size_t off = (size_t)snprintf(j->path, sizeof(j->path), "%s", q->path ? q->path : "");

	/* the query's arguments, each value escaped again (lws gave them decoded) */
	for (int i = 0; i < 64 && off < sizeof(j->path); i++) {
		if (lws_hdr_copy_fragment(q->wsi, frag, sizeof(frag), WSI_TOKEN_HTTP_URI_ARGS, i) <
		    0)
			break;
		char *eq = strchr(frag, '=');
		char *v = eq ? curl_easy_escape(NULL, eq + 1, 0) : NULL;

		if (eq)
			*eq = 0;
		off += (size_t)snprintf(j->path + off, sizeof(j->path) - off, "%c%s%s%s",
					i ? '&' : '?', frag, eq ? "=" : "", v ? v : "");
		curl_free(v);
	}
	if (off >= sizeof(j->path)) {
		free(j);
		req_reply_error(q, 414, "InvalidRequest", "the query is too long");
		return;
	}
	for (size_t i = 0; i < sizeof(passed_in) / sizeof(passed_in[0]); i++) {
		char v[4096], line[4200];

		if (req_header(q, passed_in[i], v, sizeof(v)) > 0 && !strpbrk(v, "\r\n")) {
			snprintf(line, sizeof(line), "%.*s: %s", (int)strlen(passed_in[i]) - 1,
				 passed_in[i], v);
			j->headers = curl_slist_append(j->headers, line);
		}
	}
	j->headers = curl_slist_append(j->headers, "Expect:");
	j->body = q->body;
	j->body_len = q->body_len;
	q->body = NULL;
	q->body_len = q->body_cap = 0;
	j->pending = req_park(q);
	if (!j->pending) {
		free(j->body);
		curl_slist_free_all(j->headers);
		free(j);
		return;
	}
	j->job.run = dp_run;
	j->job.done = dp_done;
	work_queue_class(&j->job, WORK_FLEET);
}

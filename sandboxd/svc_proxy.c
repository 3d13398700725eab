/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A service URL's request, reverse-proxied to the guest's port (docs/api.md, "Service URLs"):
 * a worker makes sure the sandbox's port is forwarded to this host's loopback (the sandbox's
 * own forwarder, as `sandboxctl port` makes: it connects from inside the sandbox's namespace,
 * so the request reaches the guest the way its proxy's traffic does) and sends the request
 * there with libcurl; the answer (bounded by SVC_BODY_MAX) goes back to the client.
 * Hop-by-hop headers and the service token are not passed on. WebSocket upgrades through a
 * service URL are not proxied (docs/api.md says so).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>
#include <curl/curl.h>

#include "client.h"
#include "hostutil.h"
#include "sandboxd.h"

#define SVC_BODY_MAX  (64u << 20)
#define SVC_TIMEOUT_S 60
static const char *const passed_headers[] = {
	"content-type:", "accept:", "authorization:", "user-agent:", "accept-encoding:", "cookie:"};

struct svc_job {
	struct sd_job job;
	struct sd_pending *pending;
	char sandbox[16];
	unsigned guest_port;
	char url[9000];
	char method[8];
	char *body;
	size_t body_len;
	struct curl_slist *headers;
	/* out */
	long status;
	char ctype[128];
	char *resp;
	size_t resp_len;
	bool too_big;
	char msg[256];
};

/* The host port a running forwarder of `sb`'s guest port listens on, from its command line. */
static int forward_port_of(const struct sandbox *sb, unsigned guest_port, unsigned *host_port)
{
	char file[64], path[4300], *text = NULL, *cmd = NULL;
	size_t len, clen;
	uint64_t pid;

	snprintf(file, sizeof(file), "port-%u.pid", guest_port);
	if (sandbox_path(sb, file, path, sizeof(path)) < 0 || read_file(path, 64, &text, &len) < 0)
		return -ENOENT;
	text[strcspn(text, "\n")] = 0;
	bool ok = parse_u64(text, 1, INT32_MAX, &pid);

	free(text);
	snprintf(path, sizeof(path), "/proc/%llu/cmdline", (unsigned long long)pid);
	if (!ok || read_file(path, 8192, &cmd, &clen) < 0)
		return -ENOENT;
	int err = -ENOENT;

	for (size_t i = 0; i + 1 < clen; i += strlen(cmd + i) + 1)
		if (strcmp(cmd + i, "--listen") == 0 && i + 9 < clen) {
			const char *colon = strrchr(cmd + i + 9, ':');
			uint64_t p;

			if (colon && parse_u64(colon + 1, 1, 65535, &p)) {
				*host_port = (unsigned)p;
				err = 0;
			}
			break;
		}
	free(cmd);
	return err;
}

static int free_port(unsigned *port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &al) < 0) {
		close(fd);
		return -errno;
	}
	*port = ntohs(a.sin_port);
	close(fd);
	return 0;
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct svc_job *j = arg;
	size_t len = size * n;

	if (len > SVC_BODY_MAX - j->resp_len) {
		j->too_big = true;
		return 0;
	}
	char *nb = realloc(j->resp, j->resp_len + len + 1);

	if (!nb)
		return 0;
	memcpy(nb + j->resp_len, p, len);
	j->resp = nb;
	j->resp_len += len;
	return len;
}

static void svc_run(struct sd_job *sj)
{
	struct svc_job *j = (struct svc_job *)sj;
	struct lc_report r = {0};
	struct sandbox sb;
	unsigned host_port = 0;
	int err;

	pthread_mutex_lock(&lifecycle_lock);
	err = sandbox_find(j->sandbox, &sb, &r);
	if (err == 0 && forward_port_of(&sb, j->guest_port, &host_port) < 0) {
		err = free_port(&host_port);
		if (err == 0)
			err = proxy_forward(&sb, j->guest_port, host_port);
	}
	pthread_mutex_unlock(&lifecycle_lock);
	if (err < 0) {
		snprintf(j->msg, sizeof(j->msg), "cannot reach the sandbox's port %u: %s",
			 j->guest_port, strerror(-err));
		j->status = -1;
		return;
	}
	char url[9100];

	snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", host_port, j->url);
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
	curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)SVC_TIMEOUT_S);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, j);
	if (strcmp(j->method, "HEAD") == 0)
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	if (j->body_len) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, j->body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)j->body_len);
	}
	CURLcode rc = curl_easy_perform(c);

	if (rc != CURLE_OK) {
		j->status = -1;
		snprintf(j->msg, sizeof(j->msg), "%s",
			 j->too_big ? "the service's answer is too large" : curl_easy_strerror(rc));
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

static void svc_done(struct sd_job *sj)
{
	struct svc_job *j = (struct svc_job *)sj;
	struct sd_req *q = pending_take(j->pending);

	if (q && j->status < 0)
		req_reply_error(q, 502, "ConnectionError", "%s", j->msg);
	else if (q && (j->status < 100 || j->status > 599))
		req_reply_error(q, 502, "ConnectionError", "the service gave no HTTP answer");
	else if (q) {
		req_reply_raw(q, (int)j->status, j->ctype, j->resp, j->resp_len);
		j->resp = NULL;
	}
	free(j->resp);
	free(j->body);
	curl_slist_free_all(j->headers);
	free(j);
}

void svc_proxy(struct sd_req *q, struct box *b)
{
	static const char *const methods[] = {"GET",   "HEAD",	 "POST",    "PUT",
					      "PATCH", "DELETE", "OPTIONS", "GET"};
	struct svc_job *j = calloc(1, sizeof(*j));

	if (!j) {
		req_reply_error(q, 503, "ServiceUnavailable", "out of memory");
		return;
	}
	snprintf(j->sandbox, sizeof(j->sandbox), "%s", b->sandbox);
	j->guest_port = q->svc_port;
	snprintf(j->method, sizeof(j->method), "%s", methods[q->method]);
	/* the path after /svc/<box>-<port>, and the query without our token */
	size_t off = (size_t)snprintf(j->url, sizeof(j->url), "%s", q->rt.rest);
	char frag[4096];
	bool first = true;

	for (int i = 0; i < 64 && off < sizeof(j->url); i++) {
		int n = lws_hdr_copy_fragment(q->wsi, frag, sizeof(frag), WSI_TOKEN_HTTP_URI_ARGS,
					      i);

		if (n < 0)
			break;
		if (strncmp(frag, "token=", 6) == 0)
			continue;
		off += (size_t)snprintf(j->url + off, sizeof(j->url) - off, "%c%s",
					first ? '?' : '&', frag);
		first = false;
	}
	for (size_t i = 0; i < sizeof(passed_headers) / sizeof(passed_headers[0]); i++) {
		char v[4096], line[4200];

		if (req_header(q, passed_headers[i], v, sizeof(v)) > 0 && !strpbrk(v, "\r\n")) {
			snprintf(line, sizeof(line), "%.*s: %s", (int)strlen(passed_headers[i]) - 1,
				 passed_headers[i], v);
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
	j->job.run = svc_run;
	j->job.done = svc_done;
	work_queue_io(&j->job);
}

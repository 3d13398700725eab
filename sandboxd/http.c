/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP on the loop (libwebsockets): a request's head, its body (bounded by its route), the
 * key's check, the dispatch to a handler, the response. A WebSocket upgrade of the same
 * connection goes to ws_exec.c. One struct sd_conn per connection, reset per request (keep-
 * alive); a request parked on a job holds a struct sd_pending, which outlives its
 * connection so that a job finishing after the client left finds it gone, not freed memory.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libwebsockets.h>

#include "sandboxd.h"

/* Bytes the uploads being received may take (SD_UPLOADS_INFLIGHT in all). */
static uint64_t uploads_inflight;

struct sd_pending {
	struct sd_req *q; /* NULL once its connection closed */
	void (*cancel)(void *arg);
	void *arg;
};

void pending_on_cancel(struct sd_pending *p, void (*cancel)(void *arg), void *arg)
{
	p->cancel = cancel;
	p->arg = arg;
}

/* Failed authentications: a small table of peers, each a token bucket (AUTH_FAIL_BURST
 * failures, refilled AUTH_FAIL_PER_S a second); a peer over it gets 429 before any key
 * check. Bounded: the oldest entry is reused. */
#define AUTH_PEERS	1024
#define AUTH_FAIL_BURST 20
#define AUTH_FAIL_PER_S 5
static struct {
	char peer[64];
	double tokens;
	uint64_t at_ms;
} auth_peers[AUTH_PEERS];

static int auth_slot(const char *peer)
{
	int oldest = 0;

	for (int i = 0; i < AUTH_PEERS; i++) {
		if (strcmp(auth_peers[i].peer, peer) == 0)
			return i;
		if (auth_peers[i].at_ms < auth_peers[oldest].at_ms)
			oldest = i;
	}
	snprintf(auth_peers[oldest].peer, sizeof(auth_peers[oldest].peer), "%s", peer);
	auth_peers[oldest].tokens = AUTH_FAIL_BURST;
	auth_peers[oldest].at_ms = sd_now_ms();
	return oldest;
}

static double auth_tokens(const char *peer)
{
	int i = auth_slot(peer);
	uint64_t now = sd_now_ms();
	double t = auth_peers[i].tokens +
		   (double)(now - auth_peers[i].at_ms) * AUTH_FAIL_PER_S / 1000.0;

	auth_peers[i].tokens = t > AUTH_FAIL_BURST ? AUTH_FAIL_BURST : t;
	auth_peers[i].at_ms = now;
	return auth_peers[i].tokens;
}

bool auth_limited(const char *peer)
{
	return auth_tokens(peer) < 1.0;
}

void auth_failed(const char *peer)
{
	int i = auth_slot(peer);

	(void)auth_tokens(peer);
	auth_peers[i].tokens -= 1.0;
	metrics_auth_failed();
}

const struct sd_key *auth_check(struct lws *wsi, const char *peer, int *status)
{
	char key[SD_KEY_TEXT_LEN + 2];

	if (auth_limited(peer)) {
		*status = 429;
		return NULL;
	}
	int n = lws_hdr_custom_copy(wsi, key, sizeof(key), "x-api-key:", 10);
	const struct sd_key *k = n > 0 && n <= SD_KEY_TEXT_LEN ? keys_check(key) : NULL;

	explicit_bzero(key, sizeof(key));
	if (!k) {
		auth_failed(peer);
		*status = 401;
	}
	return k;
}

int req_header(struct sd_req *q, const char *name_colon, char *out, size_t len)
{
	if (!q->wsi) /* a call from another host carries no headers */
		return -1;
	static const struct {
		const char *name;
		enum lws_token_indexes tok;
	} known[] = {
		{"range:", WSI_TOKEN_HTTP_RANGE},
		{"if-range:", WSI_TOKEN_HTTP_IF_RANGE},
		{"if-none-match:", WSI_TOKEN_HTTP_IF_NONE_MATCH},
		{"content-type:", WSI_TOKEN_HTTP_CONTENT_TYPE},
		{"host:", WSI_TOKEN_HOST},
	};
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strcmp(known[i].name, name_colon) == 0) {
			if (lws_hdr_total_length(q->wsi, known[i].tok) <= 0)
				return -1;
			return lws_hdr_copy(q->wsi, out, (int)len, known[i].tok);
		}
	int n = lws_hdr_custom_length(q->wsi, name_colon, (int)strlen(name_colon));

	if (n < 0 || (size_t)n >= len)
		return -1;
	return lws_hdr_custom_copy(q->wsi, out, (int)len, name_colon, (int)strlen(name_colon));
}

int req_query(struct sd_req *q, const char *name, char *out, size_t len)
{
	char frag[8192];
	size_t nl = strlen(name);

	for (unsigned i = 0; i < q->nvquery; i++)
		if (strncmp(q->vquery[i], name, nl) == 0 && q->vquery[i][nl] == '=') {
			if (strlen(q->vquery[i] + nl + 1) >= len)
				return -E2BIG;
			strcpy(out, q->vquery[i] + nl + 1);
			return 0;
		}
	if (!q->wsi)
		return -ENOENT;
	for (int i = 0; i < 64; i++) {
		int n = lws_hdr_copy_fragment(q->wsi, frag, sizeof(frag), WSI_TOKEN_HTTP_URI_ARGS,
					      i);

		if (n < 0)
			break;
		if (strncmp(frag, name, nl) == 0 && frag[nl] == '=') {
			if (strlen(frag + nl + 1) >= len)
				return -E2BIG;
			strcpy(out, frag + nl + 1);
			return 0;
		}
	}
	return -ENOENT;
}

void req_add_header(struct sd_req *q, const char *name, const char *value)
{
	if (q->nextra >= REQ_EXTRA_HEADERS)
		return;
	snprintf(q->extra[q->nextra].name, sizeof(q->extra[0].name), "%s", name);
	snprintf(q->extra[q->nextra].value, sizeof(q->extra[0].value), "%s", value);
	q->nextra++;
}

void req_reply_raw(struct sd_req *q, int status, const char *ctype, char *data, size_t len)
{
	if (q->replied) {
		free(data);
		return;
	}
	q->replied = true;
	q->status = status;
	snprintf(q->ctype, sizeof(q->ctype), "%s", ctype);
	q->resp = data;
	q->resp_len = len;
	q->resp_off = 0;
	metrics_request(q->rt.kind, status, sd_now_ms() - q->start_ms);
	access_log(q);
	if (q->on_reply) {
		q->on_reply(q); /* sent back to the calling host (q may be freed) */
		return;
	}
	if (!q->dispatching) /* else written when its dispatch returns (http_dispatch) */
		lws_callback_on_writable(q->wsi);
}

void req_reply_json(struct sd_req *q, int status, json_t *body)
{
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;

	json_decref(body);
	if (!text) {
		text = strdup(
			"{\"detail\":{\"error\":\"InternalError\",\"message\":\"out of memory\"}}");
		status = 500;
	}
	req_reply_raw(q, status, "application/json", text, text ? strlen(text) : 0);
}

void req_reply_error(struct sd_req *q, int status, const char *type, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	req_reply_json(q, status,
		       json_pack("{s:{s:s, s:s}}", "detail", "error", type, "message", msg));
}

void req_reply_invalid(struct sd_req *q, const char *field, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	req_reply_json(q, 422,
		       json_pack("{s:[{s:[s,s], s:s, s:s}]}", "detail", "loc", "body", field, "msg",
				 msg, "type", "value_error"));
}

json_t *req_json(struct sd_req *q)
{
	json_error_t err;
	json_t *o;

	if (q->body_len == 0)
		return json_object();
	o = jsonx_parse(q->body, q->body_len, &err);
	if (!o) {
		req_reply_error(q, 400, "InvalidRequest", "the body is not JSON: %s", err.text);
		return NULL;
	}
	if (!json_is_object(o)) {
		json_decref(o);
		req_reply_error(q, 400, "InvalidRequest", "the body is not a JSON object");
		return NULL;
	}
	return o;
}

struct sd_pending *req_park(struct sd_req *q)
{
	struct sd_pending *p = calloc(1, sizeof(*p));

	if (!p) {
		req_reply_error(q, 503, "ServiceUnavailable", "out of memory");
		return NULL;
	}
	if (q->pending) { /* never: a request is dispatched once */
		free(p);
		sd_log("a request parked twice");
		return NULL;
	}
	p->q = q;
	q->pending = p;
	return p;
}

struct sd_req *pending_take(struct sd_pending *p)
{
	struct sd_req *q = p->q;

	if (q)
		q->pending = NULL;
	free(p);
	return q;
}

uint64_t req_budget_take(struct sd_req *q)
{
	uint64_t n = q->upload_reserved;

	q->upload_reserved = 0;
	return n;
}

void req_budget_return(uint64_t n)
{
	uploads_inflight -= n;
}

static void req_reset(struct sd_req *q)
{
	struct sd_pending *p = q->pending;

	uploads_inflight -= q->upload_reserved;

	if (p && p->cancel) { /* its owner hears it now, and forgets the handle */
		p->cancel(p->arg);
		free(p);
	} else if (p) {
		p->q = NULL; /* freed by its owner's pending_take */
	}
	free(q->body);
	free(q->resp);
	free(q->path);
	struct lws *wsi = q->wsi;

	memset(q, 0, sizeof(*q));
	q->wsi = wsi;
}

static enum http_method req_method(struct lws *wsi)
{
	static const struct {
		enum lws_token_indexes tok;
		enum http_method m;
	} ms[] = {
		{WSI_TOKEN_GET_URI, M_GET},	    {WSI_TOKEN_POST_URI, M_POST},
		{WSI_TOKEN_HEAD_URI, M_HEAD},	    {WSI_TOKEN_PATCH_URI, M_PATCH},
		{WSI_TOKEN_DELETE_URI, M_DELETE},   {WSI_TOKEN_PUT_URI, M_PUT},
		{WSI_TOKEN_OPTIONS_URI, M_OPTIONS},
	};
	for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++)
		if (lws_hdr_total_length(wsi, ms[i].tok) > 0)
			return ms[i].m;
	return M_OTHER;
}

/* The key's check for a route that needs one: 0, or answered (401, 429, 404). */
static int req_authenticate(struct sd_req *q)
{
	int status = 401;
	const struct sd_key *k = auth_check(q->wsi, q->peer, &status);

	if (!k) {
		if (status == 429) {
			req_add_header(q, "retry-after:", "1");
			req_reply_error(q, 429, "TooManyRequests",
					"too many failed authentications from this address");
		} else {
			req_reply_error(q, 401, "Unauthorized", "missing or invalid X-Api-Key");
		}
		return -1;
	}
	snprintf(q->workspace, sizeof(q->workspace), "%s", k->workspace);
	snprintf(q->key_id, sizeof(q->key_id), "%s", k->id);
	q->authenticated = true;
	if (q->rt.kind >= R_DP_EXECUTE && q->rt.kind <= R_DP_TUNNEL) {
		struct box *b = box_find(q->workspace, q->rt.arg);

		if ((!b || strcmp(b->id, q->rt.arg) != 0) && fleet_hooks && fleet_hooks->dp &&
		    strlen(q->rt.arg) == SD_ID_LEN) {
			q->dp_remote = true; /* another host's, maybe: its host answers */
			return 0;
		}
		if (!b || strcmp(b->id, q->rt.arg) != 0) {
			req_reply_error(q, 404, "NotFound", "sandbox not found");
			return -1;
		}
	}
	return 0;
}

/* The head of a request: route it, decide its body's limit. 0 to go on, else replied. */
static int req_begin(struct sd_req *q, const char *uri, bool operator_listener)
{
	char path[4096];

	q->start_ms = sd_now_ms();
	q->operator_listener = operator_listener;
	q->method = req_method(q->wsi);
	lws_get_peer_simple(q->wsi, q->peer, sizeof(q->peer));
	/* A request answered before its body is read (refused) closes its connection after the
	 * answer: the body is never read, whatever its size. */
	int cl = lws_hdr_total_length(q->wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH);
	int te = lws_hdr_total_length(q->wsi, WSI_TOKEN_HTTP_TRANSFER_ENCODING);
	/* A POST, PUT or PATCH without a length: lws takes what follows as its body (up to
	 * 100 MB), so it is served as one without a body and its connection closes after. */
	bool unlengthed_body = cl <= 0 && te <= 0 &&
			       (q->method == M_POST || q->method == M_PUT || q->method == M_PATCH);

	q->has_length = cl > 0;
	q->close_after = cl > 0 || te > 0 || unlengthed_body;
	if (strlen(uri) >= sizeof(path) || memchr(uri, '?', strlen(uri))) {
		req_reply_error(q, 414, "InvalidRequest", "the path is too long");
		return -1;
	}
	strcpy(path, uri);
	q->path = strdup(uri);
	route_parse(q->method, path, operator_listener, &q->rt);
	if (q->rt.kind == R_NONE) {
		req_reply_error(q, 404, "NotFound", "no such route");
		return -1;
	}
	if (!q->rt.method_ok) {
		req_reply_error(q, 405, "MethodNotAllowed", "method not allowed here");
		return -1;
	}
	q->body_max = q->rt.kind == R_DP_UPLOAD ? SD_UPLOAD_MAX
		      : q->rt.kind == R_CHUNK	? SD_CHUNK_BODY_MAX
		      : q->rt.kind == R_CHUNKS_MISSING || q->rt.kind == R_IMPORTS
			      ? SD_MANIFEST_BODY_MAX
			      : SD_JSON_BODY_MAX;

	if (cl > 0) {
		char v[32];
		unsigned long long n;
		char *end;

		if (lws_hdr_copy(q->wsi, v, sizeof(v), WSI_TOKEN_HTTP_CONTENT_LENGTH) <= 0 ||
		    (n = strtoull(v, &end, 10), *end) || v[0] < '0' || v[0] > '9') {
			req_reply_error(q, 400, "InvalidRequest", "bad Content-Length");
			return -1;
		}
		if (n > q->body_max) {
			req_reply_error(q, 413, "InvalidRequest", "the body is over %zu bytes",
					q->body_max);
			return -1;
		}
		q->body_expected = n > 0;
	}
	if (te > 0) { /* libwebsockets 4.1 reads no chunked request body: refused, not waited on */
		req_reply_error(q, 411, "InvalidRequest",
				"a body needs a Content-Length (chunked bodies are not read)");
		return -1;
	}
	/* The key (and a dataplane route's box) before any byte of the body is taken. */
	if (!operator_listener && q->rt.kind != R_FILE_LINK && q->rt.kind != R_SERVICE &&
	    req_authenticate(q) < 0)
		return -1;
	if ((q->rt.kind == R_DP_UPLOAD || q->rt.kind == R_CHUNK || q->rt.kind == R_CHUNKS_MISSING ||
	     q->rt.kind == R_IMPORTS) &&
	    q->body_expected) { /* large bodies: held within one budget */
		uint64_t want = cl > 0 ? q->body_max : SD_UPLOAD_MAX;
		char v[32];

		if (cl > 0 && lws_hdr_copy(q->wsi, v, sizeof(v), WSI_TOKEN_HTTP_CONTENT_LENGTH) > 0)
			want = strtoull(v, NULL, 10);
		if (want > SD_UPLOADS_INFLIGHT - uploads_inflight) {
			req_add_header(q, "retry-after:", "1");
			req_reply_error(q, 503, "ServiceUnavailable",
					"too many uploads at once: try again");
			return -1;
		}
		uploads_inflight += want;
		q->upload_reserved = want;
	}
	q->close_after = unlengthed_body;
	return 0;
}

static int req_body(struct sd_req *q, const void *in, size_t len)
{
	if (q->replied)
		return 0;
	if (len > q->body_max - q->body_len) {
		req_reply_error(q, 413, "InvalidRequest", "the body is over %zu bytes",
				q->body_max);
		return 0;
	}
	if (q->body_len + len + 1 > q->body_cap) {
		size_t cap = q->body_cap ? q->body_cap : 4096;

		while (cap < q->body_len + len + 1)
			cap *= 2;
		char *nb = realloc(q->body, cap);

		if (!nb) {
			req_reply_error(q, 503, "ServiceUnavailable", "out of memory");
			return 0;
		}
		q->body = nb;
		q->body_cap = cap;
	}
	memcpy(q->body + q->body_len, in, len);
	q->body_len += len;
	q->body[q->body_len] = 0;
	return 0;
}

void req_dispatch(struct sd_req *q)
{
	if (q->replied)
		return;
	if (q->operator_listener) {
		operator_handle(q);
		return;
	}
	if (q->rt.kind == R_FILE_LINK || q->rt.kind == R_SERVICE) {
		links_handle(q);
		return;
	}
	if (!q->authenticated && req_authenticate(q) < 0)
		return;
	/* a key revoked while the body came: refused now */
	if (!keys_live(q->key_id)) {
		req_reply_error(q, 401, "Unauthorized", "missing or invalid X-Api-Key");
		return;
	}
	if (q->rt.kind >= R_DP_EXECUTE && q->rt.kind <= R_DP_TUNNEL) {
		struct box *b = box_find(q->workspace, q->rt.arg);

		if (q->dp_remote && (!b || strcmp(b->id, q->rt.arg) != 0)) {
			fleet_hooks->dp(q);
			return;
		}
		if (!b || strcmp(b->id, q->rt.arg) != 0) {
			req_reply_error(q, 404, "NotFound", "sandbox not found");
			return;
		}
		b->last_active_ms = sd_now_ms();
		if (q->rt.kind == R_DP_EXECUTE)
			box_wake_then(b, q, exec_http_handle);
		else if (q->rt.kind == R_DP_EXECUTE_WS || q->rt.kind == R_DP_TUNNEL)
			req_reply_error(q, 400, "InvalidRequest", "this route takes a WebSocket");
		else
			box_wake_then(b, q, files_handle);
		return;
	}
	control_handle(q, NULL);
}

void req_moved(struct sd_req *q)
{
	if (q->on_reply || !fleet_hooks) {
		/* another host's call: it asks the fleet again where the box went (fleet_rpc.c) */
		req_reply_error(q, 421, "Misdirected", "the sandbox moved");
		return;
	}
	if (q->rt.kind == R_FILE_LINK || q->rt.kind == R_SERVICE ||
	    ++q->moved_hops > REQ_MOVED_HOPS) {
		req_add_header(q, "retry-after:", "1");
		req_reply_error(q, 503, "ServiceUnavailable", "the sandbox moved: try again");
		return;
	}
	if (q->rt.kind >= R_DP_EXECUTE && q->rt.kind <= R_DP_TUNNEL) {
		q->dp_remote = true; /* to its wake, wherever that is */
		fleet_hooks->dp(q);
		return;
	}
	fleet_hooks->forward(q);
}

static int req_write(struct sd_req *q)
{
	uint8_t hbuf[LWS_PRE + 8192], *start = hbuf + LWS_PRE, *p = start,
				      *end = hbuf + sizeof(hbuf);

	if (!q->headers_sent) {
		if (lws_add_http_common_headers(q->wsi, (unsigned)q->status, q->ctype,
						q->method == M_HEAD ? q->head_len : q->resp_len, &p,
						end))
			return 1;
		/* the client must not send another request on it */
		if (q->close_after &&
		    lws_add_http_header_by_token(q->wsi, WSI_TOKEN_CONNECTION,
						 (const uint8_t *)"close", 5, &p, end))
			return 1;
		for (unsigned i = 0; i < q->nextra; i++)
			if (lws_add_http_header_by_name(q->wsi, (const uint8_t *)q->extra[i].name,
							(const uint8_t *)q->extra[i].value,
							(int)strlen(q->extra[i].value), &p, end))
				return 1;
		if (q->method != M_HEAD && q->resp_len > 0 &&
		    q->resp_len + 2 <= (size_t)(end - p)) {
			/* a small body (a box's JSON, an error) goes with the headers: one send,
			 * not two turns of the loop */
			if (lws_finalize_http_header(q->wsi, &p, end))
				return 1;
			memcpy(p, q->resp, q->resp_len);
			p += q->resp_len;
			q->headers_sent = true;
			q->resp_off = q->resp_len;
			if (lws_write(q->wsi, start, (size_t)(p - start), LWS_WRITE_HTTP_FINAL) !=
			    (int)(p - start))
				return 1;
			goto done;
		}
		if (lws_finalize_write_http_header(q->wsi, start, &p, end))
			return 1;
		q->headers_sent = true;
		if (q->method == M_HEAD || q->resp_len == 0)
			goto done;
		lws_callback_on_writable(q->wsi);
		return 0;
	}
	/* The body in pieces, each written whole (lws keeps a partial write's rest itself). */
	static uint8_t chunk[LWS_PRE + 65536];
	size_t n = q->resp_len - q->resp_off;

	if (n > sizeof(chunk) - LWS_PRE)
		n = sizeof(chunk) - LWS_PRE;
	memcpy(chunk + LWS_PRE, q->resp + q->resp_off, n);
	q->resp_off += n;
	bool last = q->resp_off == q->resp_len;

	if (lws_write(q->wsi, chunk + LWS_PRE, n, last ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP) !=
	    (int)n)
		return 1;
	if (!last) {
		lws_callback_on_writable(q->wsi);
		return 0;
	}
done:;
	bool close = q->close_after;

	req_reset(q);
	if (close)
		return -1; /* a body announced and never read: the connection cannot go on */
	return lws_http_transaction_completed(q->wsi) ? -1 : 0;
}

static bool on_operator(struct lws *wsi)
{
	struct lws_vhost *vh = lws_get_vhost(wsi);
	const char *name = vh ? lws_get_vhost_name(vh) : NULL;

	return name && strcmp(name, "operator") == 0;
}

/*
 * Dispatch q, once. A GET or HEAD without a body that is answered at once (a box's JSON, an
 * error) is written now, inside LWS_CALLBACK_HTTP, not after one more turn of the loop:
 * lws expects no body after it then. Anything else is written from the writable callback,
 * as lws 4.1 wants after it may have set its body state (a POST without a length is a body of
 * up to 100 MB to it; answering and completing the transaction inside that callback left lws
 * reading the next bytes as a body on a freed request).
 */
static int http_dispatch(struct sd_req *q)
{
	q->dispatched = true;
	q->dispatching =
		(q->method == M_GET || q->method == M_HEAD) && !q->close_after && !q->has_length;
	req_dispatch(q);
	if (!q->dispatching)
		return 0;
	q->dispatching = false;
	return q->replied && !q->headers_sent ? req_write(q) : 0;
}

int http_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
		  size_t len)
{
	struct sd_conn *c = user;
	struct sd_req *q = c ? c->req : NULL;

	switch (reason) {
	case LWS_CALLBACK_HTTP_DROP_PROTOCOL:
		/* A transaction ended (answered, or its connection closes): lws frees `c` after
		 * this, and binds the next keep-alive request's afresh. Until this was handled,
		 * every request on a kept-alive connection leaked its sd_req (7 KiB: 1.1 GB after
		 * 159,000 requests of wrk). */
		if (q) {
			req_reset(q);
			free(q);
			c->req = NULL;
		}
		return 0;
	case LWS_CALLBACK_HTTP:
		/* made at a transaction's request (lws binds `c` to one transaction, not to the
		 * connection), never for a WebSocket: an idle WebSocket costs its session only */
		if (!c || (!q && !(q = c->req = calloc(1, sizeof(*q)))))
			return -1;
		req_reset(q);
		q->wsi = wsi;
		metrics_conn(true);
		if (req_begin(q, in, on_operator(wsi)) == 0 && !q->body_expected)
			return http_dispatch(q);
		return 0;
	case LWS_CALLBACK_HTTP_BODY:
		if (!q || (q->dispatched && len)) /* bytes past a request dispatched: close */
			return -1;
		return q->dispatched ? 0 : req_body(q, in, len);
	case LWS_CALLBACK_HTTP_BODY_COMPLETION:
		/* Once a request: lws sends it after an explicit Content-Length of 0 to a POST
		 * dispatched at its head (once), and again and again while bytes past a body wait
		 * in its buffer (a pipelined request after a POST's body): that closes, or the
		 * loop spins and the request runs twice. */
		if (!q)
			return -1;
		if (q->completed) { /* its answer, if it has one, goes out before the close */
			if (q->replied && !q->headers_sent) {
				q->close_after = true;
				(void)req_write(q);
			}
			return -1;
		}
		q->completed = true;
		return q->dispatched ? 0 : http_dispatch(q);
	case LWS_CALLBACK_HTTP_WRITEABLE:
		if (!q || !q->replied)
			return 0;
		return req_write(q);
	case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
		return ws_confirm_upgrade(wsi, c, in, on_operator(wsi));
	case LWS_CALLBACK_CLOSED_HTTP:
	case LWS_CALLBACK_WSI_DESTROY:
		if (q) {
			req_reset(q);
			free(q);
			c->req = NULL;
		}
		if (reason == LWS_CALLBACK_WSI_DESTROY) {
			/* an upgrade confirmed but never established: its session never attached */
			free(lws_get_opaque_user_data(wsi));
			lws_set_opaque_user_data(wsi, NULL);
		}
		return 0;
	case LWS_CALLBACK_ESTABLISHED:
	case LWS_CALLBACK_RECEIVE:
	case LWS_CALLBACK_SERVER_WRITEABLE:
	case LWS_CALLBACK_CLOSED:
	case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
		return ws_callback(wsi, reason, c, in, len);
	case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
		work_reap();
		return 0;
	default:
		return lws_callback_http_dummy(wsi, reason, user, in, len);
	}
}

int http_reject(struct lws *wsi, int status, const char *type, const char *msg)
{
	uint8_t buf[LWS_PRE + 2048], *start = buf + LWS_PRE, *p = start, *end = buf + sizeof(buf);
	char body[600];
	int n = snprintf(body, sizeof(body), "{\"detail\":{\"error\":\"%s\",\"message\":\"%s\"}}",
			 type, msg);

	if (n < 0 || (size_t)n >= sizeof(body))
		return -1;
	if (lws_add_http_common_headers(wsi, (unsigned)status, "application/json", (size_t)n, &p,
					end) ||
	    (status == 429 && lws_add_http_header_by_name(wsi, (const uint8_t *)"retry-after:",
							  (const uint8_t *)"1", 1, &p, end)) ||
	    lws_finalize_write_http_header(wsi, start, &p, end))
		return -1;
	memcpy(start, body, (size_t)n);
	if (lws_write(wsi, start, (size_t)n, LWS_WRITE_HTTP_FINAL) != n)
		return -1;
	return 1;
}

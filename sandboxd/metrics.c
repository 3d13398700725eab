/* SPDX-License-Identifier: Apache-2.0 */
/*
 * /metrics (Prometheus text format 0.0.4) and /healthz on the operator's listener, and the
 * JSON access log. No label carries a box's name or id, a workspace or a key: routes are
 * labelled by their kind (route_name), statuses by their number.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandboxd.h"

#define ROUTES (R_GC + 1)
static const double buckets_ms[] = {1,	  5,	10,   25,    50,    100,   250,	  500,
				    1000, 2500, 5000, 10000, 30000, 60000, 120000};
#define NBUCKETS (sizeof(buckets_ms) / sizeof(buckets_ms[0]))

struct histo {
	uint64_t n[NBUCKETS + 1];
	uint64_t count;
	double sum;
};

static struct histo route_h[ROUTES];
static uint64_t route_status[ROUTES][6]; /* 1xx..5xx, by status / 100 */
static struct histo create_h, wake_h, claim_h;
static uint64_t conns_total, ws_open, ws_total, auth_failures;

static void histo_add(struct histo *h, double ms)
{
	size_t i = 0;

	while (i < NBUCKETS && ms > buckets_ms[i])
		i++;
	h->n[i]++;
	h->count++;
	h->sum += ms;
}

void metrics_request(enum route_kind k, int status, uint64_t ms)
{
	if ((unsigned)k >= ROUTES)
		k = R_NONE;
	histo_add(&route_h[k], (double)ms);
	route_status[k][status / 100 < 6 ? status / 100 : 5]++;
}

void metrics_duration(const char *what, uint64_t ms)
{
	histo_add(strcmp(what, "create") == 0 ? &create_h
		  : strcmp(what, "wake") == 0 ? &wake_h
					      : &claim_h,
		  (double)ms);
}

void metrics_conn(bool open)
{
	if (open)
		conns_total++;
}

void metrics_ws(bool open)
{
	if (open) {
		ws_open++;
		ws_total++;
	} else if (ws_open) {
		ws_open--;
	}
}

void metrics_auth_failed(void)
{
	auth_failures++;
}

struct buf {
	char *p;
	size_t len, cap;
};

static void put(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct buf *b, const char *fmt, ...)
{
	va_list ap;

	for (;;) {
		va_start(ap, fmt);
		int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);

		va_end(ap);
		if (n < 0)
			return;
		if (b->p && (size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = b->cap ? b->cap * 2 : 16384;

		while (cap < b->len + (size_t)n + 1)
			cap *= 2;
		char *np = realloc(b->p, cap);

		if (!np)
			return;
		b->p = np;
		b->cap = cap;
	}
}

static void histo_put(struct buf *b, const char *name, const char *labels, const struct histo *h)
{
	uint64_t cum = 0;

	for (size_t i = 0; i < NBUCKETS; i++) {
		cum += h->n[i];
		put(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, *labels ? "," : "",
		    buckets_ms[i] / 1000.0, (unsigned long long)cum);
	}
	cum += h->n[NBUCKETS];
	put(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, *labels ? "," : "",
	    (unsigned long long)cum);
	put(b, "%s_sum{%s} %g\n%s_count{%s} %llu\n", name, labels, h->sum / 1000.0, name, labels,
	    (unsigned long long)h->count);
}

char *metrics_text(size_t *len)
{
	struct buf b = {0};
	unsigned by_state[5] = {0};

	for (struct box *x = box_first(); x; x = x->next)
		if ((unsigned)x->status < 5)
			by_state[x->status]++;
	put(&b, "# HELP sandboxd_sandboxes Sandboxes on this host by state.\n"
		"# TYPE sandboxd_sandboxes gauge\n");
	for (unsigned i = 0; i < 5; i++)
		put(&b, "sandboxd_sandboxes{state=\"%s\"} %u\n",
		    box_status_name((enum box_status)i), by_state[i]);
	put(&b, "# HELP sandboxd_request_duration_seconds Requests by route.\n"
		"# TYPE sandboxd_request_duration_seconds histogram\n");
	for (unsigned k = 0; k < ROUTES; k++) {
		char labels[64];

		if (!route_h[k].count)
			continue;
		snprintf(labels, sizeof(labels), "route=\"%s\"", route_name((enum route_kind)k));
		histo_put(&b, "sandboxd_request_duration_seconds", labels, &route_h[k]);
	}
	put(&b, "# TYPE sandboxd_responses_total counter\n");
	for (unsigned k = 0; k < ROUTES; k++)
		for (unsigned c = 1; c < 6; c++)
			if (route_status[k][c])
				put(&b,
				    "sandboxd_responses_total{route=\"%s\",code=\"%uxx\"} %llu\n",
				    route_name((enum route_kind)k), c,
				    (unsigned long long)route_status[k][c]);
	char pl[4096];

	if (pool_sizes(pl, sizeof(pl)))
		put(&b, "# TYPE sandboxd_pool_ready gauge\n%s", pl);
	put(&b, "# TYPE sandboxd_create_duration_seconds histogram\n");
	histo_put(&b, "sandboxd_create_duration_seconds", "", &create_h);
	put(&b, "# TYPE sandboxd_wake_duration_seconds histogram\n");
	histo_put(&b, "sandboxd_wake_duration_seconds", "", &wake_h);
	put(&b, "# TYPE sandboxd_claim_duration_seconds histogram\n");
	histo_put(&b, "sandboxd_claim_duration_seconds", "", &claim_h);
	put(&b,
	    "# TYPE sandboxd_http_requests_total counter\nsandboxd_http_requests_total %llu\n"
	    "# TYPE sandboxd_websockets gauge\nsandboxd_websockets %llu\n"
	    "# TYPE sandboxd_websockets_total counter\nsandboxd_websockets_total %llu\n"
	    "# TYPE sandboxd_auth_failures_total counter\nsandboxd_auth_failures_total %llu\n",
	    (unsigned long long)conns_total, (unsigned long long)ws_open,
	    (unsigned long long)ws_total, (unsigned long long)auth_failures);
	*len = b.len;
	return b.p;
}

void operator_handle(struct sd_req *q)
{
	if (q->rt.kind == R_HEALTHZ) {
		req_reply_json(q, 200, json_pack("{s:s}", "status", "ok"));
		return;
	}
	if (q->rt.kind == R_DRAIN) {
		if (fleet_hooks && fleet_hooks->drain)
			fleet_hooks->drain(q);
		else
			req_reply_error(
				q, 409, "Conflict",
				"a drain moves sandboxes to other hosts: it needs a fleet "
				"with an object store (serve --fleet --store-endpoint ...)");
		return;
	}
	if (q->rt.kind == R_GC) {
		if (fleet_hooks && fleet_hooks->gc)
			fleet_hooks->gc(q);
		else
			req_reply_error(q, 409, "Conflict",
					"a collection is of a fleet's object store: serve with "
					"--fleet and --store-endpoint");
		return;
	}
	size_t len;
	char *text = metrics_text(&len);

	if (!text) {
		req_reply_error(q, 503, "ServiceUnavailable", "out of memory");
		return;
	}
	req_reply_raw(q, 200, "text/plain; version=0.0.4", text, len);
}

void access_log(const struct sd_req *q)
{
	static const char *const methods[] = {"GET",   "HEAD",	 "POST",    "PUT",
					      "PATCH", "DELETE", "OPTIONS", "OTHER"};
	char t[32];

	if (!getenv("SANDBOXD_ACCESS_LOG"))
		return;
	sd_iso(sd_now_ms(), t);
	/* No path (it may carry a name or a token), no query, no header: the route's kind. */
	fprintf(stderr,
		"{\"time\":\"%s\",\"method\":\"%s\",\"route\":\"%s\",\"status\":%d,\"ms\":%llu,"
		"\"key\":\"%s\",\"peer\":\"%s\"}\n",
		t, methods[q->method], route_name(q->rt.kind), q->status,
		(unsigned long long)(sd_now_ms() - q->start_ms), q->key_id, q->peer);
}

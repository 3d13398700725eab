/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Calls between the hosts of a fleet (fleetd.h), over NATS request/reply on the subject
 * sandbox.ctl.<host>. A message is a JSON head, a newline, then the body's bytes:
 *   a call:     {"op":"call","m":METHOD,"p":PATH,"q":[QUERY ARGS],"w":WORKSPACE,"k":KEY ID}
 *   an await:   {"op":"await","id":BOX ID[,"gen":G]}: the answer of the create (or the wake
 *               of generation G) this host took
 *   an answer:  {"s":STATUS,"t":CONTENT TYPE,"h":[[NAME,VALUE],...]}
 * A call runs on the receiving host as a request of its own API would, already authenticated
 * by the host the client reached (the NATS cluster is the fleet's own network: docs/fleet.md
 * says how it is closed to others). The waits on answers run on WORK_FLEET threads; the loop
 * only builds and relays.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <nats/nats.h>

#include "fleetd.h"

#define RPC_WS_INFLIGHT 4     /* calls of one workspace waiting on other hosts at once */
#define PLACE_MAX_S	60    /* a create's wait for a host with room, whatever its timeout */
#define RPC_CALL_MS	30000 /* a forwarded call's answer */
#define RPC_LIST_MS	5000  /* a host's part of a list (a slow one: its boxes missing) */
#define PLACE_DEFAULT_S 30
#define LIST_HOSTS_MAX	256
#define CALL_HERE	1 /* call_job.status: the box is this host's after all */
/* A create from a snapshot goes first to the hosts that hold it, for this long, then to the
 * pool too (a host waits up to TAKE_WAIT_MS in the pool's fetch before it looks again) */

/* ---- messages ---- */

uint8_t *fleet_rpc_msg(json_t *head, const void *body, size_t blen, size_t *len)
{
	char *h = json_dumps(head, JSON_COMPACT);
	size_t hl = h ? strlen(h) : 0;
	uint8_t *m = h && hl + 1 + blen <= FLEETD_MSG_MAX ? malloc(hl + 1 + blen) : NULL;

	json_decref(head);
	if (m) {
		memcpy(m, h, hl);
		m[hl] = '\n';
		if (blen)
			memcpy(m + hl + 1, body, blen);
		*len = hl + 1 + blen;
	}
	free(h);
	return m;
}

/* The head (an object) and where the body starts: 0 or -EBADMSG. */
int fleet_rpc_split(const uint8_t *m, size_t len, json_t **head, const uint8_t **body, size_t *blen)
{
	const uint8_t *nl = memchr(m, '\n', len);
	json_error_t e;

	*head = nl ? jsonx_parse((const char *)m, (size_t)(nl - m), &e) : NULL;
	if (!*head || !json_is_object(*head)) {
		json_decref(*head);
		*head = NULL;
		return -EBADMSG;
	}
	*body = nl + 1;
	*blen = len - (size_t)(nl + 1 - m);
	return 0;
}

int fleet_rpc_status(const uint8_t *m, size_t len)
{
	json_t *head;
	const uint8_t *body;
	size_t blen;
	int s = 0;

	if (fleet_rpc_split(m, len, &head, &body, &blen) == 0)
		s = (int)json_integer_value(json_object_get(head, "s"));
	json_decref(head);
	return s;
}

uint8_t *fleet_rpc_answer(int status, const char *ctype, const struct sd_req *q, const void *body,
			  size_t blen, size_t *len)
{
	json_t *h = json_array();

	for (unsigned i = 0; q && i < q->nextra; i++)
		json_array_append_new(h, json_pack("[s,s]", q->extra[i].name, q->extra[i].value));
	return fleet_rpc_msg(json_pack("{s:i, s:s, s:o}", "s", status, "t", ctype, "h", h), body,
			     blen, len);
}

/* Relay an answer (msg) to q as its reply. */
static void answer_relay(struct sd_req *q, const uint8_t *m, size_t len)
{
	json_t *head;
	const uint8_t *body;
	size_t blen;

	if (fleet_rpc_split(m, len, &head, &body, &blen) < 0) {
		req_reply_error(q, 502, "BadGateway", "the owning host's answer is not readable");
		return;
	}
	json_int_t status = json_integer_value(json_object_get(head, "s"));
	const char *ctype = json_string_value(json_object_get(head, "t"));
	json_t *hs = json_object_get(head, "h"), *hv;
	size_t i;

	json_array_foreach(hs, i, hv)
	{
		const char *n = json_string_value(json_array_get(hv, 0));
		const char *v = json_string_value(json_array_get(hv, 1));

		if (n && v && !strpbrk(n, "\r\n") && !strpbrk(v, "\r\n"))
			req_add_header(q, n, v);
	}
	char *data = blen ? malloc(blen) : NULL;

	if (status < 200 || status > 599 || !ctype || strpbrk(ctype, "\r\n") ||
	    strlen(ctype) >= 96 || (blen && !data)) {
		free(data);
		json_decref(head);
		req_reply_error(q, 502, "BadGateway", "the owning host's answer is not readable");
		return;
	}
	if (blen)
		memcpy(data, body, blen);
	req_reply_raw(q, (int)status, ctype, data, blen);
	json_decref(head);
}

/* ---- calls to another host, on WORK_FLEET ---- */

enum call_kind { CALL_FORWARD, CALL_CREATE, CALL_LIST };

struct call_job {
	struct sd_job job;
	enum call_kind kind;
	struct sd_pending *pending;
	char workspace[SD_WORKSPACE_MAX + 1];
	char ref[ROUTE_ARG_MAX]; /* forward: the box's name or id */
	char id[SD_ID_LEN + 1];	 /* create: the new box's id */
	bool other_here; /* forward: ref is the id of another workspace's box of this host */
	char name[SD_NAME_MAX + 1];
	int timeout_s;
	bool wait;
	uint8_t *msg; /* what goes to the owner (forward, list), or the create's request */
	size_t len;
	char inflight_ws[SD_WORKSPACE_MAX + 1]; /* counted in inflight[] */
	enum http_method method;		/* forward: the call's */
	enum route_kind kind_route;
	char key_id[SD_KEY_ID_LEN + 1];
	/* out */
	char *released; /* forward: a released box's get, answered from its record (its text) */
	char *lost;	/* forward: a lost host's box's get, answered from its record (its text) */
	uint64_t lost_ago_ms;
	char (*alive)[FLEET_ID_MAX + 1]; /* list: the hosts that answered */
	unsigned nalive;
	int status; /* 0: relay answer; else an error of ours */
	const char *etype;
	char emsg[600];
	uint8_t *answer;
	size_t alen;
	json_t *merged;				     /* list */
	json_t *body;				     /* create: its body (the worker's copy) */
	char near[FLEET_NEAR_MAX][FLEET_ID_MAX + 1]; /* create: hosts to try first */
	int nnear;
};

int fleet_rpc_ask(const char *host, const uint8_t *m, size_t len, int timeout_ms, uint8_t **answer,
		  size_t *alen)
{
	char subject[96];
	natsMsg *reply = NULL;
	natsStatus s;

	snprintf(subject, sizeof(subject), "sandbox.ctl.%s", host);
	s = natsConnection_Request(&reply, (natsConnection *)fleetd.nc, subject, (const char *)m,
				   (int)len, timeout_ms);
	if (s != NATS_OK)
		return s == NATS_TIMEOUT ? -ETIMEDOUT : -EHOSTUNREACH;
	int n = natsMsg_GetDataLength(reply);

	*answer = n > 0 ? malloc((size_t)n) : NULL;
	if (*answer)
		memcpy(*answer, natsMsg_GetData(reply), (size_t)n);
	*alen = *answer ? (size_t)n : 0;
	natsMsg_Destroy(reply);
	return *answer ? 0 : -EBADMSG;
}

static void call_fail(struct call_job *c, int status, const char *type, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void call_fail(struct call_job *c, int status, const char *type, const char *fmt, ...)
{
	va_list ap;

	c->status = status;
	c->etype = type;
	va_start(ap, fmt);
	vsnprintf(c->emsg, sizeof(c->emsg), fmt, ap);
	va_end(ap);
}

bool fleet_is_uuid(const char *s)
{
	if (strlen(s) != SD_ID_LEN)
		return false;
	for (int i = 0; i < SD_ID_LEN; i++)
		if ((i == 8 || i == 13 || i == 18 || i == 23) ? s[i] != '-'
							      : !strchr("0123456789abcdef", s[i]))
			return false;
	return true;
}

/* A call for a box released into the store: a read answered from its record (0, with
 * c->released set), a delete done here (0), anything else wakes it on a host with room (1:
 * host is that host, where the call goes on). -ENOENT: no record (woken meanwhile, or
 * deleted: the caller asks the bucket again). Another workspace's: 404 at once (0), as for
 * none, in no more time. */
static int released_call(struct call_job *c, const char *id, char host[FLEET_ID_MAX + 1])
{
	char why[FLEET_ERR_MAX];
	int err;
	/* a stop of a box in the store is done already (as one host's stop of a stopped box):
	 * never a wake to stop it again (a client's stop sent again while the first pushed the
	 * box woke it on another host, and the next status read "ready") */
	bool stop = c->method == M_POST && c->kind_route == R_BOX_STOP;

	if (stop) {
		char *text = NULL;

		err = fleetd_released_fetch(c->workspace, id, &text);
		free(text);
		if (err == -ENOENT)
			return err;
		if (err == -EACCES)
			call_fail(c, 404, "NotFound", "Sandbox not found");
		else if (err < 0)
			call_fail(c, 503, "ServiceUnavailable", "the fleet did not answer");
		else
			c->status = 204;
		return 0;
	}
	if (c->method == M_GET && (c->kind_route == R_BOX || c->kind_route == R_BOX_STATUS))
		err = fleetd_released_fetch(c->workspace, id, &c->released);
	else if (c->method == M_DELETE && c->kind_route == R_BOX)
		err = fleetd_released_delete(c->workspace, id);
	else
		err = fleetd_wake(c->workspace, c->key_id, id, host, why, sizeof(why));
	if (err == -ENOENT)
		return err;
	if (err == -EACCES) {
		call_fail(c, 404, "NotFound", "Sandbox not found");
		return 0;
	}
	if (c->method == M_GET && (c->kind_route == R_BOX || c->kind_route == R_BOX_STATUS)) {
		if (err < 0)
			call_fail(c, 503, "ServiceUnavailable", "the fleet did not answer");
		return 0;
	}
	if (c->method == M_DELETE && c->kind_route == R_BOX) {
		if (err == 0)
			c->status = 204;
		else
			call_fail(c, 503, "ServiceUnavailable", "the fleet did not answer");
		return 0;
	}
	if (err < 0) {
		call_fail(c, 503, err == -EAGAIN ? "Unschedulable" : "ServiceUnavailable",
			  "sandbox '%s' could not be woken: %s", c->ref, why);
		return 0;
	}
	return 1;
}

/* A call for a box whose host is lost: a read answered from its record (c->lost set), a
 * delete done here, anything else refused. */
static void lost_call(struct call_job *c, const char *id, const char *host)
{
	char *text = NULL;
	int err = fleetd_lost_fetch(c->workspace, id, &text);

	if (err == -ENOENT) { /* none kept, or another workspace's: the same answer */
		call_fail(c, 404, "NotFound", "Sandbox not found");
		return;
	}
	if (err < 0) {
		call_fail(c, 503, "ServiceUnavailable", "the fleet did not answer");
		return;
	}
	if (c->method == M_GET && (c->kind_route == R_BOX || c->kind_route == R_BOX_STATUS)) {
		c->lost = text;
		return;
	}
	free(text);
	if (c->method == M_DELETE && c->kind_route == R_BOX) {
		err = fleetd_lost_delete(c->workspace, id);
		if (err == 0)
			c->status = 204;
		else if (err == -ENOENT)
			call_fail(c, 404, "NotFound", "Sandbox not found");
		else if (err == -ESTALE)
			call_fail(c, 409, "Conflict", "sandbox '%s' moved meanwhile: try again",
				  c->ref);
		else
			call_fail(c, 503, "ServiceUnavailable", "the fleet did not answer");
		return;
	}
	call_fail(c, 400, "NotReady",
		  "the sandbox failed: its host %s was lost (no beat for %llu s); delete it", host,
		  (unsigned long long)(c->lost_ago_ms / 1000));
}

/* A call for another host's box: sent to its owner. The owner is read from this host's copy
 * of the bucket first; when the box was seen moving (its host answered 421: it let the box
 * go, a released record gone: woken or deleted meanwhile) it is read from the bucket itself,
 * a few times, before the client is told to try again. */
static void forward_run(struct call_job *c)
{
	char host[FLEET_ID_MAX + 1], key[80], id[SD_ID_LEN + 1];
	int err;

	/* a name is looked up in the names bucket; an id is its own key. Either way the box
	 * is another workspace's or no one's: the same 404 */
	if (fleet_is_uuid(c->ref)) {
		memcpy(id, c->ref, sizeof(id)); /* (its 36 characters and NUL) */
	} else {
		fleetd_name_key(c->workspace, c->ref, key);
		err = fleet_kv_get(&fleetd, fleetd_names.kv, key, id, sizeof(id), NULL);
		if (err == -ENOENT || err == -EMSGSIZE || (err == 0 && !fleet_is_uuid(id))) {
			call_fail(c, 404, "NotFound", "Sandbox not found");
			return;
		}
		if (err < 0) {
			call_fail(c, 503, "ServiceUnavailable", "the fleet's names did not answer");
			return;
		}
	}
	for (int tries = 0;; tries++) {
		/* it moved under us: the bucket's word, not the copy's */
		err = tries ? fleetd_owner_fresh(id, host, FLEETD_MOVE_PAUSE_MS)
			    : fleetd_owner_of(id, host, true);
		if (err == -ENOENT || c->other_here) { /* (one read either way: the same time) */
			call_fail(c, 404, "NotFound", "Sandbox not found");
			return;
		}
		if (err < 0) {
			call_fail(c, 503, "ServiceUnavailable",
				  "the fleet's owners did not answer");
			return;
		}
		bool last = tries + 1 >= FLEETD_MOVE_TRIES;

		if (fleetd_self(host) && !tries)
			continue;	 /* this host's copy lags a move away */
		if (fleetd_self(host)) { /* woken here meanwhile: served here */
			c->status = CALL_HERE;
			return;
		}
		if (strcmp(host, FLEET_RELEASED) == 0) {
			err = released_call(c, id, host);
			if (err == -ENOENT && !last)
				continue;
			if (err == -ENOENT)
				call_fail(c, 404, "NotFound", "Sandbox not found");
			if (err <= 0)
				return;
		}
		free(c->answer);
		c->answer = NULL;
		err = fleet_rpc_ask(host, c->msg, c->len, RPC_CALL_MS, &c->answer, &c->alen);
		if (err == 0 && fleet_rpc_status(c->answer, c->alen) == 421 && !last)
			continue; /* it let the box go a moment ago */
		if (err == 0 && fleet_rpc_status(c->answer, c->alen) == 421) {
			sd_log("fleet: a call for box %s: its owner %s let it go, %d times", id,
			       host, FLEETD_MOVE_TRIES);
			call_fail(c, 503, "ServiceUnavailable",
				  "sandbox '%s' is moving between hosts: try again", c->ref);
		} else if (err < 0 && fleetd_host_lost(host, &c->lost_ago_ms) == 1)
			lost_call(c, id, host);
		else if (err < 0)
			call_fail(c, 503, "ServiceUnavailable",
				  "the host of sandbox '%s' did not answer (%s): try again", c->ref,
				  strerror(-err));
		return;
	}
}

static void create_run(struct call_job *c)
{
	char key[80], owner[FLEET_ID_MAX + 1], err_text[FLEET_ERR_MAX];
	int err;

	/* its share of the workspace's quotas first (fleet-wide), then its name */
	err = fleetd_quota_reserve(c->workspace, c->body, err_text, sizeof(err_text));
	if (err == -EDQUOT) {
		call_fail(c, 429, "QuotaExceeded", "%s", err_text);
		return;
	}
	if (err < 0) {
		call_fail(c, 503, "ServiceUnavailable", "%s", err_text);
		return;
	}
	fleetd_name_key(c->workspace, c->name, key);
	err = fleet_kv_create(&fleetd, fleetd_names.kv, key, c->id, NULL);
	if (err < 0) {
		fleetd_quota_release_body(c->workspace, c->body);
		if (err == -EEXIST)
			call_fail(c, 409, "Conflict", "a sandbox named '%s' exists", c->name);
		else
			call_fail(c, 503, "ServiceUnavailable", "the fleet's names did not answer");
		return;
	}
	int place_s = c->timeout_s < PLACE_MAX_S ? c->timeout_s : PLACE_MAX_S;

	struct fleet_near near = {.n = fleetd_near_ms ? c->nnear : 0, .wait_ms = fleetd_near_ms};

	for (int i = 0; i < c->nnear; i++)
		near.hosts[i] = c->near[i];
	err = fleet_place(&fleetd, c->id, c->msg, c->len, &near, place_s * 1000, owner, err_text,
			  sizeof(err_text));
	if (err < 0) {
		/* not placed (and, for -EAGAIN, cancelled for good): its name and share are free
		 * again (-EIO: unknown, so both stay: never a quota overrun) */
		if (err == -EAGAIN) {
			fleetd_quota_release_body(c->workspace, c->body);
			if (fleet_kv_delete(&fleetd, fleetd_names.kv, key) < 0)
				sd_log("fleet: name of unplaced box %s: %s", c->id, fleetd.err);
		}
		if (err == -EAGAIN)
			call_fail(c, 503, "Unschedulable",
				  "no host had room for the sandbox within %d s", place_s);
		else
			call_fail(c, 503, "ServiceUnavailable", "the fleet did not answer: %s",
				  err_text);
		return;
	}
	uint8_t *m;
	size_t len;

	m = fleet_rpc_msg(json_pack("{s:s, s:s}", "op", "await", "id", c->id), NULL, 0, &len);
	err = m ? fleet_rpc_ask(owner, m, len, (c->wait ? c->timeout_s * 1000 : 0) + RPC_CALL_MS,
				&c->answer, &c->alen)
		: -ENOMEM;
	free(m);
	if (err < 0)
		call_fail(c, 503, "ServiceUnavailable",
			  "the sandbox was placed, and its host did not answer (%s): poll its "
			  "status",
			  strerror(-err));
}

static void list_run(struct call_job *c)
{
	char(*hs)[FLEET_ID_MAX + 1] = calloc(LIST_HOSTS_MAX, FLEET_ID_MAX + 1);
	unsigned n = hs ? fleetd_hosts_ask(hs, LIST_HOSTS_MAX) : 0, answered = 0;

	/* (the loop's, after: the hosts that answered; a lost host's boxes are those of none of
	 * them, shown failed from their records) */
	c->alive = hs;
	c->merged = json_array();
	for (unsigned i = 0; i < n; i++) {
		uint8_t *a = NULL;
		size_t alen;
		json_t *head = NULL, *body = NULL;
		const uint8_t *b;
		size_t blen;
		json_error_t e = {.text = ""};
		int err = fleet_rpc_ask(hs[i], c->msg, c->len, RPC_LIST_MS, &a, &alen);
		json_int_t st = 0;

		if (err == 0 && (err = fleet_rpc_split(a, alen, &head, &b, &blen)) == 0 &&
		    (st = json_integer_value(json_object_get(head, "s"))) == 200 &&
		    (body = jsonx_parse((const char *)b, blen, &e))) {
			json_array_extend(c->merged, json_object_get(body, "sandboxes"));
			if (answered != i)
				memcpy(hs[answered], hs[i], FLEET_ID_MAX + 1);
			answered++;
		} else { /* a host that does not answer: its boxes are missing, said in the log */
			char why[64];

			if (err == 0 && st != 200)
				snprintf(why, sizeof(why), "its answer's status %lld",
					 (long long)st);
			sd_log("fleet: host %s did not answer a list: %s", hs[i],
			       err < 0	   ? strerror(-err)
			       : st != 200 ? why
					   : e.text);
		}
		json_decref(head);
		json_decref(body);
		free(a);
	}
	c->nalive = answered;
}

static void call_run(struct sd_job *j)
{
	struct call_job *c = (struct call_job *)j;

	if (c->kind == CALL_FORWARD)
		forward_run(c);
	else if (c->kind == CALL_CREATE)
		create_run(c);
	else
		list_run(c);
}

/* Calls in flight per workspace (the loop's): one tenant cannot hold every thread. */
struct ws_inflight {
	char workspace[SD_WORKSPACE_MAX + 1];
	unsigned n;
};
static struct ws_inflight inflight[FLEETD_RPC_THREADS];

static struct ws_inflight *inflight_of(const char *workspace, bool make)
{
	struct ws_inflight *free_slot = NULL;

	for (size_t i = 0; i < FLEETD_RPC_THREADS; i++) {
		if (inflight[i].n && strcmp(inflight[i].workspace, workspace) == 0)
			return &inflight[i];
		if (!inflight[i].n && !free_slot)
			free_slot = &inflight[i];
	}
	if (make && free_slot)
		snprintf(free_slot->workspace, sizeof(free_slot->workspace), "%s", workspace);
	return make ? free_slot : NULL;
}

static void call_done(struct sd_job *j)
{
	struct call_job *c = (struct call_job *)j;
	struct sd_req *q = pending_take(c->pending);
	struct ws_inflight *w = inflight_of(c->inflight_ws, false);

	if (w && w->n)
		w->n--;

	if (q && c->kind == CALL_LIST) {
		fleetd_released_list(c->workspace, c->merged);
		if (c->alive)
			fleetd_lost_list(c->workspace, c->merged, c->alive, c->nalive);
	}
	if (q && c->kind == CALL_FORWARD && c->status == CALL_HERE) {
		if (box_find(q->workspace, c->ref))
			control_handle(q, NULL);	   /* its wake came here: served here */
		else if (++q->moved_hops > REQ_MOVED_HOPS) /* (bounded however it moves) */
			req_reply_error(q, 503, "ServiceUnavailable",
					"sandbox '%s' is moving between hosts: try again", c->ref);
		else /* a read that lagged its going (another workspace's: other_here, a 404) */
			fleet_hooks->forward(q);
	} else if (q && c->kind == CALL_FORWARD && (c->released || c->lost)) {
		json_t *o = c->lost ? fleetd_lost_json(c->lost, c->lost_ago_ms)
				    : fleetd_released_record_json(c->released);

		if (!o)
			req_reply_error(q, 404, "NotFound", "Sandbox not found");
		else if (c->kind_route == R_BOX_STATUS)
			req_reply_json(q, 200,
				       json_pack("{s:O, s:O}", "status",
						 json_object_get(o, "status"), "status_message",
						 json_object_get(o, "status_message")));
		else
			req_reply_json(q, 200, json_incref(o));
		json_decref(o);
	} else if (q && c->kind == CALL_FORWARD && c->status == 204)
		req_reply_raw(q, 204, "application/json", NULL, 0);
	else if (q && c->kind == CALL_LIST)
		req_reply_json(q, 200,
			       json_pack("{s:O, s:O, s:n, s:i}", "sandboxes", c->merged, "items",
					 c->merged, "next_cursor", "offset", 0));
	else if (q && c->status)
		req_reply_error(q, c->status, c->etype, "%s", c->emsg);
	else if (q)
		answer_relay(q, c->answer, c->alen);
	json_decref(c->merged);
	json_decref(c->body);
	free(c->alive);
	free(c->lost);
	free(c->released);
	free(c->msg);
	free(c->answer);
	free(c);
}

static void call_queue(struct sd_req *q, struct call_job *c)
{
	struct ws_inflight *w = inflight_of(q->workspace, true);

	if (!w || w->n >= RPC_WS_INFLIGHT) {
		free(c->msg);
		free(c);
		req_add_header(q, "retry-after:", "1");
		req_reply_error(q, 429, "TooManyRequests",
				"too many calls of this workspace wait on other hosts: try again");
		return;
	}
	w->n++;
	snprintf(c->inflight_ws, sizeof(c->inflight_ws), "%s", q->workspace);
	c->pending = req_park(q);
	if (!c->pending) {
		w->n--;
		free(c->msg);
		free(c);
		return;
	}
	c->job.run = call_run;
	c->job.done = call_done;
	work_queue_class(&c->job, WORK_FLEET);
}

/* The request as a call: its method, path, query, workspace, key and body. */
static uint8_t *call_msg(struct sd_req *q, size_t *len)
{
	static const char *const methods[] = {
		[M_GET] = "GET",	 [M_HEAD] = "HEAD",   [M_POST] = "POST",
		[M_PUT] = "PUT",	 [M_PATCH] = "PATCH", [M_DELETE] = "DELETE",
		[M_OPTIONS] = "OPTIONS", [M_OTHER] = "OTHER"};
	json_t *args = json_array();
	char frag[1024];

	for (int i = 0; q->wsi && i < FLEETD_QUERY_ARGS; i++) {
		if (lws_hdr_copy_fragment(q->wsi, frag, sizeof(frag), WSI_TOKEN_HTTP_URI_ARGS, i) <
		    0)
			break;
		json_array_append_new(args, json_string(frag));
	}
	return fleet_rpc_msg(json_pack("{s:s, s:s, s:s, s:o, s:s, s:s}", "op", "call", "m",
				       methods[q->method], "p", q->path ? q->path : "", "q", args,
				       "w", q->workspace, "k", q->key_id),
			     q->body, q->body_len, len);
}

void fleetd_forward(struct sd_req *q)
{
	struct call_job *c = calloc(1, sizeof(*c));

	if (!c || !(c->msg = call_msg(q, &c->len))) {
		free(c);
		req_reply_error(q, 413, "InvalidRequest", "the request is too large for the fleet");
		return;
	}
	c->kind = CALL_FORWARD;
	c->method = q->method;
	struct box *here = fleet_is_uuid(q->rt.arg) ? box_by_id(q->rt.arg) : NULL;

	c->other_here = here && strcmp(here->workspace, q->workspace) != 0;
	c->kind_route = q->rt.kind;
	snprintf(c->workspace, sizeof(c->workspace), "%s", q->workspace);
	snprintf(c->key_id, sizeof(c->key_id), "%s", q->key_id);
	snprintf(c->ref, sizeof(c->ref), "%s", q->rt.arg);
	call_queue(q, c);
}

void fleetd_list(struct sd_req *q)
{
	struct call_job *c = calloc(1, sizeof(*c));

	if (!c || !(c->msg = call_msg(q, &c->len))) {
		free(c);
		req_reply_error(q, 503, "ServiceUnavailable", "out of memory");
		return;
	}
	c->kind = CALL_LIST;
	snprintf(c->workspace, sizeof(c->workspace), "%s", q->workspace);
	call_queue(q, c);
}

/* The hosts that hold the snapshot a create names (this one, if it has it on its disk; the one
 * that made it), live and with a slot free, for the create to go to first: how many. */
static int near_hosts(const char *workspace, json_t *o, char (*near)[FLEET_ID_MAX + 1])
{
	const char *ref = json_string_value(json_object_get(o, "snapshot_id"));
	struct sd_snap *s;
	int n = 0;

	if (!ref)
		ref = json_string_value(json_object_get(o, "snapshot_name"));
	s = ref ? snap_find(workspace, ref) : NULL;
	if (!s || s->status != SNAP_READY || !s->store_name[0])
		return 0;
	if (fleetd_host_room(fleetd_host_id()) && fstore_held(s->store_name))
		snprintf(near[n++], FLEET_ID_MAX + 1, "%s", fleetd_host_id());
	if (s->host[0] && fleet_id_ok(s->host) && !fleetd_self(s->host) &&
	    fleetd_host_room(s->host) && n < FLEET_NEAR_MAX)
		snprintf(near[n++], FLEET_ID_MAX + 1, "%s", s->host);
	return n;
}

void fleetd_create(struct sd_req *q, json_t *o)
{
	const char *name = json_string_value(json_object_get(o, "name"));
	json_int_t timeout = json_integer_value(json_object_get(o, "timeout"));
	struct call_job *c = calloc(1, sizeof(*c));
	char gen[SD_NAME_MAX + 1];

	if (!c) {
		req_reply_error(q, 503, "ServiceUnavailable", "out of memory");
		return;
	}
	if (box_create_refused(q, o)) { /* before its name is claimed: nothing to undo */
		free(c);
		return;
	}
	if (!name) { /* named here: the name is claimed before the create is placed */
		uint8_t r[4];

		if (getrandom(r, sizeof(r), 0) != sizeof(r)) {
			free(c);
			req_reply_error(q, 503, "ServiceUnavailable", "no randomness");
			return;
		}
		snprintf(gen, sizeof(gen), "sandbox-%02x%02x%02x%02x", r[0], r[1], r[2], r[3]);
		name = gen;
		json_object_set_new(o, "name", json_string(gen));
	}
	char *body = json_dumps(o, JSON_COMPACT);

	c->kind = CALL_CREATE;
	sd_uuid(c->id);
	snprintf(c->name, sizeof(c->name), "%s", name);
	snprintf(c->workspace, sizeof(c->workspace), "%s", q->workspace);
	c->timeout_s = timeout >= 1 && timeout <= 3600 ? (int)timeout : PLACE_DEFAULT_S;
	c->body = json_deep_copy(o); /* the worker's own: the share it reserves */
	c->wait = !json_is_false(json_object_get(o, "wait_for_ready"));
	c->nnear = near_hosts(q->workspace, o, c->near);
	c->msg = body ? fleet_rpc_msg(json_pack("{s:s, s:s, s:s}", "w", q->workspace, "k",
						q->key_id, "id", c->id),
				      body, strlen(body), &c->len)
		      : NULL;
	free(body);
	if (!c->msg || c->len > FLEET_REQ_MAX) {
		free(c->msg);
		free(c);
		req_reply_error(q, 413, "InvalidRequest", "the create is too large for the fleet");
		return;
	}
	call_queue(q, c);
}

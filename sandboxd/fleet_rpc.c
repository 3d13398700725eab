/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Calls between the hosts of a fleet (fleetd.h), over NATS request/reply on the subject
 * sandbox.ctl.<host>. A message is a JSON head, a newline, then the body's bytes:
 *   a call:     {"op":"call","m":METHOD,"p":PATH,"q":[QUERY ARGS],"w":WORKSPACE,"k":KEY ID}
 *   an await:   {"op":"await","id":BOX ID}: the answer of the create this host took
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

#define RPC_THREADS	16
#define RPC_MSG_MAX	(1000u << 10) /* NATS's 1 MiB, less room for its own framing */
#define RPC_CALL_MS	30000	      /* a forwarded call's answer */
#define RPC_LIST_MS	2000	      /* a host's part of a list */
#define AWAIT_KEEP_MS	120000	      /* a taken create's answer, kept for its await */
#define AWAITS_MAX	1024
#define PLACE_DEFAULT_S 30
#define LIST_HOSTS_MAX	256
#define QUERY_ARGS_MAX	16

struct fleet_vreq {
	char reply[128];	/* the subject its answer goes to ("" for a take's create) */
	char id[SD_ID_LEN + 1]; /* a take's create: its box */
	struct sd_req *q;
	struct sd_job free_job; /* frees the request on the loop's next turn */
};

static natsSubscription *ctl_sub;

/* ---- messages ---- */

uint8_t *fleet_rpc_msg(json_t *head, const void *body, size_t blen, size_t *len)
{
	char *h = json_dumps(head, JSON_COMPACT);
	size_t hl = h ? strlen(h) : 0;
	uint8_t *m = h && hl + 1 + blen <= RPC_MSG_MAX ? malloc(hl + 1 + blen) : NULL;

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
static int msg_split(const uint8_t *m, size_t len, json_t **head, const uint8_t **body,
		     size_t *blen)
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

	if (msg_split(m, len, &head, &body, &blen) == 0)
		s = (int)json_integer_value(json_object_get(head, "s"));
	json_decref(head);
	return s;
}

static uint8_t *answer_make(int status, const char *ctype, const struct sd_req *q, const void *body,
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

	if (msg_split(m, len, &head, &body, &blen) < 0) {
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

	if (status < 100 || status > 599 || !ctype || (blen && !data)) {
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
	char name[SD_NAME_MAX + 1];
	int timeout_s;
	bool wait;
	uint8_t *msg; /* what goes to the owner (forward, list), or the create's request */
	size_t len;
	enum http_method method; /* forward: the call's */
	enum route_kind kind_route;
	char key_id[SD_KEY_ID_LEN + 1];
	/* out */
	char released[SD_ID_LEN + 1]; /* forward: a released box's get, answered from its record */
	int status;		      /* 0: relay answer; else an error of ours */
	const char *etype;
	char emsg[600];
	uint8_t *answer;
	size_t alen;
	json_t *merged; /* list */
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

static bool is_uuid(const char *s)
{
	if (strlen(s) != SD_ID_LEN)
		return false;
	for (int i = 0; i < SD_ID_LEN; i++)
		if ((i == 8 || i == 13 || i == 18 || i == 23) ? s[i] != '-'
							      : !strchr("0123456789abcdef", s[i]))
			return false;
	return true;
}

/* A call for a box released into the store: a read answered from its record (false, with
 * c->released set), a delete done here (false), anything else wakes it on a host with room
 * (true: host is that host, where the call goes on). */
static bool released_call(struct call_job *c, const char *id, char host[FLEET_ID_MAX + 1])
{
	char why[FLEET_ERR_MAX];
	int err;

	if (c->method == M_GET && (c->kind_route == R_BOX || c->kind_route == R_BOX_STATUS)) {
		memcpy(c->released, id, sizeof(c->released));
		return false;
	}
	if (c->method == M_DELETE && c->kind_route == R_BOX) {
		err = fleetd_released_delete(c->workspace, id);
		if (err == 0)
			c->status = 204;
		else if (err == -ENOENT)
			call_fail(c, 404, "NotFound", "Sandbox '%s' not found", c->ref);
		else
			call_fail(c, 503, "ServiceUnavailable", "the fleet did not answer");
		return false;
	}
	err = fleetd_wake(c->workspace, c->key_id, id, host, why, sizeof(why));
	if (err == -ENOENT) {
		call_fail(c, 404, "NotFound", "Sandbox '%s' not found", c->ref);
		return false;
	}
	if (err < 0) {
		call_fail(c, 503, err == -EAGAIN ? "Unschedulable" : "ServiceUnavailable",
			  "sandbox '%s' could not be woken: %s", c->ref, why);
		return false;
	}
	return true;
}

static void forward_run(struct call_job *c)
{
	char host[FLEET_ID_MAX + 1], key[80], id[SD_ID_LEN + 1];
	int err;

	/* a name is looked up in the names bucket; an id is its own key. Either way the box
	 * is another workspace's or no one's: the same 404 */
	if (is_uuid(c->ref)) {
		memcpy(id, c->ref, sizeof(id)); /* (its 36 characters and NUL) */
	} else {
		fleetd_name_key(c->workspace, c->ref, key);
		err = fleet_kv_get(&fleetd, fleetd_names.kv, key, id, sizeof(id), NULL);
		if (err == -ENOENT || err == -EMSGSIZE || (err == 0 && !is_uuid(id))) {
			call_fail(c, 404, "NotFound", "Sandbox '%s' not found", c->ref);
			return;
		}
		if (err < 0) {
			call_fail(c, 503, "ServiceUnavailable", "the fleet's names did not answer");
			return;
		}
	}
	err = fleetd_owner_of(id, host, true);
	if (err == -ENOENT || (err == 0 && fleetd_self(host))) {
		call_fail(c, 404, "NotFound", "Sandbox '%s' not found", c->ref);
		return;
	}
	if (err < 0) {
		call_fail(c, 503, "ServiceUnavailable", "the fleet's owners did not answer");
		return;
	}
	if (strcmp(host, FLEET_RELEASED) == 0 && !released_call(c, id, host))
		return;
	err = fleet_rpc_ask(host, c->msg, c->len, RPC_CALL_MS, &c->answer, &c->alen);
	if (err < 0)
		call_fail(c, 503, "ServiceUnavailable",
			  "the host of sandbox '%s' did not answer (%s): try again", c->ref,
			  strerror(-err));
}

static void create_run(struct call_job *c)
{
	char key[80], owner[FLEET_ID_MAX + 1], err_text[FLEET_ERR_MAX];
	int err;

	fleetd_name_key(c->workspace, c->name, key);
	err = fleet_kv_create(&fleetd, fleetd_names.kv, key, c->id, NULL);
	if (err == -EEXIST) {
		call_fail(c, 409, "Conflict", "a sandbox named '%s' exists", c->name);
		return;
	}
	if (err < 0) {
		call_fail(c, 503, "ServiceUnavailable", "the fleet's names did not answer");
		return;
	}
	err = fleet_place(&fleetd, c->id, c->msg, c->len, c->timeout_s * 1000, owner, err_text,
			  sizeof(err_text));
	if (err < 0) {
		/* not placed (and, for -EAGAIN, cancelled for good): the name is free again */
		if (err == -EAGAIN && fleet_kv_delete(&fleetd, fleetd_names.kv, key) < 0)
			sd_log("fleet: name of unplaced box %s: %s", c->id, fleetd.err);
		if (err == -EAGAIN)
			call_fail(c, 503, "Unschedulable",
				  "no host had room for the sandbox within %d s", c->timeout_s);
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
			  "the sandbox was placed on host %s, which did not answer (%s): poll its "
			  "status",
			  owner, strerror(-err));
}

static void list_run(struct call_job *c)
{
	char(*hs)[FLEET_ID_MAX + 1] = calloc(LIST_HOSTS_MAX, FLEET_ID_MAX + 1);
	unsigned n = hs ? fleetd_hosts(hs, LIST_HOSTS_MAX) : 0;

	c->merged = json_array();
	for (unsigned i = 0; i < n; i++) {
		uint8_t *a = NULL;
		size_t alen;
		json_t *head = NULL, *body = NULL;
		const uint8_t *b;
		size_t blen;
		json_error_t e;

		if (fleet_rpc_ask(hs[i], c->msg, c->len, RPC_LIST_MS, &a, &alen) == 0 &&
		    msg_split(a, alen, &head, &b, &blen) == 0 &&
		    json_integer_value(json_object_get(head, "s")) == 200 &&
		    (body = jsonx_parse((const char *)b, blen, &e)))
			json_array_extend(c->merged, json_object_get(body, "sandboxes"));
		else /* a host that does not answer: its boxes are missing, said in the log */
			sd_log("fleet: host %s did not answer a list", hs[i]);
		json_decref(head);
		json_decref(body);
		free(a);
	}
	free(hs);
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

static void call_done(struct sd_job *j)
{
	struct call_job *c = (struct call_job *)j;
	struct sd_req *q = pending_take(c->pending);

	if (q && c->kind == CALL_LIST)
		fleetd_released_list(c->workspace, c->merged);
	if (q && c->kind == CALL_FORWARD && c->released[0]) {
		json_t *o = fleetd_released_json(c->workspace, c->released);

		if (!o)
			req_reply_error(q, 404, "NotFound", "Sandbox '%s' not found", c->ref);
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
	free(c->msg);
	free(c->answer);
	free(c);
}

static void call_queue(struct sd_req *q, struct call_job *c)
{
	c->pending = req_park(q);
	if (!c->pending) {
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

	for (int i = 0; q->wsi && i < QUERY_ARGS_MAX; i++) {
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
	if ((json_object_get(o, "name") && !name) || (name && !valid_box_name(name))) {
		free(c);
		req_reply_invalid(q, "name",
				  "name must be 1 to 63 letters, digits, '-', '_' or '.', starting "
				  "with a letter or digit");
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
	c->wait = !json_is_false(json_object_get(o, "wait_for_ready"));
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

/* ---- requests this host answers for others ---- */

struct await {
	char id[SD_ID_LEN + 1];
	uint8_t *answer; /* NULL: the create has not answered yet */
	size_t alen;
	char waiter[128]; /* an await's reply subject, "" for none */
	uint64_t made_ms;
	struct await *next;
};
static struct await *awaits;
static unsigned nawaits;

static struct await *await_get(const char *id, bool make)
{
	struct await **pp = &awaits;
	uint64_t now = sd_now_ms();

	for (struct await *a; (a = *pp);) {
		if (strcmp(a->id, id) == 0)
			return a;
		if (now - a->made_ms > AWAIT_KEEP_MS) { /* expired on the way */
			*pp = a->next;
			free(a->answer);
			free(a);
			nawaits--;
			continue;
		}
		pp = &a->next;
	}
	if (!make || nawaits >= AWAITS_MAX)
		return NULL;
	struct await *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	snprintf(a->id, sizeof(a->id), "%s", id);
	a->made_ms = now;
	a->next = awaits;
	awaits = a;
	nawaits++;
	return a;
}

static void publish(const char *subject, const uint8_t *m, size_t len)
{
	natsStatus s = natsConnection_Publish((natsConnection *)fleetd.nc, subject, m, (int)len);

	if (s != NATS_OK)
		sd_log("fleet: an answer to %s: %s", subject, natsStatus_GetText(s));
}

/* An await's answer is there and its waiter too: sent, and the record goes. */
static void await_settle(struct await *a)
{
	if (!a->answer || !a->waiter[0])
		return;
	publish(a->waiter, a->answer, a->alen);
	for (struct await **pp = &awaits; *pp; pp = &(*pp)->next)
		if (*pp == a) {
			*pp = a->next;
			nawaits--;
			break;
		}
	free(a->answer);
	free(a);
}

static void vreq_free_job(struct sd_job *j)
{
	struct fleet_vreq *v =
		(struct fleet_vreq *)((char *)j - offsetof(struct fleet_vreq, free_job));
	struct sd_req *q = v->q;

	for (unsigned i = 0; i < q->nvquery; i++)
		free(q->vquery[i]);
	free(q->vquery);
	free(q->owner);
	free(q->body);
	free(q->resp);
	free(q->path);
	free(q);
}

/* A request made from a call is answered (req_reply_raw's on_reply): sent back, then freed. */
static void vreq_replied(struct sd_req *q)
{
	struct fleet_vreq *v = q->owner;
	size_t len;
	uint8_t *m = answer_make(q->status, q->ctype, q, q->resp, q->resp_len, &len);

	if (v->reply[0] && m) {
		publish(v->reply, m, len);
		free(m);
	} else if (v->id[0]) { /* a take's create: kept for its await */
		struct await *a = await_get(v->id, true);

		if (a && !a->answer) {
			a->answer = m;
			a->alen = m ? len : 0;
			await_settle(a);
		} else {
			free(m);
		}
	} else {
		free(m);
	}
	/* freed on the loop's next turn, never under the handler that replied */
	v->free_job.done = vreq_free_job;
	work_post(&v->free_job);
}

static enum http_method method_of(const char *m)
{
	static const char *const names[] = {"GET",   "HEAD",   "POST",	 "PUT",
					    "PATCH", "DELETE", "OPTIONS"};

	for (int i = 0; m && i < 7; i++)
		if (strcmp(m, names[i]) == 0)
			return (enum http_method)i;
	return M_OTHER;
}

/* A request of this host's API made from a call (or a take): NULL when the call is not one. */
static struct sd_req *vreq_make(json_t *head, const uint8_t *body, size_t blen, const char *reply,
				const char *take_id)
{
	struct sd_req *q = calloc(1, sizeof(*q));
	struct fleet_vreq *v = calloc(1, sizeof(*v));
	const char *w = json_string_value(json_object_get(head, "w"));
	const char *k = json_string_value(json_object_get(head, "k"));
	const char *p = json_string_value(json_object_get(head, "p"));
	json_t *args = json_object_get(head, "q"), *a;
	size_t i;

	if (!q || !v || !w || !valid_workspace(w) || blen > SD_JSON_BODY_MAX) {
		free(q);
		free(v);
		return NULL; /* (the caller's wait ends in its timeout) */
	}
	q->owner = v;
	v->q = q;
	q->on_reply = vreq_replied;
	snprintf(v->reply, sizeof(v->reply), "%s", reply ? reply : "");
	snprintf(v->id, sizeof(v->id), "%s", take_id ? take_id : "");
	q->start_ms = sd_now_ms();
	snprintf(q->peer, sizeof(q->peer), "fleet");
	snprintf(q->workspace, sizeof(q->workspace), "%s", w);
	snprintf(q->key_id, sizeof(q->key_id), "%s", k ? k : "");
	q->authenticated = true;
	if (take_id) {
		q->method = M_POST;
		q->rt.kind = R_BOXES;
		q->rt.method_ok = true;
		snprintf(q->fleet_box_id, sizeof(q->fleet_box_id), "%s", take_id);
	} else {
		char path[4096];

		q->method = method_of(json_string_value(json_object_get(head, "m")));
		snprintf(path, sizeof(path), "%s", p ? p : "");
		route_parse(q->method, path, false, &q->rt);
	}
	q->vquery = calloc(QUERY_ARGS_MAX, sizeof(char *));
	json_array_foreach(args, i, a)
	{
		char *arg = json_is_string(a) ? strdup(json_string_value(a)) : NULL;

		if (q->vquery && arg && q->nvquery < QUERY_ARGS_MAX)
			q->vquery[q->nvquery++] = arg;
		else
			free(arg);
	}
	if (blen && (q->body = malloc(blen + 1))) {
		memcpy(q->body, body, blen);
		q->body[blen] = 0;
		q->body_len = blen;
	}
	return q;
}

/* A request of this host's API made from a call (or a take), run now. */
static void vreq_run(json_t *head, const uint8_t *body, size_t blen, const char *reply,
		     const char *take_id)
{
	struct sd_req *q = vreq_make(head, body, blen, reply, take_id);

	if (!q)
		return;
	if (q->rt.kind == R_NONE || !q->rt.method_ok ||
	    (q->rt.kind >= R_DP_EXECUTE && q->rt.kind <= R_DP_TUNNEL))
		req_reply_error(q, 404, "NotFound", "no such route");
	else if (!keys_live(q->key_id))
		req_reply_error(q, 401, "Unauthorized", "missing or invalid X-Api-Key");
	else
		control_handle(q, NULL);
}

/* A wake's box restored here, or not: the answer kept for the await of the waking host. */
static void woken(struct sd_req *q, struct box *b, int err, const char *msg)
{
	if (!b) {
		req_reply_error(q, 503, "ServiceUnavailable", "the sandbox went while it woke");
		return;
	}
	if (err < 0) { /* released again, for another wake to try (its record stays) */
		fleetd_woken(b->id, false);
		req_reply_error(q, 503, "ServiceUnavailable", "the sandbox could not be woken: %s",
				msg);
		return;
	}
	b->released = false;
	fleetd_woken(b->id, true); /* runs here: its released record goes */
	req_reply_json(q, 200, box_json(b));
}

static void wake_here(json_t *head, const uint8_t *body, size_t blen, const char *id)
{
	struct sd_req *q = vreq_make(head, NULL, 0, NULL, id);
	char *record = blen ? strndup((const char *)body, blen) : NULL;
	int err;

	if (!q) {
		free(record);
		return;
	}
	q->fleet_box_id[0] = 0; /* (not a create) */
	err = record ? box_wake_here(record, q, woken) : -EBADMSG;
	free(record);
	if (err == -EBADMSG && box_by_id(id))
		req_reply_json(q, 200, box_json(box_by_id(id))); /* woken here already */
	else if (err < 0)
		req_reply_error(q, 503, "ServiceUnavailable", "box %s cannot wake here (%s)", id,
				strerror(-err));
}

void fleet_rpc_take(const char *id, const uint8_t *msg, size_t len, bool again)
{
	json_t *head;
	const uint8_t *body;
	size_t blen;

	if (again && box_by_id(id))
		return; /* made before its ack was lost */
	if (msg_split(msg, len, &head, &body, &blen) < 0) {
		sd_log("fleet: create %s: not a create request: dropped", id);
		return;
	}
	const char *op = json_string_value(json_object_get(head, "op"));

	if (op && strcmp(op, "wake") == 0) /* a released box's record, to run here */
		wake_here(head, body, blen, id);
	else
		vreq_run(head, body, blen, NULL, id);
	json_decref(head);
}

struct in_job {
	struct sd_job job;
	char reply[128];
	uint8_t *msg;
	size_t len;
};

static void in_done(struct sd_job *j)
{
	struct in_job *in = (struct in_job *)j;
	json_t *head;
	const uint8_t *body;
	size_t blen;

	if (msg_split(in->msg, in->len, &head, &body, &blen) == 0) {
		const char *op = json_string_value(json_object_get(head, "op"));
		const char *id = json_string_value(json_object_get(head, "id"));

		if (op && strcmp(op, "call") == 0) {
			vreq_run(head, body, blen, in->reply, NULL);
		} else if (op && strcmp(op, "await") == 0 && id && is_uuid(id)) {
			struct await *a = await_get(id, true);
			struct box *b = box_by_id(id);

			if (!a) {
				/* no room to keep it, or long made: what the box is now */
				size_t len;
				json_t *bj = b ? box_json(b) : NULL;
				char *text = bj ? json_dumps(bj, JSON_COMPACT) : NULL;
				uint8_t *m = text ? answer_make(200, "application/json", NULL, text,
								strlen(text), &len)
						  : NULL;

				json_decref(bj);
				if (m)
					publish(in->reply, m, len);
				free(m);
				free(text);
			} else {
				snprintf(a->waiter, sizeof(a->waiter), "%s", in->reply);
				await_settle(a);
			}
		}
		json_decref(head);
	}
	free(in->msg);
	free(in);
}

/* libnats's thread: the message copied and handed to the loop. */
static void on_ctl(natsConnection *nc, natsSubscription *sub, natsMsg *m, void *arg)
{
	const char *reply = natsMsg_GetReply(m);
	int len = natsMsg_GetDataLength(m);
	struct in_job *in = NULL;

	(void)nc;
	(void)sub;
	(void)arg;
	if (reply && strlen(reply) < sizeof(in->reply) && len > 0 && (size_t)len <= RPC_MSG_MAX &&
	    (in = calloc(1, sizeof(*in))) && (in->msg = malloc((size_t)len))) {
		snprintf(in->reply, sizeof(in->reply), "%s", reply);
		memcpy(in->msg, natsMsg_GetData(m), (size_t)len);
		in->len = (size_t)len;
		in->job.done = in_done;
		work_post(&in->job);
		in = NULL;
	}
	free(in);
	natsMsg_Destroy(m);
}

int fleet_rpc_start(void)
{
	char subject[96];
	natsStatus s;

	snprintf(subject, sizeof(subject), "sandbox.ctl.%s", fleetd.conf.host);
	s = natsConnection_Subscribe(&ctl_sub, (natsConnection *)fleetd.nc, subject, on_ctl, NULL);
	if (s == NATS_OK)
		s = natsConnection_Flush((natsConnection *)fleetd.nc);
	if (s != NATS_OK) {
		snprintf(fleetd.err, sizeof(fleetd.err), "the calls' subscription: %s",
			 natsStatus_GetText(s));
		return -EIO;
	}
	int err = work_add_threads(WORK_FLEET, RPC_THREADS);

	return err;
}

void fleet_rpc_stop(void)
{
	if (ctl_sub)
		natsSubscription_Destroy(ctl_sub);
	ctl_sub = NULL;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The calls this host answers for the other hosts of its fleet (fleet_rpc.c says the
 * messages): a call runs as a request of this host's own API would, already authenticated by
 * the host the client reached, and its answer goes back on the call's reply subject; a create
 * or a wake this host took from the queue runs the same way, its answer kept (the await table,
 * bounded) until the placing host's await asks for it.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nats/nats.h>

#include "fleetd.h"

#define RPC_BG_THREADS 4
#define AWAIT_KEEP_MS  120000  /* a taken create's answer, kept for its await */
#define AWAIT_WAIT_MS  3720000 /* an await with no answer yet (a create waits an hour) */
#define AWAITS_MAX     1024
#define AWAIT_WAITERS  8 /* hosts awaiting one box at once (calls waking it from several) */

struct fleet_vreq {
	char reply[128];	/* the subject its answer goes to ("" for a take's create) */
	char id[SD_ID_LEN + 1]; /* a take's create: its box */
	struct sd_req *q;
	struct sd_job free_job; /* frees the request on the loop's next turn */
	bool wake;		/* a take's wake (not a create) */
	uint64_t gen;		/* a wake's: the generation it restores (a create: 0) */
};

static natsSubscription *ctl_sub;

/* ---- requests this host answers for others ---- */

struct await {
	char id[SD_ID_LEN + 1];
	uint8_t *answer; /* NULL: the create has not answered yet */
	size_t alen;
	char waiter[AWAIT_WAITERS][128]; /* the awaits' reply subjects */
	unsigned nwaiters;
	uint64_t gen; /* the answer's take: a wake's generation, 0 for a create */
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
		bool expired = now - a->made_ms > (a->answer ? AWAIT_KEEP_MS : AWAIT_WAIT_MS);

		if (strcmp(a->id, id) == 0 && !expired)
			return a;
		if (expired) {
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

/* An await's answer is there and its waiters too: sent to each. The answer stays (until
 * AWAIT_KEEP_MS after it came) for the awaits of other callers that woke the box at once and
 * come later; a new take of the box drops it (await_reset). */
static void await_settle(struct await *a)
{
	if (!a->answer)
		return;
	for (unsigned i = 0; i < a->nwaiters; i++)
		publish(a->waiter[i], a->answer, a->alen);
	a->nwaiters = 0;
}

/* Box id taken again here (a create, a wake after another stop): an answer kept from its
 * last take is not this one's. */
static void await_reset(const char *id)
{
	struct await *a = await_get(id, false);

	if (a && a->answer) {
		free(a->answer);
		a->answer = NULL;
		a->alen = 0;
		a->made_ms = sd_now_ms();
	}
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
	uint8_t *m = fleet_rpc_answer(q->status, q->ctype, q, q->resp, q->resp_len, &len);

	if (v->reply[0] && m) {
		publish(v->reply, m, len);
		free(m);
	} else if (v->id[0]) { /* a take's create: kept for its await */
		if (!v->wake && (q->status < 200 || q->status > 299) && !box_by_id(v->id)) {
			/* refused on this host (a quota, a snapshot it lacks): never made, so
			 * its name and ownership go, or they would stay claimed for good */
			json_error_t e;
			json_t *o = q->body ? jsonx_parse(q->body, q->body_len, &e) : NULL;
			const char *name = json_string_value(json_object_get(o, "name"));

			if (name)
				fleetd_records_drop(
					q->workspace, name, v->id,
					(unsigned)json_integer_value(json_object_get(o, "vcpus")),
					(uint64_t)json_integer_value(
						json_object_get(o, "mem_bytes")),
					(uint64_t)json_integer_value(
						json_object_get(o, "fs_capacity_bytes")));
			json_decref(o);
		}
		struct await *a = await_get(v->id, true);

		if (a && !a->answer) {
			a->made_ms = sd_now_ms(); /* kept AWAIT_KEEP_MS from now */
			a->gen = v->gen;
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
	q->vquery = calloc(FLEETD_QUERY_ARGS, sizeof(char *));
	json_array_foreach(args, i, a)
	{
		char *arg = json_is_string(a) ? strdup(json_string_value(a)) : NULL;

		if (q->vquery && arg && q->nvquery < FLEETD_QUERY_ARGS)
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
	/* a create comes as a take, never as a call; the key must be the workspace's */
	if (q->rt.kind == R_NONE || !q->rt.method_ok ||
	    (q->rt.kind >= R_DP_EXECUTE && q->rt.kind <= R_DP_TUNNEL) ||
	    (q->rt.kind == R_BOXES && q->method == M_POST && !q->fleet_box_id[0]))
		req_reply_error(q, 404, "NotFound", "no such route");
	else if (!keys_live_in(q->key_id, q->workspace))
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
	sd_log("box %s: woken here from the store (generation %llu)", b->id,
	       (unsigned long long)b->fleet_gen);
	fleetd_woken(b->id, true); /* runs here: its released record goes */
	req_reply_json(q, 200, box_json(b));
}

static void wake_here(json_t *head, const uint8_t *body, size_t blen, const char *id)
{
	struct sd_req *q = vreq_make(head, NULL, 0, NULL, id);
	char *record = blen ? strndup((const char *)body, blen) : NULL;
	int err;

	if (!q) { /* claimed here and not woken: let go again, for another wake to try */
		free(record);
		if (!box_by_id(id))
			fleetd_woken(id, false);
		return;
	}
	q->fleet_box_id[0] = 0; /* (not a create) */
	((struct fleet_vreq *)q->owner)->wake = true;
	if (record) {
		struct box rb = {0};

		if (box_parse_record(record, &rb) == 0) /* the generation its awaits name */
			((struct fleet_vreq *)q->owner)->gen = rb.fleet_gen;
		box_record_free(&rb);
	}
	await_reset(id);
	sd_log("box %s: its wake taken here (generation %llu)", id,
	       (unsigned long long)((struct fleet_vreq *)q->owner)->gen);
	err = record ? box_wake_here(record, q, woken) : -EBADMSG;
	free(record);
	if (err == -EBADMSG && box_by_id(id)) {
		req_reply_json(q, 200, box_json(box_by_id(id))); /* woken here already */
	} else if (err < 0) {
		/* claimed here and not made: let go again (an ownership naming this host with no
		 * box here would send every call for it round in circles) */
		if (!box_by_id(id))
			fleetd_woken(id, false);
		req_reply_error(q, 503, "ServiceUnavailable", "box %s cannot wake here (%s)", id,
				strerror(-err));
	}
}

/* Wakes this host took while its copy of the box was going: its stop into the store (which
 * released the box before its local copy went; a call then woke it, and the wake came here),
 * or a fence (fleetd.c: the fleet gave the box to another, which released it since). Answered
 * "woken here already", the box went a moment later while the owners bucket named this host:
 * every call for it went round in circles (421, "moving between hosts"). Each runs once the
 * copy's fate is known (fleetd_box_released): a wake from the store, or the box still here. */
struct deferred_wake {
	char id[SD_ID_LEN + 1];
	uint8_t *msg;
	size_t len;
	struct deferred_wake *next;
};
static struct deferred_wake *deferred; /* the loop's: at most one per box stopping here */

static bool wake_defer(const char *id, const uint8_t *msg, size_t len)
{
	struct deferred_wake *d = calloc(1, sizeof(*d));

	if (!d || !(d->msg = malloc(len ? len : 1))) {
		free(d);
		return false;
	}
	memcpy(d->msg, msg, len);
	d->len = len;
	snprintf(d->id, sizeof(d->id), "%s", id);
	d->next = deferred;
	deferred = d;
	sd_log("box %s: its wake taken here while its copy here goes: after that", id);
	return true;
}

void fleetd_box_released(const char *id, bool deleted)
{
	struct deferred_wake **pp = &deferred;

	while (*pp) {
		struct deferred_wake *d = *pp;

		if (strcmp(d->id, id) != 0) {
			pp = &d->next;
			continue;
		}
		*pp = d->next;
		if (deleted) /* deleted meanwhile: nothing to wake (its caller finds it gone) */
			sd_log("box %s: its wake taken during its stop dropped: it was deleted",
			       id);
		else
			fleet_rpc_take(d->id, d->msg, d->len, false);
		free(d->msg);
		free(d);
		pp = &deferred; /* (the list may have changed under the take) */
	}
}

void fleet_rpc_take(const char *id, const uint8_t *msg, size_t len, bool again)
{
	struct box *b = box_by_id(id);
	json_t *head;
	const uint8_t *body;
	size_t blen;

	if (again && b && !b->releasing)
		return; /* made before its ack was lost */
	if (fleet_rpc_split(msg, len, &head, &body, &blen) < 0) {
		sd_log("fleet: create %s: not a create request: dropped", id);
		return;
	}
	const char *op = json_string_value(json_object_get(head, "op"));

	if (op && strcmp(op, "wake") == 0 && b && b->releasing) {
		if (!wake_defer(id, msg, len)) /* (out of memory: let go, for another wake) */
			fleetd_woken(id, false);
	} else if (op && strcmp(op, "wake") == 0) { /* a released box's record, to run here */
		wake_here(head, body, blen, id);
	} else {
		vreq_run(head, body, blen, NULL, id);
	}
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

	if (fleet_rpc_split(in->msg, in->len, &head, &body, &blen) == 0) {
		const char *op = json_string_value(json_object_get(head, "op"));
		const char *id = json_string_value(json_object_get(head, "id"));

		if (op && strcmp(op, "call") == 0) {
			vreq_run(head, body, blen, in->reply, NULL);
		} else if (op && strcmp(op, "await") == 0 && id && fleet_is_uuid(id)) {
			struct await *a = await_get(id, false);
			struct box *b = box_by_id(id);
			json_t *g = json_object_get(head, "gen");
			uint64_t gen = json_is_integer(g) && json_integer_value(g) > 0
					       ? (uint64_t)json_integer_value(g)
					       : 0;

			if (a && a->answer && a->gen != gen) { /* another take's: not this one's */
				free(a->answer);
				a->answer = NULL;
				a->alen = 0;
				a->made_ms = sd_now_ms();
			}

			/* none kept (made long ago, or its record expired) and the box runs
			 * here: what it is now; else a record to wait on */
			if (!a && !(b && b->status != BOX_PROVISIONING && !b->busy))
				a = await_get(id, true);
			if (!a || a->nwaiters == AWAIT_WAITERS) {
				/* no room to keep it, or long made: what the box is now */
				size_t len;
				json_t *bj = b ? box_json(b) : NULL;
				char *text = bj ? json_dumps(bj, JSON_COMPACT) : NULL;
				uint8_t *m = text ? fleet_rpc_answer(200, "application/json", NULL,
								     text, strlen(text), &len)
						  : NULL;

				json_decref(bj);
				if (m)
					publish(in->reply, m, len);
				free(m);
				free(text);
			} else {
				snprintf(a->waiter[a->nwaiters], sizeof(a->waiter[0]), "%s",
					 in->reply);
				a->nwaiters++;
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
	if (reply && strlen(reply) < sizeof(in->reply) && len > 0 &&
	    (size_t)len <= FLEETD_MSG_MAX && (in = calloc(1, sizeof(*in))) &&
	    (in->msg = malloc((size_t)len))) {
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
	int err = work_add_threads(WORK_FLEET, FLEETD_RPC_THREADS);

	if (err == 0)
		err = work_add_threads(WORK_FLEET_BG, RPC_BG_THREADS);
	return err < 0 ? err : work_add_threads(WORK_XFER, FLEETD_XFER_THREADS);
}

void fleet_rpc_stop(void)
{
	if (ctl_sub)
		natsSubscription_Destroy(ctl_sub);
	ctl_sub = NULL;
}

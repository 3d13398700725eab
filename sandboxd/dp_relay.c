/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A dataplane WebSocket (execute/ws) for a box another host of the fleet holds (dp_proxy.c
 * says why): the client's WebSocket is accepted here, the box's host found (the box woken on a
 * host with room if it was released into the store: on a worker), and a WebSocket of ours
 * opened to that host with the client's key; then each message goes across whole, both ways.
 * Bounded: a message at most SD_WS_FRAME_MAX; what waits for a slow reader past RELAY_HIGH
 * stops the other side's reading until it drains. Either side's close closes the other with
 * its code (a 1001 from the box's host: the client attaches again, and is relayed anew).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleetd.h"

#define RELAY_HIGH (1u << 20)	/* queued for one side: the other's reading stops */
#define RELAY_LOW  (256u << 10) /* and goes on below this */
#define RELAY_MAX  (8u << 20)	/* queued for one side, at most: past it the relay closes */

struct rmsg {
	struct rmsg *next;
	size_t len;
	uint8_t data[]; /* LWS_PRE, then the text */
};

struct side {
	struct lws *wsi;
	struct rmsg *head, *tail; /* to be written to this side */
	size_t queued;
	char *frag; /* a message from this side, being reassembled */
	size_t frag_len;
	bool paused; /* its reading stopped (the other side's queue is full) */
};

struct dp_relay {
	struct side user, up;
	char id[SD_ID_LEN + 1];
	char workspace[SD_WORKSPACE_MAX + 1];
	char key_id[SD_KEY_ID_LEN + 1];
	char key[SD_KEY_TEXT_LEN + 1];
	bool closing; /* the client's side closes once its queue is out */
	unsigned short code;
	char reason[120];
	int refs;     /* the client's side, the upstream's, the resolving job */
	bool up_done; /* the upstream side's close (or failed connect) was handled */
	/* the resolving job */
	struct sd_job job;
	char addr[FLEETD_ADDR_MAX];
	bool here;
	int err;
	char msg[300];
};

static struct lws_vhost *relay_vhost;

void dp_relay_set_vhost(struct lws_vhost *vh)
{
	relay_vhost = vh;
}

static void side_free(struct side *s)
{
	while (s->head) {
		struct rmsg *m = s->head;

		s->head = m->next;
		free(m);
	}
	s->tail = NULL;
	s->queued = 0;
	free(s->frag);
	s->frag = NULL;
}

static void relay_unref(struct dp_relay *r)
{
	if (--r->refs > 0)
		return;
	side_free(&r->user);
	side_free(&r->up);
	explicit_bzero(r->key, sizeof(r->key));
	free(r);
}

/* The client's side closes with code, once what is queued for it is out. */
static void user_close(struct dp_relay *r, unsigned short code, const char *reason)
{
	if (r->closing || !r->user.wsi)
		return;
	r->closing = true;
	r->code = code;
	snprintf(r->reason, sizeof(r->reason), "%.119s", reason ? reason : "");
	lws_callback_on_writable(r->user.wsi);
}

static void up_close(struct dp_relay *r)
{
	if (r->up.wsi)
		lws_set_timeout(r->up.wsi, PENDING_TIMEOUT_KILLED_BY_PARENT, LWS_TO_KILL_ASYNC);
}

/* A whole message from one side, queued for the other. -1: over the bound. */
static int relay_queue(struct dp_relay *r, struct side *from, struct side *to, const char *text,
		       size_t len)
{
	struct rmsg *m;

	if (len > RELAY_MAX - to->queued || !(m = malloc(sizeof(*m) + LWS_PRE + len)))
		return -1;
	m->next = NULL;
	m->len = len;
	memcpy(m->data + LWS_PRE, text, len);
	if (to->tail)
		to->tail->next = m;
	else
		to->head = m;
	to->tail = m;
	to->queued += len;
	if (to->queued > RELAY_HIGH && from->wsi && !from->paused) {
		lws_rx_flow_control(from->wsi, 0);
		from->paused = true;
	}
	if (to->wsi && (to == &r->user || r->up.wsi))
		lws_callback_on_writable(to->wsi);
	return 0;
}

/* Bytes of a message from side `from` (lws's fragment): whole messages go across. */
static int relay_rx(struct dp_relay *r, struct side *from, struct side *to, struct lws *wsi,
		    const void *in, size_t len)
{
	if (len > SD_WS_FRAME_MAX - from->frag_len ||
	    lws_remaining_packet_payload(wsi) > SD_WS_FRAME_MAX - from->frag_len - len)
		return -1;
	char *n = realloc(from->frag, from->frag_len + len + 1);

	if (!n)
		return -1;
	from->frag = n;
	memcpy(from->frag + from->frag_len, in, len);
	from->frag_len += len;
	if (!lws_is_final_fragment(wsi) || lws_remaining_packet_payload(wsi))
		return 0;
	int err = relay_queue(r, from, to, from->frag, from->frag_len);

	from->frag_len = 0;
	return err;
}

/* One queued message written to side `to`; the other side's reading resumed when it drains. */
static int relay_write(struct side *to, struct side *other)
{
	struct rmsg *m = to->head;

	if (!m)
		return 0;
	to->head = m->next;
	if (!to->head)
		to->tail = NULL;
	to->queued -= m->len;
	int n = lws_write(to->wsi, m->data + LWS_PRE, m->len, LWS_WRITE_TEXT);

	free(m);
	if (n < 0)
		return -1;
	if (other->paused && other->wsi && to->queued < RELAY_LOW) {
		lws_rx_flow_control(other->wsi, 1);
		other->paused = false;
	}
	if (to->head)
		lws_callback_on_writable(to->wsi);
	return 0;
}

/* ---- the client's side (ws_exec.c's session calls these) ---- */

static void resolve_run(struct sd_job *j)
{
	struct dp_relay *r = (struct dp_relay *)((char *)j - offsetof(struct dp_relay, job));

	r->err = dp_resolve(r->workspace, r->key_id, r->id, r->addr, &r->here, r->msg,
			    sizeof(r->msg));
	if (r->here && fleetd_self_addr(r->addr) < 0)
		r->err = -EHOSTDOWN;
}

static void resolve_done(struct sd_job *j)
{
	struct dp_relay *r = (struct dp_relay *)((char *)j - offsetof(struct dp_relay, job));
	char host[FLEETD_ADDR_MAX], path[96];
	const char *colon = strrchr(r->addr, ':');

	if (!r->user.wsi || r->closing) {
		relay_unref(r);
		return;
	}
	if (r->err < 0 || !colon) {
		user_close(r, r->err == -ENOENT ? LWS_CLOSE_STATUS_POLICY_VIOLATION : 1011,
			   r->err == -ENOENT ? "sandbox not found" : r->msg);
		relay_unref(r);
		return;
	}
	snprintf(host, sizeof(host), "%.*s", (int)(colon - r->addr), r->addr);
	snprintf(path, sizeof(path), "/dp/%s/execute/ws", r->id);
	struct lws_client_connect_info ci = {0};

	ci.context = lws_get_context(r->user.wsi);
	ci.vhost = relay_vhost;
	ci.address = host;
	ci.port = atoi(colon + 1);
	ci.path = path;
	ci.host = r->addr;
	ci.origin = r->addr;
	ci.ietf_version_or_minus_one = -1;
	ci.local_protocol_name = "dp-relay";
	ci.opaque_user_data = r;
	ci.pwsi = &r->up.wsi;
	if (!lws_client_connect_via_info(&ci) && !r->up_done) {
		/* (lws may have said so through the callback already: then it is done) */
		r->up_done = true;
		user_close(r, 1011, "the sandbox's host cannot be reached");
		relay_unref(r);
		return;
	}
	/* (the resolving job's reference is the upstream side's now) */
}

struct dp_relay *dp_relay_new(struct lws *user, const char *id, const char *workspace,
			      const char *key_id, const char *key)
{
	struct dp_relay *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->user.wsi = user;
	snprintf(r->id, sizeof(r->id), "%s", id);
	snprintf(r->workspace, sizeof(r->workspace), "%s", workspace);
	snprintf(r->key_id, sizeof(r->key_id), "%s", key_id);
	snprintf(r->key, sizeof(r->key), "%s", key);
	r->refs = 2; /* the client's side, and the job (then the upstream side) */
	r->job.run = resolve_run;
	r->job.done = resolve_done;
	work_queue_class(&r->job, WORK_FLEET);
	return r;
}

int dp_relay_user_rx(struct dp_relay *r, const void *in, size_t len)
{
	if (relay_rx(r, &r->user, &r->up, r->user.wsi, in, len) < 0) {
		lws_close_reason(r->user.wsi, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE,
				 (unsigned char *)"message too large", 17);
		return -1;
	}
	return 0;
}

int dp_relay_user_writable(struct dp_relay *r)
{
	if (r->user.head)
		return relay_write(&r->user, &r->up);
	if (r->closing) {
		lws_close_reason(r->user.wsi, (enum lws_close_status)(r->code ? r->code : 1000),
				 (unsigned char *)r->reason, strlen(r->reason));
		return -1;
	}
	return 0;
}

void dp_relay_user_closed(struct dp_relay *r)
{
	r->user.wsi = NULL;
	up_close(r);
	relay_unref(r);
}

/* ---- the upstream side: our WebSocket to the box's host ---- */

int dp_relay_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
		      size_t len)
{
	struct dp_relay *r = lws_get_opaque_user_data(wsi);

	if (!r)
		return 0;
	switch (reason) {
	case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER: {
		char **p = in;
		int n = snprintf(*p, len, "X-Api-Key: %s\r\n", r->key);

		if (n < 0 || (size_t)n >= len)
			return -1;
		*p += n;
		return 0;
	}
	case LWS_CALLBACK_CLIENT_ESTABLISHED:
		if (r->up.head)
			lws_callback_on_writable(wsi);
		return 0;
	case LWS_CALLBACK_CLIENT_RECEIVE:
		if (relay_rx(r, &r->up, &r->user, wsi, in, len) < 0) {
			user_close(r, 1009, "the sandbox's host sent too much");
			return -1;
		}
		return 0;
	case LWS_CALLBACK_CLIENT_WRITEABLE:
		return relay_write(&r->up, &r->user);
	case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
		if (len >= 2) { /* its code goes to the client (a 1001: attach again) */
			const uint8_t *c = in;

			r->code = (unsigned short)(c[0] << 8 | c[1]);
		}
		return 0;
	case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
	case LWS_CALLBACK_CLIENT_CLOSED: {
		unsigned short code = r->code ? r->code : LWS_CLOSE_STATUS_GOINGAWAY;

		lws_set_opaque_user_data(wsi, NULL);
		r->up.wsi = NULL;
		if (r->up_done)
			return 0;
		r->up_done = true;
		r->code = 0;
		user_close(r, code,
			   reason == LWS_CALLBACK_CLIENT_CONNECTION_ERROR
				   ? "the sandbox's host refused the connection"
				   : "");
		relay_unref(r);
		return 0;
	}
	default:
		return 0;
	}
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A box's connection to its guest agent, on the loop: one per running box, made on first use
 * (a worker connects and says HELLO, the loop adopts the socket), carrying every command
 * session call of the box's clients under its own call ids (wire/proto.h: calls interleave).
 * Frames from the agent go to the call's owner; an owner that went away leaves its call
 * orphaned: its frames are dropped until the final one. What we send is queued (bounded by
 * LINK_OUT_MAX) and written when the socket can take it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <libwebsockets.h>

#include "client.h"
#include "proto.h"
#include "sandboxd.h"

/* Frames queued for one agent: stdin of its clients, mostly. 8 MiB: eight full client
 * messages; past it a sender is told -ENOBUFS (its WebSocket closes). */
#define LINK_OUT_MAX   (8u << 20)
#define LINK_CALLS_MAX 4096 /* calls in flight on one link */

struct link_call {
	uint64_t id;
	link_frame_fn on_frame;
	void *owner;
	struct link_call *next;
};

struct agent_link {
	char box_id[SD_ID_LEN + 1];
	struct lws *wsi; /* NULL while connecting */
	bool down;
	struct proto_decoder dec;
	uint8_t *out;
	size_t out_len, out_cap;
	uint64_t next_id;
	struct link_call *calls;
	unsigned ncalls;
};

struct link_connect_job {
	struct sd_job job;
	char box_id[SD_ID_LEN + 1];
	char vsock[4200];
	int fd, err;
};

static struct lws_vhost *link_vhost;

void link_set_vhost(struct lws_vhost *vh)
{
	link_vhost = vh;
}

static void link_fail_calls(struct agent_link *l)
{
	struct link_call *c = l->calls;

	l->calls = NULL;
	l->ncalls = 0;
	while (c) {
		struct link_call *next = c->next;

		if (c->on_frame)
			c->on_frame(c->owner, c->id, NULL);
		free(c);
		c = next;
	}
}

static void link_free(struct agent_link *l)
{
	struct box *b = box_by_id(l->box_id);

	if (b && b->link == l)
		b->link = NULL;
	link_fail_calls(l);
	proto_decoder_free(&l->dec);
	free(l->out);
	free(l);
}

static void link_adopt_fd(struct agent_link *l, int fd);

static void link_connect_run(struct sd_job *j)
{
	struct link_connect_job *cj = (struct link_connect_job *)j;
	struct agent_conn c;

	cj->fd = -1;
	cj->err = agent_connect_path(cj->vsock, 10000, &c);
	if (cj->err < 0)
		return;
	cj->fd = agent_conn_release(&c); /* close-on-exec: never a VMM's or a proxy's */
	if (cj->fd < 0)
		cj->err = cj->fd;
}

static void link_connect_done(struct sd_job *j)
{
	struct link_connect_job *cj = (struct link_connect_job *)j;
	struct box *b = box_by_id(cj->box_id);
	struct agent_link *l = b ? b->link : NULL;

	if (!l || l->wsi || l->down) {
		if (cj->fd >= 0)
			close(cj->fd);
		free(cj);
		return;
	}
	if (cj->err < 0) {
		sd_log("box %s: cannot reach its agent: %s", b->id, strerror(-cj->err));
		l->down = true;
		link_free(l);
		free(cj);
		return;
	}
	link_adopt_fd(l, cj->fd);
	free(cj);
}

/* The loop takes fd, a connection to l's agent past its HELLO, as l's socket (closed on
 * failure, and l freed). */
static void link_adopt_fd(struct agent_link *l, int fd)
{
	lws_adopt_desc_t ad = {
		.vh = link_vhost,
		.type = LWS_ADOPT_SOCKET,
		.fd.sockfd = fd,
		.vh_prot_name = "agent-link",
	};
	l->wsi = lws_adopt_descriptor_vhost_via_info(&ad);
	if (!l->wsi) { /* lws closed fd */
		l->down = true;
		link_free(l);
		return;
	}
	lws_set_wsi_user(l->wsi, l);
	if (l->out_len)
		lws_callback_on_writable(l->wsi);
}

static struct agent_link *link_new(struct box *b)
{
	struct agent_link *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	snprintf(l->box_id, sizeof(l->box_id), "%s", b->id);
	proto_decoder_init(&l->dec);
	b->link = l;
	return l;
}

void link_adopt(struct box *b, int fd)
{
	struct agent_link *l;

	if (b->link || !(l = link_new(b))) {
		close(fd);
		return;
	}
	l->next_id = 1000; /* above any id its first owner used (the pool's warm-up) */
	link_adopt_fd(l, fd);
}

/* The box's link, connecting when there is none. NULL: out of memory or no sandbox. */
static struct agent_link *link_get(struct box *b)
{
	if (b->link)
		return b->link;
	if (!b->sandbox[0])
		return NULL;
	struct link_connect_job *cj = calloc(1, sizeof(*cj));
	struct agent_link *l = cj ? link_new(b) : NULL;

	if (!l) {
		free(cj);
		return NULL;
	}
	snprintf(cj->box_id, sizeof(cj->box_id), "%s", b->id);
	snprintf(cj->vsock, sizeof(cj->vsock), "%s/sandboxes/%s/vsock.sock", state_home(),
		 b->sandbox);
	cj->job.run = link_connect_run;
	cj->job.done = link_connect_done;
	work_queue_io(&cj->job);
	return l;
}

/* Write what the socket takes now (never blocking), and ask to be told when it takes more.
 * 0, or -1 when the socket failed (its close callback follows). */
static int link_flush(struct agent_link *l)
{
	ssize_t n =
		send(lws_get_socket_fd(l->wsi), l->out, l->out_len, MSG_DONTWAIT | MSG_NOSIGNAL);

	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			return -1;
		n = 0;
	}
	memmove(l->out, l->out + n, l->out_len - (size_t)n);
	l->out_len -= (size_t)n;
	if (l->out_len)
		lws_callback_on_writable(l->wsi);
	return 0;
}

static int link_queue(struct agent_link *l, uint16_t type, uint64_t id, const void *payload,
		      uint32_t len)
{
	size_t need = PROTO_HDR_LEN + len;

	if (need > LINK_OUT_MAX - l->out_len)
		return -ENOBUFS;
	if (l->out_len + need > l->out_cap) {
		size_t cap = l->out_cap ? l->out_cap : 65536;

		while (cap < l->out_len + need)
			cap *= 2;
		uint8_t *n = realloc(l->out, cap);

		if (!n)
			return -ENOMEM;
		l->out = n;
		l->out_cap = cap;
	}
	long n = proto_frame_encode(l->out + l->out_len, l->out_cap - l->out_len, type, id, payload,
				    len);

	if (n < 0)
		return (int)n;
	l->out_len += (size_t)n;
	if (l->wsi && l->out_len == (size_t)n && link_flush(l) == 0)
		return 0; /* nothing was waiting: written at once, or asked for writable */
	if (l->wsi)	  /* failed: the writable callback fails it again, and lws closes it */
		lws_callback_on_writable(l->wsi);
	return 0;
}

int link_call_start(struct box *b, uint16_t type, const void *payload, uint32_t len,
		    link_frame_fn on_frame, void *owner, uint64_t *id)
{
	struct agent_link *l = link_get(b);

	if (!l)
		return -ENOMEM;
	if (l->ncalls >= LINK_CALLS_MAX)
		return -EAGAIN;
	struct link_call *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->id = ++l->next_id;
	int err = link_queue(l, type, c->id, payload, len);

	if (err < 0) {
		free(c);
		return err;
	}
	c->on_frame = on_frame;
	c->owner = owner;
	c->next = l->calls;
	l->calls = c;
	l->ncalls++;
	*id = c->id;
	return 0;
}

int link_send(struct box *b, uint16_t type, uint64_t id, const void *payload, uint32_t len)
{
	if (!b->link)
		return -ENOTCONN;
	return link_queue(b->link, type, id, payload, len);
}

void link_call_orphan(struct box *b, uint64_t id)
{
	if (!b || !b->link)
		return;
	for (struct link_call *c = b->link->calls; c; c = c->next)
		if (c->id == id) {
			c->on_frame = NULL;
			c->owner = NULL;
		}
}

void link_close(struct box *b)
{
	struct agent_link *l = b->link;

	if (!l)
		return;
	l->down = true;
	b->link = NULL;
	link_fail_calls(l);
	if (l->wsi) {
		/* freed at its RAW_CLOSE: this may run inside one of its frames' dispatch */
		lws_set_timeout(l->wsi, PENDING_TIMEOUT_KILLED_BY_PARENT, LWS_TO_KILL_ASYNC);
		return;
	}
	proto_decoder_free(&l->dec);
	free(l->out);
	free(l);
}

static void link_frame(struct agent_link *l, const struct proto_frame *f)
{
	struct link_call **pp = &l->calls;

	while (*pp && (*pp)->id != f->hdr.id)
		pp = &(*pp)->next;
	struct link_call *c = *pp;

	if (!c)
		return; /* an answer to a call we forgot (an orphan's, after its final) */
	bool final = proto_msg_is_final(f->hdr.type);

	/* A call's final frame takes it off the list first: its owner may close the link from
	 * on_frame (a stop), which tells every call still listed that the link is gone. */
	if (final) {
		*pp = c->next;
		l->ncalls--;
	}
	if (c->on_frame)
		c->on_frame(c->owner, c->id, f);
	if (final)
		free(c);
}

int link_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
		  size_t len)
{
	struct agent_link *l = user;

	switch (reason) {
	case LWS_CALLBACK_RAW_RX: {
		const uint8_t *p = in;

		while (l && !l->down && len) {
			struct proto_frame f;
			size_t used = 0;
			int r = proto_decoder_feed(&l->dec, p, len, &used, &f);

			if (r < 0) {
				sd_log("box %s: agent protocol error: %s", l->box_id,
				       proto_decoder_error(&l->dec));
				return -1;
			}
			p += used;
			len -= used;
			if (r == 1)
				link_frame(l, &f); /* its owner may close the link: l->down */
		}
		return 0;
	}
	case LWS_CALLBACK_RAW_WRITEABLE: {
		if (!l || l->down || !l->out_len)
			return 0;
		return link_flush(l);
	}
	case LWS_CALLBACK_RAW_CLOSE:
		if (l) {
			lws_set_wsi_user(wsi, NULL);
			l->wsi = NULL;
			l->down = true;
			link_free(l);
		}
		return 0;
	default:
		return 0;
	}
}

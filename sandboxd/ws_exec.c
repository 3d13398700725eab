/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The execute WebSocket ({D}/execute/ws, docs/api.md "Commands"): the client's execute or
 * reconnect frame becomes a command session call on the box's agent link (agent_link.c), the
 * session's frames become the API's JSON frames. The session lives in the guest agent, so a
 * client that reconnects (or sandboxd restarted) attaches again by command id and offsets.
 *
 * Flow control: output queued for a client past SD_WS_OUTQ_MAX detaches its call (the
 * command goes on in the guest, its output kept there); once the client drained half of it,
 * the call attaches again from the offsets already sent. So a slow client never holds the
 * loop, the link or another client.
 */
#include <errno.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <libwebsockets.h>

#include "client.h"
#include "proto.h"
#include "sandboxd.h"

/* A message up to this long is written from the stack when it goes out at once. */
#define WS_SMALL_MSG 1024
/* Frames a client may send before its command's call exists: more is a misbehaving client. */
#define WS_EARLY_MAX 16 /* messages (each at most SD_WS_FRAME_MAX) */

struct ws_msg {
	struct ws_msg *next;
	size_t len;
	uint8_t data[]; /* LWS_PRE bytes, then the text */
};

enum ws_state { WS_FIRST, WS_WAKING, WS_LIVE, WS_DONE };

struct ws_sess {
	struct lws *wsi;
	char box_id[SD_ID_LEN + 1];
	char key_id[SD_KEY_ID_LEN + 1];
	char cmd_id[SD_CMD_ID_MAX + 1];
	char cmd_id_json[SD_CMD_ID_MAX * 6 + 3]; /* cmd_id as a JSON string, quotes and all */
	enum ws_state st;
	bool reconnect, started_sent, paused, has_call, closing;
	bool from_agent;	   /* in ws_on_frame: what it queues may go out at once */
	unsigned short close_code; /* with closing: 0 is 1000 */
	uint64_t call;
	uint64_t off[3]; /* [1] stdout, [2] stderr: the next offset the client has not got */
	uint32_t pid;
	struct ws_msg *head, *tail;
	size_t qbytes;
	struct dp_relay *relay; /* a box of another host: relayed there (dp_relay.c) */
	char *frag;
	size_t frag_len;
	json_t *first; /* the first frame, kept while the box wakes */
	json_t *early; /* frames after it that came before its call existed */
	struct ws_sess *next_all;
};

static struct ws_sess *all_sessions;

static void ws_queue_textn(struct ws_sess *s, const char *text, size_t n)
{
	struct ws_msg *m;

	if (s->from_agent && !s->head && !s->closing && !lws_partial_buffered(s->wsi)) {
		/* Nothing of ours waits and lws holds nothing unsent: sent now, not after one
		 * more turn of the loop (a command's started and exit are on every exec's path).
		 * What the socket does not take lws keeps and sends first; while it keeps some,
		 * nothing is written this way, so lws keeps one message at most and our queue's
		 * bound holds. (lws_send_pipe_choked would add a poll(2) to each message.) */
		unsigned char small[LWS_PRE + WS_SMALL_MSG], *buf = small;
		int w;

		if (n > WS_SMALL_MSG && !(buf = malloc(LWS_PRE + n)))
			return;
		memcpy(buf + LWS_PRE, text, n);
		w = lws_write(s->wsi, buf + LWS_PRE, n, LWS_WRITE_TEXT);
		if (buf != small)
			free(buf);
		if (w < 0)
			lws_set_timeout(s->wsi, PENDING_TIMEOUT_KILLED_BY_PARENT,
					LWS_TO_KILL_ASYNC);
		return;
	}
	m = malloc(sizeof(*m) + LWS_PRE + n);
	if (!m)
		return;
	m->next = NULL;
	m->len = n;
	memcpy(m->data + LWS_PRE, text, n);
	if (s->tail)
		s->tail->next = m;
	else
		s->head = m;
	s->tail = m;
	s->qbytes += n;
	lws_callback_on_writable(s->wsi);
}

static void ws_queue_json(struct ws_sess *s, json_t *o)
{
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;

	json_decref(o);
	if (text)
		ws_queue_textn(s, text, strlen(text));
	free(text);
}

/* The frames on every command's path, written without building a JSON tree: `started` (its
 * command id quoted once, at the first frame) and `exit`. */
static void ws_queue_started(struct ws_sess *s)
{
	char text[64 + sizeof(s->cmd_id_json)];
	int n = snprintf(text, sizeof(text), "{\"type\":\"started\",\"command_id\":%s,\"pid\":%d}",
			 s->cmd_id_json, (int)s->pid);

	if (n > 0 && (size_t)n < sizeof(text))
		ws_queue_textn(s, text, (size_t)n);
}

/* Send `o` (if any), then close with code 1000 (or `code`) once the queue is out. */
static void ws_finish(struct ws_sess *s, json_t *o)
{
	if (o)
		ws_queue_json(s, o);
	s->st = WS_DONE;
	s->closing = true;
	lws_callback_on_writable(s->wsi);
}

static void ws_error(struct ws_sess *s, const char *type, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void ws_error(struct ws_sess *s, const char *type, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ws_finish(s,
		  json_pack("{s:s, s:s, s:s}", "type", "error", "error_type", type, "error", msg));
}

/* Close with `code` now: what is queued is dropped. */
static void ws_close_now(struct ws_sess *s, unsigned short code)
{
	while (s->head) {
		struct ws_msg *m = s->head;

		s->head = m->next;
		free(m);
	}
	s->tail = NULL;
	s->qbytes = 0;
	s->st = WS_DONE;
	s->closing = true;
	s->close_code = code;
	lws_callback_on_writable(s->wsi);
}

/* The close for a session whose box went (stopped, moved): 1001 once its command started (the
 * client attaches again at once), a plain 1000 before (the client sends the same command id
 * again: a 1001 there is an error the LangSmith JS client does not retry). */
static unsigned short ws_gone_code(const struct ws_sess *s)
{
	return s->started_sent || s->reconnect ? LWS_CLOSE_STATUS_GOINGAWAY
					       : LWS_CLOSE_STATUS_NORMAL;
}

static struct box *ws_box(struct ws_sess *s)
{
	return box_by_id(s->box_id);
}

static void ws_on_frame(void *owner, uint64_t call, const struct proto_frame *f);

/* Attach the session again after a pause, from the offsets the client has. */
static void ws_resume(struct ws_sess *s)
{
	uint8_t buf[512];
	struct box *b = ws_box(s);
	int n = session_attach_payload(s->cmd_id, s->off[1], s->off[2], buf, sizeof(buf));

	s->paused = false;
	if (!b || n < 0 ||
	    link_call_start(b, PROTO_MSG_SESSION_ATTACH, buf, (uint32_t)n, ws_on_frame, s,
			    &s->call) < 0) {
		ws_error(s, "CommandError", "cannot attach to the command again");
		return;
	}
	s->has_call = true;
}

static void ws_on_agent_frame(struct ws_sess *s, const struct proto_frame *f);

static void ws_on_frame(void *owner, uint64_t call, const struct proto_frame *f)
{
	struct ws_sess *s = owner;

	s->from_agent = true; /* the link's callback, not this WebSocket's own */
	ws_on_agent_frame(s, f);
	s->from_agent = false;
}

static void ws_on_agent_frame(struct ws_sess *s, const struct proto_frame *f)
{
	if (!f) { /* the link is gone: the box stopped or its VMM died */
		s->has_call = false;
		if (s->st != WS_DONE) /* the client comes back at once, and wakes it */
			ws_close_now(s, ws_gone_code(s));
		return;
	}
	switch (f->hdr.type) {
	case PROTO_MSG_STARTED:
		s->pid = proto_get_le32(f->payload);
		if (!s->started_sent) {
			s->started_sent = true;
			ws_queue_started(s);
		}
		return;
	case PROTO_MSG_SESSION_OUT: {
		int stream;
		uint64_t offset;
		const uint8_t *data;
		size_t len;

		if (session_out_parse(f, &stream, &offset, &data, &len) < 0 ||
		    (stream != 1 && stream != 2))
			return;
		/* Bytes the client has already (a replay from an older offset) are skipped. */
		if (offset + len <= s->off[stream])
			return;
		if (offset < s->off[stream]) {
			size_t skip = (size_t)(s->off[stream] - offset);

			data += skip;
			len -= skip;
			offset += skip;
		}
		json_t *o =
			json_pack("{s:s, s:s%, s:I}", "type", stream == 1 ? "stdout" : "stderr",
				  "data", (const char *)data, len, "offset", (json_int_t)offset);

		if (!o) /* not UTF-8 (the agent sanitises: never), or out of memory */
			return;
		ws_queue_json(s, o);
		s->off[stream] = offset + len;
		if (s->qbytes > SD_WS_OUTQ_MAX && !s->paused && s->has_call) {
			struct box *b = ws_box(s);

			if (b)
				link_call_orphan(b, s->call);
			s->has_call = false;
			if (b && link_send(b, PROTO_MSG_SESSION_DETACH, s->call, NULL, 0) == 0)
				s->paused = true;
			else /* cannot pause it: this client goes (it may attach again) */
				ws_close_now(s, LWS_CLOSE_STATUS_POLICY_VIOLATION);
		}
		return;
	}
	case PROTO_MSG_EXIT: {
		uint32_t code = proto_get_le32(f->payload), flags = proto_get_le32(f->payload + 8);

		s->has_call = false;
		if (flags & PROTO_EXIT_TIMED_OUT)
			ws_error(s, "CommandTimeout", "the command timed out");
		else {
			char text[64];
			int n = snprintf(text, sizeof(text), "{\"type\":\"exit\",\"exit_code\":%d}",
					 (int)code);

			ws_queue_textn(s, text, (size_t)n);
			ws_finish(s, NULL);
		}
		return;
	}
	case PROTO_MSG_ERROR: {
		char msg[256];
		uint32_t err = proto_get_le32(f->payload);
		const char *type = err == ENOENT   ? "CommandNotFound"
				   : err == ESTALE ? "SessionExpired"
						   : "CommandError";

		s->has_call = false;
		agent_error_text(f, msg, sizeof(msg));
		ws_error(s, type, "%s", msg);
		return;
	}
	default:
		return;
	}
}

/* ---- the client's frames ---- */

static int ws_start(struct ws_sess *s, struct box *b);
static int ws_rx(struct ws_sess *s, json_t *o);

static void ws_woken(struct ws_sess *s, struct box *b, int err, const char *msg)
{
	if (err == -ESTALE) { /* moved: the client sends it again, and that wakes it */
		ws_close_now(s, ws_gone_code(s));
		return;
	}
	if (err < 0) {
		ws_error(s, "CommandError", "the sandbox cannot run: %s", msg);
		return;
	}
	s->st = WS_LIVE;
	ws_start(s, b);
}

static void ws_woken_cb(void *ws, struct box *b, int err, const char *msg)
{
	ws_woken(ws, b, err, msg);
}

/* The first frame: execute or reconnect. */
static int ws_start(struct ws_sess *s, struct box *b)
{
	json_t *o = s->first;
	const char *type = json_string_value(json_object_get(o, "type"));
	uint8_t *buf = NULL;
	int n, err;

	s->first = NULL;
	if (type && strcmp(type, "reconnect") == 0) {
		json_t *so = json_object_get(o, "stdout_offset"),
		       *se = json_object_get(o, "stderr_offset");

		s->off[1] = json_is_integer(so) && json_integer_value(so) > 0
				    ? (uint64_t)json_integer_value(so)
				    : 0;
		s->off[2] = json_is_integer(se) && json_integer_value(se) > 0
				    ? (uint64_t)json_integer_value(se)
				    : 0;
		buf = malloc(512);
		n = buf ? session_attach_payload(s->cmd_id, s->off[1], s->off[2], buf, 512)
			: -ENOMEM;
		if (n >= 0)
			err = link_call_start(b, PROTO_MSG_SESSION_ATTACH, buf, (uint32_t)n,
					      ws_on_frame, s, &s->call);
		else
			err = n;
	} else {
		struct exec_req x;
		char why[256];

		err = exec_req_from_json(o, b, s->cmd_id, false, &x, why, sizeof(why));
		if (err < 0) {
			json_decref(o);
			ws_error(s, "CommandError", "%s", why);
			return 0;
		}
		err = exec_req_start(b, &x, ws_on_frame, s, &s->call);
		exec_req_free(&x);
	}
	free(buf);
	json_decref(o);
	if (err < 0) {
		ws_error(s, "CommandError", "cannot start the command: %s", strerror(-err));
		return 0;
	}
	s->has_call = true;
	json_t *early = s->early;
	size_t i;
	json_t *f;

	s->early = NULL;
	json_array_foreach(early, i, f) if (ws_rx(s, json_incref(f)) < 0) break;
	json_decref(early);
	return 0;
}

static int ws_first(struct ws_sess *s, json_t *o)
{
	const char *type = json_string_value(json_object_get(o, "type"));
	const char *id = json_string_value(json_object_get(o, "command_id"));
	struct box *b = ws_box(s);

	if (!type || (strcmp(type, "execute") != 0 && strcmp(type, "reconnect") != 0)) {
		json_decref(o);
		ws_error(s, "CommandError", "the first frame must be execute or reconnect");
		return 0;
	}
	if (id && (strlen(id) == 0 || strlen(id) > SD_CMD_ID_MAX)) {
		json_decref(o);
		ws_error(s, "CommandError", "command_id must be 1 to %d bytes", SD_CMD_ID_MAX);
		return 0;
	}
	if (id && strncmp(id, SD_CMD_ID_RESERVED, strlen(SD_CMD_ID_RESERVED)) == 0) {
		json_decref(o);
		ws_error(s, "CommandError", "command ids beginning %s are the server's",
			 SD_CMD_ID_RESERVED);
		return 0;
	}
	if (!id && strcmp(type, "reconnect") == 0) {
		json_decref(o);
		ws_error(s, "CommandNotFound", "reconnect without a command_id");
		return 0;
	}
	if (id)
		snprintf(s->cmd_id, sizeof(s->cmd_id), "%s", id);
	else
		sd_uuid(s->cmd_id);
	jsonx_quote(s->cmd_id, s->cmd_id_json, sizeof(s->cmd_id_json));
	s->reconnect = strcmp(type, "reconnect") == 0;
	s->first = o;
	if (!b) {
		ws_error(s, "CommandError", "the sandbox is gone");
		return 0;
	}
	s->st = WS_WAKING;
	box_wake_ws(b, s, ws_woken_cb);
	return 0;
}

static int ws_rx(struct ws_sess *s, json_t *o)
{
	const char *type = json_string_value(json_object_get(o, "type"));
	struct box *b = ws_box(s);
	int err = 0;

	if (type && b && !s->has_call && !s->paused && s->st != WS_DONE) {
		/* before the command's call exists (its box waking, its agent connecting):
		 * kept in order, bounded, and fed once it does */
		if (json_array_size(s->early) >= WS_EARLY_MAX ||
		    (!s->early && !(s->early = json_array()))) {
			json_decref(o);
			ws_close_now(s, LWS_CLOSE_STATUS_POLICY_VIOLATION);
			return 0;
		}
		json_array_append_new(s->early, o);
		return 0;
	}
	if (!type || !b || !s->has_call) {
		json_decref(o);
		return 0;
	}
	if (strcmp(type, "input") == 0) {
		const char *data = json_string_value(json_object_get(o, "data"));
		size_t len = data ? json_string_length(json_object_get(o, "data")) : 0;

		for (size_t off = 0; off < len && err == 0; off += PROTO_DATA_CHUNK) {
			size_t n = len - off < PROTO_DATA_CHUNK ? len - off : PROTO_DATA_CHUNK;

			err = link_send(b, PROTO_MSG_STDIN, s->call, data + off, (uint32_t)n);
		}
	} else if (strcmp(type, "kill") == 0) {
		uint8_t sig[16] = {0};
		uint64_t id;

		/* SIGNAL is a call of its own (answered OK), aimed at the session's call: the
		 * agent kills the whole process group, and the session's EXIT follows */
		proto_put_le64(sig, s->call);
		proto_put_le32(sig + 8, SIGKILL);
		err = link_call_start(b, PROTO_MSG_SIGNAL, sig, sizeof(sig), NULL, NULL, &id);
	} else if (strcmp(type, "close_stdin") == 0) {
		err = link_send(b, PROTO_MSG_STDIN_CLOSE, s->call, NULL, 0);
	}
	json_decref(o);
	if (err == -ENOBUFS) {
		lws_close_reason(s->wsi, LWS_CLOSE_STATUS_POLICY_VIOLATION,
				 (unsigned char *)"input too fast", 14);
		return -1;
	}
	return 0;
}

static int ws_receive(struct ws_sess *s, const void *in, size_t len)
{
	/* what the frame announces counts, not only what came: a header saying 2^62 bytes ends
	 * the connection at once */
	if (len > SD_WS_FRAME_MAX - s->frag_len ||
	    lws_remaining_packet_payload(s->wsi) > SD_WS_FRAME_MAX - s->frag_len - len) {
		lws_close_reason(s->wsi, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE,
				 (unsigned char *)"message too large", 17);
		return -1;
	}
	char *n = realloc(s->frag, s->frag_len + len + 1);

	if (!n)
		return -1;
	s->frag = n;
	memcpy(s->frag + s->frag_len, in, len);
	s->frag_len += len;
	if (!lws_is_final_fragment(s->wsi) || lws_remaining_packet_payload(s->wsi))
		return 0;
	json_error_t jerr;
	json_t *o = jsonx_parse(s->frag, s->frag_len, &jerr);

	s->frag_len = 0;
	if (!o || !json_is_object(o)) {
		json_decref(o);
		if (s->st == WS_FIRST) {
			ws_error(s, "CommandError", "a frame is not a JSON object");
			return 0;
		}
		return 0; /* later frames we cannot read are ignored, as unknown types are */
	}
	if (s->st == WS_FIRST)
		return ws_first(s, o);
	return ws_rx(s, o);
}

static int ws_writeable(struct ws_sess *s)
{
	struct ws_msg *m = s->head;

	if (m) {
		s->head = m->next;
		if (!s->head)
			s->tail = NULL;
		s->qbytes -= m->len;
		int n = lws_write(s->wsi, m->data + LWS_PRE, m->len, LWS_WRITE_TEXT);

		free(m);
		if (n < 0)
			return -1;
		if (s->paused && s->qbytes < SD_WS_OUTQ_MAX / 2)
			ws_resume(s);
		if (s->head || s->closing)
			lws_callback_on_writable(s->wsi);
		return 0;
	}
	if (s->closing) {
		lws_close_reason(s->wsi,
				 (enum lws_close_status)(s->close_code ? s->close_code
								       : LWS_CLOSE_STATUS_NORMAL),
				 NULL, 0);
		return -1;
	}
	return 0;
}

static void ws_closed(struct ws_sess *s)
{
	struct box *b = s->relay ? NULL : ws_box(s);

	if (s->relay)
		dp_relay_user_closed(s->relay);
	if (b && s->has_call) {
		if (link_send(b, PROTO_MSG_SESSION_DETACH, s->call, NULL, 0) < 0)
			sd_log("box %s: a detach was not sent: the command goes on", b->id);
		link_call_orphan(b, s->call);
	}
	if (b && b->attached)
		b->attached--;
	if (b)
		b->last_active_ms = sd_now_ms();
	box_wake_cancel(s);
	for (struct ws_sess **p = &all_sessions; *p; p = &(*p)->next_all)
		if (*p == s) {
			*p = s->next_all;
			break;
		}
	while (s->head) {
		struct ws_msg *m = s->head;

		s->head = m->next;
		free(m);
	}
	json_decref(s->first);
	json_decref(s->early);
	free(s->frag);
	free(s);
	metrics_ws(false);
}

int ws_confirm_upgrade(struct lws *wsi, struct sd_conn *c, const char *proto, bool op)
{
	static struct sd_req req; /* the upgrade's head, for this call only */
	struct sd_req *q = &req;
	char path[1024];
	int status = 401;

	memset(q, 0, sizeof(*q));
	q->wsi = wsi;
	q->start_ms = sd_now_ms();
	q->method = M_GET;
	lws_get_peer_simple(wsi, q->peer, sizeof(q->peer));
	if (!proto || strcasecmp(proto, "websocket") != 0) /* h2c, or anything else */
		return http_reject(wsi, 400, "InvalidRequest",
				   "only WebSocket upgrades are served");
	if (lws_hdr_total_length(wsi, WSI_TOKEN_PROTOCOL) > 0)
		return http_reject(wsi, 400, "InvalidRequest",
				   "no WebSocket subprotocol is served");
	if (op || lws_hdr_copy(wsi, path, sizeof(path), WSI_TOKEN_GET_URI) <= 0 ||
	    route_parse(M_GET, path, false, &q->rt) != R_DP_EXECUTE_WS) {
		return http_reject(wsi, 404, "NotFound", "no WebSocket here");
	}
	const struct sd_key *k = auth_check(wsi, q->peer, &status);

	if (!k)
		return http_reject(wsi, status, status == 429 ? "TooManyRequests" : "Unauthorized",
				   "missing or invalid X-Api-Key");
	struct box *b = box_find(k->workspace, q->rt.arg);
	bool relay = (!b || strcmp(b->id, q->rt.arg) != 0) && fleet_hooks && fleet_hooks->dp &&
		     strlen(q->rt.arg) == SD_ID_LEN;

	if (!relay && (!b || strcmp(b->id, q->rt.arg) != 0))
		return http_reject(wsi, 404, "NotFound", "sandbox not found");
	struct ws_sess *s = calloc(1, sizeof(*s));

	if (!s)
		return http_reject(wsi, 503, "ServiceUnavailable", "out of memory");
	if (relay) { /* another host's, maybe: relayed there, whose answer it is */
		char key[SD_KEY_TEXT_LEN + 1];

		if (lws_hdr_custom_copy(wsi, key, sizeof(key), "x-api-key:", 10) <= 0 ||
		    !(s->relay = dp_relay_new(wsi, q->rt.arg, k->workspace, k->id, key))) {
			free(s);
			return http_reject(wsi, 503, "ServiceUnavailable", "out of memory");
		}
		explicit_bzero(key, sizeof(key));
		snprintf(s->box_id, sizeof(s->box_id), "%.36s", q->rt.arg);
		snprintf(s->key_id, sizeof(s->key_id), "%s", k->id);
		s->wsi = wsi;
		lws_set_opaque_user_data(wsi, s);
		return 0;
	}
	s->wsi = wsi;
	snprintf(s->box_id, sizeof(s->box_id), "%s", b->id);
	snprintf(s->key_id, sizeof(s->key_id), "%s", k->id);
	/* The connection's user data is made for the WebSocket only at ESTABLISHED: until then
	 * the session waits on the wsi. */
	lws_set_opaque_user_data(wsi, s);
	return 0;
}

int ws_callback(struct lws *wsi, enum lws_callback_reasons reason, struct sd_conn *c, void *in,
		size_t len)
{
	if (c && reason == LWS_CALLBACK_ESTABLISHED) {
		c->ws = lws_get_opaque_user_data(wsi);
		lws_set_opaque_user_data(wsi, NULL);
	}
	struct ws_sess *s = c ? c->ws : NULL;

	if (!s)
		return reason == LWS_CALLBACK_CLOSED ? 0 : -1;
	switch (reason) {
	case LWS_CALLBACK_ESTABLISHED: {
		struct box *b = ws_box(s);

		s->next_all = all_sessions;
		all_sessions = s;
		if (b) {
			b->attached++;
			b->last_active_ms = sd_now_ms();
		}
		metrics_ws(true);
		return 0;
	}
	case LWS_CALLBACK_RECEIVE:
		return s->relay ? dp_relay_user_rx(s->relay, in, len) : ws_receive(s, in, len);
	case LWS_CALLBACK_SERVER_WRITEABLE:
		if (s->relay && !s->closing)
			return dp_relay_user_writable(s->relay);
		return ws_writeable(s);
	case LWS_CALLBACK_CLOSED:
		c->ws = NULL;
		ws_closed(s);
		return 0;
	default:
		return 0;
	}
}

void ws_close_revoked(void)
{
	for (struct ws_sess *s = all_sessions; s; s = s->next_all)
		if (!keys_live(s->key_id) && !(s->closing && s->close_code))
			ws_close_now(s, LWS_CLOSE_STATUS_POLICY_VIOLATION);
}

void ws_close_all(unsigned short code)
{
	for (struct ws_sess *s = all_sessions; s; s = s->next_all)
		ws_close_now(s, code);
}

void ws_box_gone(const char *box_id)
{
	for (struct ws_sess *s = all_sessions; s; s = s->next_all)
		if (strcmp(s->box_id, box_id) == 0 && !s->closing)
			ws_close_now(s, ws_gone_code(s));
}

int ws_attached_count(void)
{
	int n = 0;

	for (struct ws_sess *s = all_sessions; s; s = s->next_all)
		n++;
	return n;
}

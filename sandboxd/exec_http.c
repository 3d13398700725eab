/* SPDX-License-Identifier: Apache-2.0 */
/*
 * POST {D}/execute, the blocking fallback of clients without a WebSocket library: the same
 * command session as the WebSocket's (stdin at EOF, killed when the client goes), its output
 * gathered (each stream bounded by EXEC_HTTP_OUT_MAX, the rest dropped) and answered at its
 * exit as {"stdout","stderr","exit_code"}. A timeout answers 200 with exit code 124 and what
 * came before it, as timeout(1) does.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "proto.h"
#include "sandboxd.h"

#define EXEC_HTTP_OUT_MAX (16u << 20)

struct http_exec {
	struct sd_pending *pending;
	char box_id[SD_ID_LEN + 1];
	uint64_t call;
	char *out[3];
	size_t len[3];
};

static void hx_free(struct http_exec *h)
{
	free(h->out[1]);
	free(h->out[2]);
	free(h);
}

static void hx_append(struct http_exec *h, int stream, const uint8_t *data, size_t len)
{
	if (len > EXEC_HTTP_OUT_MAX - h->len[stream])
		len = EXEC_HTTP_OUT_MAX - h->len[stream];
	if (!len)
		return;
	char *n = realloc(h->out[stream], h->len[stream] + len + 1);

	if (!n)
		return;
	memcpy(n + h->len[stream], data, len);
	h->len[stream] += len;
	n[h->len[stream]] = 0;
	h->out[stream] = n;
}

static void hx_frame(void *owner, uint64_t call, const struct proto_frame *f)
{
	struct http_exec *h = owner;

	if (f && f->hdr.type == PROTO_MSG_SESSION_OUT) {
		int stream;
		uint64_t offset;
		const uint8_t *data;
		size_t len;

		if (session_out_parse(f, &stream, &offset, &data, &len) == 0 &&
		    (stream == 1 || stream == 2))
			hx_append(h, stream, data, len);
		return;
	}
	if (f && !proto_msg_is_final(f->hdr.type))
		return;
	struct sd_req *q = pending_take(h->pending);

	h->pending = NULL;
	if (q && !f) {
		req_reply_error(q, 502, "ConnectionError",
				"the sandbox went away during the command");
	} else if (q && f->hdr.type == PROTO_MSG_ERROR) {
		char msg[256];

		agent_error_text(f, msg, sizeof(msg));
		req_reply_error(q, 400, "CommandError", "%s", msg);
	} else if (q && f->hdr.type == PROTO_MSG_EXIT) {
		uint32_t code = proto_get_le32(f->payload), flags = proto_get_le32(f->payload + 8);

		req_reply_json(q, 200,
			       json_pack("{s:s%, s:s%, s:i}", "stdout", h->out[1] ? h->out[1] : "",
					 h->len[1], "stderr", h->out[2] ? h->out[2] : "", h->len[2],
					 "exit_code",
					 flags & PROTO_EXIT_TIMED_OUT ? 124 : (int)code));
	}
	hx_free(h);
}

/* The client left before the answer: detach (kill_on_disconnect ends the command). */
static void hx_cancel(void *arg)
{
	struct http_exec *h = arg;
	struct box *b = box_by_id(h->box_id);

	h->pending = NULL; /* freed by the caller (req_reset) */
	if (b) {
		/* orphaned first: nothing reaches h once it is freed. A detach that cannot be
		 * queued (the link's buffer full) leaves the command to its own timeout; the link,
		 * which other clients share, stays. */
		link_call_orphan(b, h->call);
		if (link_send(b, PROTO_MSG_SESSION_DETACH, h->call, NULL, 0) < 0)
			sd_log("box %s: a detach was not queued: the command runs to its timeout",
			       b->id);
	}
	hx_free(h);
}

void exec_http_handle(struct sd_req *q, struct box *b)
{
	json_t *o = req_json(q);
	struct exec_req x;
	char why[256], id[SD_ID_LEN + 1];

	if (!o)
		return;
	sd_uuid(id);
	int err = exec_req_from_json(o, b, id, true, &x, why, sizeof(why));

	json_decref(o);
	if (err < 0) {
		req_reply_error(q, 400, "InvalidRequest", "%s", why);
		return;
	}
	struct http_exec *h = calloc(1, sizeof(*h));

	if (!h) {
		exec_req_free(&x);
		req_reply_error(q, 503, "ServiceUnavailable", "out of memory");
		return;
	}
	snprintf(h->box_id, sizeof(h->box_id), "%s", b->id);
	err = exec_req_start(b, &x, hx_frame, h, &h->call);
	exec_req_free(&x);
	if (err == -EMSGSIZE) {
		free(h);
		req_reply_error(q, 400, "CommandError", "the command is too long");
		return;
	}
	if (err < 0) {
		free(h);
		req_reply_error(q, 503, "ServiceUnavailable", "cannot reach the sandbox: %s",
				strerror(-err));
		return;
	}
	h->pending = req_park(q);
	if (h->pending)
		pending_on_cancel(h->pending, hx_cancel, h);
}

/* ---- GET /boxes/{name}/commands ---- */

struct cmd_list {
	struct sd_pending *pending;
	json_t *arr;
};

static void cl_frame(void *owner, uint64_t call, const struct proto_frame *f)
{
	struct cmd_list *l = owner;

	struct session_info si;

	if (f && f->hdr.type == PROTO_MSG_DATA) {
		if (session_info_parse(f, &si) < 0)
			return;
		printable(si.id, strlen(si.id), false);
		json_array_append_new(
			l->arr, json_pack("{s:s, s:i, s:b, s:o, s:I, s:I}", "command_id", si.id,
					  "pid", (int)si.pid, "running", si.running, "exit_code",
					  si.exited ? json_integer((int)si.exit_code) : json_null(),
					  "stdout_bytes", (json_int_t)si.stdout_len, "stderr_bytes",
					  (json_int_t)si.stderr_len));
		return;
	}
	if (f && !proto_msg_is_final(f->hdr.type))
		return;
	struct sd_req *q = l->pending ? pending_take(l->pending) : NULL;

	if (q && f && f->hdr.type == PROTO_MSG_END)
		req_reply_json(q, 200, json_pack("{s:O}", "commands", l->arr));
	else if (q)
		req_reply_error(q, 502, "ConnectionError", "the sandbox's agent did not answer");
	json_decref(l->arr);
	free(l);
}

static void cl_cancel(void *arg)
{
	/* the call goes on until its END, which finds the request gone: nothing to do but let
	 * cl_frame free it then */
	struct cmd_list *l = arg;

	l->pending = NULL;
}

static void commands_then(struct sd_req *q, struct box *b)
{
	struct cmd_list *l = calloc(1, sizeof(*l));
	uint64_t call;

	if (!l || !(l->arr = json_array())) {
		free(l);
		req_reply_error(q, 503, "ServiceUnavailable", "out of memory");
		return;
	}
	if (link_call_start(b, PROTO_MSG_SESSION_LIST, NULL, 0, cl_frame, l, &call) < 0) {
		json_decref(l->arr);
		free(l);
		req_reply_error(q, 503, "ServiceUnavailable", "cannot reach the sandbox");
		return;
	}
	l->pending = req_park(q);
	if (l->pending)
		pending_on_cancel(l->pending, cl_cancel, l);
}

void commands_list(struct sd_req *q, struct box *b)
{
	box_wake_then(b, q, commands_then);
}

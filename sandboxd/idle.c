/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The lifecycle policy (docs/api.md, "Lifecycle"): at start, every box of the state directory
 * adopted as its sandbox is now (a create a crash cut short is undone); each tick, a box idle
 * past its idle_ttl_seconds (no request, no WebSocket, no running command) is stopped: its
 * memory suspended to disk, its VMM gone; a box stopped past delete_after_stop_seconds is
 * deleted.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "proto.h"
#include "sandboxd.h"

void box_sandbox_name_of(const char *id, char out[40])
{
	size_t j = 0;

	memcpy(out, "sd-", 3);
	j = 3;
	for (size_t i = 0; id[i] && j < 35; i++)
		if (id[i] != '-')
			out[j++] = id[i];
	out[j] = 0;
}

void box_sandbox_name(const struct box *b, char out[40])
{
	box_sandbox_name_of(b->id, out);
}

/* At start, with no worker busy yet: each box's record against its sandbox. */
void adopt_boxes(void)
{
	struct lc_report r = {0};
	struct box *next;

	pthread_mutex_lock(&lifecycle_lock);
	for (struct box *b = box_first(); b; b = next) {
		struct sandbox sb;
		char name[40];

		next = b->next;
		box_sandbox_name(b, name);
		int err = sandbox_find(b->sandbox[0] ? b->sandbox : name, &sb, &r);

		if (b->status == BOX_PROVISIONING || b->status == BOX_DELETING) {
			/* a create or a delete a crash cut short: nothing of it stays */
			if (err == 0 && sandbox_rm(&sb, true, &r) < 0)
				sd_log("box %s: its sandbox cannot be removed: %s", b->id, r.error);
			sd_log("box %s (%s): %s cut short by a restart, removed", b->id, b->name,
			       b->status == BOX_DELETING ? "a delete" : "a create");
			box_forget(b);
			continue;
		}
		if (err < 0) {
			if (b->status != BOX_FAILED) {
				b->status = BOX_FAILED;
				snprintf(b->status_message, sizeof(b->status_message),
					 "its sandbox is gone from this host");
				box_store(b);
			}
			continue;
		}
		enum sandbox_state st = sandbox_state(&sb, NULL);
		enum box_status want = st == SB_RUNNING || st == SB_PAUSED ? BOX_READY
				       : b->status == BOX_FAILED	   ? BOX_FAILED
									   : BOX_STOPPED;

		if (want != b->status) {
			b->status = want;
			if (want == BOX_STOPPED && !b->stopped_ms)
				b->stopped_ms = sd_now_ms();
			box_store(b);
		}
	}
	pthread_mutex_unlock(&lifecycle_lock);
}

/* ---- idle ---- */

struct idle_check {
	char box_id[SD_ID_LEN + 1];
	bool running;
};

static void idle_frame(void *owner, uint64_t call, const struct proto_frame *f)
{
	struct idle_check *ic = owner;

	struct session_info si;

	if (f && f->hdr.type == PROTO_MSG_DATA) {
		if (session_info_parse(f, &si) == 0 && si.running)
			ic->running = true;
		return;
	}
	if (f && !proto_msg_is_final(f->hdr.type))
		return;
	struct box *b = box_by_id(ic->box_id);

	if (b) {
		b->idle_checking = false;
		if (f && f->hdr.type == PROTO_MSG_END && !ic->running && b->status == BOX_READY &&
		    !b->busy && !b->attached) {
			sd_log("box %s: idle for %llds, stopped", b->id, (long long)b->idle_ttl_s);
			if (box_stop_job(b) < 0)
				sd_log("box %s: cannot stop it: out of memory", b->id);
		} else if (ic->running) {
			b->last_active_ms = sd_now_ms(); /* a command runs: not idle */
		}
	}
	free(ic);
}

void idle_tick(uint64_t now)
{
	for (struct box *b = box_first(); b;) {
		struct box *next = b->next;

		if (b->create_wait && b->create_deadline_ms && now > b->create_deadline_ms) {
			struct sd_req *q = pending_take(b->create_wait);

			b->create_wait = NULL;
			if (q)
				create_timed_out(q, b);
		}

		if (b->status == BOX_STOPPED && !b->busy && b->delete_after_stop_s > 0 &&
		    b->stopped_ms &&
		    now > b->stopped_ms + (uint64_t)b->delete_after_stop_s * 1000) {
			sd_log("box %s: stopped for %llds, deleted", b->id,
			       (long long)b->delete_after_stop_s);
			b->status = BOX_DELETING;
			box_store(b);
			if (box_simple_job(b, J_DELETE, NULL, NULL) < 0)
				b->delete_requested = true;
		} else if (b->status == BOX_READY && !b->busy && !b->attached &&
			   !b->idle_checking && b->idle_ttl_s > 0 &&
			   now > b->last_active_ms + (uint64_t)b->idle_ttl_s * 1000) {
			struct idle_check *ic = calloc(1, sizeof(*ic));
			uint64_t call;

			if (ic) {
				snprintf(ic->box_id, sizeof(ic->box_id), "%s", b->id);
				if (link_call_start(b, PROTO_MSG_SESSION_LIST, NULL, 0, idle_frame,
						    ic, &call) == 0)
					b->idle_checking = true;
				else
					free(ic);
			}
		}
		b = next;
	}
}

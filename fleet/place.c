/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Placement (fleet.h). The API side publishes a create into the pool's work queue, with its
 * box id and an inbox in headers, and waits on the inbox. A host with room fetches one,
 * claims the box with a create-only key in the owners bucket, acknowledges the message and
 * answers the inbox with its id. Every race ends in the owners bucket: a request delivered
 * twice (its host died before acknowledging it) finds its box owned, by that host (it is
 * taken over, by an update conditioned on the revision read, only once that host's liveness
 * lapsed) or by another; a request nobody took in time is cancelled by making its key
 * FLEET_UNSCHEDULABLE, create-only too, so a host that fetches it later drops it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nats/nats.h>

#include "fleet.h"
#include "fleet_int.h"

#define HDR_BOX	  "Sandbox-Box"
#define HDR_REPLY "Sandbox-Reply"
#define INBOX_MAX 128

/* A fleet_place call waiting for a host's answer. */
struct fleet_wait {
	char id[FLEET_ID_MAX + 1];
	char owner[FLEET_ID_MAX + 1]; /* "" until answered */
	pthread_cond_t cond;
	struct fleet_wait *next;
};

/* A host's answer on INBOX.<box id>: its id, to the call waiting for that box. */
static void on_reply(natsConnection *nc, natsSubscription *sub, natsMsg *m, void *arg)
{
	struct fleet *f = arg;
	const char *subj = natsMsg_GetSubject(m), *id;
	size_t plen = strlen(f->inbox);
	int n = natsMsg_GetDataLength(m);

	(void)nc;
	(void)sub;
	if (strncmp(subj, f->inbox, plen) == 0 && subj[plen] == '.' && n > 0 && n <= FLEET_ID_MAX) {
		id = subj + plen + 1;
		pthread_mutex_lock(&f->lock);
		for (struct fleet_wait *w = f->waits; w; w = w->next)
			if (strcmp(w->id, id) == 0 && !w->owner[0]) {
				memcpy(w->owner, natsMsg_GetData(m), (size_t)n);
				w->owner[n] = 0;
				if (!fleet_id_ok(w->owner))
					w->owner[0] = 0;
				pthread_cond_signal(&w->cond);
			}
		pthread_mutex_unlock(&f->lock);
	}
	natsMsg_Destroy(m);
}

int fleet_replies_open(struct fleet *f)
{
	natsInbox *inbox = NULL;
	char subj[80];
	natsStatus s;

	if (pthread_mutex_init(&f->lock, NULL) != 0)
		return -ENOMEM;
	f->lock_made = true;
	s = natsInbox_Create(&inbox);
	if (s != NATS_OK)
		return -ENOMEM;
	snprintf(f->inbox, sizeof(f->inbox), "%s", inbox);
	natsInbox_Destroy(inbox);
	snprintf(subj, sizeof(subj), "%s.*", f->inbox);
	s = natsConnection_Subscribe((natsSubscription **)&f->replies, (natsConnection *)f->nc,
				     subj, on_reply, f);
	/* the subscription reaches every node before a create it answers is published */
	if (s == NATS_OK)
		s = natsConnection_FlushTimeout((natsConnection *)f->nc, 5000);
	return s == NATS_OK ? 0 : -EIO;
}

void fleet_replies_close(struct fleet *f)
{
	if (f->replies)
		natsSubscription_Destroy((natsSubscription *)f->replies);
	f->replies = NULL;
	if (f->lock_made)
		pthread_mutex_destroy(&f->lock);
	f->lock_made = false;
}

static void owner_key(const char *id, char out[FLEET_ID_MAX + 8])
{
	snprintf(out, FLEET_ID_MAX + 8, "box.%s", id);
}

int fleet_owner(struct fleet *f, const char *id, char owner[FLEET_ID_MAX + 1], uint64_t *rev)
{
	char key[FLEET_ID_MAX + 8];
	kvEntry *e = NULL;
	natsStatus s;
	int len;

	if (!fleet_id_ok(id))
		return fleet_fail(f, -EINVAL, "fleet: not a box id");
	owner_key(id, key);
	s = kvStore_Get(&e, (kvStore *)f->owners, key);
	if (s == NATS_NOT_FOUND)
		return -ENOENT;
	if (s != NATS_OK)
		return fleet_fail(f, -EIO, "fleet: owner of %s: %s", id, natsStatus_GetText(s));
	len = kvEntry_ValueLen(e);
	if (len <= 0 || len > FLEET_ID_MAX) {
		kvEntry_Destroy(e);
		return fleet_fail(f, -EBADMSG, "fleet: the owner of %s is not a host id", id);
	}
	memcpy(owner, kvEntry_Value(e), (size_t)len);
	owner[len] = 0;
	if (rev)
		*rev = kvEntry_Revision(e);
	kvEntry_Destroy(e);
	if (!fleet_id_ok(owner))
		return fleet_fail(f, -EBADMSG, "fleet: the owner of %s is not a host id", id);
	return 0;
}

/* Make key create-only with value v: 0, -EEXIST (it has a value), -EIO. */
static int owner_create(struct fleet *f, const char *id, const char *v, uint64_t *rev)
{
	char key[FLEET_ID_MAX + 8];
	natsStatus s;
	uint64_t r = 0;

	owner_key(id, key);
	s = kvStore_Create(&r, (kvStore *)f->owners, key, v, (int)strlen(v));
	if (s == NATS_OK) {
		if (rev)
			*rev = r;
		return 0;
	}
	/* the key exists (the server's "wrong last sequence"), or the call failed: the caller
	 * reads the owner to tell */
	return -EEXIST;
}

/* Wait for w's answer until deadline, asking the owners bucket each second meanwhile (an
 * answer lost with a node on the way): 0 with w->owner, or -ETIMEDOUT. An owner found there
 * counts once it has beaten since it was first seen: a host that claimed and died still
 * looks alive until its entry lapses, and its box is then moved to another. */
static int place_wait(struct fleet *f, struct fleet_wait *w, uint64_t deadline)
{
	uint64_t next_ask = fleet_now_ms() + 1000, seen_rev = 0;
	char seen[FLEET_ID_MAX + 1] = "";
	int ret = -ETIMEDOUT;

	pthread_mutex_lock(&f->lock);
	for (;;) {
		uint64_t now = fleet_now_ms(), until = deadline < next_ask ? deadline : next_ask;
		struct timespec ts;

		if (w->owner[0]) {
			ret = 0;
			break;
		}
		if (now >= deadline)
			break;
		if (now >= next_ask) {
			char owner[FLEET_ID_MAX + 1];

			pthread_mutex_unlock(&f->lock);
			uint64_t rev = 0;
			int err = fleet_owner(f, w->id, owner, NULL);
			bool live = err == 0 && strcmp(owner, FLEET_UNSCHEDULABLE) != 0 &&
				    fleet_alive_rev(f, owner, &rev) == 1;

			if (live && (strcmp(seen, owner) != 0 || rev == seen_rev)) {
				snprintf(seen, sizeof(seen), "%s", owner);
				seen_rev = rev;
				live = false; /* not beaten since: asked again */
			}
			pthread_mutex_lock(&f->lock);
			if (live && !w->owner[0])
				memcpy(w->owner, owner, sizeof(owner));
			next_ask = fleet_now_ms() + 1000;
			continue;
		}
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t wait_ms = until - now;

		ts.tv_sec += (time_t)(wait_ms / 1000);
		ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&w->cond, &f->lock, &ts);
	}
	pthread_mutex_unlock(&f->lock);
	return ret;
}

int fleet_place(struct fleet *f, const char *id, const void *req, size_t len, int timeout_ms,
		char owner[FLEET_ID_MAX + 1])
{
	char key[FLEET_ID_MAX + 8], reply[sizeof(f->inbox) + FLEET_ID_MAX + 2];
	struct fleet_wait w = {0}, **pp;
	pthread_condattr_t ca;
	natsMsg *m = NULL;
	jsPubAck *pa = NULL;
	jsErrCode jerr = 0;
	natsStatus s;
	uint64_t deadline = fleet_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
	int err;

	if (!fleet_id_ok(id))
		return fleet_fail(f, -EINVAL, "fleet: not a box id");
	if (len > FLEET_REQ_MAX)
		return fleet_fail(f, -E2BIG, "fleet: a request of %zu bytes (at most %u)", len,
				  FLEET_REQ_MAX);
	err = fleet_owner(f, id, owner, NULL);
	if (err == 0 && strcmp(owner, FLEET_UNSCHEDULABLE) != 0)
		return 0; /* placed already: a retried create */
	if (err == 0) {	  /* cancelled before: asked again */
		owner_key(id, key);
		kvStore_Delete((kvStore *)f->owners, key);
	} else if (err != -ENOENT) {
		return err;
	}
	snprintf(w.id, sizeof(w.id), "%s", id);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w.cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_lock(&f->lock);
	w.next = f->waits;
	f->waits = &w;
	pthread_mutex_unlock(&f->lock);
	snprintf(reply, sizeof(reply), "%s.%s", f->inbox, id);
	s = natsMsg_Create(&m, f->subject, NULL, req, (int)len);
	if (s == NATS_OK)
		s = natsMsgHeader_Set(m, HDR_BOX, id);
	if (s == NATS_OK)
		s = natsMsgHeader_Set(m, HDR_REPLY, reply);
	/* no responders: the stream's leader is being elected (a node lost, a new cluster):
	 * asked again for up to 2 s */
	for (int i = 0; s == NATS_OK || (s == NATS_NO_RESPONDERS && i < 40); i++) {
		if (i)
			nats_Sleep(50);
		jsPubAck_Destroy(pa);
		pa = NULL;
		s = js_PublishMsg(&pa, (jsCtx *)f->js, m, NULL, &jerr);
		if (s != NATS_NO_RESPONDERS)
			break;
	}
	jsPubAck_Destroy(pa);
	natsMsg_Destroy(m);
	if (s != NATS_OK)
		err = fleet_fail(f, -EIO, "fleet: placing %s: %s (error %d)", id,
				 natsStatus_GetText(s), (int)jerr);
	else
		err = place_wait(f, &w, deadline);
	pthread_mutex_lock(&f->lock);
	for (pp = &f->waits; *pp; pp = &(*pp)->next)
		if (*pp == &w) {
			*pp = w.next;
			break;
		}
	pthread_mutex_unlock(&f->lock);
	pthread_cond_destroy(&w.cond);
	if (err == 0) {
		memcpy(owner, w.owner, FLEET_ID_MAX + 1);
		return 0;
	}
	if (err != -ETIMEDOUT)
		return err;
	/* nobody answered in time: cancel, unless a host claimed it meanwhile */
	if (owner_create(f, id, FLEET_UNSCHEDULABLE, NULL) == 0)
		return fleet_fail(f, -EAGAIN, "fleet: no host had room for %s within %d ms", id,
				  timeout_ms);
	err = fleet_owner(f, id, owner, NULL);
	if (err == 0 && strcmp(owner, FLEET_UNSCHEDULABLE) == 0)
		err = fleet_fail(f, -EAGAIN, "fleet: no host had room for %s", id);
	return err;
}

/*
 * Claim box id for this host: 1 (ours now; *moved if taken over), 0 (not to be made: it was
 * cancelled), 2 (ask again after *retry_ms), -errno. Only the create and the update decide;
 * a read of the owner may lag (a follower answers it), so what a read says is acted on only
 * by asking again later, never by dropping the request.
 */
static int claim(struct fleet *f, const char *id, bool *moved, int64_t *retry_ms)
{
	char owner[FLEET_ID_MAX + 1], key[FLEET_ID_MAX + 8];
	uint64_t rev = 0, nrev = 0;
	int alive, err;

	*moved = false;
	*retry_ms = 200;
	if (owner_create(f, id, f->conf.host, NULL) == 0)
		return 1;
	err = fleet_owner(f, id, owner, &rev);
	if (err == -ENOENT) /* a read behind the create that failed, or a delete: again */
		return 2;
	if (err < 0)
		return err;
	if (strcmp(owner, f->conf.host) == 0)
		return 1; /* ours: we claimed it and did not get to acknowledge it */
	if (strcmp(owner, FLEET_UNSCHEDULABLE) == 0)
		return 0;
	alive = fleet_alive(f, owner);
	if (alive < 0)
		return alive;
	if (alive) { /* its host has not acknowledged it yet: it does, or it lapses */
		*retry_ms = f->conf.liveness_ttl_ms;
		return 2;
	}
	/* its host claimed it and died before acknowledging it: moved, on this revision only */
	owner_key(id, key);
	if (kvStore_Update(&nrev, (kvStore *)f->owners, key, f->conf.host,
			   (int)strlen(f->conf.host), rev) != NATS_OK)
		return 2; /* another host moved it first (then its ack ends this), or a stale read
			   */
	*moved = true;
	return 1;
}

int fleet_take(struct fleet *f, int wait_ms, struct fleet_req *r)
{
	natsMsgList list = {0};
	jsErrCode jerr = 0;
	natsStatus s;
	const char *id = NULL, *reply = NULL;
	int ret = 0;

	memset(r, 0, sizeof(*r));
	if (!f->pull)
		return fleet_fail(f, -EINVAL, "fleet: not a host");
	s = natsSubscription_Fetch(&list, (natsSubscription *)f->pull, 1, wait_ms, &jerr);
	if (s == NATS_TIMEOUT || (s == NATS_OK && list.Count == 0)) {
		natsMsgList_Destroy(&list);
		return 0;
	}
	if (s != NATS_OK)
		return fleet_fail(f, -EIO, "fleet: fetch: %s (error %d)", natsStatus_GetText(s),
				  (int)jerr);
	for (int i = 0; i < list.Count; i++) {
		natsMsg *m = list.Msgs[i];
		int n = natsMsg_GetDataLength(m), c;
		int64_t retry_ms = 0;
		bool moved = false;

		if (ret != 0 || natsMsgHeader_Get(m, HDR_BOX, &id) != NATS_OK || !fleet_id_ok(id) ||
		    n < 0 || (size_t)n > FLEET_REQ_MAX) {
			/* not a request of ours: dropped for good (it would come back forever) */
			if (ret == 0)
				natsMsg_Term(m, NULL);
			continue;
		}
		c = claim(f, id, &moved, &retry_ms);
		if (c < 0) { /* the bucket did not answer: the message comes again */
			ret = fleet_fail(f, c, "fleet: claiming %s: %s", id, f->err);
			natsMsg_Nak(m, NULL);
			continue;
		}
		if (c == 2) {
			natsMsg_NakWithDelay(m, retry_ms, NULL);
			continue;
		}
		natsMsg_Ack(m, NULL);
		if (c == 0)
			continue;
		if (natsMsgHeader_Get(m, HDR_REPLY, &reply) == NATS_OK &&
		    strncmp(reply, "_INBOX.", 7) == 0 && strlen(reply) < INBOX_MAX)
			natsConnection_Publish((natsConnection *)f->nc, reply, f->conf.host,
					       (int)strlen(f->conf.host));
		snprintf(r->id, sizeof(r->id), "%s", id);
		r->moved = moved;
		r->len = (size_t)n;
		r->data = malloc(r->len ? r->len : 1);
		if (!r->data) {
			ret = fleet_fail(f, -ENOMEM, "fleet: out of memory");
			continue;
		}
		memcpy(r->data, natsMsg_GetData(m), r->len);
		ret = 1;
	}
	natsMsgList_Destroy(&list);
	return ret;
}

void fleet_shed(struct fleet *f)
{
	natsMsgList list = {0};
	jsErrCode jerr = 0;
	int pending = 0, bytes = 0;

	if (!f->pull ||
	    natsSubscription_GetPending((natsSubscription *)f->pull, &pending, &bytes) != NATS_OK ||
	    pending <= 0)
		return;
	/* a batch of what is queued here: taken from the queue, no pull request sent (unless
	 * some of the queue is a status message: what such a request brings goes back too) */
	if (natsSubscription_Fetch(&list, (natsSubscription *)f->pull, pending, 10, &jerr) !=
	    NATS_OK)
		return;
	for (int i = 0; i < list.Count; i++)
		natsMsg_Nak(list.Msgs[i], NULL);
	natsMsgList_Destroy(&list);
}

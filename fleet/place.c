/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Placement (fleet.h). The API side publishes a create (its box id as the message id, so a
 * publish repeated within the stream's window is one message) with the box id and an inbox
 * in headers, and waits on the inbox. A host with room fetches one, and claims the box in the
 * owners bucket with the value "HOST:SEQ", SEQ the create's stream sequence, made
 * create-only. The sequence ties an owner to one message: another message for the same box
 * (a duplicate) is terminated, never run; a redelivery of the same message finds either this
 * host (its claim, not yet acknowledged), a live host (asked again later) or a host whose
 * liveness lapsed (moved to this one by an update conditioned on the revision read). After
 * its ack the host confirms the claim by an update on its own revision: if the box was moved
 * meanwhile (a stall longer than the ack wait and the liveness period) that fails and the
 * host does not run it. A create nobody took in time is cancelled by "unschedulable:SEQ",
 * create-only too. Reads go to the bucket's leader (fleet_nats.c), so a read is never older
 * than a write that succeeded.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nats/nats.h>

#include "fleet.h"
#include "fleet_int.h"

#define HDR_BOX		 "Sandbox-Box"
#define HDR_REPLY	 "Sandbox-Reply"
#define HDR_WAKE	 "Sandbox-Wake" /* a wake's release: the SEQ of "released:SEQ" */
#define INBOX_MAX	 128
#define OWNER_VAL_MAX	 (FLEET_ID_MAX + 22) /* HOST:SEQ */
#define PUBLISH_RETRY_MS FLEET_RETRY_MS	     /* a publish answered "no responders" */

/* A fleet_place call waiting for a host's answer. */
struct fleet_wait {
	char id[FLEET_ID_MAX + 1];
	char owner[FLEET_ID_MAX + 1];	   /* the answer's host, "" until one came */
	uint64_t answer_seq;		   /* the answer's sequence */
	uint64_t seq;			   /* this call's message (0 until published) */
	uint64_t near_seq[FLEET_NEAR_MAX]; /* its messages to hosts' own queues (0: none) */
	pthread_cond_t cond;
	struct fleet_wait *next;
};

static void say(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!err || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

/* A sequence (decimal, 1 to UINT64_MAX) of n bytes: 0, or -EBADMSG. */
static int owner_parse_seq(const char *v, size_t n, uint64_t *seq)
{
	uint64_t q = 0;

	if (n == 0 || n > 20)
		return -EBADMSG;
	for (const char *p = v; p < v + n; p++) {
		if (*p < '0' || *p > '9' || q > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -EBADMSG;
		q = q * 10 + (uint64_t)(*p - '0');
	}
	if (q == 0)
		return -EBADMSG;
	*seq = q;
	return 0;
}

/* "HOST:SEQ" of n bytes into host and *seq: 0, or -EBADMSG. */
static int owner_parse(const char *v, size_t n, char host[FLEET_ID_MAX + 1], uint64_t *seq)
{
	const char *colon = memchr(v, ':', n);

	if (!colon || colon == v || (size_t)(colon - v) > FLEET_ID_MAX ||
	    owner_parse_seq(colon + 1, (size_t)(v + n - (colon + 1)), seq) < 0)
		return -EBADMSG;
	memcpy(host, v, (size_t)(colon - v));
	host[colon - v] = 0;
	return fleet_id_ok(host) ? 0 : -EBADMSG;
}

/* Whether s is a subject of [A-Za-z0-9_-] tokens joined by '.', as our inboxes are. */
static bool subject_ok(const char *s)
{
	size_t n = strnlen(s, INBOX_MAX);

	if (n == 0 || n >= INBOX_MAX || s[0] == '.' || s[n - 1] == '.')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-' ||
		      (s[i] == '.' && s[i + 1] != '.')))
			return false;
	return true;
}

/* A host's answer on INBOX.<box id>: "HOST:SEQ", to the calls waiting for that box. */
static void on_reply(natsConnection *nc, natsSubscription *sub, natsMsg *m, void *arg)
{
	struct fleet *f = arg;
	const char *subj = natsMsg_GetSubject(m), *id;
	size_t plen = strlen(f->inbox);
	int n = natsMsg_GetDataLength(m);
	char host[FLEET_ID_MAX + 1];
	uint64_t seq = 0;

	(void)nc;
	(void)sub;
	if (strncmp(subj, f->inbox, plen) == 0 && subj[plen] == '.' && n > 0 &&
	    n <= OWNER_VAL_MAX && owner_parse(natsMsg_GetData(m), (size_t)n, host, &seq) == 0) {
		id = subj + plen + 1;
		pthread_mutex_lock(&f->lock);
		for (struct fleet_wait *w = f->waits; w; w = w->next)
			if (strcmp(w->id, id) == 0 && !w->owner[0]) {
				memcpy(w->owner, host, sizeof(host));
				w->answer_seq = seq;
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
	if (f->replies) {
		/* no callback runs on after this (it takes f->lock) */
		if (natsSubscription_Drain((natsSubscription *)f->replies) == NATS_OK)
			natsSubscription_WaitForDrainCompletion((natsSubscription *)f->replies,
								2000);
		natsSubscription_Destroy((natsSubscription *)f->replies);
	}
	f->replies = NULL;
	if (f->lock_made)
		pthread_mutex_destroy(&f->lock);
	f->lock_made = false;
}

static void owner_key(const char *id, char out[FLEET_ID_MAX + 8])
{
	snprintf(out, FLEET_ID_MAX + 8, "box.%s", id);
}

/* The owner of id from the bucket's leader: host, *seq, *rev. 0, -ENOENT, -EBADMSG, -EIO. */
static int owner_read(struct fleet *f, const char *id, char host[FLEET_ID_MAX + 1], uint64_t *seq,
		      uint64_t *rev)
{
	char key[FLEET_ID_MAX + 8];
	kvEntry *e = NULL;
	natsStatus s;
	int len, err;

	owner_key(id, key);
	/* no answer (no responders, a timeout: the bucket's leader is being elected, a new
	 * bucket, a node lost): asked again, 50 ms apart, for up to FLEET_RETRY_MS */
	for (uint64_t until = fleet_now_ms() + FLEET_RETRY_MS;;) {
		s = kvStore_Get(&e, (kvStore *)f->owners, key);
		if (s == NATS_OK || s == NATS_NOT_FOUND || fleet_now_ms() >= until)
			break;
		nats_Sleep(50);
	}
	if (s == NATS_NOT_FOUND)
		return -ENOENT;
	if (s != NATS_OK)
		return -EIO;
	len = kvEntry_ValueLen(e);
	err = len > 0 && len <= OWNER_VAL_MAX
		      ? owner_parse(kvEntry_ValueString(e), (size_t)len, host, seq)
		      : -EBADMSG;
	if (rev)
		*rev = kvEntry_Revision(e);
	kvEntry_Destroy(e);
	return err;
}

int fleet_owner(struct fleet *f, const char *id, char owner[FLEET_ID_MAX + 1], uint64_t *rev)
{
	uint64_t seq;
	int err;

	if (!fleet_id_ok(id))
		return fleet_fail(f, -EINVAL, "fleet: not a box id");
	err = owner_read(f, id, owner, &seq, rev);
	if (err == -EIO)
		return fleet_fail(f, -EIO, "fleet: the owner of %s: the bucket did not answer", id);
	if (err == -EBADMSG)
		return fleet_fail(f, -EBADMSG, "fleet: the owner of %s is not HOST:SEQ", id);
	return err;
}

/* Make the key create-only with host:seq: 0 (*rev), -EEXIST (it holds a value), -EIO. */
static int owner_create(struct fleet *f, const char *id, const char *host, uint64_t seq,
			uint64_t *rev)
{
	char key[FLEET_ID_MAX + 8], val[OWNER_VAL_MAX + 1], h[FLEET_ID_MAX + 1];
	uint64_t r = 0, q;

	owner_key(id, key);
	snprintf(val, sizeof(val), "%s:%" PRIu64, host, seq);
	if (kvStore_Create(&r, (kvStore *)f->owners, key, val, (int)strlen(val)) == NATS_OK) {
		if (rev)
			*rev = r;
		return 0;
	}
	/* "wrong last sequence" (it exists), or the call failed: the leader's read tells */
	return owner_read(f, id, h, &q, NULL) == -ENOENT ? -EIO : -EEXIST;
}

/* Update the key to host:seq if its revision is still rev: 0 (*nrev), -ESTALE (it moved on),
 * -EIO (no answer: unknown). */
static int owner_update(struct fleet *f, const char *id, const char *host, uint64_t seq,
			uint64_t rev, uint64_t *nrev)
{
	char key[FLEET_ID_MAX + 8], val[OWNER_VAL_MAX + 1], h[FLEET_ID_MAX + 1];
	uint64_t q, now = 0;

	owner_key(id, key);
	snprintf(val, sizeof(val), "%s:%" PRIu64, host, seq);
	if (kvStore_Update(nrev, (kvStore *)f->owners, key, val, (int)strlen(val), rev) == NATS_OK)
		return 0;
	if (owner_read(f, id, h, &q, &now) != 0)
		return -EIO;
	return now != rev ? -ESTALE : -EIO;
}

/* Whether w's answer names one of its messages. */
static bool answer_ours(const struct fleet_wait *w)
{
	if (w->seq && w->answer_seq == w->seq)
		return true;
	for (int i = 0; i < FLEET_NEAR_MAX; i++)
		if (w->near_seq[i] && w->answer_seq == w->near_seq[i])
			return true;
	return false;
}

/* Wait for w's answer until deadline, asking the owners bucket each second meanwhile (an
 * answer lost with a node on the way): 0 with w->owner, or -ETIMEDOUT. An answer counts when
 * it names this call's message; an owner read from the bucket (any message's: a duplicate
 * publish is placed by its first) once it has beaten since it was first seen, as a host that
 * claimed and died still looks alive until its entry lapses. */
static int place_wait(struct fleet *f, struct fleet_wait *w, uint64_t deadline)
{
	uint64_t next_ask = fleet_now_ms() + 1000, seen_rev = 0;
	char seen[FLEET_ID_MAX + 1] = "";
	int ret = -ETIMEDOUT;

	pthread_mutex_lock(&f->lock);
	for (;;) {
		uint64_t now = fleet_now_ms(), until = deadline < next_ask ? deadline : next_ask;
		struct timespec ts;

		if (w->owner[0] && answer_ours(w)) {
			ret = 0;
			break;
		}
		w->owner[0] = 0; /* an answer for another message: not ours */
		if (now >= deadline)
			break;
		if (now >= next_ask) {
			char owner[FLEET_ID_MAX + 1];
			uint64_t rev = 0, seq = 0;

			pthread_mutex_unlock(&f->lock);
			bool live = owner_read(f, w->id, owner, &seq, NULL) == 0 &&
				    strcmp(owner, FLEET_UNSCHEDULABLE) != 0 &&
				    fleet_alive_rev(f, owner, &rev) == 1;

			if (live && (strcmp(seen, owner) != 0 || rev == seen_rev)) {
				snprintf(seen, sizeof(seen), "%s", owner);
				seen_rev = rev;
				live = false; /* not beaten since: asked again */
			}
			pthread_mutex_lock(&f->lock);
			if (live) {
				memcpy(w->owner, owner, sizeof(owner));
				w->answer_seq = w->seq		 ? w->seq
						: w->near_seq[0] ? w->near_seq[0]
								 : w->near_seq[1];
			}
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

/* Publish the create for w on subject with message id msg_id (a wake's: the id and its
 * release, so that hosts waking it at once publish one message): its sequence in *seq. */
static int place_publish(struct fleet *f, struct fleet_wait *w, const char *subject,
			 const char *msg_id, const void *req, size_t len, uint64_t wake,
			 uint64_t deadline, uint64_t *seq, char *err, size_t err_len)
{
	char wake_text[24];
	char reply[sizeof(f->inbox) + FLEET_ID_MAX + 2];
	natsMsg *m = NULL;
	jsPubAck *pa = NULL;
	jsPubOptions po;
	jsErrCode jerr = 0;
	natsStatus s;

	snprintf(reply, sizeof(reply), "%s.%s", f->inbox, w->id);
	snprintf(wake_text, sizeof(wake_text), "%" PRIu64, wake);
	jsPubOptions_Init(&po);
	po.MsgId = msg_id;
	s = natsMsg_Create(&m, subject, NULL, req, (int)len);
	if (s == NATS_OK)
		s = natsMsgHeader_Set(m, HDR_BOX, w->id);
	if (s == NATS_OK)
		s = natsMsgHeader_Set(m, HDR_REPLY, reply);
	if (s == NATS_OK && wake)
		s = natsMsgHeader_Set(m, HDR_WAKE, wake_text);
	/* no responders: the stream's leader is being elected (a node lost, a new cluster:
	 * seconds, more on a loaded machine): asked again until the caller's deadline, for up to
	 * PUBLISH_RETRY_MS */
	uint64_t until = fleet_now_ms() + PUBLISH_RETRY_MS;

	if (deadline && deadline < until)
		until = deadline;
	for (int i = 0; s == NATS_OK || (s == NATS_NO_RESPONDERS && fleet_now_ms() < until); i++) {
		if (i)
			nats_Sleep(100);
		jsPubAck_Destroy(pa);
		pa = NULL;
		s = js_PublishMsg(&pa, (jsCtx *)f->js, m, &po, &jerr);
		if (s != NATS_NO_RESPONDERS)
			break;
	}
	natsMsg_Destroy(m);
	if (s == NATS_OK) {
		pthread_mutex_lock(&f->lock);
		*seq = pa->Sequence; /* a duplicate's: the first publish's */
		pthread_mutex_unlock(&f->lock);
	}
	jsPubAck_Destroy(pa);
	if (s != NATS_OK) {
		say(err, err_len, "fleet: placing %s: %s (JetStream error %d)", w->id,
		    natsStatus_GetText(s), (int)jerr);
		return -EIO;
	}
	return 0;
}

/* No host answered in time: cancel w's create, unless a host claimed it meanwhile (then it is
 * the answer). Asked until the bucket answers, for up to 5 s more. (w->seq: any of its
 * messages' sequences, as any names the create.) */
static int place_cancel(struct fleet *f, struct fleet_wait *w, int timeout_ms,
			char owner[FLEET_ID_MAX + 1], char *err, size_t err_len)
{
	uint64_t until = fleet_now_ms() + 5000, seq = 0;

	for (;;) {
		int c = owner_create(f, w->id, FLEET_UNSCHEDULABLE, w->seq, NULL);

		if (c == 0) {
			say(err, err_len, "fleet: no host had room for %s within %d ms", w->id,
			    timeout_ms);
			return -EAGAIN;
		}
		if (c == -EEXIST && owner_read(f, w->id, owner, &seq, NULL) == 0) {
			if (strcmp(owner, FLEET_UNSCHEDULABLE) != 0)
				return 0; /* claimed meanwhile, by this message or a duplicate's */
			say(err, err_len, "fleet: no host had room for %s", w->id);
			return -EAGAIN;
		}
		if (fleet_now_ms() >= until) {
			say(err, err_len,
			    "fleet: %s: the owners bucket does not answer: the create may still be "
			    "placed",
			    w->id);
			return -EIO;
		}
		nats_Sleep(100);
	}
}

/* w listed as waiting for an answer about box id. */
static void place_listen(struct fleet *f, struct fleet_wait *w, const char *id)
{
	pthread_condattr_t ca;

	snprintf(w->id, sizeof(w->id), "%s", id);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_lock(&f->lock);
	w->next = f->waits;
	f->waits = w;
	pthread_mutex_unlock(&f->lock);
}

/* w unlisted: its answer's host in owner when ret is 0. */
static int place_unlisten(struct fleet *f, struct fleet_wait *w, int ret,
			  char owner[FLEET_ID_MAX + 1])
{
	pthread_mutex_lock(&f->lock);
	for (struct fleet_wait **pp = &f->waits; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	pthread_mutex_unlock(&f->lock);
	pthread_cond_destroy(&w->cond);
	if (ret == 0)
		memcpy(owner, w->owner, FLEET_ID_MAX + 1);
	return ret;
}

/* The create of w to the hosts of near, each on its own queue, and its answer waited for
 * until their wait (or deadline): 0 with w->owner, -ETIMEDOUT (none took it: on to the
 * pool), or none sent (-ENOENT). */
static int place_near(struct fleet *f, struct fleet_wait *w, const void *req, size_t len,
		      const struct fleet_near *near, uint64_t deadline)
{
	int sent = 0;

	for (int i = 0; near && i < near->n && i < FLEET_NEAR_MAX; i++) {
		char subject[sizeof(f->near_subject) + FLEET_ID_MAX + 2];
		char msg_id[2 * FLEET_ID_MAX + 8];

		if (!near->hosts[i] || !fleet_id_ok(near->hosts[i]))
			continue;
		snprintf(subject, sizeof(subject), "%s.%s", f->near_subject, near->hosts[i]);
		snprintf(msg_id, sizeof(msg_id), "%s.n.%s", w->id, near->hosts[i]);
		/* (one not sent: the pool's is next anyway) */
		if (place_publish(f, w, subject, msg_id, req, len, 0, deadline, &w->near_seq[i],
				  NULL, 0) != 0)
			continue;
		sent++;
		fleet_poke_subject(f, near->hosts[i], subject, sizeof(subject));
		natsConnection_Publish((natsConnection *)f->nc, subject, NULL, 0);
	}
	if (!sent)
		return -ENOENT;
	uint64_t until = fleet_now_ms() + (uint64_t)(near->wait_ms > 0 ? near->wait_ms : 0);

	return place_wait(f, w, until < deadline ? until : deadline);
}

/* The near messages of w that did not place it deleted from the stream once the bucket says
 * which did (none of them: a cancel), so that a full host's queue does not keep them for an
 * hour. Not knowing, none: a message being claimed whose ack then failed would not come
 * again. One of them being fetched meanwhile finds the box another message's, as before. */
static void place_near_drop(struct fleet *f, const struct fleet_wait *w)
{
	char owner[FLEET_ID_MAX + 1];
	uint64_t seq = 0;
	jsErrCode jerr = 0;

	if (!w->near_seq[0] && !w->near_seq[1])
		return;
	if (owner_read(f, w->id, owner, &seq, NULL) != 0)
		return;
	if (strcmp(owner, FLEET_UNSCHEDULABLE) == 0)
		seq = 0;
	for (int i = 0; i < FLEET_NEAR_MAX; i++)
		if (w->near_seq[i] && w->near_seq[i] != seq)
			(void)js_DeleteMsg((jsCtx *)f->js, f->stream, w->near_seq[i], NULL, &jerr);
}

int fleet_place(struct fleet *f, const char *id, const void *req, size_t len,
		const struct fleet_near *near, int timeout_ms, char owner[FLEET_ID_MAX + 1],
		char *err, size_t err_len)
{
	struct fleet_wait w = {0};
	uint64_t deadline = fleet_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0), seq;
	int ret;

	owner[0] = 0;
	if (!fleet_id_ok(id)) {
		say(err, err_len, "fleet: not a box id");
		return -EINVAL;
	}
	if (len > FLEET_REQ_MAX) {
		say(err, err_len, "fleet: a request of %zu bytes (at most %u)", len, FLEET_REQ_MAX);
		return -E2BIG;
	}
	ret = owner_read(f, id, owner, &seq, NULL);
	if (ret == 0 && strcmp(owner, FLEET_UNSCHEDULABLE) == 0) {
		say(err, err_len, "fleet: %s was cancelled: no host had room", id);
		return -EAGAIN; /* a new create has a new id */
	}
	if (ret == 0)
		return 0; /* placed already: a repeated create */
	if (ret != -ENOENT) {
		say(err, err_len,
		    "fleet: the owner of %s cannot be read (the owners bucket does "
		    "not answer)",
		    id);
		return ret;
	}
	place_listen(f, &w, id);
	ret = place_near(f, &w, req, len, near, deadline);
	if (ret != 0) {
		ret = place_publish(f, &w, f->subject, id, req, len, 0, deadline, &w.seq, err,
				    err_len);
		if (ret == 0)
			ret = place_wait(f, &w, deadline);
		else if (w.near_seq[0] || w.near_seq[1])
			ret = -ETIMEDOUT; /* its near messages are out: cancelled, or claimed */
	}
	ret = place_unlisten(f, &w, ret, owner);
	if (ret == -ETIMEDOUT) {
		if (!w.seq)
			w.seq = w.near_seq[0] ? w.near_seq[0] : w.near_seq[1];
		ret = place_cancel(f, &w, timeout_ms, owner, err, err_len);
	}
	if (ret == 0 || ret == -EAGAIN)
		place_near_drop(f, &w);
	return ret;
}

/* Box id's owner from `host` to "released:SEQ" (*release = SEQ), on the revision read. */
static int release_of(struct fleet *f, const char *id, const char *host, uint64_t *release)
{
	char owner[FLEET_ID_MAX + 1];
	uint64_t seq = 0, rev = 0, nrev = 0;
	int err;

	if (!fleet_id_ok(id))
		return fleet_fail(f, -EINVAL, "fleet: not a box id");
	err = owner_read(f, id, owner, &seq, &rev);
	if (err == 0 && strcmp(owner, host) != 0)
		return fleet_fail(f, -EPERM, "fleet: %s is %s's, not %s's", id, owner, host);
	if (err < 0)
		return fleet_fail(f, err, "fleet: the owner of %s cannot be read", id);
	err = owner_update(f, id, FLEET_RELEASED, seq, rev, &nrev);
	if (err < 0)
		return fleet_fail(f, err, "fleet: %s cannot be released (%s)", id,
				  err == -ESTALE ? "another host took it" : "no answer");
	*release = seq;
	return 0;
}

int fleet_release(struct fleet *f, const char *id, uint64_t *release)
{
	return release_of(f, id, f->conf.host, release);
}

int fleet_release_lost(struct fleet *f, const char *id, const char *host)
{
	uint64_t release;

	return release_of(f, id, host, &release);
}

int fleet_own_released(struct fleet *f, const char *id)
{
	int err;

	if (!fleet_id_ok(id))
		return fleet_fail(f, -EINVAL, "fleet: not a box id");
	/* (as a release's "released:SEQ": SEQ names the wake's message, never 0) */
	err = owner_create(f, id, FLEET_RELEASED, 1, NULL);
	if (err < 0)
		return fleet_fail(f, err, "fleet: %s cannot be recorded (%s)", id,
				  err == -EEXIST ? "it has an owner" : "no answer");
	return 0;
}

int fleet_retire(struct fleet *f, const char *id, const char *host)
{
	char owner[FLEET_ID_MAX + 1];
	uint64_t seq = 0, rev = 0, nrev = 0;
	int err;

	if (!fleet_id_ok(id))
		return fleet_fail(f, -EINVAL, "fleet: not a box id");
	err = owner_read(f, id, owner, &seq, &rev);
	if (err == -ENOENT || (err == 0 && strcmp(owner, FLEET_UNSCHEDULABLE) == 0))
		return fleet_fail(f, -ENOENT, "fleet: %s is retired, or no one's", id);
	if (err == 0 && strcmp(owner, host) != 0)
		return fleet_fail(f, -ESTALE, "fleet: %s is %s's now, not %s's", id, owner, host);
	if (err < 0)
		return fleet_fail(f, -EIO, "fleet: the owner of %s cannot be read", id);
	err = owner_update(f, id, FLEET_UNSCHEDULABLE, seq, rev, &nrev);
	if (err < 0)
		return fleet_fail(f, err, "fleet: %s cannot be retired (%s)", id,
				  err == -ESTALE ? "it moved meanwhile" : "no answer");
	return 0;
}

int fleet_wake(struct fleet *f, const char *id, const void *req, size_t len, int timeout_ms,
	       char owner[FLEET_ID_MAX + 1], char *err, size_t err_len)
{
	struct fleet_wait w = {0};
	uint64_t deadline = fleet_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0), seq = 0;
	int ret;

	owner[0] = 0;
	if (!fleet_id_ok(id) || len > FLEET_REQ_MAX) {
		say(err, err_len, "fleet: not a box id, or a request over %u bytes", FLEET_REQ_MAX);
		return -EINVAL;
	}
	ret = owner_read(f, id, owner, &seq, NULL);
	if (ret == 0 && strcmp(owner, FLEET_RELEASED) != 0) {
		if (strcmp(owner, FLEET_UNSCHEDULABLE) == 0) {
			say(err, err_len, "fleet: %s was never placed", id);
			return -ENOENT;
		}
		return 0; /* awake already (another wake won): its host */
	}
	owner[0] = 0;
	if (ret < 0) {
		say(err, err_len, "fleet: the owner of %s cannot be read", id);
		return ret;
	}
	char msg_id[FLEET_ID_MAX + 24];

	snprintf(msg_id, sizeof(msg_id), "%s.w%" PRIu64, id, seq);
	place_listen(f, &w, id);
	ret = place_publish(f, &w, f->subject, msg_id, req, len, seq, deadline, &w.seq, err,
			    err_len);
	if (ret == 0)
		ret = place_wait(f, &w, deadline);
	ret = place_unlisten(f, &w, ret, owner);
	if (ret == -ETIMEDOUT) { /* its message stays queued: a host with room wakes it later */
		say(err, err_len, "fleet: no host had room to wake %s within %d ms", id,
		    timeout_ms);
		return -EAGAIN;
	}
	return ret;
}

/*
 * Claim box id, from the message of stream sequence seq, for this host: 1 (ours now, the
 * owner's revision in *rev; *moved if taken over, *again if this host had claimed it), 0 (not to be
 * run: a duplicate of another message, or cancelled), 2 (ask again after *retry_ms), -errno.
 */
static int claim(struct fleet *f, const char *id, uint64_t seq, uint64_t wake, bool *moved,
		 bool *again, uint64_t *rev, int64_t *retry_ms)
{
	char owner[FLEET_ID_MAX + 1];
	uint64_t oseq = 0, orev = 0;
	int alive, err;

	*moved = *again = false;
	*retry_ms = 200;
	err = owner_create(f, id, f->conf.host, seq, rev);
	if (err == 0)
		return 1;
	if (err == -EIO)
		return 2;
	err = owner_read(f, id, owner, &oseq, &orev);
	if (err == -ENOENT || err == -EIO)
		return 2;
	if (err < 0)
		return err;
	if (wake && strcmp(owner, FLEET_RELEASED) == 0 && oseq == wake) {
		/* released in the store: this message wakes it here, on this revision only (two
		 * wakes of one release are one message; a wake of an older release fails here) */
		if (owner_update(f, id, f->conf.host, seq, orev, rev) != 0)
			return 2;
		return 1;
	}
	if (oseq != seq)
		return 0; /* the box is another message's: this one is a duplicate */
	/* cancelled; or released into the store since this message placed it (a copy of it
	 * delivered again after its host's ack was late): only a wake of that release may take
	 * it, never this message as if its host had died before running it ("released" is no
	 * host's name: it would look dead, and the box would run again from its create) */
	if (strcmp(owner, FLEET_UNSCHEDULABLE) == 0 || strcmp(owner, FLEET_RELEASED) == 0)
		return 0;
	if (strcmp(owner, f->conf.host) == 0) {
		*rev = orev;
		*again = true;
		return 1; /* ours: claimed, its ack lost or not made */
	}
	alive = fleet_alive(f, owner);
	if (alive < 0)
		return 2;
	if (alive) { /* its host has not acknowledged it yet: it does, or it lapses */
		*retry_ms = f->conf.liveness_ttl_ms;
		return 2;
	}
	/* its host claimed it and died before acknowledging it: moved, on this revision only */
	if (owner_update(f, id, f->conf.host, seq, orev, rev) != 0)
		return 2; /* another host moved it first (its ack then ends this message) */
	*moved = true;
	return 1;
}

/* Whether reply is our API side's inbox for box id: _INBOX.<token>.<id>. */
static bool reply_ok(const char *reply, const char *id)
{
	size_t n = strlen(reply), l = strlen(id);

	return strncmp(reply, "_INBOX.", 7) == 0 && subject_ok(reply) && n > 8 + l &&
	       reply[n - l - 1] == '.' && strcmp(reply + n - l, id) == 0;
}

/* The requests fetched: the first that is this host's to run claimed, into *r (1), the rest
 * handed back. */
static int take_list(struct fleet *f, natsMsgList *list, struct fleet_req *r)
{
	int ret = 0;

	for (int i = 0; i < list->Count; i++) {
		natsMsg *m = list->Msgs[i];
		jsMsgMetaData *meta = NULL;
		const char *id = NULL, *reply = NULL, *wake_text = NULL;
		uint64_t wake = 0;
		int n = natsMsg_GetDataLength(m), c;
		int64_t retry_ms = 0;
		uint64_t seq = 0, rev = 0, nrev = 0;
		bool moved = false, again = false;

		if (ret != 0) { /* one at a time: another goes back at once */
			natsMsg_Nak(m, NULL);
			continue;
		}
		if (natsMsg_GetMetaData(&meta, m) == NATS_OK)
			seq = meta->Sequence.Stream;
		jsMsgMetaData_Destroy(meta);
		if (seq == 0 || natsMsgHeader_Get(m, HDR_BOX, &id) != NATS_OK || !fleet_id_ok(id) ||
		    n < 0 || (size_t)n > FLEET_REQ_MAX ||
		    natsMsgHeader_Get(m, HDR_REPLY, &reply) != NATS_OK || !reply_ok(reply, id)) {
			/* not a request of ours: dropped for good (it would come back forever) */
			natsMsg_Term(m, NULL);
			continue;
		}
		if (natsMsgHeader_Get(m, HDR_WAKE, &wake_text) == NATS_OK &&
		    owner_parse_seq(wake_text, strlen(wake_text), &wake) < 0) {
			natsMsg_Term(m, NULL);
			continue;
		}
		/* the request's copy first: a box claimed and then not run would be lost */
		r->data = malloc(n ? (size_t)n : 1);
		if (!r->data) {
			natsMsg_NakWithDelay(m, 1000, NULL);
			ret = fleet_fail(f, -ENOMEM, "fleet: out of memory");
			continue;
		}
		c = claim(f, id, seq, wake, &moved, &again, &rev, &retry_ms);
		if (c == 2 || c < 0) {
			natsMsg_NakWithDelay(m, retry_ms > 0 ? retry_ms : 200, NULL);
			free(r->data);
			r->data = NULL;
			continue;
		}
		if (c == 0) {
			natsMsg_Term(m, NULL);
			free(r->data);
			r->data = NULL;
			continue;
		}
		/* the answer at once (the API side waits for it; the claim is made), then the ack
		 * for good, then the claim confirmed: a host stalled past the ack wait and its
		 * liveness may have lost the box to another (the update on its revision fails; the
		 * API side's later calls find the owner in the bucket) */
		char val[OWNER_VAL_MAX + 1];

		snprintf(val, sizeof(val), "%s:%" PRIu64, f->conf.host, seq);
		natsConnection_Publish((natsConnection *)f->nc, reply, val, (int)strlen(val));
		if (natsMsg_AckSync(m, NULL, NULL) != NATS_OK ||
		    owner_update(f, id, f->conf.host, seq, rev, &nrev) == -ESTALE) {
			free(r->data);
			r->data = NULL;
			continue; /* not acknowledged: it comes again; or it is another's now */
		}
		snprintf(r->id, sizeof(r->id), "%s", id);
		r->moved = moved;
		r->again = again;
		r->woken = wake != 0;
		r->len = (size_t)n;
		memcpy(r->data, natsMsg_GetData(m), r->len);
		ret = 1;
	}
	natsMsgList_Destroy(list);
	return ret;
}

int fleet_take(struct fleet *f, int wait_ms, struct fleet_req *r)
{
	natsMsgList list = {0};
	jsErrCode jerr = 0;
	natsStatus s;

	memset(r, 0, sizeof(*r));
	if (!f->pull)
		return fleet_fail(f, -EINVAL, "fleet: not a host");
	if (f->near && atomic_exchange(&f->poked, 0)) { /* what was sent to this host first */
		jsFetchRequest fr;

		jsFetchRequest_Init(&fr);
		fr.Batch = 1;
		fr.NoWait = true;
		/* the server holds a no-wait pull on an empty queue until it expires */
		fr.Expires = 50 * MS_NS;
		s = natsSubscription_FetchRequest(&list, (natsSubscription *)f->near, &fr);
		if (s == NATS_OK && list.Count > 0) {
			int n = take_list(f, &list, r);

			atomic_store(&f->poked, 1); /* (there may be more) */
			if (n != 0)
				return n;
		} else {
			natsMsgList_Destroy(&list);
		}
		memset(&list, 0, sizeof(list));
	}
	s = natsSubscription_Fetch(&list, (natsSubscription *)f->pull, 1, wait_ms, &jerr);
	if (s == NATS_TIMEOUT || (s == NATS_OK && list.Count == 0)) {
		natsMsgList_Destroy(&list);
		return 0;
	}
	if (s != NATS_OK)
		return fleet_fail(f, -EIO, "fleet: fetch: %s (JetStream error %d)",
				  natsStatus_GetText(s), (int)jerr);
	return take_list(f, &list, r);
}

void fleet_shed(struct fleet *f)
{
	natsMsgList list = {0};
	jsErrCode jerr = 0;
	int pending = 0, bytes = 0;

	if (!f->pull || fleet_now_ms() - f->shed_ms < 500)
		return;
	f->shed_ms = fleet_now_ms();
	if (natsSubscription_GetPending((natsSubscription *)f->pull, &pending, &bytes) != NATS_OK ||
	    pending <= 0)
		return;
	/* what is queued here (a pull request may go too when some of it is a status message:
	 * what it brings goes back as well, after a moment, to a host with room) */
	if (natsSubscription_Fetch(&list, (natsSubscription *)f->pull, pending, 10, &jerr) !=
	    NATS_OK)
		return;
	for (int i = 0; i < list.Count; i++)
		natsMsg_NakWithDelay(list.Msgs[i], 100, NULL);
	natsMsgList_Destroy(&list);
}

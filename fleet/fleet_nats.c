/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fleet's connection to NATS (fleet.h): the pool's work-queue stream and its one durable
 * pull consumer, the owners bucket (one revision kept: ownership is its latest value) and the
 * hosts bucket (values expire: liveness). Made by the first host to come, bound to by the rest.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nats/nats.h>

#include "fleet.h"
#include "fleet_int.h"

int fleet_fail(struct fleet *f, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(f->err, sizeof(f->err), fmt, ap);
	va_end(ap);
	return ret;
}

bool fleet_id_ok(const char *s)
{
	size_t n = strnlen(s, FLEET_ID_MAX + 1);

	if (n == 0 || n > FLEET_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-'))
			return false;
	return true;
}

void fleet_poke_subject(const struct fleet *f, const char *host, char *out, size_t len)
{
	snprintf(out, len, "sandbox.poke.%s.%s", f->conf.pool, host);
}

uint64_t fleet_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A durable pull consumer of the pool's stream: `name`, of the messages on `filter` (made, or
 * an existing one updated to it: the server allows a filter's change). One that still takes
 * more than its filter (an earlier version's pool consumer took the whole stream, and would
 * take the hosts' own queues' messages too) is an error, said. */
static natsStatus fleet_consumer(struct fleet *f, const char *name, const char *filter,
				 jsErrCode *jerr)
{
	jsConsumerConfig cc;
	jsConsumerInfo *ci = NULL;
	natsStatus s;

	jsConsumerConfig_Init(&cc);
	cc.Durable = name;
	cc.FilterSubject = filter;
	cc.AckPolicy = js_AckExplicit;
	cc.AckWait = (int64_t)f->conf.ack_wait_ms * MS_NS;
	cc.MaxAckPending = 100000;
	/* a message no host can settle (one libnats hides from us: a status header) ends after
	 * this many deliveries. Full and draining hosts hand back what reaches them (fleet_shed:
	 * up to 2 a second each), and each of those counts: at 50 a waiting create was dropped
	 * within seconds while a slot it could have had was being freed. The placing side's
	 * cancel (at most 60 s: unschedulable, create-only) ends a create long before 5000 */
	cc.MaxDeliver = 5000;
	s = js_AddConsumer(&ci, (jsCtx *)f->js, f->stream, &cc, NULL, jerr);
	if (s != NATS_OK &&
	    (*jerr == JSConsumerNameExistErr || *jerr == JSConsumerExistingActiveErr)) {
		s = js_GetConsumerInfo(&ci, (jsCtx *)f->js, f->stream, name, NULL, jerr);
		if (s == NATS_OK && (!ci->Config || !ci->Config->FilterSubject ||
				     strcmp(ci->Config->FilterSubject, filter) != 0)) {
			snprintf(f->err, sizeof(f->err),
				 "consumer %s of stream %s takes more than %s (an earlier "
				 "version's?): remove it, and it is made again",
				 name, f->stream, filter);
			s = NATS_ERR;
		}
	}
	jsConsumerInfo_Destroy(ci);
	return s;
}

/* A create was sent to this host's own queue (place.c): pulled at its next take. */
static void on_poke(natsConnection *nc, natsSubscription *sub, natsMsg *m, void *arg)
{
	struct fleet *f = arg;

	(void)nc;
	(void)sub;
	atomic_store(&f->poked, 1);
	natsMsg_Destroy(m);
}

/* The pool's stream with the hosts' own queues (sandbox.near.<pool>.*) among its subjects: an
 * earlier version's, with its pool's subject only, is updated (its config kept otherwise). */
static natsStatus fleet_stream_near(struct fleet *f, const char *near_all, jsErrCode *jerr)
{
	jsStreamInfo *si = NULL;
	natsStatus s = js_GetStreamInfo(&si, (jsCtx *)f->js, f->stream, NULL, jerr);
	bool has = false;

	for (int i = 0; s == NATS_OK && si->Config && i < si->Config->SubjectsLen; i++)
		has |= strcmp(si->Config->Subjects[i], near_all) == 0;
	if (s == NATS_OK && !has && si->Config) {
		const char *subjects[2] = {f->subject, near_all};

		si->Config->Subjects = subjects;
		si->Config->SubjectsLen = 2;
		s = js_UpdateStream(NULL, (jsCtx *)f->js, si->Config, NULL, jerr);
		si->Config->Subjects = NULL; /* (ours: not the info's to free) */
		si->Config->SubjectsLen = 0;
	}
	jsStreamInfo_Destroy(si);
	return s;
}

/* The stream (the pool's subject, and below sandbox.near.<pool> each host's own queue: the
 * creates sent to it first), its consumers and the host's pull subscriptions (a host only). */
static natsStatus fleet_stream(struct fleet *f, jsErrCode *jerr)
{
	char near_all[sizeof(f->near_subject) + 2];
	char near_mine[sizeof(f->near_subject) + FLEET_ID_MAX + 2];
	char near_name[FLEET_ID_MAX + 8];
	jsStreamConfig sc;
	jsSubOptions so;
	jsStreamInfo *si = NULL;
	const char *subjects[2] = {f->subject, near_all};
	natsStatus s;

	snprintf(near_all, sizeof(near_all), "%s.*", f->near_subject);
	jsStreamConfig_Init(&sc);
	sc.Name = f->stream;
	sc.Subjects = subjects;
	sc.SubjectsLen = 2;
	sc.Retention = js_WorkQueuePolicy;
	sc.Storage = js_FileStorage;
	sc.Replicas = f->conf.replicas;
	sc.Duplicates = 120 * 1000 * MS_NS; /* a create published twice (its id as the message
					       id) within 2 min is one message */
	sc.MaxMsgSize = (int32_t)FLEET_REQ_MAX + 4096; /* the request and its headers */
	sc.MaxMsgs = 100000;			       /* creates waiting, at most */
	sc.MaxAge = 3600 * 1000 * MS_NS; /* a create an hour old: its caller gave up long ago */
	sc.Discard = js_DiscardNew;	 /* a full queue refuses new creates, keeps old ones */
	s = js_AddStream(&si, (jsCtx *)f->js, &sc, NULL, jerr);
	jsStreamInfo_Destroy(si);
	if (s != NATS_OK && *jerr == JSStreamNameExistErr) {
		*jerr = 0; /* another host made it (the same config), or an earlier version */
		s = fleet_stream_near(f, near_all, jerr);
	}
	if (s == NATS_OK)
		s = fleet_consumer(f, "hosts", f->subject, jerr);
	if (s != NATS_OK || !f->conf.host[0])
		return s;
	snprintf(near_mine, sizeof(near_mine), "%s.%s", f->near_subject, f->conf.host);
	snprintf(near_name, sizeof(near_name), "near-%s", f->conf.host);
	s = fleet_consumer(f, near_name, near_mine, jerr);
	jsSubOptions_Init(&so);
	so.Stream = f->stream;
	so.Consumer = "hosts";
	if (s == NATS_OK && !f->pull)
		s = js_PullSubscribe((natsSubscription **)&f->pull, (jsCtx *)f->js, f->subject,
				     "hosts", NULL, &so, jerr);
	so.Consumer = near_name;
	if (s == NATS_OK && !f->near)
		s = js_PullSubscribe((natsSubscription **)&f->near, (jsCtx *)f->js, near_mine,
				     near_name, NULL, &so, jerr);
	fleet_poke_subject(f, f->conf.host, near_mine, sizeof(near_mine));
	atomic_store(&f->poked, 1); /* (what came while it was away: looked at once) */
	if (s == NATS_OK && !f->poke)
		s = natsConnection_Subscribe((natsSubscription **)&f->poke, (natsConnection *)f->nc,
					     near_mine, on_poke, f);
	return s;
}

/*
 * A KV bucket whose reads go to its stream's leader: made as the stream KV_<name> with the
 * layout libnats's buckets have, but without direct gets (AllowDirect would let a follower
 * answer a read with a value older than a create that already succeeded: ownership decided on
 * such a read runs a box twice), then bound by js_KeyValue, which reads that setting.
 */
natsStatus fleet_bucket(struct fleet *f, const char *name, int64_t ttl_ms, int32_t max_msg,
			void **kv)
{
	char stream[80], subject[96];
	const char *subjects[1] = {subject};
	jsStreamConfig sc;
	jsErrCode jerr = 0;
	natsStatus s;

	snprintf(stream, sizeof(stream), "KV_%s", name);
	snprintf(subject, sizeof(subject), "$KV.%s.>", name);
	jsStreamConfig_Init(&sc);
	sc.Name = stream;
	sc.Subjects = subjects;
	sc.SubjectsLen = 1;
	sc.MaxMsgsPerSubject = 1; /* one revision kept */
	sc.MaxAge = ttl_ms * MS_NS;
	sc.MaxMsgSize = max_msg;
	sc.Storage = js_FileStorage;
	sc.Replicas = f->conf.replicas;
	sc.AllowRollup = true;
	sc.DenyDelete = true;
	sc.AllowDirect = false;
	sc.Discard = js_DiscardNew;
	s = js_AddStream(NULL, (jsCtx *)f->js, &sc, NULL, &jerr);
	if (s != NATS_OK && jerr == JSStreamNameExistErr)
		s = NATS_OK; /* another host made it (the same config: the same code) */
	if (s == NATS_OK)
		s = js_KeyValue((kvStore **)kv, (jsCtx *)f->js, name);
	return s;
}

int fleet_open(struct fleet *f, const struct fleet_conf *c, int wait_ms)
{
	natsOptions *o = NULL;
	natsStatus s;
	jsErrCode jerr = 0;
	uint64_t deadline = fleet_now_ms() + (uint64_t)(wait_ms > 0 ? wait_ms : 0);

	memset(f, 0, sizeof(*f));
	f->conf = *c;
	if (c->nservers < 1 || c->nservers > FLEET_SERVERS_MAX)
		return fleet_fail(f, -EINVAL, "fleet: 1 to %d NATS servers", FLEET_SERVERS_MAX);
	if (!fleet_id_ok(c->pool) || (c->host[0] && !fleet_id_ok(c->host)) ||
	    strcmp(c->host, FLEET_RELEASED) == 0 || strcmp(c->host, FLEET_UNSCHEDULABLE) == 0)
		return fleet_fail(f, -EINVAL, "fleet: a pool and host id of [A-Za-z0-9_-], 1 to %d",
				  FLEET_ID_MAX);
	if (c->replicas < 1 || c->replicas > 5)
		return fleet_fail(f, -EINVAL, "fleet: replicas 1 to 5");
	if (!f->conf.ack_wait_ms)
		f->conf.ack_wait_ms = 5000;
	if (!f->conf.liveness_ttl_ms)
		f->conf.liveness_ttl_ms = 5000;
	snprintf(f->stream, sizeof(f->stream), "SANDBOX_PLACE_%s", c->pool);
	snprintf(f->subject, sizeof(f->subject), "sandbox.place.%s", c->pool);
	snprintf(f->near_subject, sizeof(f->near_subject), "sandbox.near.%s", c->pool);
	s = natsOptions_Create(&o);
	if (s == NATS_OK)
		s = natsOptions_SetServers(o, (const char **)c->servers, c->nservers);
	if (s == NATS_OK)
		s = natsOptions_SetTimeout(o, 2000);
	if (s == NATS_OK)
		s = natsOptions_SetMaxReconnect(o, -1); /* a node's loss: on to the others */
	if (s == NATS_OK)
		s = natsOptions_SetReconnectWait(o, 100);
	if (s == NATS_OK)
		s = natsOptions_SetRetryOnFailedConnect(o, false, NULL, NULL);
	if (s == NATS_OK)
		s = natsConnection_Connect((natsConnection **)&f->nc, o);
	natsOptions_Destroy(o);
	if (s != NATS_OK)
		return fleet_fail(f, -ECONNREFUSED, "fleet: NATS: %s", natsStatus_GetText(s));
	s = natsConnection_JetStream((jsCtx **)&f->js, (natsConnection *)f->nc, NULL);
	if (s != NATS_OK || fleet_replies_open(f) < 0) {
		fleet_close(f);
		return fleet_fail(f, -EIO, "fleet: NATS: %s", natsStatus_GetText(s));
	}
	const char *what = "JetStream";

	for (;;) { /* a new cluster elects its meta leader first: retried until wait_ms */
		jerr = 0;
		f->err[0] = 0;
		if (s == NATS_OK && !f->owners && (what = "the owners bucket"))
			s = fleet_bucket(f, "sandbox_owners", 0, 1024, &f->owners);
		if (s == NATS_OK && !f->hosts && (what = "the hosts bucket"))
			s = fleet_bucket(f, "sandbox_hosts", f->conf.liveness_ttl_ms, 1024,
					 &f->hosts);
		if (s == NATS_OK && (what = "the pool's stream"))
			s = fleet_stream(f, &jerr);
		if (s == NATS_OK || fleet_now_ms() >= deadline)
			break;
		nats_Sleep(200);
		s = NATS_OK;
	}
	if (s != NATS_OK) {
		const char *last = nats_GetLastError(NULL);
		char why[FLEET_ERR_MAX];

		snprintf(why, sizeof(why), "%s", f->err[0] ? f->err : last ? last : "");
		fleet_fail(f, -EIO, "fleet: %s: %s (JetStream error %d)%s%.200s", what,
			   natsStatus_GetText(s), (int)jerr, why[0] ? ": " : "", why);
		fleet_close(f);
		return -EIO;
	}
	return 0;
}

void fleet_close(struct fleet *f)
{
	fleet_replies_close(f);
	if (f->pull)
		natsSubscription_Destroy((natsSubscription *)f->pull);
	if (f->near)
		natsSubscription_Destroy((natsSubscription *)f->near);
	if (f->poke) {
		natsSubscription_Unsubscribe((natsSubscription *)f->poke);
		natsSubscription_Destroy((natsSubscription *)f->poke);
	}
	if (f->owners)
		kvStore_Destroy((kvStore *)f->owners);
	if (f->hosts)
		kvStore_Destroy((kvStore *)f->hosts);
	if (f->js)
		jsCtx_Destroy((jsCtx *)f->js);
	if (f->nc)
		natsConnection_Destroy((natsConnection *)f->nc);
	f->pull = f->near = f->poke = f->owners = f->hosts = f->js = f->nc = NULL;
}

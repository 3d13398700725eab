/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench-fleet-place: placement through the fleet's engine (fleet/, NATS JetStream) beside a
 * bare JetStream round of the same shape, in one run on one cluster (tools/bench/fleet.sh
 * starts it; docs/benchmarks.md "The fleet").
 *
 *   bench-fleet-place SERVERS [--creates N] [--hosts H]
 *
 *   place  fleet_place of a new box to the moment its owner is known (the host's answer):
 *          publish to the pool's work queue with its JetStream ack, a host's fetch, its
 *          create-only claim in the owners bucket, its ack, its answer. H host processes
 *          (3), each with room for all N.
 *   bare   the same round without the claim: publish with its ack to a work-queue stream, a
 *          pull consumer in another process fetches, acknowledges and answers the inbox.
 * N (1000) of each, interleaved, after 20 of each uncounted. Last line:
 *   fleet place_p50_ms= place_p99_ms= bare_p50_ms= bare_p99_ms= place_over_bare_p99= n=
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nats/nats.h>

#include "fleet.h"

#define BARE_STREAM  "BENCH_BARE"
#define BARE_SUBJECT "bench.bare"
#define WARMUP	     20

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void conf_init(struct fleet_conf *c, char *servers, const char *host)
{
	memset(c, 0, sizeof(*c));
	for (char *save, *s = strtok_r(servers, ",", &save); s && c->nservers < FLEET_SERVERS_MAX;
	     s = strtok_r(NULL, ",", &save))
		c->servers[c->nservers++] = s;
	snprintf(c->host, sizeof(c->host), "%s", host);
	snprintf(c->pool, sizeof(c->pool), "bench");
	c->replicas = c->nservers >= 3 ? 3 : 1;
}

static int host_main(char *servers, const char *id, int slots)
{
	struct fleet f;
	struct fleet_conf c;
	struct fleet_req r;
	int owned = 0;

	conf_init(&c, servers, id);
	if (fleet_open(&f, &c, 30000) < 0 || fleet_beat(&f, "bench") < 0) {
		fprintf(stderr, "bench-fleet-place: host %s: %s\n", id, f.err);
		return 1;
	}
	for (;;) {
		if (owned >= slots) {
			fleet_shed(&f);
			usleep(20000);
			continue;
		}
		int n = fleet_take(&f, 1000, &r);

		if (n < 0) {
			fprintf(stderr, "bench-fleet-place: host %s: %s\n", id, f.err);
			usleep(100000);
		} else if (n > 0) {
			free(r.data);
			owned++;
		}
	}
}

/* The bare round's consumer: fetch, ack, answer the inbox in the message's header. */
static int bare_main(char *servers)
{
	struct fleet_conf c;
	natsConnection *nc = NULL;
	natsOptions *o = NULL;
	jsCtx *js = NULL;
	jsStreamConfig sc;
	jsConsumerConfig cc;
	jsSubOptions so;
	natsSubscription *sub = NULL;
	jsErrCode jerr = 0;
	const char *subjects[1] = {BARE_SUBJECT};
	natsStatus s;

	conf_init(&c, servers, "");
	s = natsOptions_Create(&o);
	if (s == NATS_OK)
		s = natsOptions_SetServers(o, c.servers, c.nservers);
	if (s == NATS_OK)
		s = natsConnection_Connect(&nc, o);
	if (s == NATS_OK)
		s = natsConnection_JetStream(&js, nc, NULL);
	jsStreamConfig_Init(&sc);
	sc.Name = BARE_STREAM;
	sc.Subjects = subjects;
	sc.SubjectsLen = 1;
	sc.Retention = js_WorkQueuePolicy;
	sc.Storage = js_FileStorage;
	sc.Replicas = c.replicas;
	jsConsumerConfig_Init(&cc);
	cc.Durable = "bare";
	cc.AckPolicy = js_AckExplicit;
	for (int i = 0; s == NATS_OK && i < 150; i++) { /* the cluster's leaders first */
		s = js_AddStream(NULL, js, &sc, NULL, &jerr);
		if (s == NATS_OK || jerr == JSStreamNameExistErr) {
			s = js_AddConsumer(NULL, js, BARE_STREAM, &cc, NULL, &jerr);
			if (s == NATS_OK || jerr == JSConsumerNameExistErr)
				break;
		}
		s = NATS_OK;
		nats_Sleep(200);
	}
	jsSubOptions_Init(&so);
	so.Stream = BARE_STREAM;
	so.Consumer = "bare";
	if (s == NATS_OK)
		s = js_PullSubscribe(&sub, js, BARE_SUBJECT, "bare", NULL, &so, &jerr);
	if (s != NATS_OK) {
		fprintf(stderr, "bench-fleet-place: bare consumer: %s (%d)\n",
			natsStatus_GetText(s), (int)jerr);
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		natsMsgList list = {0};
		const char *reply = NULL;

		if (natsSubscription_Fetch(&list, sub, 1, 1000, &jerr) != NATS_OK)
			continue;
		for (int i = 0; i < list.Count; i++) {
			natsMsg_Ack(list.Msgs[i], NULL);
			if (natsMsgHeader_Get(list.Msgs[i], "Sandbox-Reply", &reply) == NATS_OK)
				natsConnection_Publish(nc, reply, "bare", 4);
		}
		natsMsgList_Destroy(&list);
	}
}

/* One bare round from the API side's connection, answered on sub (INBOX.*, subscribed once
 * and flushed, as fleet_place's: a per-round inbox loses answers published on another node
 * before the route carries its interest). */
static int bare_round(jsCtx *js, natsSubscription *sub, const char *inbox, int i)
{
	natsMsg *m = NULL, *r = NULL;
	jsPubAck *pa = NULL;
	jsErrCode jerr = 0;
	char reply[128];
	natsStatus s;

	snprintf(reply, sizeof(reply), "%s.%d", inbox, i);
	s = natsMsg_Create(&m, BARE_SUBJECT, NULL, "{}", 2);
	if (s == NATS_OK)
		s = natsMsgHeader_Set(m, "Sandbox-Reply", reply);
	/* as fleet_place does: no responders (a leader being elected) asked again, up to 2 s */
	for (int t = 0; s == NATS_OK || (s == NATS_NO_RESPONDERS && t < 40); t++) {
		if (t)
			nats_Sleep(50);
		jsPubAck_Destroy(pa);
		pa = NULL;
		s = js_PublishMsg(&pa, js, m, NULL, &jerr);
		if (s != NATS_NO_RESPONDERS)
			break;
	}
	while (s == NATS_OK) { /* this round's answer (rounds are one at a time) */
		s = natsSubscription_NextMsg(&r, sub, 10000);
		if (s == NATS_OK && strcmp(natsMsg_GetSubject(r), reply) == 0) {
			natsMsg_Destroy(r);
			break;
		}
		natsMsg_Destroy(r);
		r = NULL;
	}
	natsMsg_Destroy(m);
	jsPubAck_Destroy(pa);
	if (s != NATS_OK)
		fprintf(stderr, "bench-fleet-place: bare round: %s (JetStream error %d)\n",
			natsStatus_GetText(s), (int)jerr);
	return s == NATS_OK ? 0 : -EIO;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void report(const char *what, double *v, int n, double *p50, double *p99)
{
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	*p50 = v[n / 2];
	*p99 = v[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1];
	fprintf(stderr, "bench: %s: n %d, min %.2f, p50 %.2f, p90 %.2f, p99 %.2f, max %.2f ms\n",
		what, n, v[0], *p50, v[(n * 9) / 10], *p99, v[n - 1]);
}

int main(int argc, char **argv)
{
	struct fleet api;
	struct fleet_conf c;
	char servers[1024], owner[FLEET_ID_MAX + 1], id[40], slots[16], line[16];
	char why[FLEET_ERR_MAX];
	int creates = 1000, nhosts = 3;
	pid_t pids[9];
	int npids = 0;
	FILE *bare_out;
	int bare_pipe[2];
	double *place, *bare, pp50, pp99, bp50, bp99;
	natsConnection *nc = NULL;
	natsOptions *o = NULL;
	jsCtx *js = NULL;
	natsInbox *inbox = NULL;
	natsSubscription *bare_sub = NULL;
	char inbox_all[128];

	if (argc == 5 && strcmp(argv[1], "--host") == 0)
		return host_main(argv[2], argv[3], atoi(argv[4]));
	if (argc == 3 && strcmp(argv[1], "--bare") == 0)
		return bare_main(argv[2]);
	if (argc < 2)
		goto usage;
	for (int i = 2; i < argc; i++) {
		if (i + 1 < argc && strcmp(argv[i], "--creates") == 0)
			creates = atoi(argv[++i]);
		else if (i + 1 < argc && strcmp(argv[i], "--hosts") == 0)
			nhosts = atoi(argv[++i]);
		else
			goto usage;
	}
	if (creates < 10 || creates > 100000 || nhosts < 1 || nhosts > 8)
		goto usage;
	snprintf(slots, sizeof(slots), "%d", creates + WARMUP);
	for (int i = 0; i < nhosts; i++) {
		char hid[16];

		snprintf(hid, sizeof(hid), "bench-h%d", i);
		if ((pids[npids] = fork()) == 0) {
			execl(argv[0], argv[0], "--host", argv[1], hid, slots, (char *)NULL);
			_exit(127);
		}
		npids++;
	}
	if (pipe(bare_pipe) < 0)
		return 1;
	if ((pids[npids] = fork()) == 0) {
		dup2(bare_pipe[1], 1);
		execl(argv[0], argv[0], "--bare", argv[1], (char *)NULL);
		_exit(127);
	}
	npids++;
	close(bare_pipe[1]);
	bare_out = fdopen(bare_pipe[0], "r");
	if (!bare_out || !fgets(line, sizeof(line), bare_out) || strcmp(line, "ready\n") != 0) {
		fprintf(stderr, "bench-fleet-place: the bare consumer did not start\n");
		goto fail;
	}
	snprintf(servers, sizeof(servers), "%s", argv[1]);
	conf_init(&c, servers, "");
	if (fleet_open(&api, &c, 30000) < 0) {
		fprintf(stderr, "bench-fleet-place: %s\n", api.err);
		goto fail;
	}
	if (natsOptions_Create(&o) != NATS_OK ||
	    natsOptions_SetServers(o, c.servers, c.nservers) != NATS_OK ||
	    natsConnection_Connect(&nc, o) != NATS_OK ||
	    natsConnection_JetStream(&js, nc, NULL) != NATS_OK ||
	    natsInbox_Create(&inbox) != NATS_OK ||
	    snprintf(inbox_all, sizeof(inbox_all), "%s.*", inbox) <= 0 ||
	    natsConnection_SubscribeSync(&bare_sub, nc, inbox_all) != NATS_OK ||
	    natsConnection_FlushTimeout(nc, 5000) != NATS_OK) {
		fprintf(stderr, "bench-fleet-place: NATS connection failed\n");
		goto fail;
	}
	place = calloc((size_t)creates, sizeof(double));
	bare = calloc((size_t)creates, sizeof(double));
	if (!place || !bare)
		goto fail;
	for (int i = -WARMUP; i < creates; i++) {
		double t0 = now_ms();
		int err;

		snprintf(id, sizeof(id), "bench-%d-%d", (int)getpid(), i + WARMUP);
		if ((err = fleet_place(&api, id, "{}", 2, NULL, 10000, owner, why, sizeof(why))) <
		    0) {
			fprintf(stderr, "bench-fleet-place: place %s: %s\n", id, why);
			goto fail;
		}
		if (i >= 0)
			place[i] = now_ms() - t0;
		t0 = now_ms();
		if (bare_round(js, bare_sub, inbox, i + WARMUP) < 0) {
			fprintf(stderr, "bench-fleet-place: bare round %d failed\n", i);
			goto fail;
		}
		if (i >= 0)
			bare[i] = now_ms() - t0;
	}
	report("place (fleet_place to the owner's answer)", place, creates, &pp50, &pp99);
	report("bare (publish+ack, fetch+ack, answer)", bare, creates, &bp50, &bp99);
	printf("fleet place_p50_ms=%.2f place_p99_ms=%.2f bare_p50_ms=%.2f bare_p99_ms=%.2f "
	       "place_over_bare_p99=%.2f n=%d\n",
	       pp50, pp99, bp50, bp99, pp99 / bp99, creates);
	for (int i = 0; i < npids; i++)
		kill(pids[i], SIGKILL);
	for (int i = 0; i < npids; i++)
		waitpid(pids[i], NULL, 0);
	return 0;
fail:
	for (int i = 0; i < npids; i++)
		kill(pids[i], SIGKILL);
	for (int i = 0; i < npids; i++)
		waitpid(pids[i], NULL, 0);
	return 1;
usage:
	fprintf(stderr, "usage: bench-fleet-place SERVERS [--creates N] [--hosts H]\n");
	return 2;
}

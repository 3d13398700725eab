/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Placement on a NATS JetStream cluster (fleet/, tests/fleet/place.sh starts the cluster):
 *
 *   place-check SERVERS            (SERVERS: nats://HOST:PORT,... of the cluster)
 *
 * Hosts are processes of this program (`place-check --host SERVERS ID SLOTS MODE FD`), each
 * with its own connection, taking requests while it has room and writing `took BOX HOST
 * moved` lines to FD. Checked, in order:
 *   redelivered-before-claim  a host fetches a create and dies before claiming it: after the
 *                             ack wait another host takes it, and only one does
 *   redelivered-after-claim   a host claims a create and dies before acknowledging it: once
 *                             its liveness lapsed another host takes it over (moved), once
 *   released-not-rerun        a host claims a create, releases its box into the store and
 *                             dies before acknowledging it: the message comes again, and no
 *                             host runs the box from it
 *   near                      creates sent first to h1 (as one from a snapshot h1 holds):
 *                             each runs there, taken within the near wait, while it has room
 *   near-full                 one more with h1 full: placed elsewhere after the near wait
 *   spread                    12 creates on 3 hosts of 4 slots: all placed, none over 4
 *   unschedulable             a 13th: refused in its time, and no host takes it after
 * Prints `ok NAME` per check (`FAIL NAME: why`, exit 1), then `place p50_ms= p99_ms= n=`.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nats/nats.h>

#include "fleet.h"
#include "fleet_check.h"

#define SLOTS	    4
#define ACK_WAIT_MS 1500
#define LIVENESS_MS 2000
#define PLACE_MS    15000
#define NEAR_MS	    1500 /* a create sent to a host first waits this long for it */

/* A failed check takes the host processes (this process group) down too. */
static void kill_group(void)
{
	kill(0, SIGTERM);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int conf_servers(struct fleet_conf *c, char *list)
{
	for (char *save, *s = strtok_r(list, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
		if (c->nservers >= FLEET_SERVERS_MAX)
			return -1;
		c->servers[c->nservers++] = s;
	}
	return c->nservers ? 0 : -1;
}

static void conf_init(struct fleet_conf *c, char *servers, const char *host)
{
	memset(c, 0, sizeof(*c));
	if (conf_servers(c, servers) < 0)
		exit(2);
	snprintf(c->host, sizeof(c->host), "%s", host);
	snprintf(c->pool, sizeof(c->pool), "test");
	c->replicas = c->nservers >= 3 ? 3 : 1;
	c->ack_wait_ms = ACK_WAIT_MS;
	c->liveness_ttl_ms = LIVENESS_MS;
}

/*
 * A crash at a precise point, by this host's own NATS handles: fetch one request, and with
 * `claim` make its owner key (as fleet_take would), then die without acknowledging it.
 * Returns only when nothing came.
 */
static void host_crash(struct fleet *f, bool claim, bool release)
{
	natsMsgList list = {0};
	jsErrCode jerr = 0;
	const char *box = NULL;
	char key[FLEET_ID_MAX + 8];
	uint64_t rev = 0;

	if (natsSubscription_Fetch(&list, (natsSubscription *)f->pull, 1, 1000, &jerr) != NATS_OK ||
	    list.Count < 1)
		return;
	if (claim && natsMsgHeader_Get(list.Msgs[0], "Sandbox-Box", &box) == NATS_OK) {
		jsMsgMetaData *meta = NULL;
		char val[128];

		if (natsMsg_GetMetaData(&meta, list.Msgs[0]) != NATS_OK)
			_exit(3);
		snprintf(key, sizeof(key), "box.%s", box);
		snprintf(val, sizeof(val), "%s:%llu", f->conf.host,
			 (unsigned long long)meta->Sequence.Stream);
		if (kvStore_Create(&rev, (kvStore *)f->owners, key, val, (int)strlen(val)) !=
		    NATS_OK)
			_exit(3);
		/* its box into the store and let go, as fleet_release does */
		snprintf(val, sizeof(val), "%s:%llu", FLEET_RELEASED,
			 (unsigned long long)meta->Sequence.Stream);
		if (release && kvStore_Update(&rev, (kvStore *)f->owners, key, val,
					      (int)strlen(val), rev) != NATS_OK)
			_exit(3);
	}
	_exit(0);
}

/* A host: MODE normal (take while it has room), die-after-fetch, die-after-claim,
 * die-after-release. */
static int host_main(char *servers, const char *id, int slots, const char *mode, int fd)
{
	struct fleet f;
	struct fleet_conf c;
	struct fleet_req r;
	uint64_t beat = 0;
	int owned = 0, n;

	conf_init(&c, servers, id);
	if (fleet_open(&f, &c, 30000) < 0) {
		dprintf(fd, "error %s %s\n", id, f.err);
		return 1;
	}
	for (;;) {
		if (now_ms() - beat >= 500) {
			if (fleet_beat(&f, "slots") < 0)
				dprintf(fd, "error %s %s\n", id, f.err);
			beat = now_ms();
		}
		if (strcmp(mode, "normal") != 0) {
			host_crash(&f,
				   strncmp(mode, "die-after-", 10) == 0 &&
					   strcmp(mode, "die-after-fetch") != 0,
				   strcmp(mode, "die-after-release") == 0);
			continue;
		}
		if (owned >= slots) {
			fleet_shed(&f);
			usleep(20000);
			continue;
		}
		n = fleet_take(&f, 500, &r);
		if (n < 0) {
			dprintf(fd, "error %s %s\n", id, f.err);
			usleep(100000);
			continue;
		}
		if (n == 0)
			continue;
		if (r.len == 7 && memcmp(r.data, "release", 7) == 0) {
			/* suspended into the store at once: let go, its slot free again */
			uint64_t rel = 0;

			if (fleet_release(&f, r.id, &rel) < 0)
				dprintf(fd, "error %s %s\n", id, f.err);
			else
				dprintf(fd, "released %s %s:%llu\n", r.id, id,
					(unsigned long long)rel);
			free(r.data);
			continue;
		}
		dprintf(fd, "%s %s %s %d\n", r.woken ? "woke" : "took", r.id, id, r.moved);
		free(r.data);
		owned++;
	}
}

static char *self, *servers_arg;
static int report[2]; /* the hosts' lines */

static pid_t spawn_host(const char *id, const char *mode)
{
	char slots[8], fd[16];
	pid_t pid;

	snprintf(slots, sizeof(slots), "%d", SLOTS);
	snprintf(fd, sizeof(fd), "%d", report[1]);
	pid = fork();
	if (pid == 0) {
		execl(self, self, "--host", servers_arg, id, slots, mode, fd, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Every line the hosts wrote so far, appended to buf (a NUL-terminated text). */
static void drain(char *buf, size_t cap)
{
	size_t n = strlen(buf);
	ssize_t got;

	while (n + 1 < cap && (got = read(report[0], buf + n, cap - 1 - n)) > 0)
		n += (size_t)got;
	buf[n] = 0;
}

static int count_lines(const char *buf, const char *prefix)
{
	int n = 0;

	for (const char *p = buf; (p = strstr(p, prefix)); p += strlen(prefix))
		n++;
	return n;
}

struct place_job {
	struct fleet *f;
	char id[40];
	char owner[FLEET_ID_MAX + 1];
	char why[FLEET_ERR_MAX];
	int err;
	double ms;
	const struct fleet_near *near; /* hosts to try first, or NULL */
	int timeout_ms;		       /* 0: PLACE_MS */
};

static void *place_thread(void *arg)
{
	struct place_job *j = arg;
	uint64_t t0 = now_ms();

	j->err =
		fleet_place(j->f, j->id, "{}", 2, j->near, j->timeout_ms ? j->timeout_ms : PLACE_MS,
			    j->owner, j->why, sizeof(j->why));
	j->ms = (double)(now_ms() - t0);
	return NULL;
}

static void *wake_thread(void *arg)
{
	struct place_job *j = arg;

	j->err = fleet_wake(j->f, j->id, "{}", 2, PLACE_MS, j->owner, j->why, sizeof(j->why));
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	struct fleet api;
	struct fleet_conf c;
	struct place_job j = {0};
	pthread_t t;
	char lines[65536] = "", servers_copy[1024], owner[FLEET_ID_MAX + 1], host[32], pat[96];
	char why[FLEET_ERR_MAX];
	pid_t crash, hosts[3];
	double ms[16];
	int nms = 0, status, err;

	if (argc == 7 && strcmp(argv[1], "--host") == 0)
		return host_main(argv[2], argv[3], atoi(argv[4]), argv[5], atoi(argv[6]));
	if (argc != 2) {
		fprintf(stderr, "usage: place-check SERVERS\n");
		return 2;
	}
	self = argv[0];
	check_on_fail = kill_group;
	servers_arg = argv[1];
	setpgid(0, 0);
	if (pipe2(report, O_CLOEXEC) < 0 || fcntl(report[0], F_SETFL, O_NONBLOCK) < 0)
		return 2;
	fcntl(report[1], F_SETFD, 0); /* the hosts inherit the write end */
	snprintf(servers_copy, sizeof(servers_copy), "%s", servers_arg);
	conf_init(&c, servers_copy, "");
	check(fleet_open(&api, &c, 30000) == 0, "open", "%s", api.err);

	/* a host that fetches a create and dies: after the ack wait another takes it, once */
	crash = spawn_host("crash1", "die-after-fetch");
	j.f = &api;
	snprintf(j.id, sizeof(j.id), "r1");
	pthread_create(&t, NULL, place_thread, &j);
	check(waitpid(crash, &status, 0) == crash && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "crash1-died", "status %d", status);
	for (int i = 0; i < 3; i++) {
		snprintf(host, sizeof(host), "h%d", i);
		hosts[i] = spawn_host(host, "normal");
	}
	pthread_join(t, NULL);
	check(j.err == 0 && j.owner[0] == 'h', "redelivered-before-claim", "%d %s (%s)", j.err,
	      j.owner, j.why);
	printf("r1: placed on %s in %.0f ms (crash1 died holding it)\n", j.owner, j.ms);

	/* a host that claims a create and dies before acknowledging it: taken over once its
	 * liveness lapsed, by one host */
	crash = spawn_host("crash2", "die-after-claim");
	usleep(1500000);	 /* its first beat, and it waits in its fetch */
	kill(hosts[0], SIGSTOP); /* the create goes to crash2 */
	kill(hosts[1], SIGSTOP);
	kill(hosts[2], SIGSTOP);
	memset(&j, 0, sizeof(j));
	j.f = &api;
	snprintf(j.id, sizeof(j.id), "r2");
	pthread_create(&t, NULL, place_thread, &j);
	check(waitpid(crash, &status, 0) == crash && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "crash2-died", "status %d", status);
	/* a read may lag the create a moment (a follower answers it) */
	for (int i = 0; i < 20; i++) {
		err = fleet_owner(&api, "r2", owner, NULL);
		if (err == 0)
			break;
		usleep(100000);
	}
	check(err == 0 && strcmp(owner, "crash2") == 0, "crash2-claimed", "%d %s", err, owner);
	for (int i = 0; i < 3; i++)
		kill(hosts[i], SIGCONT);
	pthread_join(t, NULL);
	usleep(500000);
	drain(lines, sizeof(lines));
	check(j.err == 0 && j.owner[0] == 'h' && count_lines(lines, "took r2 ") == 1 &&
		      strstr(lines, " 1\n") != NULL,
	      "redelivered-after-claim", "%d %s (%s); hosts said:\n%s", j.err, j.owner, j.why,
	      lines);
	printf("r2: moved from crash2 to %s in %.0f ms\n", j.owner, j.ms);
	check(count_lines(lines, "took r1 ") == 1, "r1-once", "%s", lines);

	/* a host that claims a create, lets its box go into the store (released at that
	 * message's sequence) and dies before acknowledging it: the message comes again after
	 * the ack wait, and no host runs the box from it ("released" is no host: it must not
	 * look like a host that died before running it; only a wake of that release may) */
	crash = spawn_host("crash3", "die-after-release");
	usleep(1500000);
	for (int i = 0; i < 3; i++)
		kill(hosts[i], SIGSTOP);
	struct place_job r3 = {.f = &api, .timeout_ms = 3000};

	snprintf(r3.id, sizeof(r3.id), "r3");
	pthread_create(&t, NULL, place_thread, &r3);
	check(waitpid(crash, &status, 0) == crash && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "crash3-died", "status %d", status);
	for (int i = 0; i < 3; i++)
		kill(hosts[i], SIGCONT);
	pthread_join(t, NULL);
	usleep(3 * ACK_WAIT_MS * 1000); /* redelivered, and handled */
	drain(lines, sizeof(lines));
	err = fleet_owner(&api, "r3", owner, NULL);
	check(count_lines(lines, "took r3 ") == 0 && count_lines(lines, "woke r3 ") == 0 &&
		      err == 0 && strcmp(owner, FLEET_RELEASED) == 0,
	      "released-not-rerun", "%d %s; %s", err, owner, lines);

	/* a lost host's box deleted through another host: retired for good, only on the word of
	 * the host that owns it now */
	err = fleet_retire(&api, "r2", "crash2");
	check(err == -ESTALE, "retire-not-its-host", "%d %s", err, api.err);
	err = fleet_retire(&api, "r2", j.owner);
	check(err == 0, "retire", "%d %s", err, api.err);
	err = fleet_owner(&api, "r2", owner, NULL);
	check(err == 0 && strcmp(owner, FLEET_UNSCHEDULABLE) == 0, "retired", "%d %s", err, owner);
	err = fleet_retire(&api, "r2", j.owner);
	check(err == -ENOENT, "retire-twice", "%d %s", err, api.err);

	/* one box placed by two calls at once: one message (its id is the message's id), one
	 * host runs it, both calls get that host */
	struct place_job d1 = {.f = &api}, d2 = {.f = &api};
	pthread_t t2;

	snprintf(d1.id, sizeof(d1.id), "d1");
	snprintf(d2.id, sizeof(d2.id), "d1");
	pthread_create(&t, NULL, place_thread, &d1);
	pthread_create(&t2, NULL, place_thread, &d2);
	pthread_join(t, NULL);
	pthread_join(t2, NULL);
	usleep(300000);
	drain(lines, sizeof(lines));
	check(d1.err == 0 && d2.err == 0 && strcmp(d1.owner, d2.owner) == 0 &&
		      count_lines(lines, "took d1 ") == 1,
	      "duplicate-publish-once", "%d %s / %d %s; %s", d1.err, d1.why, d2.err, d2.why, lines);

	/* a box released into the store (its host lets it go), then woken by two callers at
	 * once: one message, one host wakes it, both callers get that host; a third wake of
	 * a box awake answers at once */
	err = fleet_place(&api, "w1", "release", 7, NULL, PLACE_MS, owner, why, sizeof(why));
	for (int i = 0; i < 50 && count_lines(lines, "released w1 ") == 0; i++) {
		usleep(100000);
		drain(lines, sizeof(lines));
	}
	check(err == 0 && count_lines(lines, "released w1 ") == 1, "released", "%d %s; %s", err,
	      why, lines);
	struct place_job w1 = {.f = &api}, w2 = {.f = &api}, w3 = {.f = &api};

	snprintf(w1.id, sizeof(w1.id), "w1");
	snprintf(w2.id, sizeof(w2.id), "w1");
	snprintf(w3.id, sizeof(w3.id), "w1");
	pthread_create(&t, NULL, wake_thread, &w1);
	pthread_create(&t2, NULL, wake_thread, &w2);
	pthread_join(t, NULL);
	pthread_join(t2, NULL);
	usleep(500000);
	drain(lines, sizeof(lines));
	err = fleet_owner(&api, "w1", owner, NULL);
	check(w1.err == 0 && w2.err == 0 && strcmp(w1.owner, w2.owner) == 0 &&
		      count_lines(lines, "woke w1 ") == 1 && err == 0 &&
		      strcmp(owner, w1.owner) == 0,
	      "wake-race-once", "%d %s / %d %s; owner %s; %s", w1.err, w1.why, w2.err, w2.why,
	      owner, lines);
	wake_thread(&w3);
	usleep(300000);
	drain(lines, sizeof(lines));
	check(w3.err == 0 && strcmp(w3.owner, w1.owner) == 0 && count_lines(lines, "woke w1 ") == 1,
	      "wake-awake", "%d %s; %s", w3.err, w3.owner, lines);

	/* what is not a create of ours (no headers, a reply that is not the box's inbox, a
	 * subject with spaces) is dropped by the hosts, and wedges nothing */
	jsCtx *raw = (jsCtx *)api.js;
	natsMsg *bad = NULL;
	jsErrCode jerr = 0;

	check(js_Publish(NULL, raw, "sandbox.place.test", "junk", 4, NULL, &jerr) == NATS_OK,
	      "junk-published", "%d", (int)jerr);
	check(natsMsg_Create(&bad, "sandbox.place.test", NULL, "{}", 2) == NATS_OK &&
		      natsMsgHeader_Set(bad, "Sandbox-Box", "x1") == NATS_OK &&
		      natsMsgHeader_Set(bad, "Sandbox-Reply", "_INBOX.a b c") == NATS_OK &&
		      js_PublishMsg(NULL, raw, bad, NULL, &jerr) == NATS_OK,
	      "bad-reply-published", "%d", (int)jerr);
	natsMsg_Destroy(bad);
	usleep(500000);
	drain(lines, sizeof(lines));
	check(count_lines(lines, "took x1") == 0, "malformed-dropped", "%s", lines);

	/* locality: creates sent to h1 first (it holds their snapshot) all run there, each
	 * taken within the near wait, while it has room; with h1 full, one goes to the pool
	 * after that wait */
	struct fleet_near near = {.hosts = {"h1"}, .n = 1, .wait_ms = NEAR_MS};
	int placed = 4; /* r1, r2, d1, w1 */

	drain(lines, sizeof(lines));
	for (int i = 0, on_h1 = count_lines(lines, " h1 "); on_h1 + i < SLOTS; i++, placed++) {
		memset(&j, 0, sizeof(j));
		j.f = &api;
		j.near = &near;
		snprintf(j.id, sizeof(j.id), "n%d", i);
		place_thread(&j);
		check(j.err == 0 && strcmp(j.owner, "h1") == 0 && j.ms < NEAR_MS, "near",
		      "%s: %d %s: on %s in %.0f ms", j.id, j.err, j.why, j.owner, j.ms);
		printf("%s: near h1, placed there in %.0f ms\n", j.id, j.ms);
	}
	memset(&j, 0, sizeof(j));
	j.f = &api;
	j.near = &near;
	snprintf(j.id, sizeof(j.id), "nfull");
	place_thread(&j);
	check(j.err == 0 && j.owner[0] == 'h' && strcmp(j.owner, "h1") != 0 && j.ms >= NEAR_MS,
	      "near-full", "%d %s: on %s in %.0f ms", j.err, j.why, j.owner, j.ms);
	printf("nfull: near h1 (full), placed on %s in %.0f ms\n", j.owner, j.ms);
	placed++;

	/* the rest of 12 on 3 hosts of 4 (w1, woken, holds one) */
	for (int i = placed; i < 3 * SLOTS; i++) {
		memset(&j, 0, sizeof(j));
		j.f = &api;
		snprintf(j.id, sizeof(j.id), "b%d", i);
		place_thread(&j);
		check(j.err == 0, "place", "%s: %d %s", j.id, j.err, j.why);
		if (nms < 16)
			ms[nms++] = j.ms;
	}
	usleep(300000);
	drain(lines, sizeof(lines));
	for (int i = 0; i < 3; i++) {
		snprintf(pat, sizeof(pat), " h%d ", i);
		check(count_lines(lines, pat) <= SLOTS, "spread", "h%d took %d: %s", i,
		      count_lines(lines, pat), lines);
	}
	check(count_lines(lines, "took ") == 11 && count_lines(lines, "woke ") == 1, "all-placed",
	      "%s", lines);

	/* the 13th: no room anywhere */
	memset(&j, 0, sizeof(j));
	j.f = &api;
	snprintf(j.id, sizeof(j.id), "b13");
	j.err = fleet_place(&api, "b13", "{}", 2, NULL, 3000, j.owner, j.why, sizeof(j.why));
	check(j.err == -EAGAIN && strstr(j.why, "no host had room"), "unschedulable", "%d %s",
	      j.err, j.why);
	j.err = fleet_place(&api, "b13", "{}", 2, NULL, 3000, j.owner, j.why, sizeof(j.why));
	check(j.err == -EAGAIN && strstr(j.why, "cancelled"), "unschedulable-again", "%d %s", j.err,
	      j.why);
	sleep(2);
	drain(lines, sizeof(lines));
	err = fleet_owner(&api, "b13", owner, NULL);
	check(count_lines(lines, "took b13") == 0 && err == 0 &&
		      strcmp(owner, FLEET_UNSCHEDULABLE) == 0,
	      "unschedulable-stays", "%d %s; %s", err, owner, lines);
	check(count_lines(lines, "error ") == 0, "no-host-errors", "%s", lines);

	qsort(ms, (size_t)nms, sizeof(double), cmp_double);
	printf("place p50_ms=%.1f p99_ms=%.1f n=%d\n", ms[nms / 2], ms[nms - 1], nms);
	for (int i = 0; i < 3; i++)
		kill(hosts[i], SIGKILL);
	for (int i = 0; i < 3; i++)
		waitpid(hosts[i], NULL, 0);
	fleet_close(&api);
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Collections on a schedule (docs/fleet.md, "The collector"): with --gc-every SECONDS, each
 * workspace this host knows (its keys' workspaces, revoked ones too: their chunks stay in the
 * store) is collected once a period by one host of the fleet, with --gc-grace-s (an hour
 * unless said). The turn is the record turn.<workspace in hex> in the bucket store_gc_turns:
 * "<unix seconds> <host>", the time its last collection began. A host whose look finds a
 * turn that old takes it by a revision-conditioned update (the first look at a workspace
 * creates it, starting its clock: nothing is collected in a fleet's first period), so of the
 * hosts that look at once one collects. A collection that fails (pushes did not let it run,
 * the store did not answer) sets the turn so that it comes again in GC_RETRY_S.
 *
 * The times are the hosts' wall clocks: a skew between hosts moves a turn by as much, which
 * a period of hours does not notice. Collections run one at a time on a host (fleet_gc_hold:
 * a POST /gc meanwhile gets 409), on a thread of their own.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fleetd.h"
#include "fstore.h"

#define GC_EVERY_MAX (30 * 24 * 3600)
#define GC_GRACE_MAX (30 * 24 * 3600)
#define GC_RETRY_S   600
#define TURN_BUCKET  "store_gc_turns"
#define TURN_VAL_MAX 128

static uint64_t every_s; /* 0: no schedule */
static int64_t grace_s = 3600;
static struct fleet_kv turns_kv;
static bool turns_open;
static uint64_t next_look_ms;

int fleet_gc_turn_option(const char *name, const char *val)
{
	uint64_t v;

	if (strcmp(name, "gc-every") != 0 && strcmp(name, "gc-grace-s") != 0)
		return 0;
	if (!parse_u64(val, 0, name[3] == 'e' ? GC_EVERY_MAX : GC_GRACE_MAX, &v)) {
		fprintf(stderr, "sandboxd: --%s takes 0 to %d seconds\n", name,
			name[3] == 'e' ? GC_EVERY_MAX : GC_GRACE_MAX);
		return -1;
	}
	if (name[3] == 'e')
		every_s = v;
	else
		grace_s = (int64_t)v;
	return 1;
}

bool fleet_gc_turn_asked(void)
{
	return every_s > 0;
}

int fleet_gc_turn_start(void)
{
	int err;

	if (!every_s)
		return 0;
	if (!snap_store_hooks) {
		snprintf(fleetd.err, sizeof(fleetd.err),
			 "--gc-every collects a store's chunks: give --store-endpoint");
		return -EINVAL;
	}
	if ((err = fleet_kv_open(&fleetd, TURN_BUCKET, TURN_VAL_MAX, &turns_kv)) < 0)
		return err;
	turns_open = true;
	sd_log("gc: each workspace collected every %" PRIu64 " s by one host (grace %" PRId64 " s)",
	       every_s, grace_s);
	return 0;
}

static void turn_key(const char *ws, char key[8 + 2 * SD_WORKSPACE_MAX + 1])
{
	size_t n = strnlen(ws, SD_WORKSPACE_MAX);

	memcpy(key, "turn.", 5);
	for (size_t i = 0; i < n; i++)
		sprintf(key + 5 + 2 * i, "%02x", (unsigned char)ws[i]);
	key[5 + 2 * n] = 0;
}

/* Whether this host takes ws's turn now (it is due, and the update was this host's). */
static bool turn_take(const char *ws, const char *key, int64_t now)
{
	char val[TURN_VAL_MAX], mine[TURN_VAL_MAX];
	uint64_t rev = 0;
	long long t;
	int r = fleet_kv_get(&fleetd, turns_kv.kv, key, val, sizeof(val), &rev);

	snprintf(mine, sizeof(mine), "%lld %s", (long long)now, fleetd_host_id());
	if (r == -ENOENT) { /* its clock starts: the first turn a period from now */
		if (fleet_kv_create(&fleetd, turns_kv.kv, key, mine, &rev) == 0)
			sd_log("gc %s: its first collection in %" PRIu64 " s", ws, every_s);
		return false;
	}
	if (r < 0 && r != -EMSGSIZE)
		return false; /* the cluster away: the next look */
	/* a value not of ours (too long, not a time, a time ahead by more than a period: a
	 * clock far off) is due, and replaced */
	if (r == 0 && sscanf(val, "%lld", &t) == 1 && now - t < (int64_t)every_s &&
	    t - now < (int64_t)every_s)
		return false;
	return fleet_kv_update(&fleetd, turns_kv.kv, key, mine, rev) == 0;
}

struct round {
	unsigned n;
	char (*ws)[SD_WORKSPACE_MAX + 1];
};

static void *round_thread(void *arg)
{
	struct round *rd = arg;

	for (unsigned i = 0; i < rd->n; i++) {
		char key[8 + 2 * SD_WORKSPACE_MAX + 1], err[512] = "";
		struct store_gc_report rep;
		int64_t now = (int64_t)time(NULL);

		turn_key(rd->ws[i], key);
		if (!turn_take(rd->ws[i], key, now))
			continue;
		if (fleet_gc_collect(rd->ws[i], grace_s, false, &rep, err, sizeof(err)) == 200)
			continue;
		/* failed: due again in GC_RETRY_S (or its period, if shorter) */
		char val[TURN_VAL_MAX];
		int64_t retry = (int64_t)every_s < GC_RETRY_S ? (int64_t)every_s : GC_RETRY_S;

		snprintf(val, sizeof(val), "%lld %s", (long long)(now - (int64_t)every_s + retry),
			 fleetd_host_id());
		if (fleet_kv_put(&fleetd, turns_kv.kv, key, val) < 0)
			sd_log("gc %s: its turn not set back for a retry: %s", rd->ws[i],
			       fleetd.err);
	}
	free(rd->ws);
	free(rd);
	fleet_gc_unhold();
	return NULL;
}

struct ws_set {
	struct round *rd;
	unsigned cap;
};

static void add_ws(const struct sd_key *k, void *arg)
{
	struct ws_set *s = arg;

	for (unsigned i = 0; i < s->rd->n; i++)
		if (strcmp(s->rd->ws[i], k->workspace) == 0)
			return;
	if (s->rd->n < s->cap)
		snprintf(s->rd->ws[s->rd->n++], SD_WORKSPACE_MAX + 1, "%s", k->workspace);
}

void fleet_gc_turn_tick(void)
{
	uint64_t now = sd_now_ms(), look;

	if (!turns_open || now < next_look_ms)
		return;
	/* each host looks four times a period (between 1 s and 5 minutes apart) */
	look = every_s * 1000 / 4;
	next_look_ms = now + (look < 1000 ? 1000 : look > 300000 ? 300000 : look);
	if (!fleet_gc_hold())
		return; /* one runs here: the next look */
	struct round *rd = calloc(1, sizeof(*rd));
	struct ws_set set = {rd, SD_KEYS_MAX};
	pthread_attr_t a;
	pthread_t t;

	if (!rd || !(rd->ws = calloc(SD_KEYS_MAX, sizeof(*rd->ws)))) {
		free(rd);
		fleet_gc_unhold();
		return;
	}
	keys_foreach(add_ws, &set);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (rd->n == 0 || pthread_create(&t, &a, round_thread, rd) != 0) {
		free(rd->ws);
		free(rd);
		fleet_gc_unhold();
	}
	pthread_attr_destroy(&a);
}

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
 * the store did not answer) sets the turn so that it comes again in GC_RETRY_S. A turn's
 * collection waits a minute for the workspace's pushes (an operator's ten), and takes the
 * host's hold only while it runs.
 *
 * The times are the hosts' wall clocks: a skew between hosts moves a turn by as much, which
 * a period of hours does not notice. Collections run one at a time on a host (fleet_gc_hold:
 * a POST /gc meanwhile gets 409), on a thread of their own.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fleetd.h"
#include "fstore.h"

#define GC_EVERY_MAX (30 * 24 * 3600)
#define GC_RETRY_S   600
#define GC_GRACE_MIN 60	   /* a client's chunks wait that long for its import at least */
#define GC_PUSH_WAIT 60000 /* a turn's collection waits for pushes (an operator's: 10 min) */
#define TURN_BUCKET  "store_gc_turns"
#define TURN_VAL_MAX 128

static uint64_t every_s; /* 0: no schedule */
static int64_t grace_s = FLEET_GC_GRACE_DEFAULT;
static bool grace_asked;
static atomic_bool round_on; /* one round of looks at a time */
static struct fleet_kv turns_kv;
static bool turns_open;
static uint64_t next_look_ms;

int fleet_gc_turn_option(const char *name, const char *val)
{
	bool every = strcmp(name, "gc-every") == 0;
	uint64_t v, min = every ? 0 : GC_GRACE_MIN, max = every ? GC_EVERY_MAX : FLEET_GC_GRACE_MAX;

	if (!every && strcmp(name, "gc-grace-s") != 0)
		return 0;
	if (!parse_u64(val, min, max, &v)) {
		fprintf(stderr, "sandboxd: --%s takes %llu to %llu seconds\n", name,
			(unsigned long long)min, (unsigned long long)max);
		return -1;
	}
	if (every) {
		every_s = v;
	} else {
		grace_s = (int64_t)v;
		grace_asked = true;
	}
	return 1;
}

bool fleet_gc_turn_asked(void)
{
	return every_s > 0 || grace_asked;
}

int fleet_gc_turn_start(void)
{
	int err;

	if (!every_s && grace_asked) {
		snprintf(fleetd.err, sizeof(fleetd.err), "--gc-grace-s is --gc-every's: give both");
		return -EINVAL;
	}
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

#define TURN_KEY_MAX (5 + 2 * FLEET_WS_MAX + 1)

/* turn.<ws in hex>: 0, or -EINVAL for a name that is not a workspace's */
static int turn_key(const char *ws, char key[TURN_KEY_MAX])
{
	char wsx[2 * FLEET_WS_MAX + 1];

	if (fleet_ws_hex(ws, wsx) < 0)
		return -EINVAL;
	snprintf(key, TURN_KEY_MAX, "turn.%s", wsx);
	return 0;
}

/* The time a turn's value gives, or -1 for one not of ours (not a time, out of range). */
static int64_t turn_time(const char *val)
{
	char *end;
	long long t;

	errno = 0;
	t = strtoll(val, &end, 10);
	if (errno || end == val || *end != ' ' || t < 0)
		return -1;
	return (int64_t)t;
}

/* Whether this host takes ws's turn now (it is due, and the update was this host's): 1, 0
 * (not due, or another's), -EIO (the cluster away: the round ends). */
static int turn_take(const char *ws, const char *key, int64_t now)
{
	char val[TURN_VAL_MAX], mine[TURN_VAL_MAX];
	uint64_t rev = 0;
	int64_t t;
	int r = fleet_kv_get(&fleetd, turns_kv.kv, key, val, sizeof(val), &rev);

	snprintf(mine, sizeof(mine), "%lld %s", (long long)now, fleetd_host_id());
	if (r == -ENOENT) { /* its clock starts: the first turn a period from now */
		if ((r = fleet_kv_create(&fleetd, turns_kv.kv, key, mine, &rev)) == 0)
			sd_log("gc %s: its first collection in %" PRIu64 " s", ws, every_s);
		return r == -EIO ? -EIO : 0;
	}
	if (r < 0 && r != -EMSGSIZE)
		return -EIO;
	/* due: a period since the last began; a value not of ours (too long, not a time, a
	 * time ahead by a period or more: a clock far off) is due too, and replaced */
	t = r == 0 ? turn_time(val) : -1;
	if (t >= 0 && t <= now + (int64_t)every_s && now - t < (int64_t)every_s)
		return 0;
	if ((r = fleet_kv_update(&fleetd, turns_kv.kv, key, mine, rev)) == -ESTALE) {
		/* moved on, or ours landed and its answer was lost: the record tells */
		uint64_t now_rev;

		r = fleet_kv_get(&fleetd, turns_kv.kv, key, val, sizeof(val), &now_rev) == 0 &&
				    strcmp(val, mine) == 0
			    ? 0
			    : -ESTALE;
	}
	return r == 0 ? 1 : r == -EIO ? -EIO : 0;
}

struct round {
	unsigned n;
	char (*ws)[SD_WORKSPACE_MAX + 1];
};

/* The round: each workspace due collected in turn, the host's hold taken for each (an
 * operator's collection, or sandboxd stopping, ends the round: the next look goes on). */
static void *round_thread(void *arg)
{
	struct round *rd = arg;

	for (unsigned i = 0; i < rd->n; i++) {
		char key[TURN_KEY_MAX], err[512] = "";
		struct store_gc_report rep;
		int took;

		if (turn_key(rd->ws[i], key) < 0)
			continue;
		if (!fleet_gc_hold())
			break;
		took = turn_take(rd->ws[i], key, (int64_t)time(NULL));
		if (took == 1 && fleet_gc_collect(rd->ws[i], grace_s, false, GC_PUSH_WAIT, &rep,
						  err, sizeof(err)) != 200) {
			/* failed: due again GC_RETRY_S (or its period, if shorter) from now */
			char val[TURN_VAL_MAX];
			int64_t now = (int64_t)time(NULL), retry = (int64_t)every_s < GC_RETRY_S
									   ? (int64_t)every_s
									   : GC_RETRY_S;
			int r;

			snprintf(val, sizeof(val), "%lld %s",
				 (long long)(now - (int64_t)every_s + retry), fleetd_host_id());
			if ((r = fleet_kv_put(&fleetd, turns_kv.kv, key, val)) < 0)
				sd_log("gc %s: its turn not set back for a retry: %s", rd->ws[i],
				       strerror(-r));
		}
		fleet_gc_unhold();
		if (took == -EIO) {
			sd_log("gc: the turns' bucket did not answer: the round ends");
			break;
		}
	}
	free(rd->ws);
	free(rd);
	atomic_store(&round_on, false);
	return NULL;
}

static void add_ws(const struct sd_key *k, void *arg)
{
	struct round *rd = arg;

	if (rd->n < SD_KEYS_MAX)
		snprintf(rd->ws[rd->n++], SD_WORKSPACE_MAX + 1, "%s", k->workspace);
}

static int ws_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

void fleet_gc_turn_tick(void)
{
	uint64_t now = sd_now_ms(), look;

	if (!turns_open || now < next_look_ms)
		return;
	/* each host looks four times a period, between 1 s and 5 minutes apart */
	look = every_s * 1000 / 4;
	next_look_ms = now + (look < 1000 ? 1000 : look > 300000 ? 300000 : look);
	if (atomic_exchange(&round_on, true))
		return; /* the last round goes on: the next look */
	struct round *rd = calloc(1, sizeof(*rd));
	pthread_attr_t a;
	pthread_t t;
	unsigned n = 0;

	if (!rd || !(rd->ws = calloc(SD_KEYS_MAX, sizeof(*rd->ws)))) {
		free(rd);
		atomic_store(&round_on, false);
		return;
	}
	keys_foreach(add_ws, rd); /* (every key's workspace: sorted, each once) */
	qsort(rd->ws, rd->n, sizeof(*rd->ws), ws_cmp);
	for (unsigned i = 0; i < rd->n; i++)
		if (n == 0 || strcmp(rd->ws[i], rd->ws[n - 1]) != 0)
			memmove(rd->ws[n++], rd->ws[i], sizeof(*rd->ws));
	rd->n = n;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (rd->n == 0 || pthread_create(&t, &a, round_thread, rd) != 0) {
		free(rd->ws);
		free(rd);
		atomic_store(&round_on, false);
	}
	pthread_attr_destroy(&a);
}

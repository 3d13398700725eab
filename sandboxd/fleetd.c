/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandboxd in a fleet (fleetd.h): the options, the start, the host's loop that takes creates
 * from the pool's queue while this host has room, and the copies every host keeps of the
 * owners bucket (box id -> host) and the hosts bucket (host -> address, by its beats), read
 * by the loop and the front thread without a round trip. API keys: the keys bucket mirrored
 * into the key files (keys.c reloads them within a tick).
 */
#include <errno.h>
#include <inttypes.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nats/nats.h>

#include "fleetd.h"

#define HOSTS_MAX     256
#define OWNERS_SLOTS  65536 /* the owners copy: open hashing, ids of every box of the fleet */
#define BEAT_MS	      1000
#define TAKE_WAIT_MS  250
#define FLEET_WAIT_MS 30000 /* at start: for the cluster to elect its leaders */

bool fleetd_on;
struct fleet fleetd;

/* replicas 0: as many as the servers given, up to 3 (1 for fewer than 3): whoever makes the
 * fleet's streams and buckets first (a host, or `keys create --fleet`) makes them alike */
static struct fleet_conf conf = {.pool = "default", .replicas = 0};
static char servers_text[1024];
static unsigned slots = 4;
static char advertise[FLEETD_ADDR_MAX];
static struct fleet_kv keys_kv;
static struct fleet_watch *w_owners, *w_hosts, *w_keys;
static pthread_t host_thread;
static bool host_started;
static atomic_bool stopping;
static atomic_uint used, inflight; /* boxes running here; requests taken, not yet boxes */
static atomic_bool draining;	   /* `sandboxd drain`: no more creates taken here */
static uint64_t started_ms;	   /* fleetd_start's */
struct fleet_kv fleetd_names;

/* ---- options ---- */

static int split_servers(void)
{
	char *save = NULL;

	conf.nservers = 0;
	for (char *s = strtok_r(servers_text, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
		if (conf.nservers == FLEET_SERVERS_MAX || strncmp(s, "nats://", 7) != 0)
			return -1;
		conf.servers[conf.nservers++] = s;
	}
	return conf.nservers ? 0 : -1;
}

/* The replicas when none were given: a stream on one node dies with it. */
static void default_replicas(void)
{
	if (!conf.replicas)
		conf.replicas = conf.nservers >= 3 ? 3 : 1;
}

unsigned fleetd_near_ms = FLEETD_NEAR_MS;

int fleetd_option(const char *name, const char *val)
{
	uint64_t v;

	if (strcmp(name, "fleet") == 0) {
		snprintf(servers_text, sizeof(servers_text), "%s", val);
		if (strlen(val) >= sizeof(servers_text) || split_servers() < 0) {
			fprintf(stderr,
				"sandboxd: --fleet takes nats://HOST:PORT[,nats://...] (at "
				"most %d)\n",
				FLEET_SERVERS_MAX);
			return -1;
		}
		fleetd_on = true;
		return 1;
	}
	if (strcmp(name, "host-id") == 0 || strcmp(name, "fleet-pool") == 0) {
		if (!fleet_id_ok(val)) {
			fprintf(stderr, "sandboxd: --%s takes 1 to %d of [A-Za-z0-9_-]\n", name,
				FLEET_ID_MAX);
			return -1;
		}
		snprintf(name[0] == 'h' ? conf.host : conf.pool, FLEET_ID_MAX + 1, "%s", val);
		return 1;
	}
	if (strcmp(name, "slots") == 0 || strcmp(name, "fleet-replicas") == 0) {
		bool s = name[0] == 's';

		if (!parse_u64(val, 1, s ? SD_BOXES_MAX : 5, &v)) {
			fprintf(stderr, "sandboxd: --%s takes 1 to %d\n", name,
				s ? SD_BOXES_MAX : 5);
			return -1;
		}
		if (s)
			slots = (unsigned)v;
		else
			conf.replicas = (int)v;
		return 1;
	}
	if (strcmp(name, "fleet-near-ms") == 0) {
		if (!parse_u64(val, 0, 10000, &v)) {
			fprintf(stderr,
				"sandboxd: --fleet-near-ms takes 0 (no near try) to 10000\n");
			return -1;
		}
		fleetd_near_ms = (unsigned)v;
		return 1;
	}
	if (strcmp(name, "advertise") == 0) {
		const char *colon = strrchr(val, ':');

		if (!colon || colon == val || strlen(val) >= sizeof(advertise) ||
		    !parse_u64(colon + 1, 1, 65535, &v)) {
			fprintf(stderr, "sandboxd: --advertise takes HOST:PORT\n");
			return -1;
		}
		snprintf(advertise, sizeof(advertise), "%s", val);
		return 1;
	}
	return 0;
}

int fleetd_check(const char *listen)
{
	if (!fleetd_on && fleet_gc_turn_asked()) {
		fprintf(stderr, "sandboxd: --gc-every collects a fleet's store: give --fleet\n");
		return -1;
	}
	if (!fleetd_on)
		return 0;
	if (!conf.host[0]) {
		fprintf(stderr, "sandboxd: --fleet needs --host-id\n");
		return -1;
	}
	if (!advertise[0]) {
		if (strncmp(listen, "0.0.0.0:", 8) == 0) {
			fprintf(stderr,
				"sandboxd: --listen %s: give --advertise HOST:PORT, the "
				"address other hosts reach this one at\n",
				listen);
			return -1;
		}
		snprintf(advertise, sizeof(advertise), "%s", listen);
	}
	return 0;
}

int fleetd_self_addr(char addr[FLEETD_ADDR_MAX])
{
	snprintf(addr, FLEETD_ADDR_MAX, "%s", advertise);
	return advertise[0] ? 0 : -ENOENT;
}

bool fleetd_self(const char *host)
{
	return strcmp(host, conf.host) == 0;
}

const char *fleetd_host_id(void)
{
	return conf.host;
}

/* ---- the owners' copy ---- */

struct owner_slot {
	char id[SD_ID_LEN + 1]; /* "" free; "-" a tombstone */
	char host[FLEET_ID_MAX + 1];
};
static struct owner_slot *owners;
static unsigned owners_used, owners_live; /* slots not free (live and tombstones); live */
static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned owner_hash(const char *id)
{
	unsigned h = 2166136261u;

	for (; *id; id++)
		h = (h ^ (unsigned char)*id) * 16777619u;
	return h % OWNERS_SLOTS;
}

/* The slot of id, or the first free one on its chain (NULL: full). Under map_lock. */
static struct owner_slot *owner_slot(const char *id, bool for_insert)
{
	unsigned h = owner_hash(id);
	struct owner_slot *tomb = NULL;

	for (unsigned i = 0; i < OWNERS_SLOTS; i++) {
		struct owner_slot *s = &owners[(h + i) % OWNERS_SLOTS];

		if (strcmp(s->id, id) == 0)
			return s;
		if (s->id[0] == '-' && !tomb)
			tomb = s;
		if (!s->id[0])
			return for_insert ? (tomb ? tomb : s) : NULL;
	}
	return for_insert ? tomb : NULL;
}

/* Tombstones cleared: the live entries put in a fresh table. Under map_lock. */
static void owners_rehash(void)
{
	struct owner_slot *old = owners, *fresh = calloc(OWNERS_SLOTS, sizeof(*fresh));

	if (!fresh)
		return;
	owners = fresh;
	owners_used = owners_live = 0;
	for (unsigned i = 0; i < OWNERS_SLOTS; i++)
		if (old[i].id[0] && old[i].id[0] != '-') {
			struct owner_slot *s = owner_slot(old[i].id, true);

			*s = old[i];
			owners_used++;
			owners_live++;
		}
	free(old);
}

static void on_owner(void *arg, const char *key, const char *val, size_t len)
{
	(void)arg;
	if (!key || strncmp(key, "box.", 4) != 0 || strlen(key + 4) != SD_ID_LEN)
		return;
	const char *id = key + 4;
	char host[FLEET_ID_MAX + 1] = "";
	const char *colon = val ? memchr(val, ':', len) : NULL;

	if (colon && (size_t)(colon - val) <= FLEET_ID_MAX) {
		memcpy(host, val, (size_t)(colon - val));
		host[colon - val] = 0;
	}
	pthread_mutex_lock(&map_lock);
	struct owner_slot *s = owner_slot(id, false);

	if (!fleet_id_ok(host) || strcmp(host, FLEET_UNSCHEDULABLE) == 0) {
		if (s) {
			strcpy(s->id, "-");
			owners_live--;
		}
	} else {
		if (!s && owners_used >= OWNERS_SLOTS * 3 / 4 &&
		    owners_used - owners_live > OWNERS_SLOTS / 4)
			owners_rehash(); /* mostly tombstones: made anew */
		if (!s && owners_used < OWNERS_SLOTS * 3 / 4 && (s = owner_slot(id, true))) {
			if (!s->id[0])
				owners_used++;
			owners_live++;
			snprintf(s->id, sizeof(s->id), "%s", id);
		}
		if (s)
			snprintf(s->host, sizeof(s->host), "%s", host);
		else
			sd_log("fleet: the owners' copy is full: box %s is looked up in NATS", id);
	}
	pthread_mutex_unlock(&map_lock);
}

int fleetd_owner_of(const char *id, char host[FLEET_ID_MAX + 1], bool ask)
{
	int err = -ENOENT;

	pthread_mutex_lock(&map_lock);
	struct owner_slot *s = owners ? owner_slot(id, false) : NULL;

	if (s) {
		snprintf(host, FLEET_ID_MAX + 1, "%s", s->host);
		err = 0;
	}
	pthread_mutex_unlock(&map_lock);
	if (err == 0 || !ask || !fleet_id_ok(id))
		return err;
	/* not (yet) in the copy: the bucket's leader knows (a create a moment old) */
	return fleetd_owner_fresh(id, host, 0);
}

int fleetd_owner_fresh(const char *id, char host[FLEET_ID_MAX + 1], unsigned pause_ms)
{
	uint64_t rev;
	int err;

	if (pause_ms) {
		struct timespec ts = {pause_ms / 1000, (long)(pause_ms % 1000) * 1000000L};

		nanosleep(&ts, NULL);
	}
	err = fleet_owner(&fleetd, id, host, &rev);
	return err == 0 && strcmp(host, FLEET_UNSCHEDULABLE) == 0 ? -ENOENT : err;
}

/* ---- the hosts' copy: a host is live while its beats come ---- */

struct host_rec {
	char id[FLEET_ID_MAX + 1];
	char addr[FLEETD_ADDR_MAX];
	uint64_t seen_ms;
	bool room; /* at its last beat: a slot free, not draining */
};
static struct host_rec hosts[HOSTS_MAX];
static unsigned nhosts;

static void on_host(void *arg, const char *key, const char *val, size_t len)
{
	char text[512], addr[FLEETD_ADDR_MAX] = "";

	(void)arg;
	if (!key || !val || !fleet_id_ok(key) || len >= sizeof(text))
		return;
	memcpy(text, val, len);
	text[len] = 0;
	const char *a = strstr(text, "addr=");

	if (!a || sscanf(a + 5, "%63[^ ]", addr) != 1)
		return;
	pthread_mutex_lock(&map_lock);
	unsigned i = 0;

	while (i < nhosts && strcmp(hosts[i].id, key) != 0)
		i++;
	if (i == nhosts && nhosts < HOSTS_MAX)
		snprintf(hosts[nhosts++].id, sizeof(hosts[0].id), "%s", key);
	if (i < nhosts) {
		const char *sl = strstr(text, "slots="), *us = strstr(text, "used=");
		unsigned ns = 0, nu = 0;

		snprintf(hosts[i].addr, sizeof(hosts[i].addr), "%s", addr);
		hosts[i].seen_ms = sd_now_ms();
		hosts[i].room = sl && us && sscanf(sl + 6, "%u", &ns) == 1 &&
				sscanf(us + 5, "%u", &nu) == 1 && nu < ns &&
				!strstr(text, " draining");
	}
	pthread_mutex_unlock(&map_lock);
}

uint64_t fleetd_host_lapsed_ms(const char *host)
{
	uint64_t now = sd_now_ms(), seen = started_ms;

	pthread_mutex_lock(&map_lock);
	for (unsigned i = 0; i < nhosts; i++)
		if (strcmp(hosts[i].id, host) == 0 && hosts[i].seen_ms)
			seen = hosts[i].seen_ms;
	pthread_mutex_unlock(&map_lock);
	return now > seen ? now - seen : 0;
}

/* A list asks every host the copy saw beat this lately, whatever the bucket says. */
#define LIST_RECENT_MS 60000

static bool host_live(const struct host_rec *h, uint64_t now)
{
	return h->seen_ms && now - h->seen_ms < fleetd.conf.liveness_ttl_ms;
}

bool fleetd_host_room(const char *host)
{
	bool room = false;
	uint64_t now = sd_now_ms();

	if (fleetd_self(host))
		return !atomic_load(&draining) &&
		       atomic_load(&used) + atomic_load(&inflight) < slots;
	pthread_mutex_lock(&map_lock);
	for (unsigned i = 0; i < nhosts; i++)
		if (strcmp(hosts[i].id, host) == 0)
			room = host_live(&hosts[i], now) && hosts[i].room;
	pthread_mutex_unlock(&map_lock);
	return room;
}

int fleetd_host_addr(const char *host, char addr[FLEETD_ADDR_MAX])
{
	int err = -ENOENT;
	uint64_t now = sd_now_ms();

	pthread_mutex_lock(&map_lock);
	for (unsigned i = 0; i < nhosts; i++)
		if (strcmp(hosts[i].id, host) == 0 && host_live(&hosts[i], now)) {
			snprintf(addr, FLEETD_ADDR_MAX, "%s", hosts[i].addr);
			err = 0;
		}
	pthread_mutex_unlock(&map_lock);
	return err;
}

/* The bucket's own word (a watcher's copy may lag after the cluster lost a node): the value
 * of host's liveness entry, expired by the server. */
int fleetd_host_addr_ask(const char *host, char addr[FLEETD_ADDR_MAX])
{
	char text[512];
	const char *a;

	if (fleetd_host_addr(host, addr) == 0)
		return 0;
	if (!fleet_id_ok(host) ||
	    fleet_kv_get(&fleetd, fleetd.hosts, host, text, sizeof(text), NULL) < 0 ||
	    !(a = strstr(text, "addr=")) || sscanf(a + 5, "%63[^ ]", addr) != 1)
		return -ENOENT;
	return 0;
}

/* id into out[0..*n) unless there (at most max). */
static void host_add(char (*out)[FLEET_ID_MAX + 1], unsigned *n, unsigned max, const char *id)
{
	for (unsigned i = 0; i < *n; i++)
		if (strcmp(out[i], id) == 0)
			return;
	if (*n < max)
		snprintf(out[(*n)++], FLEET_ID_MAX + 1, "%.63s", id);
}

unsigned fleetd_hosts_ask(char (*out)[FLEET_ID_MAX + 1], unsigned max)
{
	kvKeysList keys = {0};
	unsigned n = 0;
	uint64_t now = sd_now_ms();

	if (kvStore_Keys(&keys, (kvStore *)fleetd.hosts, NULL) == NATS_OK) {
		for (int i = 0; i < keys.Count; i++)
			if (fleet_id_ok(keys.Keys[i]))
				host_add(out, &n, max, keys.Keys[i]);
		kvKeysList_Destroy(&keys);
	}
	/* and every host this copy saw beat in the last minute, whatever the bucket says now: a
	 * loaded host's beat lapses its 5 s now and then, and its boxes must not drop out of a
	 * list (a suite's runs had lists empty of every other host's boxes); a host really gone
	 * does not answer, and its part is missing after the list's wait, as it would be */
	pthread_mutex_lock(&map_lock);
	for (unsigned i = 0; i < nhosts; i++)
		if (hosts[i].seen_ms && now - hosts[i].seen_ms < LIST_RECENT_MS)
			host_add(out, &n, max, hosts[i].id);
	pthread_mutex_unlock(&map_lock);
	/* this host, whatever either says (its own beat may lag): its boxes are always in */
	host_add(out, &n, max, fleetd_host_id());
	if (n == 1)
		sd_log("fleet: no other host known alive in the last minute: a list of this one");
	return n;
}

/* ---- keys: the bucket's records as this host's key files ---- */

static void on_key(void *arg, const char *key, const char *val, size_t len)
{
	char text[512];

	(void)arg;
	if (!key || !val || strncmp(key, "k.", 2) != 0 || len >= sizeof(text))
		return;
	memcpy(text, val, len);
	text[len] = 0;
	if (keys_mirror(key + 2, text) < 0)
		sd_log("fleet: key record %.40s is not a key: ignored", key);
}

/* ---- names ---- */

void fleetd_name_key(const char *workspace, const char *name, char key[80])
{
	uint8_t h[SHA256_DIGEST_LENGTH];
	char both[SD_WORKSPACE_MAX + 1 + SD_NAME_MAX + 1];
	size_t wl = strnlen(workspace, SD_WORKSPACE_MAX), nl = strnlen(name, SD_NAME_MAX);

	/* the workspace's NUL between them: no two pairs alike */
	memcpy(both, workspace, wl);
	both[wl] = 0;
	memcpy(both + wl + 1, name, nl);
	SHA256((const uint8_t *)both, wl + 1 + nl, h);
	strcpy(key, "n.");
	for (int i = 0; i < 20; i++)
		snprintf(key + 2 + 2 * i, 3, "%02x", h[i]);
}

/* ---- the host's loop ---- */

struct take_job {
	struct sd_job job;
	struct fleet_req r;
};

/* On the loop: a request this host took becomes a box (a create as the API would make it,
 * its answer kept for the host that placed it). */
static void take_done(struct sd_job *j)
{
	struct take_job *t = (struct take_job *)j;

	fleet_rpc_take(t->r.id, t->r.data, t->r.len, t->r.again);
	atomic_fetch_sub(&inflight, 1);
	fleetd_tick();
	free(t->r.data);
	free(t);
}

static void *host_loop(void *arg)
{
	uint64_t last_beat = 0, last_err = 0;
	char info[160];

	(void)arg;
	while (!atomic_load(&stopping)) {
		uint64_t now = sd_now_ms();

		if (now - last_beat >= BEAT_MS) {
			snprintf(info, sizeof(info), "addr=%s slots=%u used=%u%s", advertise, slots,
				 atomic_load(&used), atomic_load(&draining) ? " draining" : "");
			if (fleet_beat(&fleetd, info) < 0 && now - last_err > 10000) {
				sd_log("%s", fleetd.err);
				last_err = now;
			}
			last_beat = now;
		}
		if (atomic_load(&draining) ||
		    atomic_load(&used) + atomic_load(&inflight) >= slots) {
			fleet_shed(&fleetd);
			nats_Sleep(100);
			continue;
		}
		struct take_job *t = calloc(1, sizeof(*t));

		if (!t) {
			nats_Sleep(100);
			continue;
		}
		int n = fleet_take(&fleetd, TAKE_WAIT_MS, &t->r);

		if (n == 1) {
			atomic_fetch_add(&inflight, 1);
			t->job.done = take_done;
			work_post(&t->job);
			continue;
		}
		free(t);
		if (n < 0) {
			if (now - last_err > 10000) {
				sd_log("fleet: taking creates: %s", fleetd.err);
				last_err = now;
			}
			nats_Sleep(200);
		}
	}
	return NULL;
}

static void fence_tick(void);

void fleetd_tick(void)
{
	unsigned n = 0;

	for (struct box *b = box_first(); b; b = b->next)
		if (b->status != BOX_STOPPED && b->status != BOX_DELETING)
			n++;
	atomic_store(&used, n);
	fleetd_lost_tick();
	fence_tick();
	box_checkpoint_tick(sd_now_ms());
	fleet_gc_turn_tick();
}

/* ---- drain: a host emptied for maintenance ---- */

static void drain(struct sd_req *q)
{
	unsigned moving = 0, waiting = 0, failed = 0;

	if (!snap_store_hooks) {
		req_reply_error(q, 409, "Conflict",
				"a drain moves sandboxes into the object store: serve with "
				"--store-endpoint");
		return;
	}
	atomic_store(&draining, true);
	for (struct box *b = box_first(); b; b = b->next) {
		if (b->status == BOX_READY && !b->busy && box_stop_job(b) == 0)
			moving++;
		else if (b->busy || b->status == BOX_PROVISIONING)
			waiting++; /* a job holds it: asked again by the next drain */
		else if (b->status == BOX_FAILED)
			failed++;
	}
	sd_log("drain: no more creates here; %u boxes going into the store, %u busy", moving,
	       waiting);
	req_reply_json(q, 200,
		       json_pack("{s:b, s:I, s:I, s:I}", "draining", 1, "moving",
				 (json_int_t)moving, "busy", (json_int_t)waiting, "failed",
				 (json_int_t)failed));
}

int fleetd_start(void)
{
	int err;

	conf.ack_wait_ms = 5000;
	conf.liveness_ttl_ms = 5000;
	started_ms = sd_now_ms();
	default_replicas();
	owners = calloc(OWNERS_SLOTS, sizeof(*owners));
	if (!owners)
		return -ENOMEM;
	if ((err = fleet_open(&fleetd, &conf, FLEET_WAIT_MS)) < 0 ||
	    (err = fleet_kv_open(&fleetd, "sandbox_names", 512, &fleetd_names)) < 0 ||
	    (err = fleet_kv_open(&fleetd, "sandbox_keys", 512, &keys_kv)) < 0) {
		sd_log("%s", fleetd.err);
		return err;
	}
	if ((err = fleet_watch_start(&fleetd, fleetd.owners, on_owner, NULL, &w_owners)) < 0 ||
	    (err = fleet_watch_start(&fleetd, fleetd.hosts, on_host, NULL, &w_hosts)) < 0 ||
	    (err = fleet_watch_start(&fleetd, keys_kv.kv, on_key, NULL, &w_keys)) < 0 ||
	    (err = fleet_snaps_start()) < 0 || (err = fleet_lost_start()) < 0 ||
	    (err = fleet_moves_start()) < 0 || (err = fleet_quota_start()) < 0 ||
	    (err = fleet_gc_start()) < 0 || (err = fleet_gc_turn_start()) < 0 ||
	    (err = fleet_rpc_start()) < 0) {
		sd_log("fleet: %s", fleetd.err);
		return err;
	}
	static const struct fleet_hooks hooks = {
		.create = fleetd_create,
		.list = fleetd_list,
		.forward = fleetd_forward,
		.deleted = fleetd_box_deleted,
		.rename = fleetd_box_rename,
		.release = fleetd_release,
		.released_delete = fleetd_released_delete,
		.dp = dp_proxy,
		.drain = drain,
		.gc = fleetd_gc,
		.xfer = fleetd_xfer,
		.released = fleetd_box_released,
	};

	box_forget_hook = fleetd_box_forgotten;
	fleet_hooks = &hooks;
	fleetd_tick();
	if (pthread_create(&host_thread, NULL, host_loop, NULL) != 0)
		return -EAGAIN;
	host_started = true;
	sd_log("fleet: host %s of pool %s, %u slots, at %s (NATS %s)", conf.host, conf.pool, slots,
	       advertise, conf.servers[0]);
	return 0;
}

void fleetd_stop(void)
{
	atomic_store(&stopping, true);
	if (host_started)
		pthread_join(host_thread, NULL);
	host_started = false;
	fleet_rpc_stop();
	fleet_moves_stop();
	fleet_quota_stop();
	fleet_gc_stop();
	fleet_watch_stop(w_owners);
	fleet_watch_stop(w_hosts);
	fleet_watch_stop(w_keys);
	fleet_snaps_stop();
	fleet_lost_stop();
	w_owners = w_hosts = w_keys = NULL;
	fleet_kv_close(&keys_kv);
	fleet_kv_close(&fleetd_names);
	fleet_close(&fleetd);
}

/* ---- a restart: only what the fleet says is this host's is adopted ---- */

void fleetd_adopt_filter(void)
{
	struct lc_report r = {0};
	struct box *next;

	pthread_mutex_lock(&lifecycle_lock);
	for (struct box *b = box_first(); b; b = next) {
		char owner[FLEET_ID_MAX + 1], name[40];
		uint64_t rev;
		struct sandbox sb;
		int err;

		next = b->next;
		err = fleet_owner(&fleetd, b->id, owner, &rev);
		/* ours; or the bucket did not say, or has no record of it (a box made before this
		 * host joined a fleet): kept */
		if (err < 0 || fleetd_self(owner))
			continue;
		/* moved on while this host was away (woken elsewhere, released, deleted): this
		 * copy is stale; its VMM stops and its sandbox goes, the fleet's records stay */
		box_sandbox_name(b, name);
		if (sandbox_find(b->sandbox[0] ? b->sandbox : name, &sb, &r) == 0 &&
		    sandbox_rm(&sb, true, &r) < 0)
			sd_log("box %s: its stale sandbox cannot be removed: %s", b->id, r.error);
		lc_clear(&r);
		sd_log("box %s (%s): %s now, not this host's: its copy here removed", b->id,
		       b->name, owner);
		b->released = true;
		box_forget(b);
	}
	pthread_mutex_unlock(&lifecycle_lock);
}

/* ---- while running: a box the fleet gave to another host (this one was taken for lost and
 * its box released at a checkpoint, or retired) has its copy here stopped, as a restart
 * would (fleetd_adopt_filter) ---- */

#define FENCE_SCAN_MS 10000

struct fence_job {
	struct sd_job job;
	char id[SD_ID_LEN + 1];
	char sandbox[40];
	char owner[FLEET_ID_MAX + 1];
	bool gone; /* not this host's by the bucket itself: its copy removed */
};

static void fence_run(struct sd_job *sj)
{
	struct fence_job *j = (struct fence_job *)sj;
	struct lc_report r = {0};
	struct sandbox sb;

	if (fleetd_owner_fresh(j->id, j->owner, 0) < 0 || fleetd_self(j->owner))
		return; /* (no word, or ours after all: the copy lagged) */
	j->gone = true;
	pthread_mutex_lock(&lifecycle_lock);
	if (sandbox_find(j->sandbox, &sb, &r) == 0 && sandbox_rm(&sb, true, &r) < 0)
		sd_log("box %s: its stale sandbox cannot be removed: %s", j->id, r.error);
	pthread_mutex_unlock(&lifecycle_lock);
}

static void fence_done(struct sd_job *sj)
{
	struct fence_job *j = (struct fence_job *)sj;
	struct box *b = box_by_id(j->id);

	bool deleted = b && b->delete_requested;

	if (b) {
		b->busy = b->releasing = false;
		if (j->gone) {
			/* (a delete answered meanwhile does not reach the new owner: left) */
			sd_log("box %s (%s): %s now, not this host's (taken for lost meanwhile): "
			       "its copy here removed",
			       b->id, b->name, j->owner);
			b->released = true;
			box_forget(b);
		} else if (b->delete_requested && box_simple_job(b, J_DELETE, NULL, NULL) == 0) {
			b->delete_requested = false; /* asked meanwhile: it runs now */
		}
	}
	fleetd_box_released(j->id, deleted); /* (a wake taken meanwhile runs now) */
	free(j);
}

static void fence_tick(void)
{
	static uint64_t scanned;
	uint64_t now = sd_now_ms();
	char owner[FLEET_ID_MAX + 1];

	if (now < scanned + FENCE_SCAN_MS)
		return;
	scanned = now;
	for (struct box *b = box_first(); b; b = b->next) {
		struct fence_job *j;

		if (b->status != BOX_READY || b->busy || b->released || b->checkpointing ||
		    fleetd_owner_of(b->id, owner, false) < 0 || fleetd_self(owner) ||
		    !(j = calloc(1, sizeof(*j))))
			continue;
		snprintf(j->id, sizeof(j->id), "%s", b->id);
		box_sandbox_name(b, j->sandbox);
		if (b->sandbox[0])
			snprintf(j->sandbox, sizeof(j->sandbox), "%s", b->sandbox);
		/* (nothing else starts on it meanwhile; a wake taken here meanwhile waits) */
		b->busy = b->releasing = true;
		link_close(b);
		ws_box_gone(b->id);
		j->job.run = fence_run;
		j->job.done = fence_done;
		work_queue_class(&j->job, WORK_FLEET_BG);
	}
}

/* ---- `sandboxd keys` and `sandboxd quota` in a fleet: the record put in its bucket too ---- */

int fleetd_put_record(const char *servers, const char *bucket, const char *key, const char *text)
{
	struct fleet f;
	struct fleet_kv kv;
	int err;

	snprintf(servers_text, sizeof(servers_text), "%s", servers);
	if (strlen(servers) >= sizeof(servers_text) || split_servers() < 0) {
		fprintf(stderr, "sandboxd: --fleet takes nats://HOST:PORT[,nats://...]\n");
		return -EINVAL;
	}
	conf.host[0] = 0;
	default_replicas();
	if ((err = fleet_open(&f, &conf, FLEET_WAIT_MS)) < 0) {
		fprintf(stderr, "sandboxd: %s\n", f.err);
		return err;
	}
	err = fleet_kv_open(&f, bucket, 512, &kv);
	if (err == 0) {
		err = fleet_kv_put(&f, kv.kv, key, text);
		fleet_kv_close(&kv);
	}
	if (err < 0)
		fprintf(stderr, "sandboxd: %s\n", f.err);
	fleet_close(&f);
	return err;
}

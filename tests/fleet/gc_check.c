/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The collector in a fleet (fleet/lease.c against store/gc.c), on a NATS node and Swift's S3
 * API that tests/fleet/gc.sh starts on loopback:
 *
 *   gc-check ENDPOINT ACCESS SECRET REGION DIR     (FLEET_NATS: nats://HOST:PORT of the node)
 *
 * Leases go stale after LEASE_STALE_MS here (120 s in sandboxd). Checked, in order:
 *   lease-blocks-collection  a push's lease held: a collection waits, and gives up (-EBUSY)
 *   lock-blocks-push         a collection's lock held: a push waits, and gives up
 *   push-waits-for-lock      a push waiting for a collection that ends goes on at its end
 *   stale-lease-taken        a push whose holder died (its lease no longer renewed): the
 *                            collection takes it for dead after the stale time and runs
 *   reader-does-not-wait     a restore's lease (a reader's) is had at once beside a lock,
 *                            and the collection holding it yields at its next look
 *   renewed-not-stale        a push's lease held three times the stale time: renewed, never
 *                            taken for dead
 *   race                     a push skips chunks the store holds that no manifest names (a
 *                            deleted snapshot's) while a collection starts: the collection
 *                            waits for the push's manifest, then keeps those chunks, deletes
 *                            only what nothing names, and the push's snapshot restores whole
 *   lost-lease-no-manifest   a push whose lease was taken from it (judged dead) writes no
 *                            manifest
 *   collection-yields        a push that comes during a collection's sweep has its lease
 *                            within seconds: the collection stops
 *   lost-lock-stops          a collection whose lock was taken from it before its first
 *                            delete deletes nothing; with it held, it deletes
 * Prints `ok NAME` per check (`FAIL NAME: why`, exit 1).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <nats/nats.h>

#include "fleet.h"
#include "fleet_check.h"
#include "fleet_files.h"
#include "store.h"

/* A step of a check: silent when it holds (each check prints its own line with its figures). */
#define need(ok, ...)                                                                              \
	do {                                                                                       \
		if (!(ok))                                                                         \
			check(false, __VA_ARGS__);                                                 \
	} while (0)

#define LEASE_STALE_MS 3000
#define CHUNK_SIZE     (256u << 10)
#define FILE_BYTES     (2u << 20) /* 8 chunks */
#define WS	       "gc.test"  /* a dot, as names may have */
#define WS_HEX	       "67632e74657374"
#define PREFIX	       "w/gc.test"

static struct fleet fl;
static struct fleet_kv leases;
static struct s3 s3;
static uint8_t secret[32];
static char dir[4096];

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static bool lease_ok(void *arg)
{
	return fleet_lease_fresh(arg);
}

static int lock_ok(void *arg)
{
	return fleet_lease_sweep_ok(arg) == 0 ? 0 : 1;
}

/* A file of fresh random bytes as DIR/name: its path in path. */
static uint8_t *random_file(const char *name, char path[4200])
{
	uint8_t *p = malloc(FILE_BYTES);
	FILE *f;

	need(p && getrandom(p, FILE_BYTES, 0) == FILE_BYTES, "setup", "random bytes");
	snprintf(path, 4200, "%s/%s", dir, name);
	f = fopen(path, "wb");
	need(f && fwrite(p, 1, FILE_BYTES, f) == FILE_BYTES && fclose(f) == 0, "setup", "%s", path);
	return p;
}

/* A snapshot of one file pushed as manifest id, through a fresh handle (as a push is). */
static void push_file(const char *id, const char *path, struct fleet_lease *l)
{
	struct chunk_store cs;
	struct manifest m;

	need(chunk_store_open(&cs, &s3, PREFIX, secret) == 0, "setup", "%s", cs.err);
	if (l) {
		cs.may_publish = lease_ok;
		cs.may_publish_arg = l;
	}
	need(chunk_store_learn(&cs, 16) == 0 && manifest_init(&m, CHUNK_SIZE) == 0 &&
		     manifest_add_file(&m, &cs, "disk", path) == 0 &&
		     manifest_put(&m, &cs, id) == 0,
	     "setup", "push %s: %s", id, cs.err);
	manifest_free(&m);
	chunk_store_close(&cs);
}

static void lease_blocks_collection(void)
{
	struct fleet_lease *p, *c = NULL;
	char err[512] = "";
	uint64_t t0;
	int e;

	need(fleet_lease_push(&fl, leases.kv, WS, false, 1000, &p, err, sizeof(err)) == 0,
	     "lease-blocks-collection", "a push's lease: %s", err);
	t0 = now_ms();
	e = fleet_lease_collect(&fl, leases.kv, WS, 1500, &c, err, sizeof(err));
	need(e == -EBUSY && !c && strstr(err, "push") && now_ms() - t0 >= 1500,
	     "lease-blocks-collection", "%d after %llu ms: %s", e,
	     (unsigned long long)(now_ms() - t0), err);
	/* and it left no lock: the push's next lease is had at once */
	struct fleet_lease *p2;

	t0 = now_ms();
	need(fleet_lease_push(&fl, leases.kv, WS, false, 0, &p2, err, sizeof(err)) == 0 &&
		     now_ms() - t0 < 1000,
	     "lease-blocks-collection", "a second push after the collection gave up: %s", err);
	fleet_lease_end(p2);
	fleet_lease_end(p);
	printf("ok lease-blocks-collection (it waited, then: %s)\n", err[0] ? err : "-");
}

static void lock_blocks_push(void)
{
	struct fleet_lease *c, *p = NULL;
	char err[512] = "";
	uint64_t t0;
	int e;

	need(fleet_lease_collect(&fl, leases.kv, WS, 2000, &c, err, sizeof(err)) == 0,
	     "lock-blocks-push", "the collection's lock: %s", err);
	t0 = now_ms();
	e = fleet_lease_push(&fl, leases.kv, WS, false, 1500, &p, err, sizeof(err));
	need(e == -EBUSY && !p && strstr(err, "collection") && now_ms() - t0 >= 1500,
	     "lock-blocks-push", "%d after %llu ms: %s", e, (unsigned long long)(now_ms() - t0),
	     err);
	fleet_lease_end(c);
	printf("ok lock-blocks-push (%s)\n", err);
}

static void *end_after(void *arg)
{
	usleep(1000 * 1000);
	fleet_lease_end(arg);
	return NULL;
}

static void push_waits_for_lock(void)
{
	struct fleet_lease *c, *p = NULL;
	char err[512] = "";
	pthread_t t;
	uint64_t t0, took;

	need(fleet_lease_collect(&fl, leases.kv, WS, 2000, &c, err, sizeof(err)) == 0,
	     "push-waits-for-lock", "the collection's lock: %s", err);
	t0 = now_ms();
	need(pthread_create(&t, NULL, end_after, c) == 0, "push-waits-for-lock", "thread");
	int e = fleet_lease_push(&fl, leases.kv, WS, false, 10000, &p, err, sizeof(err));

	took = now_ms() - t0;
	pthread_join(t, NULL);
	need(e == 0 && p && took >= 900 && took < 5000, "push-waits-for-lock",
	     "%d after %llu ms: %s", e, (unsigned long long)took, err);
	fleet_lease_end(p);
	printf("ok push-waits-for-lock (its lease after %llu ms)\n", (unsigned long long)took);
}

static void stale_lease_taken(void)
{
	struct fleet_lease *p, *c = NULL;
	char err[512] = "";
	uint64_t t0, took;

	need(fleet_lease_push(&fl, leases.kv, WS, false, 1000, &p, err, sizeof(err)) == 0,
	     "stale-lease-taken", "a push's lease: %s", err);
	fleet_lease_abandon(p); /* its holder dies: the record stays, no longer renewed */
	t0 = now_ms();
	int e = fleet_lease_collect(&fl, leases.kv, WS, 4 * LEASE_STALE_MS, &c, err, sizeof(err));

	took = now_ms() - t0;
	need(e == 0 && c && took >= LEASE_STALE_MS - 200 && took < 3 * LEASE_STALE_MS,
	     "stale-lease-taken", "%d after %llu ms: %s", e, (unsigned long long)took, err);
	fleet_lease_end(c);
	printf("ok stale-lease-taken (after %llu ms; stale at %d)\n", (unsigned long long)took,
	       LEASE_STALE_MS);
}

static void reader_does_not_wait(void)
{
	struct fleet_lease *c, *r = NULL;
	char err[512] = "";
	uint64_t t0, took;

	need(fleet_lease_collect(&fl, leases.kv, WS, 2000, &c, err, sizeof(err)) == 0,
	     "reader-does-not-wait", "the collection's lock: %s", err);
	t0 = now_ms();
	need(fleet_lease_push(&fl, leases.kv, WS, true, 10000, &r, err, sizeof(err)) == 0 && r,
	     "reader-does-not-wait", "a reader's lease: %s", err);
	took = now_ms() - t0;
	/* and the collection holding the lock sees it before its next act */
	usleep(1100 * 1000);
	int e = fleet_lease_sweep_ok(c);

	need(took < 1000 && e == -EAGAIN, "reader-does-not-wait",
	     "the reader's lease after %llu ms; the collection's next look: %d (want -EAGAIN)",
	     (unsigned long long)took, e);
	fleet_lease_end(r);
	fleet_lease_end(c);
	printf("ok reader-does-not-wait (a restore's lease in %llu ms beside a collection's lock, "
	       "which then yields)\n",
	       (unsigned long long)took);
}

static void renewed_not_stale(void)
{
	struct fleet_lease *p, *c = NULL;
	char err[512] = "";
	uint64_t t0, took;

	need(fleet_lease_push(&fl, leases.kv, WS, false, 1000, &p, err, sizeof(err)) == 0,
	     "renewed-not-stale", "a push's lease: %s", err);
	t0 = now_ms();
	int e = fleet_lease_collect(&fl, leases.kv, WS, 3 * LEASE_STALE_MS, &c, err, sizeof(err));

	took = now_ms() - t0;
	need(e == -EBUSY && !c && took >= 3 * LEASE_STALE_MS && fleet_lease_fresh(p),
	     "renewed-not-stale", "%d after %llu ms (stale at %d): %s", e, (unsigned long long)took,
	     LEASE_STALE_MS, err);
	fleet_lease_end(p);
	printf("ok renewed-not-stale (a push's lease held %llu ms, three times the stale time: "
	       "never taken for dead)\n",
	       (unsigned long long)took);
}

struct collector {
	struct fleet_lease *lock;
	uint64_t locked_at;
	int err;
	char msg[512];
	struct store_gc_report rep;
};

static void *collect_main(void *arg)
{
	struct collector *k = arg;
	struct chunk_store cs;

	k->err = fleet_lease_collect(&fl, leases.kv, WS, 20000, &k->lock, k->msg, sizeof(k->msg));
	__atomic_store_n(&k->locked_at, now_ms(), __ATOMIC_RELEASE);
	if (k->err < 0)
		return NULL;
	if ((k->err = chunk_store_open(&cs, &s3, PREFIX, secret)) == 0) {
		k->err =
			store_gc(&cs, (int64_t)time(NULL) + 3600, false, &k->rep, lock_ok, k->lock);
		snprintf(k->msg, sizeof(k->msg), "%s", cs.err);
		chunk_store_close(&cs);
	}
	fleet_lease_end(k->lock);
	return NULL;
}

static void race(void)
{
	char pa[4200], pg[4200], out[4200];
	uint8_t *a = random_file("a.img", pa), *g = random_file("g.img", pg), *back;
	struct fleet_lease *p;
	struct chunk_store cs;
	struct manifest m, got;
	struct collector k = {0};
	char err[512] = "";
	pthread_t t;
	uint64_t put_at;
	FILE *f;

	/* a's and g's chunks in the store and named by nothing (their snapshots deleted); z's
	 * named (a store with no manifest at all is not judged) */
	char pz[4200];
	uint8_t *z = random_file("z.img", pz);

	push_file("old-a", pa, NULL);
	push_file("old-g", pg, NULL);
	push_file("other", pz, NULL);
	need(chunk_store_open(&cs, &s3, PREFIX, secret) == 0 &&
		     manifest_delete(&cs, "old-a") == 0 && manifest_delete(&cs, "old-g") == 0,
	     "race", "setup: %s", cs.err);
	chunk_store_close(&cs);

	/* the push: its lease, then what the store holds, a's chunks skipped */
	need(fleet_lease_push(&fl, leases.kv, WS, false, 1000, &p, err, sizeof(err)) == 0, "race",
	     "the push's lease: %s", err);
	need(chunk_store_open(&cs, &s3, PREFIX, secret) == 0 && chunk_store_learn(&cs, 16) == 0 &&
		     manifest_init(&m, CHUNK_SIZE) == 0 &&
		     manifest_add_file(&m, &cs, "disk", pa) == 0,
	     "race", "the push: %s", cs.err);
	need(cs.put_chunks == 0 && cs.skip_chunks == FILE_BYTES / CHUNK_SIZE, "race",
	     "the push sent %llu chunks and skipped %llu: the store should have had them all",
	     (unsigned long long)cs.put_chunks, (unsigned long long)cs.skip_chunks);
	/* a collection starts before its manifest is in */
	need(pthread_create(&t, NULL, collect_main, &k) == 0, "race", "thread");
	usleep(1500 * 1000);
	need(!__atomic_load_n(&k.locked_at, __ATOMIC_ACQUIRE), "race",
	     "the collection should wait for the push");
	cs.may_publish = lease_ok;
	cs.may_publish_arg = p;
	need(manifest_put(&m, &cs, "new-a") == 0, "race", "the push's manifest: %s", cs.err);
	put_at = now_ms();
	fleet_lease_end(p);
	chunk_store_close(&cs);
	pthread_join(t, NULL);
	need(k.err == 0 && k.locked_at >= put_at, "race", "the collection: %d %s (locked %s)",
	     k.err, k.msg, k.locked_at >= put_at ? "after the manifest" : "before it");
	/* g's 8 chunks went (named by nothing); a's stayed (the push's manifest names them) */
	need(k.rep.deleted == FILE_BYTES / CHUNK_SIZE && k.rep.manifests == 2, "race",
	     "%llu chunks deleted, %llu manifests read (want %u, 2)",
	     (unsigned long long)k.rep.deleted, (unsigned long long)k.rep.manifests,
	     FILE_BYTES / CHUNK_SIZE);
	snprintf(out, sizeof(out), "%s/a.back", dir);
	need(chunk_store_open(&cs, &s3, PREFIX, secret) == 0 &&
		     manifest_get(&got, &cs, "new-a", 0) == 0 &&
		     manifest_fetch_file(&got, &cs, "disk", out) == 0,
	     "race", "the push's snapshot after the collection: %s", cs.err);
	back = malloc(FILE_BYTES);
	f = fopen(out, "rb");
	need(back && f && fread(back, 1, FILE_BYTES, f) == FILE_BYTES &&
		     memcmp(back, a, FILE_BYTES) == 0,
	     "race", "the restored file differs");
	fclose(f);
	manifest_free(&got);
	manifest_free(&m);
	chunk_store_close(&cs);
	printf("ok race (the collection waited for the push's manifest, then deleted %llu "
	       "chunks (%llu bytes), kept %llu: the skipped ones restore)\n",
	       (unsigned long long)k.rep.deleted, (unsigned long long)k.rep.deleted_bytes,
	       (unsigned long long)k.rep.kept);
	free(a);
	free(g);
	free(z);
	free(back);
}

static void lost_lease_no_manifest(void)
{
	char pb[4200], key[FLEET_KEY_MAX + 1] = "";
	uint8_t *b = random_file("b.img", pb);
	struct fleet_lease *p;
	struct chunk_store cs;
	struct manifest m, got;
	char err[512] = "";
	int e;

	need(fleet_lease_push(&fl, leases.kv, WS, false, 1000, &p, err, sizeof(err)) == 0,
	     "lost-lease-no-manifest", "the push's lease: %s", err);
	/* a collector takes it for dead: its record deleted under it */
	kvKeysList keys = {0};

	need(kvStore_Keys(&keys, (kvStore *)leases.kv, NULL) == NATS_OK, "lost-lease-no-manifest",
	     "keys");
	for (int i = 0; i < keys.Count; i++)
		if (strncmp(keys.Keys[i], "push." WS_HEX ".", strlen("push." WS_HEX ".")) == 0)
			snprintf(key, sizeof(key), "%s", keys.Keys[i]);
	kvKeysList_Destroy(&keys);
	need(key[0] && fleet_kv_delete(&fl, leases.kv, key) == 0, "lost-lease-no-manifest",
	     "no lease to delete");
	usleep(2 * (LEASE_STALE_MS / 24 + 200) * 1000); /* its next renewal finds it gone */
	need(chunk_store_open(&cs, &s3, PREFIX, secret) == 0 &&
		     manifest_init(&m, CHUNK_SIZE) == 0 &&
		     manifest_add_file(&m, &cs, "disk", pb) == 0,
	     "lost-lease-no-manifest", "%s", cs.err);
	cs.may_publish = lease_ok;
	cs.may_publish_arg = p;
	e = manifest_put(&m, &cs, "lost-b");
	snprintf(err, sizeof(err), "%s", cs.err);
	need(e == -ESTALE && strstr(err, "lease") &&
		     manifest_get(&got, &cs, "lost-b", 0) == -ENOENT,
	     "lost-lease-no-manifest", "%d %s", e, err);
	fleet_lease_end(p);
	printf("ok lost-lease-no-manifest (%s)\n", err);
	manifest_free(&m);
	chunk_store_close(&cs);
	free(b);
}

/* A collection's go_on for the checks below: the lock's own answer, each call slowed, and
 * at call `cut` the lock taken from it (deleted under it, as a host judging it dead would). */
struct slow_go {
	struct fleet_lease *lock;
	unsigned calls, cut, slow_ms;
};

static int slow_go_on(void *arg)
{
	struct slow_go *g = arg;

	g->calls++;
	if (g->slow_ms)
		usleep(g->slow_ms * 1000);
	if (g->cut && g->calls == g->cut) {
		need(fleet_kv_delete(&fl, leases.kv, "gc." WS_HEX) == 0, "lost-lock-stops",
		     "delete");
		usleep(2 * (LEASE_STALE_MS / 24 + 200) * 1000); /* its renewal finds it gone */
	}
	return fleet_lease_sweep_ok(g->lock) == 0 ? 0 : 1;
}

struct yield_collector {
	struct slow_go g;
	int err;
	struct store_gc_report rep;
	char msg[512];
};

static void *yield_main(void *arg)
{
	struct yield_collector *y = arg;
	struct chunk_store cs;

	need(chunk_store_open(&cs, &s3, PREFIX, secret) == 0, "collection-yields", "%s", cs.err);
	y->err = store_gc(&cs, (int64_t)time(NULL) + 3600, false, &y->rep, slow_go_on, &y->g);
	snprintf(y->msg, sizeof(y->msg), "%s", cs.err);
	chunk_store_close(&cs);
	fleet_lease_end(y->g.lock); /* as the collector's thread in sandboxd does */
	return NULL;
}

/* lost-b's 8 chunks are named by nothing: a collection deletes them. One that a push comes
 * to in its sweep stops (yields); one whose lock was taken from it deletes nothing; one left
 * alone deletes them all. */
static void collection_yields(void)
{
	struct yield_collector y = {.g.slow_ms = 400};
	struct fleet_lease *p = NULL;
	char err[512] = "";
	pthread_t t;
	uint64_t t0, took;

	need(fleet_lease_collect(&fl, leases.kv, WS, 2000, &y.g.lock, err, sizeof(err)) == 0,
	     "collection-yields", "the lock: %s", err);
	need(pthread_create(&t, NULL, yield_main, &y) == 0, "collection-yields", "thread");
	usleep(1500 * 1000); /* in its sweep, slowly */
	t0 = now_ms();
	int e = fleet_lease_push(&fl, leases.kv, WS, false, 20000, &p, err, sizeof(err));

	took = now_ms() - t0;
	pthread_join(t, NULL);
	need(e == 0 && took < 5000 && y.err == -ECANCELED &&
		     y.rep.deleted < FILE_BYTES / CHUNK_SIZE && strstr(y.msg, "push"),
	     "collection-yields",
	     "the push's lease %d after %llu ms; the collection %d with %llu deleted: %s", e,
	     (unsigned long long)took, y.err, (unsigned long long)y.rep.deleted, y.msg);
	fleet_lease_end(p);
	printf("ok collection-yields (a push during a sweep had its lease in %llu ms; the "
	       "collection stopped after %llu of %u deletes: %s)\n",
	       (unsigned long long)took, (unsigned long long)y.rep.deleted, FILE_BYTES / CHUNK_SIZE,
	       y.msg);
}

static void lost_lock_stops(void)
{
	struct slow_go g = {.cut = 2}; /* the mark's one listing page, then the first delete */
	struct chunk_store cs;
	struct store_gc_report rep;
	char err[512] = "";
	uint64_t before;
	int e;

	need(fleet_lease_collect(&fl, leases.kv, WS, 2000, &g.lock, err, sizeof(err)) == 0,
	     "lost-lock-stops", "the lock: %s", err);
	need(chunk_store_open(&cs, &s3, PREFIX, secret) == 0, "lost-lock-stops", "%s", cs.err);
	e = store_gc(&cs, (int64_t)time(NULL) + 3600, true, &rep, NULL, NULL);
	before = rep.deleted;
	e = store_gc(&cs, (int64_t)time(NULL) + 3600, false, &rep, slow_go_on, &g);
	need(e == -ECANCELED && rep.deleted == 0 && before > 0 && g.calls == 2, "lost-lock-stops",
	     "%d, %llu deleted of %llu, %u calls: %s", e, (unsigned long long)rep.deleted,
	     (unsigned long long)before, g.calls, cs.err);
	printf("ok lost-lock-stops (its lock taken before its first delete: none of %llu made; "
	       "%s)\n",
	       (unsigned long long)before, cs.err);
	fleet_lease_end(g.lock);
	/* and with the lock held, it does delete them: the check above could fail */
	struct slow_go held = {0};

	need(fleet_lease_collect(&fl, leases.kv, WS, 2 * LEASE_STALE_MS, &held.lock, err,
				 sizeof(err)) == 0,
	     "lost-lock-stops", "the lock again: %s", err);
	e = store_gc(&cs, (int64_t)time(NULL) + 3600, false, &rep, slow_go_on, &held);
	need(e == 0 && rep.deleted == before, "lost-lock-stops",
	     "held: %d, %llu deleted of %llu: %s", e, (unsigned long long)rep.deleted,
	     (unsigned long long)before, cs.err);
	fleet_lease_end(held.lock);
	chunk_store_close(&cs);
	printf("ok collected-when-held (%llu chunks deleted with the lock held)\n",
	       (unsigned long long)rep.deleted);
}

int main(int argc, char **argv)
{
	struct s3_conf conf = {0};
	struct fleet_conf fc = {0};
	char *servers = getenv("FLEET_NATS");

	if (argc != 6 || !servers) {
		fprintf(stderr, "usage: FLEET_NATS=nats://H:P gc-check ENDPOINT ACCESS SECRET "
				"REGION DIR\n");
		return 2;
	}
	store_conf_from_args(&conf, argv, "sandbox-gc-test");
	snprintf(dir, sizeof(dir), "%s", argv[5]);
	need(getrandom(secret, sizeof(secret), 0) == sizeof(secret), "setup", "random");
	need(s3_open(&s3, &conf) == 0 && s3_bucket_create(&s3) == 0, "setup", "%s", s3.err);

	fc.servers[0] = servers;
	fc.nservers = 1;
	snprintf(fc.host, sizeof(fc.host), "gc-check");
	snprintf(fc.pool, sizeof(fc.pool), "gc");
	fc.replicas = 1;
	fc.ack_wait_ms = 5000;
	fc.liveness_ttl_ms = 5000;
	fc.lease_stale_ms = LEASE_STALE_MS;
	need(fleet_open(&fl, &fc, 30000) == 0, "setup", "%s", fl.err);
	need(fleet_kv_open(&fl, "store_leases", 256, &leases) == 0, "setup", "%s", fl.err);

	lease_blocks_collection();
	lock_blocks_push();
	push_waits_for_lock();
	stale_lease_taken();
	reader_does_not_wait();
	renewed_not_stale();
	race();
	lost_lease_no_manifest();
	collection_yields();
	lost_lock_stops();
	fleet_kv_close(&leases);
	fleet_close(&fl);
	s3_close(&s3);
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fleet's engine (docs/fleet.md): NATS JetStream places sandboxes on hosts; no scheduler
 * of ours decides. A create request goes into a work-queue stream per pool; every host's
 * sandboxd pulls from one durable consumer only as many requests as it has room for, so the
 * broker spreads them. Ownership of a sandbox is a key in a KV bucket, made create-only (two
 * hosts never both own one) and moved only by an update conditioned on its revision; a host's
 * liveness is a key in a bucket whose values expire.
 *
 * Functions return 0 or -errno, with a message in f->err naming what failed.
 */
#ifndef SANDBOX_FLEET_H
#define SANDBOX_FLEET_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FLEET_SERVERS_MAX   8
#define FLEET_ID_MAX	    63		 /* a host id, a box id, a pool: [A-Za-z0-9_-] */
#define FLEET_REQ_MAX	    (512u << 10) /* a create request's bytes (NATS: 1 MiB a message) */
#define FLEET_ERR_MAX	    512
/* The owner a create that no host took in time gets: the key is made create-only by the API
 * side, so a host that fetches the request later finds it owned and drops it. */
#define FLEET_UNSCHEDULABLE "unschedulable"
/* The owner of a box suspended into the store and let go by its host: "released:SEQ", SEQ the
 * message that placed it last. A wake places it again. Neither name is a host's. */
#define FLEET_RELEASED	    "released"

struct fleet_conf {
	const char *servers[FLEET_SERVERS_MAX]; /* nats://HOST:PORT */
	int nservers;
	char host[FLEET_ID_MAX + 1]; /* this host's id ("" for a client that only places) */
	char pool[FLEET_ID_MAX + 1]; /* the pool its creates go to ("default") */
	int replicas;		     /* of the stream and buckets: 1 to 5 (the cluster's size) */
	unsigned ack_wait_ms;	     /* a fetched request not claimed in this long goes again */
	unsigned liveness_ttl_ms;    /* a host's entry lapses this long after its last beat */
	unsigned lease_stale_ms;     /* lease.c: a push's lease or a collection's lock unmoved
					this long is a dead holder's (0: FLEET_LEASE_STALE_MS) */
};

struct fleet {
	struct fleet_conf conf;
	void *nc, *js;	      /* natsConnection *, jsCtx * */
	void *owners, *hosts; /* kvStore * */
	void *pull;	      /* natsSubscription *: the host's pull subscription */
	void *near;	      /* natsSubscription *: its pull of the creates sent to it first */
	void *poke;	      /* natsSubscription *: word that one was sent (core NATS) */
	_Atomic int poked;    /* set by that word: its own queue is pulled at the next take */
	void *replies;	      /* natsSubscription *: hosts' answers, INBOX.<box id> */
	char inbox[64];	      /* made at open, so that its interest is known cluster-wide
				 before the first create is published */
	pthread_mutex_t lock; /* waits, against the answers' thread */
	bool lock_made;
	struct fleet_wait *waits; /* fleet_place calls waiting for their answer */
	uint64_t shed_ms;	  /* fleet_shed's last turn */
	char stream[80], subject[96];
	char near_subject[96]; /* sandbox.near.<pool>: a host's own queue is a subject below it */
	char err[FLEET_ERR_MAX];
};

/* Connect and make (or bind to) the pool's stream and consumer and the two buckets, retrying
 * for up to wait_ms while the cluster elects its leaders. */
int fleet_open(struct fleet *f, const struct fleet_conf *c, int wait_ms)
	__attribute__((warn_unused_result));
void fleet_close(struct fleet *f);

/* ---- place.c ---- */

/* Hosts a create goes to first (they hold what it needs: its snapshot), each on a queue of its
 * own that only it pulls from, while it has room; after wait_ms the create goes to the pool as
 * well, and whichever host claims it first runs it (the other's message finds it owned). */
#define FLEET_NEAR_MAX 2
struct fleet_near {
	const char *hosts[FLEET_NEAR_MAX];
	int n;
	int wait_ms;
};

/* The API side: place box `id` with request bytes req (len), waiting up to timeout_ms for a
 * host to take it: its host id in owner; near (or NULL): hosts to try first. Callable from
 * several threads at once (a message goes to err, not f->err). A box already placed answers
 * its owner at once (a repeated create). -EAGAIN when no host took it in time: the request is
 * then cancelled for good (FLEET_UNSCHEDULABLE; a new create is a new box id) unless a host
 * took it meanwhile, which is then the answer; -EIO when the outcome cannot be known (the
 * bucket did not answer). */
int fleet_place(struct fleet *f, const char *id, const void *req, size_t len,
		const struct fleet_near *near, int timeout_ms, char owner[FLEET_ID_MAX + 1],
		char *err, size_t err_len) __attribute__((warn_unused_result));

/* A request a host took: its box is this host's now. */
struct fleet_req {
	char id[FLEET_ID_MAX + 1];
	uint8_t *data; /* malloc'd, len bytes */
	size_t len;
	bool moved; /* taken over from a host whose liveness lapsed after it claimed the box */
	bool again; /* this host had claimed it and its ack did not reach the server: the caller
		       may have it already (run a box id once) */
	bool woken; /* a wake of a released box (fleet_wake), not a create */
};
/* The host side: one request sent to this host first if there is one, else wait up to wait_ms
 * for one of the pool's, and claim it. 1 with *r filled (free
 * r->data): the box is this host's to run; 0 when none came or it was not to be run here (a
 * duplicate, cancelled, another's), or -errno. Only call with room for one more sandbox:
 * that is how the engine spreads by capacity. */
int fleet_take(struct fleet *f, int wait_ms, struct fleet_req *r)
	__attribute__((warn_unused_result));

/* The host side, while it has no room: a request that reached this host after its last
 * take's wait ended (the server answers a pull until its own expiry) goes back, to a host
 * with room, not after the ack wait. Call it in the loop that would take if there were room:
 * it acts at most twice a second (each may send one pull request: a status message in the
 * queue makes libnats ask for more). */
void fleet_shed(struct fleet *f);

/* Box id of lost host `host` deleted through another host: its owner becomes
 * "unschedulable:SEQ" for good, on the revision read (a sandboxd restarted on that host does
 * not adopt it; a redelivered create of it is terminated). 0, -ESTALE (not host's now), -ENOENT
 * (retired already, or no one's), -EIO. */
int fleet_retire(struct fleet *f, const char *id, const char *host)
	__attribute__((warn_unused_result));
/* The host side: box id (this host's) suspended into the store: its owner becomes
 * "released:SEQ" (*release = SEQ), on the revision read. -EPERM: another host's; -ESTALE: it
 * was taken meanwhile. */
int fleet_release(struct fleet *f, const char *id, uint64_t *release)
	__attribute__((warn_unused_result));
/* Box id of lost host `host`, with a checkpoint in the store: released on its behalf, on the
 * revision read, so that the next call wakes it from that checkpoint elsewhere. -EPERM (not
 * host's now), -ESTALE (taken meanwhile), -EIO. */
int fleet_release_lost(struct fleet *f, const char *id, const char *host)
	__attribute__((warn_unused_result));
/* A new box id that is in the store already (a sandbox pushed through the API): its owner made
 * "released" (create-only), so the next call wakes it as any released box. -EEXIST, -EIO. */
int fleet_own_released(struct fleet *f, const char *id) __attribute__((warn_unused_result));
/* The API side: wake released box id on a host with room, as fleet_place does a create (its
 * host in owner). Callers waking one release at once publish one message: one host wakes it.
 * A box not released answers its owner at once; -EAGAIN when no host took it in time (the
 * wake stays queued: a host with room takes it later); -ENOENT: a cancelled create. */
int fleet_wake(struct fleet *f, const char *id, const void *req, size_t len, int timeout_ms,
	       char owner[FLEET_ID_MAX + 1], char *err, size_t err_len)
	__attribute__((warn_unused_result));

/* The owner of box id in owner and its revision; -ENOENT when it has none. */
int fleet_owner(struct fleet *f, const char *id, char owner[FLEET_ID_MAX + 1], uint64_t *rev)
	__attribute__((warn_unused_result));

/* ---- host.c ---- */

/* This host's liveness entry, with a small text (its capacity) as the value. */
int fleet_beat(struct fleet *f, const char *info) __attribute__((warn_unused_result));
/* Whether host is alive (its entry has not lapsed): 1, 0, or -errno. */
int fleet_alive(struct fleet *f, const char *host) __attribute__((warn_unused_result));
/* Whether s is an id this layer takes. */
bool fleet_id_ok(const char *s);

/* ---- kv.c: the fleet's records beside placement (a name's box, an API key) ---- */

#define FLEET_KEY_MAX 200	  /* a record's key: [-_=/.A-Za-z0-9], no empty token */
#define FLEET_VAL_MAX (256 << 10) /* a record's value, at most (each bucket has its own) */
struct fleet_kv {
	void *kv; /* kvStore * */
};
bool fleet_key_ok(const char *key);
/* The bucket `name` (made if no host made it yet; values do not expire, each at most val_max
 * bytes: the first host to make it decides). */
int fleet_kv_open(struct fleet *f, const char *name, size_t val_max, struct fleet_kv *b)
	__attribute__((warn_unused_result));
void fleet_kv_close(struct fleet_kv *b);
/* On a bucket (a fleet_kv's kv, or f->owners, f->hosts), read from its leader: the value of
 * key (NUL-terminated, under cap bytes) and its revision: 0, -ENOENT, -EMSGSIZE (its revision
 * set), -EIO. */
int fleet_kv_get(struct fleet *f, void *kv, const char *key, char *val, size_t cap, uint64_t *rev)
	__attribute__((warn_unused_result));
/* key made only if it holds no value: 0, -EEXIST, -EIO. */
int fleet_kv_create(struct fleet *f, void *kv, const char *key, const char *val, uint64_t *rev)
	__attribute__((warn_unused_result));
int fleet_kv_put(struct fleet *f, void *kv, const char *key, const char *val)
	__attribute__((warn_unused_result));
int fleet_kv_delete(struct fleet *f, void *kv, const char *key) __attribute__((warn_unused_result));
/* Put val only if key's revision is still rev: 0, -ESTALE (it changed), -EIO. */
int fleet_kv_update(struct fleet *f, void *kv, const char *key, const char *val, uint64_t rev)
	__attribute__((warn_unused_result));
/* Delete key only if its revision is still rev: 0, -ESTALE (it changed), -EIO. */
int fleet_kv_delete_rev(struct fleet *f, void *kv, const char *key, uint64_t rev)
	__attribute__((warn_unused_result));

/* A bucket followed on a thread of its own: fn(arg, key, value, len) for each value there
 * and each change after (value NULL: deleted), and once fn(arg, NULL, NULL, 0) when the
 * values present at the start are all in. After the cluster was away it starts over (every
 * value again). fn runs on the watcher's thread. */
typedef void (*fleet_watch_fn)(void *arg, const char *key, const char *val, size_t len);
struct fleet_watch;
int fleet_watch_start(struct fleet *f, void *kv, fleet_watch_fn fn, void *arg,
		      struct fleet_watch **w) __attribute__((warn_unused_result));
void fleet_watch_stop(struct fleet_watch *w);

/* ---- lease.c: pushes against a store's collector ---- */

/* A lease unmoved this long is taken for a dead holder's; it is renewed every 1/24 of it and
 * acted on only while renewed within 1/4 of it. Above a quarter plus the store's request
 * timeout (60 s). */
#define FLEET_LEASE_STALE_MS 120000
struct fleet_lease;
#define FLEET_WS_MAX 63 /* a workspace's name (sandboxd's SD_WORKSPACE_MAX) */
/* A workspace's part of a record's key: its bytes in hex (a name may hold dots, which NATS
 * reads as a key's token separators). 0, or -EINVAL for no workspace or one over FLEET_WS_MAX
 * bytes. */
int fleet_ws_hex(const char *ws, char out[2 * FLEET_WS_MAX + 1]);
/* The bucket of leases and locks (store_leases; a deleted one's marker kept an hour). */
int fleet_lease_bucket(struct fleet *f, struct fleet_kv *b) __attribute__((warn_unused_result));
/* A push of workspace ws's chunks (or, reader, a restore reading them while its box runs):
 * its lease in bucket kv, held and renewed until fleet_lease_end. A push waits while a
 * collection of ws holds its lock (it stops within a second and a request, as it sees the
 * lease; a dead one's goes stale), up to wait_ms: -EBUSY after; a reader does not wait.
 * -EINVAL, -EIO; err says why. */
int fleet_lease_push(struct fleet *f, void *kv, const char *ws, bool reader, int wait_ms,
		     struct fleet_lease **l, char *err, size_t err_len)
	__attribute__((warn_unused_result));
/* A collection of ws's chunks: its lock, once no push of ws holds a lease (its lock let go
 * while some do, and taken again), waiting up to wait_ms: -EBUSY after, no lock kept. */
int fleet_lease_collect(struct fleet *f, void *kv, const char *ws, int wait_ms,
			struct fleet_lease **l, char *err, size_t err_len)
	__attribute__((warn_unused_result));
/* Whether l's holder may still act on it (a manifest written, a chunk deleted): renewed
 * lately and never found lost. Any thread. */
bool fleet_lease_fresh(struct fleet_lease *l);
/* A collection's lock l, before each of its acts: 0 to go on; -ECANCELED (no longer
 * fresh), -EAGAIN (a push of its workspace began: the collection yields), -EIO. Lists the
 * pushes at most once a second. The collection's thread only. */
int fleet_lease_sweep_ok(struct fleet_lease *l) __attribute__((warn_unused_result));
/* Stop renewing l and delete it (on its revision); free. NULL: nothing. The _async one
 * returns at once (the deletion done by l's own thread: on an event loop). */
void fleet_lease_end(struct fleet_lease *l);
void fleet_lease_end_async(struct fleet_lease *l);
/* Whether every lease's thread ended (those ended async deleting their records), waiting up
 * to wait_ms: before the fleet's connection closes. */
bool fleet_lease_quiesce(int wait_ms);
/* Stop renewing l and free it, its record left to go stale (a test's dead holder). */
void fleet_lease_abandon(struct fleet_lease *l);

#endif /* SANDBOX_FLEET_H */

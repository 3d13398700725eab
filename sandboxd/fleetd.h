/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandboxd in a fleet (docs/fleet.md, "The service in a fleet"): every host runs sandboxd and
 * any of them answers the API. A create is placed by NATS JetStream (fleet/): the host that
 * takes the request from the pool's queue, only while it has room, makes the box and owns it.
 * A control call for a box another host owns goes to the owner over NATS request/reply and
 * runs there as it would have locally; a list asks every live host. A box's dataplane_url names
 * its owner. API keys and the API's snapshot records live in buckets every host mirrors into
 * its own records; the snapshots themselves in the object store.
 *
 * Files: fleetd.c (options, start, the host's loop that takes creates, the owners' and hosts'
 * copies, keys), fleet_rpc.c (calls between hosts: a request forwarded, a create's answer
 * awaited, a list gathered, and the requests this host answers for others), fleet_names.c
 * (names claimed and freed by renames, deletes and boxes gone), fleet_snaps.c (the API's
 * snapshot records), fleet_moves.c (boxes released into the store, woken), fleet_lost.c (a
 * lost host's boxes: shown failed, or released at their last checkpoint), box_move.c (a stop
 * into the store), box_checkpoint.c (periodic checkpoints into it), fleet_quota.c, fleet_store.c
 * (snapshots in the object store: a capture pushed, a snapshot another host made pulled),
 * dp_proxy.c and dp_relay.c (dataplanes).
 */
#ifndef SANDBOXD_FLEETD_H
#define SANDBOXD_FLEETD_H

#include "fleet.h"
#include "sandboxd.h"

#define FLEETD_ADDR_MAX	    64		  /* a host's advertised HOST:PORT */
#define FLEETD_MSG_MAX	    (1000u << 10) /* a call's message: NATS's 1 MiB, less its framing */
#define FLEETD_RPC_THREADS  16		  /* WORK_FLEET's threads */
#define FLEETD_XFER_THREADS 4		  /* WORK_XFER's (fleet_xfer.c) */
#define FLEETD_QUERY_ARGS   16		  /* a call's query arguments */

/* Whether this sandboxd serves in a fleet (serve --fleet). */
extern bool fleetd_on;
/* The fleet (its NATS connection, placement, owners and hosts buckets). */
extern struct fleet fleetd;

/* serve's options: --fleet URL[,URL...], --host-id ID, --fleet-pool NAME, --slots N,
 * --fleet-replicas N, --advertise HOST:PORT. 1: taken, 0: not a fleet option, -1: bad value
 * (said on stderr). */
int fleetd_option(const char *name, const char *val);
/* After the options: complete them (the advertised address defaults to listen). -1: said. */
int fleetd_check(const char *listen);
/* Connect, open the buckets, start the watchers, the host's loop and its call subscription. */
int fleetd_start(void) __must_check;
void fleetd_stop(void);
/* At a restart, before adopt_boxes: a box whose ownership names another host (or released) is
 * not adopted: its VMM stops and its sandbox goes (the fleet's records stay). */
void fleetd_adopt_filter(void);
/* The loop's tick: this host's use of its slots, for the host's loop. */
void fleetd_tick(void);

/* ---- lookups from the watchers' copies (any thread) ---- */
/* The host owning box `id`: 0, or -ENOENT (none known, or it was cancelled). ask: one not in
 * the copy (a create a moment old) is asked of the bucket (a round trip: not on the loop). */
int fleetd_owner_of(const char *id, char host[FLEET_ID_MAX + 1], bool ask);
/* On a worker: box id's owner read from the bucket's leader (never the copy, which can lag a
 * move), after pause_ms (0: at once); a cancelled create's is none: 0, -ENOENT, -errno. */
int fleetd_owner_fresh(const char *id, char host[FLEET_ID_MAX + 1], unsigned pause_ms);
/* A call or request whose box moved under it reads its owner afresh this many times, this
 * far apart, before it gives up (fleet_rpc.c, dp_proxy.c). */
#define FLEETD_MOVE_TRIES    5
#define FLEETD_MOVE_PAUSE_MS 300
/* A live host's advertised HOST:PORT: 0 or -ENOENT. */
int fleetd_host_addr(const char *host, char addr[FLEETD_ADDR_MAX]);
/* On a worker: the same from the hosts bucket itself when the copy does not have it (a
 * watcher's copy lags while its connection moves to another node). */
int fleetd_host_addr_ask(const char *host, char addr[FLEETD_ADDR_MAX]);
/* On a worker: the hosts a list asks: the bucket's live ones, every host the copy saw beat in
 * the last minute, and this one. */
unsigned fleetd_hosts_ask(char (*out)[FLEET_ID_MAX + 1], unsigned max);
bool fleetd_self(const char *host);
/* Whether host is live and had a slot free at its last beat (this host: now), not draining. */
bool fleetd_host_room(const char *host);
const char *fleetd_host_id(void);
/* This host's advertised HOST:PORT. */
int fleetd_self_addr(char addr[FLEETD_ADDR_MAX]);

/* `sandboxd keys ... --fleet URLS` and `sandboxd quota set ... --fleet URLS`: a record into
 * the fleet's bucket (sandbox_keys: k.<key id>; sandbox_quotas: q.<workspace>). */
int fleetd_put_record(const char *servers, const char *bucket, const char *key, const char *text);

/* ---- names (fleetd.c): a box's name is unique in its workspace across the fleet ---- */
/* The record key of (workspace, name). */
void fleetd_name_key(const char *workspace, const char *name, char key[80]);
extern struct fleet_kv fleetd_names; /* name key -> box id */

/* ---- control (fleet_rpc.c), on the loop ---- */
/* POST /boxes in a fleet: the name claimed, the create placed, the owner's answer relayed. */
void fleetd_create(struct sd_req *q, json_t *body);
/* GET /boxes: every live host's boxes of the workspace. */
void fleetd_list(struct sd_req *q);
/* A control call for a box this host does not hold: sent to its owner (the reply relayed),
 * or a 404. */
void fleetd_forward(struct sd_req *q);
/* The loop made box b from a request it took: answer the create waiting for it. */
void fleetd_created(struct sd_req *q);
/* fleet_names.c. A box of this host is gone for good: its name and ownership records go too
 * (box_forget_hook). */
void fleetd_box_forgotten(const struct box *b);
/* The same for a box that was never made (a create the owner refused): its name, if it still
 * names id, and its ownership. */
void fleetd_records_drop(const char *workspace, const char *name, const char *id, unsigned vcpus,
			 uint64_t mem_bytes, uint64_t fs_bytes);
/* A delete of b was asked (the box is DELETING): its name is freed, then q answered 204. */
void fleetd_box_deleted(struct sd_req *q, struct box *b);
/* A PATCH renaming b: the new name claimed (409 when it is taken), then the update runs
 * again (control_handle) with q->fleet_name_claimed set, and the old name is freed. */
void fleetd_box_rename(struct sd_req *q, struct box *b, const char *name);

/* On the loop: a create this host took from the queue (the placing host's message): made as
 * a box, its answer kept for the placing host's await. again: taken before (its ack lost). */
void fleet_rpc_take(const char *id, const uint8_t *msg, size_t len, bool again);
/* How long a create from a snapshot waits for the hosts that hold it before it goes to the
 * pool (--fleet-near-ms; 0: it goes to the pool at once). */
#define FLEETD_NEAR_MS 1000
extern unsigned fleetd_near_ms;
/* On the loop: box id's stop into the store is over: a wake taken meanwhile runs now, or is
 * dropped when the box was deleted meanwhile. */
void fleetd_box_released(const char *id, bool deleted);
int fleet_rpc_start(void) __must_check;
/* A call's message: a JSON head (taken), a newline, the body. NULL over NATS's bound. */
uint8_t *fleet_rpc_msg(json_t *head, const void *body, size_t blen, size_t *len);
/* On a worker: send m to host's calls and wait up to timeout_ms for the answer (malloc'd). */
int fleet_rpc_ask(const char *host, const uint8_t *m, size_t len, int timeout_ms, uint8_t **answer,
		  size_t *alen) __must_check;

/* An answer's HTTP status (0: not an answer). */
int fleet_rpc_status(const uint8_t *m, size_t len);
/* A message's head (an object: the caller's to free) and body: 0 or -EBADMSG. */
int fleet_rpc_split(const uint8_t *m, size_t len, json_t **head, const uint8_t **body,
		    size_t *blen);
/* An answer: status, content type, q's extra headers (q may be NULL), the body. */
uint8_t *fleet_rpc_answer(int status, const char *ctype, const struct sd_req *q, const void *body,
			  size_t blen, size_t *len);
bool fleet_is_uuid(const char *s);

/* ---- fleet_moves.c: boxes released into the store ---- */
int fleet_moves_start(void) __must_check;
void fleet_moves_stop(void);
/* On the loop: the released boxes of workspace as the API's objects, appended to arr. */
void fleetd_released_list(const char *workspace, json_t *arr);
/* on WORK_FLEET: released box id's record (its text, malloc'd) from the bucket itself, if it is
 * workspace's: 0, -ENOENT, -EACCES (another workspace's: answer as -ENOENT, final), -EIO. On the
 * loop: that record as the API shows a box. */
int fleetd_released_fetch(const char *workspace, const char *id, char **text);
json_t *fleetd_released_record_json(const char *text);
/* On a worker: delete released box id of workspace (its records; its chunks wait for the
 * store's collector): 0, -ENOENT, -EIO. */
int fleetd_released_delete(const char *workspace, const char *id);
/* On a worker: new box id, already in the store (a push: fleet_xfer.c), recorded as released
 * with its record (stopped): 0, or -errno with err. */
int fleetd_released_new(const char *id, const char *record, char *err, size_t len);
/* On a worker: wake released box id on a host with room and wait until it runs there (or
 * failed): its host in owner. -ENOENT (no record: woken meanwhile, or gone), -EACCES
 * (another workspace's), -EAGAIN (no room), -errno. */
int fleetd_wake(const char *workspace, const char *key_id, const char *id,
		char owner[FLEET_ID_MAX + 1], char *err, size_t len) __must_check;
/* box_move.c's release (fleet_hooks): the record kept, the ownership released. */
int fleetd_release(const char *id, const char *record, char *err, size_t len);
/* On the loop: a woken box runs here (ok: its released record goes), or its restore failed
 * (it is released again, for another wake). On a worker. */
void fleetd_woken(const char *id, bool ok);
void fleet_rpc_stop(void);

/* ---- dp_proxy.c, dp_relay.c: the dataplane of a box another host holds ---- */
/* On a worker: the address of box id's host (woken first if it was released), or *here when
 * it is this host. 0, -ENOENT (no such box), -errno with err. */
int dp_resolve(const char *workspace, const char *key_id, const char *id,
	       char addr[FLEETD_ADDR_MAX], bool *here, char *err, size_t len) __must_check;
/* An HTTP dataplane request sent on to the box's host, its answer relayed. */
void dp_proxy(struct sd_req *q);

/* ---- fleet_snaps.c: the API's snapshot records, every host's copy following the bucket ---- */
int fleet_snaps_start(void) __must_check;
void fleet_snaps_stop(void);

/* ---- fleet_lost.c: the boxes of a lost host ---- */
#define FLEETD_LOST_MS 20000 /* a host without a beat this long, and gone from the bucket */
int fleet_lost_start(void) __must_check;
void fleet_lost_stop(void);
/* The watcher's thread (fleet_moves.c's): record r.<id> changed (val NULL: gone). */
void fleetd_lost_in(const char *id, const char *val, size_t len);
/* On the loop: this host's ready boxes' records kept (fleetd_tick); a box forgotten here. */
void fleetd_lost_tick(void);
void fleetd_lost_forget(const struct box *b);
/* On the loop: a lost box's record as fleetd_lost_fetch gave it, as the API's object failed
 * for its host's loss ago_ms ago (NULL: not one); the lost boxes of workspace (their hosts
 * not among the alive) appended to arr. */
json_t *fleetd_lost_json(const char *text, uint64_t ago_ms);
void fleetd_lost_list(const char *workspace, json_t *arr, char (*alive)[FLEET_ID_MAX + 1],
		      unsigned nalive);
/* Any thread: how long host has been without a beat here (since this host started, for one
 * never seen). */
uint64_t fleetd_host_lapsed_ms(const char *host);
/* On a worker: whether host is lost: 1 (its lapse in *ago_ms), 0, -EIO (the bucket did not
 * say). Lost box id of workspace: its record text (malloc'd) fetched, or the box deleted
 * (its name, ownership retired, share and record): 0, -ENOENT (or another workspace's),
 * -ESTALE (it moved meanwhile), -EIO. */
int fleetd_host_lost(const char *host, uint64_t *ago_ms);
int fleetd_lost_fetch(const char *workspace, const char *id, char **text);
int fleetd_lost_delete(const char *workspace, const char *id);

/* ---- fleet_xfer.c: a sandbox pushed and pulled through the API (fleet_hooks->xfer) ---- */
void fleetd_xfer(struct sd_req *q);

/* fleet_store.c, on a worker: deleted box id's state in the store (its manifest) deleted,
 * once no host holds the box (its ownership deleted on the revision that named this host, or
 * the fleet as released). None there, or no store: 0. */
int fleetd_forget_box_state(const char *workspace, const char *id, char *err, size_t len);

/* ---- fleet_gc.c: the store's collector in a fleet (fstore_lease: fstore.h) ---- */
int fleet_gc_start(void) __must_check;
void fleet_gc_stop(void);
/* POST /gc on the operator's listener (fleet_hooks->gc). */
void fleetd_gc(struct sd_req *q);
#define FLEET_GC_GRACE_MAX     (30 * 24 * 3600) /* a collection's grace, at most */
#define FLEET_GC_GRACE_DEFAULT 3600		/* unless said */
struct store_gc_report;
/* One collection of workspace, on the caller's thread (never a pool worker: it waits up to
 * wait_ms for the workspace's pushes to end), said in the log: 200, or the HTTP status of its
 * failure (err). */
int fleet_gc_collect(const char *workspace, int64_t grace_s, bool dry_run, int wait_ms,
		     struct store_gc_report *rep, char *err, size_t len);
/* The host's one collection at a time: false while one runs here (or with no store). */
bool fleet_gc_hold(void);
void fleet_gc_unhold(void);

/* ---- fleet_gc_turn.c: collections on a schedule (--gc-every), one host each turn ---- */
/* --gc-every SECONDS, --gc-grace-s SECONDS: 1 taken, 0 not these, -1 bad. */
int fleet_gc_turn_option(const char *name, const char *val);
bool fleet_gc_turn_asked(void);
int fleet_gc_turn_start(void) __must_check;
/* The loop's: a round of the workspaces due started on a thread of its own. */
void fleet_gc_turn_tick(void);

/* ---- fleet_quota.c: quotas across the fleet ---- */
int fleet_quota_start(void) __must_check;
void fleet_quota_stop(void);
/* On a worker: the share of a create's body reserved in the workspace's usage: 0, -EDQUOT
 * (msg names the quota, as the API's 429 says it), -EIO. */
int fleetd_quota_reserve(const char *workspace, json_t *body, char *msg, size_t len);
/* On a worker: a share given back (a create not placed; a box gone). */
void fleetd_quota_release_body(const char *workspace, json_t *body);
void fleetd_quota_release_box(const char *workspace, unsigned vcpus, uint64_t mem_bytes,
			      uint64_t fs_bytes);

/* ---- fleet_store.c: snapshots in the object store ---- */
/* --store-endpoint, --store-bucket, --store-region, --store-credentials, --fleet-key,
 * --chunk-kib: as fleetd_option. */
int fstore_option(const char *name, const char *val);
/* With a store given: its settings read, the bucket made, snap_store_hooks set. */
int fstore_start(void) __must_check;
/* Whether this host holds snapshot store_name (it made it, or pulled it): a create from it
 * here restores without the store. */
bool fstore_held(const char *store_name);
/* On a worker, for a sandbox pushed or pulled through the API (fleet_xfer.c), with the
 * workspace's chunks. Which chunks of a manifest's text (a client's) the store lacks, as an
 * array of hex hashes: */
int fstore_missing(const char *workspace, const char *text, size_t len, json_t **missing, char *err,
		   size_t elen);
/* A client's chunk, named by its SHA-256 in hex (checked against its bytes), stored: */
int fstore_chunk_put(const char *workspace, const char *hex, const void *data, size_t len,
		     char *err, size_t elen);
/* One of the workspace's chunks, checked (malloc'd, *len bytes): */
int fstore_chunk_get(const char *workspace, const char *hex, uint8_t **data, size_t *len, char *err,
		     size_t elen);
/* A client's manifest (a snapshot's state, memory, layers and meta.yaml, every chunk in the
 * store already) put as manifest id at generation 1, then pulled here as snapshot store_name
 * (every chunk and the snapshot checked as one from elsewhere): *m is it. */
struct snap_meta;
int fstore_import(const char *workspace, const char *text, size_t len, const char *id,
		  const char *store_name, struct snap_meta *m, char *err, size_t elen);
/* Manifest id (its generation at least gen) as text for a client, its proxy files left out: */
int fstore_export(const char *workspace, const char *id, uint64_t gen, char **text, size_t *len,
		  char *err, size_t elen);

#endif

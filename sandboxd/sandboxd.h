/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandboxd: the sandbox service (docs/api.md, docs/design.md "The service"). One event loop
 * (libwebsockets) serves HTTP/1.1 and WebSockets: the LangSmith Sandboxes API's control plane
 * and each box's dataplane. Lifecycle work (create, start, stop, snapshot, delete) runs on
 * worker threads (work.c) that call the lifecycle layer (client/), never on the loop. The loop
 * thread owns every in-memory record (boxes, snapshots, keys); a worker gets copies and hands
 * its result back through a completion queue.
 *
 * Files: main.c (command line, the loop, the tick), keys.c (API keys, quotas' files, secrets),
 * route.c (paths to routes: no I/O), http.c (the lws HTTP protocol: requests in, responses
 * out, the key's check, failed-auth rate limit), box.c and snap.c (box and snapshot records on
 * disk and as JSON), control.c (the box routes), tenancy.c (quotas), usage.c (usage per
 * workspace, kept on disk), work.c (the worker pool), box_work.c (the lifecycle jobs a
 * worker runs, wakes), pool.c (warm pools), idle.c (adoption at start, idle stop, delete
 * after stop, create timeouts), agent_link.c (a box's agent connection on the loop),
 * exec_req.c (an execute request as a command session), ws_exec.c (the execute WebSocket),
 * exec_http.c (POST /execute, the commands list),
 * files.c files_search.c multipart.c range.c range_parse.c (upload, download, glob, grep),
 * links.c svc_proxy.c (download links, service URLs), proxy_config.c (proxy_config as the
 * proxy's policy), image_snap.c registry.c (snapshots from Docker images, registries),
 * metrics.c (/metrics, /healthz, the access log), jsonx.c (JSON with our limits), util.c.
 */
#ifndef SANDBOXD_H
#define SANDBOXD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <jansson.h>
#include <libwebsockets.h>

#include "client.h" /* struct session_req */

#define __must_check __attribute__((warn_unused_result))

/* ---- limits: every length a client controls (docs/api.md, "Limits") ---- */
/* All of a request's headers. lws gives every connection a buffer of this size while its
 * head is read (2000 silent connections: 2000 of them), so it is no larger than clients
 * need: theirs are under 2 KiB. */
#define SD_HEADERS_MAX	     (16u << 10)
#define SD_JSON_BODY_MAX     (1u << 20)	   /* a JSON request body */
#define SD_UPLOAD_MAX	     (256u << 20)  /* an upload's body */
#define SD_UPLOADS_INFLIGHT  (1024u << 20) /* upload bodies held at once, all clients */
#define SD_CHUNK_BODY_MAX    (4u << 20)	   /* a pushed chunk (store.h's CHUNK_SIZE_MAX) */
#define SD_MANIFEST_BODY_MAX (16u << 20)   /* a pushed manifest: 250,000 chunks */
#define SD_DOWNLOAD_MAX	     (256u << 20)  /* a file read through /download */
#define SD_JSON_DEPTH_MAX    32		   /* nesting of a JSON body */
#define SD_WS_FRAME_MAX	     (1u << 20)	   /* a client's WebSocket message, reassembled */
#define SD_WS_OUTQ_MAX	     (1u << 20)	   /* output queued for one WebSocket before it pauses */
#define SD_NAME_MAX	     63		   /* a box's name (our sandbox names' bound) */
#define SD_SNAP_NAME_MAX     255	   /* a snapshot's name (registry-style) */
#define SD_WORKSPACE_MAX     63
#define SD_BOXES_MAX	     4096 /* boxes on this host, all workspaces */
#define SD_SNAPS_MAX	     4096
#define SD_KEYS_MAX	     4096
#define SD_CMD_ID_MAX	     128 /* a command id's bytes (the API: 1..128) */
/* A command's PATH (exec_req.c's base environment; the pool's warm-up runs under it too) */
#define SD_EXEC_PATH	     "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define SD_CMD_ID_RESERVED   "sandboxd-" /* command ids of ours (a pool's warm-up): refused */
#define SD_ID_LEN	     36		 /* a UUID */

/* ---- keys.c: API keys and workspaces ---- */

/* A key as shown once: "sk-" + 12 hex digits of its id + "-" + 64 hex digits of secret. */
#define SD_KEY_ID_LEN	12
#define SD_KEY_TEXT_LEN (3 + SD_KEY_ID_LEN + 1 + 64)
struct sd_key {
	char id[SD_KEY_ID_LEN + 1];
	char workspace[SD_WORKSPACE_MAX + 1];
	uint8_t hash[32]; /* SHA-256 of the secret's 32 bytes */
	uint64_t created;
	bool revoked;
};
struct sd_quota {
	uint64_t sandboxes, vcpus, memory_mib, disk_gib, snapshots; /* 0: no limit */
	uint64_t checkpoint_s; /* not a limit: a fleet's running boxes into the store this often */
};
/* $SANDBOX_HOME/service (made 0700). */
const char *sd_dir(void);
int sd_dir_init(void) __must_check;
/* Load every key (service/keys/<id>). 0 or -errno. */
int keys_load(void) __must_check;
/* Make a key for `workspace`: its text (shown once) into `text`. 0 or -errno. */
int keys_create(const char *workspace, char text[SD_KEY_TEXT_LEN + 1],
		char id[SD_KEY_ID_LEN + 1]) __must_check;
int keys_revoke(const char *id) __must_check;
/* A key's record from the fleet (fleetd.c) as key file `id`, unless it says the same or the
 * file says revoked: 0, or -EBADMSG for text that is not a key's record. */
int keys_mirror(const char *id, const char *text) __must_check;
/* Key `id`'s record, as its file holds it (for the fleet's keys bucket): 0 or -ENOENT. */
int keys_text(const char *id, char *out, size_t len) __must_check;
/* The live key `text` names (its secret checked in constant time), else NULL. */
const struct sd_key *keys_check(const char *text);
/* The keys read again when their directory changed since the last call, and at each call
 * while that change is under two seconds old (the tick's): true when they were. */
bool keys_refresh(void);
/* Call fn for every key (list). */
void keys_foreach(void (*fn)(const struct sd_key *k, void *arg), void *arg);
/* Reload a key's file (a revoke by `sandboxd keys revoke` while serving): keys_load again. */
bool valid_workspace(const char *s);
int quota_load(const char *workspace, struct sd_quota *q) __must_check;
int quota_save(const char *workspace, const struct sd_quota *q) __must_check;
/* A quota's text (its file's, the fleet's record's): the length written, or -ENAMETOOLONG. */
int quota_text(const struct sd_quota *q, char *out, size_t len) __must_check;
/* Such a text into *q: 0 or -EBADMSG. */
int quota_parse(const char *text, struct sd_quota *q) __must_check;
/* Workspace secrets, AES-256-GCM under the server key (service/server.key). */
int secret_set(const char *workspace, const char *name, const void *val, size_t len) __must_check;
/* The value (malloc'ed, NUL-terminated) or -ENOENT. */
int secret_get(const char *workspace, const char *name, char **val, size_t *len) __must_check;

/* ---- box.c: a box (the API's sandbox) ---- */

enum box_status { BOX_PROVISIONING, BOX_READY, BOX_FAILED, BOX_STOPPED, BOX_DELETING };
const char *box_status_name(enum box_status s);

struct box {
	char id[SD_ID_LEN + 1]; /* UUID, the API's id, constant across renames */
	char name[SD_NAME_MAX + 1];
	char workspace[SD_WORKSPACE_MAX + 1];
	char sandbox[16];		 /* the lifecycle layer's sandbox id, "" before it exists */
	char snapshot_id[SD_ID_LEN + 1]; /* the snapshot it came from, "" for the default */
	char snapshot_store[64];	 /* that snapshot's lifecycle name */
	char image[64];			 /* the image it booted (no snapshot) */
	enum box_status status;
	char status_message[1100];
	uint64_t created_ms, updated_ms, stopped_ms; /* stopped_ms 0: not stopped */
	int64_t idle_ttl_s, delete_after_stop_s;
	unsigned vcpus;
	uint64_t mem_bytes, fs_capacity_bytes;
	json_t *labels;	    /* object or NULL */
	json_t *run_config; /* object or NULL */
	json_t *proxy_config;
	/* Not saved: the loop's bookkeeping. */
	bool busy;		 /* a worker holds it (create, start, stop, delete, snapshot) */
	bool releasing;		 /* in a fleet: its stop into the store runs (box_move.c) */
	int *release_cancel;	 /* then: set (__atomic) by a delete, so it is not let go */
	uint64_t last_active_ms; /* the last dataplane request */
	unsigned attached;	 /* WebSockets and HTTP executes using it now */
	struct agent_link *link;
	struct box_waiter *waiters;	/* requests and WebSockets waiting for it to run */
	bool delete_requested;		/* DELETE while a job held it: deleted after */
	bool idle_checking;		/* its running commands are being counted */
	bool starting;			/* a start by the user runs: shown as provisioning */
	struct sd_pending *create_wait; /* a create waiting for ready, */
	uint64_t create_deadline_ms;	/* until then (its `timeout`) */
	struct image_conf *conf;	/* its image's exec.conf, read at its first command */
	bool conf_read;			/* conf is read (NULL: the image has none) */
	uint64_t fleet_gen;		/* saved: how many times it went into the fleet's store */
	char store_last[SD_ID_LEN + 1]; /* its last capture into the store here: the next one's
					   parent (store/chunk_patch.c); "" none */
	uint64_t ckpt_gen, ckpt_ms;	/* saved: its last checkpoint there (box_checkpoint.c), 0 */
	uint64_t wake_min_gen; /* saved: a released box's oldest generation its wake takes (a
				  lost host's: its checkpoint's), 0: fleet_gen */
	bool checkpointing;    /* a checkpoint's job runs, */
	bool stop_after_ckpt;  /* and a stop waits for it */
	uint64_t ckpt_try_ms;  /* the last checkpoint tried (made or not) */
	char dp_base[512];     /* saved: the public URL its dataplane_url has (the host that made
				  it), the same wherever it moves; "" for this host's */
	bool released;	       /* gone into the store, let go: forgotten here, not deleted */
	bool fleet_pub;	       /* its record kept in the fleet for a loss of this host, */
	char fleet_pub_name[SD_NAME_MAX + 1]; /* under this name, */
	uint64_t fleet_pub_ms;		      /* as it was at this updated_ms */
	struct box *next;
};
/* The boxes of this host, loaded from service/boxes at start. */
int boxes_load(void) __must_check;
/* A new box record (not saved), id made; NULL when SD_BOXES_MAX. */
struct box *box_new(const char *workspace, const char *name);
/* Save atomically. */
int box_save(const struct box *b) __must_check;
/* Its record as JSON text (malloc'd; NULL: out of memory), as box_save writes it. */
char *box_record(const struct box *b);
/* A box made from such a record (one moved from another host), listed; NULL when the text is
 * not a record, or its id is here already. */
struct box *box_from_record(const char *text);
/* Such a record into *b (zeroed by the caller), not listed: 0 or -EBADMSG; box_record_free
 * after. */
int box_parse_record(const char *text, struct box *b) __must_check;
void box_record_free(struct box *b);
/* box_save, a failure logged (the record in memory stays right; the next save retries). */
void box_store(const struct box *b);
/* Remove its record and free it. */
void box_forget(struct box *b);
/* Called by box_forget first (a fleet's records of the box go too: fleetd.c). */
extern void (*box_forget_hook)(const struct box *b);
/* By name or id, in `workspace` only. */
struct box *box_find(const char *workspace, const char *ref);
struct box *box_by_id(const char *id);
struct box *box_first(void);
unsigned box_count(const char *workspace, unsigned *vcpus, uint64_t *mem_mib, uint64_t *disk_gib);
/* The API's sandbox object. */
json_t *box_json(const struct box *b);
/* box_json with an object {status, status_message}. */
json_t *box_status_json(const struct box *b);
/* The exec.conf of the image b booted (its Env, WorkingDir, User), read once per box and
 * daemon run: the commands of a box do not read a file each; NULL when it has none. */
const struct image_conf *box_image_conf(struct box *b);
/* "<public url>/dp/<id>". */
void box_dataplane_url(const struct box *b, char *out, size_t len);

/* ---- snap.c: the API's snapshots ---- */

enum snap_status { SNAP_BUILDING, SNAP_READY, SNAP_FAILED };
struct sd_snap {
	char id[SD_ID_LEN + 1];
	char name[SD_SNAP_NAME_MAX + 1];
	char workspace[SD_WORKSPACE_MAX + 1];
	char store_name[64]; /* the lifecycle layer's snapshot name ("api-<uuid-hex>"), or "" */
	char image[64];	     /* or the image it stands for (from a Docker image: "api-img-...") */
	char docker_image[512];
	char source_box[SD_ID_LEN + 1];
	char host[64]; /* in a fleet, the host that made it (a create from it goes there first) */
	enum snap_status status;
	char status_message[1100];
	uint64_t created_ms, updated_ms, fs_capacity_bytes;
	bool busy;
	struct sd_snap *next;
};
int snaps_load(void) __must_check;
struct sd_snap *snap_new(const char *workspace, const char *name);
int snap_save(const struct sd_snap *s) __must_check;
void snap_forget(struct sd_snap *s);
struct sd_req;
/* In a fleet (fleet_snaps.c sets them). */
struct snap_fleet_hooks {
	/* a record's JSON text at every snap_save, NULL when it is forgotten (by a delete: its
	 * manifest in the fleet's store goes too): every host's copy follows */
	void (*saved)(const char *id, const char *workspace, const char *record);
	/* q answered 200 with body (taken; NULL: 204) once the records saved before it are in
	 * the fleet */
	void (*answer)(struct sd_req *q, json_t *body);
	/* a GET of snapshot id this host has no copy of: the fleet's record, or 404 */
	void (*lookup)(struct sd_req *q, const char *id);
	/* this host's id in the fleet */
	const char *(*host)(void);
};
extern const struct snap_fleet_hooks *snap_fleet_hooks;
/* A new snapshot's answer (200, its record): in a fleet, once its record is there. */
void snap_reply_new(struct sd_req *q, const struct sd_snap *s);
/* 200 with the record in text (a fleet's JSON text, NULL: none) if it is snapshot id of q's
 * workspace; else 404. */
void snap_reply_record(struct sd_req *q, const char *id, const char *text);
/* A record from the fleet (text NULL: it was deleted) into this host's copy. */
void snap_mirror(const char *id, const char *text);
struct sd_snap *snap_find(const char *workspace, const char *ref);
struct sd_snap *snap_first(void);
unsigned snap_count(const char *workspace);
json_t *snap_json(const struct sd_snap *s);

/* ---- route.c: a request's method and path to what serves it (no I/O; fuzzed) ---- */

enum route_kind {
	R_NONE, /* 404 */
	R_BOXES,
	R_BOX,
	R_BOX_STATUS,
	R_BOX_START,
	R_BOX_STOP,
	R_BOX_SNAPSHOT,
	R_BOX_DOWNLOAD_URL,
	R_BOX_SERVICE_URL,
	R_BOX_SERVICE_URLS,
	R_BOX_COMMANDS,
	R_BOX_STATS,
	R_BOX_EXPORT, /* GET: a stopped box's manifest, for sandboxctl pull (fleet_xfer.c) */
	R_SNAPSHOTS,
	R_SNAPSHOT,
	R_SNAPSHOT_BY_NAME,
	R_REGISTRIES,
	R_REGISTRY,
	R_USAGE,
	R_CHUNKS_MISSING, /* POST /chunks/missing: which of a manifest's chunks the store lacks */
	R_CHUNK,	  /* PUT, GET /chunks/<sha-256>: one chunk of the workspace's */
	R_IMPORTS,	  /* POST /imports?name=: a pushed sandbox, stopped (sandboxctl push) */
	R_DP_EXECUTE,
	R_DP_EXECUTE_WS,
	R_DP_UPLOAD,
	R_DP_DOWNLOAD,
	R_DP_GLOB,
	R_DP_GREP,
	R_DP_TUNNEL,
	R_FILE_LINK, /* /files/<token> */
	R_SERVICE,   /* /svc/<token>/... */
	R_HEALTHZ,
	R_METRICS,
	R_DRAIN, /* POST /drain on the operator's listener (a fleet's host) */
	R_GC,	 /* POST /gc on the operator's listener (a fleet's host) */
};
enum http_method { M_GET, M_HEAD, M_POST, M_PUT, M_PATCH, M_DELETE, M_OPTIONS, M_OTHER };
#define ROUTE_ARG_MAX 512
struct route {
	enum route_kind kind;
	char arg[ROUTE_ARG_MAX];      /* a box's name or id, a snapshot's id or name, a token */
	char rest[ROUTE_ARG_MAX * 2]; /* R_SERVICE: the path after the token, with its '/' */
	bool method_ok;		      /* the kind allows this method (else 405) */
};
/* Route `path` (already percent-decoded, no query) for `m`. `operator` selects the operator
 * listener's routes (/healthz, /metrics) instead of the API's. Returns the kind (R_NONE for
 * an unknown path); r->method_ok false when the path is known but not for m. */
enum route_kind route_parse(enum http_method m, const char *path, bool operator_listener,
			    struct route *r);
/* Decode %XX in place (a '+' stays); -1 for a bad escape or a NUL decoded. */
int route_pct_decode(char *s);
const char *route_name(enum route_kind k); /* for metrics: a label with no name or id in it */

/* ---- http.c: one HTTP request and its response, on the loop ---- */

#define REQ_EXTRA_HEADERS 6
struct sd_pending;
struct sd_req {
	struct lws *wsi;
	enum http_method method;
	struct route rt;
	bool operator_listener;
	char workspace[SD_WORKSPACE_MAX + 1]; /* the key's, once authenticated */
	char key_id[SD_KEY_ID_LEN + 1];
	char peer[64];
	uint64_t start_ms;
	/* The body as it came, bounded by the route's limit (NUL-terminated). */
	char *body;
	size_t body_len, body_cap, body_max;
	bool body_expected, body_too_big;
	bool authenticated;	  /* the key checked at the head (workspace, key_id set) */
	bool close_after;	  /* answered before its body: the connection closes after */
	uint64_t upload_reserved; /* of the uploads' in-flight budget (http.c) */
	/* The response, once decided. */
	bool replied, headers_sent;
	bool dispatching;	    /* in http_dispatch: an answer is written when it returns */
	bool dispatched, completed; /* once each: lws may call BODY_COMPLETION again */
	bool has_length;	    /* a Content-Length came (of any value) */
	int status;
	char ctype[96];
	char *resp;
	size_t resp_len, resp_off;
	uint64_t head_len; /* HEAD: the Content-Length of the GET it stands for */
	struct {
		char name[40];
		char value[200];
	} extra[REQ_EXTRA_HEADERS];
	unsigned nextra;
	struct sd_pending *pending; /* parked on a job */
	char *path;		    /* the path, percent-decoded (malloc'd) */
	/* A request made with no connection (another host's call, fleet_rpc.c): wsi NULL, no
	 * headers, its query's arguments as "name=value" in vquery; its reply goes to
	 * on_reply (which frees it) instead. */
	void (*on_reply)(struct sd_req *q);
	void *owner;
	char **vquery;
	unsigned nvquery;
	char fleet_box_id[SD_ID_LEN + 1]; /* a create taken from the fleet's queue: its id */
	char fleet_name_claimed[SD_NAME_MAX + 1]; /* a rename whose name the fleet gave it */
	bool dp_remote; /* a dataplane request for a box another host holds (fleet_hooks->dp) */
	unsigned char moved_hops; /* routed again after its box moved (req_moved), at most: */
#define REQ_MOVED_HOPS 4
	char link_path[4097]; /* a download link's path */
	unsigned svc_port;    /* a service URL's guest port */
};
/* The value of query argument `name` (percent-decoded) into out: 0, or -ENOENT, -E2BIG. */
int req_query(struct sd_req *q, const char *name, char *out, size_t len) __must_check;
/* A header's value (a custom one such as "x-api-key:" too) into out: its length, or -1. */
int req_header(struct sd_req *q, const char *name_colon, char *out, size_t len);
void req_add_header(struct sd_req *q, const char *name, const char *value);
/* Reply with `body` (taken: freed by the reply), or an error in the API's shape:
 * {"detail":{"error":TYPE,"message":MSG}}. */
void req_reply_json(struct sd_req *q, int status, json_t *body);
void req_reply_error(struct sd_req *q, int status, const char *type, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* A 422 in the FastAPI validation shape, naming `field`. */
void req_reply_invalid(struct sd_req *q, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Reply with `data` (malloc'ed, taken). */
void req_reply_raw(struct sd_req *q, int status, const char *ctype, char *data, size_t len);
/* Park the request on asynchronous work: the handle stays valid until pending_take. */
struct sd_pending *req_park(struct sd_req *q);
/* Call cancel(arg) if the client goes away while parked (the handle is then freed, and its
 * owner must not take it); without one, pending_take later gives NULL. */
void pending_on_cancel(struct sd_pending *p, void (*cancel)(void *arg), void *arg);
/* The request again (NULL when its client went away; then the handle is freed). */
struct sd_req *pending_take(struct sd_pending *p);
/* The request's JSON body as an object (NULL: replied 400/422 already). */
json_t *req_json(struct sd_req *q);
/* Dispatch a request whose body is complete: auth, then the route's handler. */
void req_dispatch(struct sd_req *q);
/* A request parked on a box that has just been released into the fleet's store: routed again
 * (its wake), or, another host's call, answered 421 so that host asks where the box went. */
void req_moved(struct sd_req *q);
/* A large body's share of the uploads' budget, taken over by a job that keeps the body past
 * the request (its client may go): given back with req_budget_return when the job ends. */
uint64_t req_budget_take(struct sd_req *q);
void req_budget_return(uint64_t n);

/* Handlers (control.c, files.c, ws_exec.c). */
void control_handle(struct sd_req *q, struct box *b);
void files_handle(struct sd_req *q, struct box *b);
void exec_http_handle(struct sd_req *q, struct box *b);
void operator_handle(struct sd_req *q);
/* Serve the guest's file `path` (GET, HEAD, Range) to q. */
void files_serve_path(struct sd_req *q, struct box *b, const char *path);
/* files_search.c: {D}/glob and {D}/grep. */
void files_search(struct sd_req *q, struct box *b);
/* svc_proxy.c: a service URL's request to the guest's q->svc_port. */
void svc_proxy(struct sd_req *q, struct box *b);
/* Wake `b` (stopped: start it) and call `then(q)` when it is ready, or answer the error. */
void box_wake_then(struct box *b, struct sd_req *q, void (*then)(struct sd_req *q, struct box *b));

/* ---- box_work.c: lifecycle jobs of a box ---- */

enum box_job_kind { J_CREATE, J_START, J_STOP, J_DELETE, J_SNAPSHOT };
#define BOX_WAITERS_MAX 256 /* requests and WebSockets waiting for one box to wake */
struct box_create_args {
	char image[64];
	unsigned cpus;
	uint64_t memory_mib, disk_gib;
	unsigned timeout_s;
	char snap_store[64];   /* "": boot the image */
	char snap_id[48];      /* with snap_store: its manifest in the fleet's store (a pull) */
	uint64_t snap_gen;     /* and its generation at least (0: 1) */
	char sandbox_name[40]; /* box_sandbox_name */
	char claim[16];	       /* a warm pool's sandbox to take, "" for none */
	int claim_fd;	       /* with claim: its agent connection (pool_take), or -1 */
	char **net_opts;       /* the proxy's policy words (netpolicy.h), owned by the job */
	unsigned nnet_opts;
	uint64_t queued_ms;
};
/* A claim given up (it failed, its box is gone, or its create was refused before its job):
 * its agent connection closed, claim emptied. */
void claim_drop(struct box_create_args *a);
typedef void (*box_reply_fn)(struct sd_req *q, struct box *b, int err, const char *msg);
/* Queue the job; `q` (may be NULL) is parked and answered by `reply` when it is done (b NULL
 * when the box is gone). 0 or -ENOMEM. */
int box_create_job(struct box *b, const struct box_create_args *a, struct sd_req *q,
		   box_reply_fn reply) __must_check;
int box_start_job(struct box *b, struct sd_req *q, box_reply_fn reply);
int box_simple_job(struct box *b, enum box_job_kind kind, struct sd_req *q,
		   box_reply_fn reply) __must_check;
int box_snapshot_job(struct box *b, const char *store_name, const char *snap_id) __must_check;
/* In a fleet with an object store (fleet_store.c sets them), on a worker: a capture goes to
 * the store before it is ready (push), and a create from a snapshot this host lacks fetches it
 * first (pull: nothing when the lifecycle's snapshot `store_name` is here). 0 or -errno with
 * a message in err. */
struct lazy_pull; /* box_lazy.h */
struct snap_store_hooks {
	/* the lifecycle's snapshot store_name as the store's manifest `manifest` at generation
	 * gen (an API snapshot: its id, 1; a box moved: "box-<id>", one more each time). parent
	 * (NULL: none; a box's own "box-<id>" needs none): the snapshot of the same box before
	 * it, whose chunks the changed ones may go up as patches of */
	int (*push)(const char *workspace, const char *store_name, const char *manifest,
		    uint64_t gen, const char *parent, char *err, size_t len);
	int (*pull)(const char *workspace, const char *manifest, uint64_t min_gen,
		    const char *store_name, char *err, size_t len);
	/* a lazy restore's pull: every file but the memory (box_lazy.c), and the pager's
	 * source over the memory's chunks; lazy_close when the pager is done with it */
	int (*pull_lazy)(const char *workspace, const char *manifest, uint64_t min_gen,
			 struct lazy_pull *out, char *err, size_t len);
	void (*lazy_close)(struct lazy_pull *lp);
};
extern const struct snap_store_hooks *snap_store_hooks;
/* The box was released into the fleet's store (box_move.c): what waited for it goes on to its
 * wake (a request routed again, a WebSocket closed early so its client sends it again). Before
 * the box is forgotten. */
void box_waiters_moved(struct box *b);
/* Or it was deleted meanwhile: what waited for it is told it is not found. */
void box_waiters_gone(struct box *b);
/* box_checkpoint.c, on the loop's tick: checkpoints of the running boxes of workspaces that
 * asked for them (a fleet with a store only). */
void box_checkpoint_tick(uint64_t now);
/* box_move.c: whether this host let a box of workspace named or numbered ref go into the
 * store in the last minutes (a call for it sent here is then told where to look again). */
bool box_released_lately(const char *workspace, const char *ref);

/* ---- box_lazy.c: a lazy restore from the fleet's store ---- */
#define LAZY_WAIT_MS 120000 /* a stop or capture waits this long for a fill at most */
struct lazy_restore;
/* Off the lock: the snapshot but its memory (snap_store_hooks->pull_lazy). 0, or -errno with
 * r->error. */
int box_lazy_pull(const char *workspace, const char *manifest, uint64_t min_gen,
		  const char *store_name, const char *box_id, struct lazy_restore **out,
		  struct lc_report *r) __must_check;
/* Until box_id's memory is whole (its lazy restore's pager done), at most ms: before a stop
 * or a capture takes the lifecycle lock (the VMM refuses to snapshot a RAM with holes). */
void box_lazy_wait(const char *box_id, unsigned ms);
/* Under the lifecycle lock: the sandbox sb made from it, its RAM filled by a pager thread
 * (the rest of it after the guest answered). 0, or -errno with r->error (naming a chunk the
 * pager could not put in). */
int box_lazy_restore(struct lazy_restore *l, const struct create_opts *o, struct sandbox *sb,
		     struct lc_report *r) __must_check;
/* After box_lazy_restore (or instead of it): the pulled directory removed; the pager goes on
 * alone (NULL: nothing). */
void box_lazy_release(struct lazy_restore *l);

/* ---- box_move.c: a box's move in a fleet with an object store ---- */
/* Stop b: into the fleet's store and let go where the fleet has a store (box_move.c), else
 * suspended here (J_STOP). */
int box_stop_job(struct box *b) __must_check;
/* A released box's record (its JSON text): made here and restored from the store, q (parked)
 * answered by reply when it runs. -EBADMSG: not a stopped box's record, or one here. */
int box_wake_here(const char *record, struct sd_req *q, box_reply_fn reply) __must_check;
/* Its lifecycle snapshot's name and its manifest in the store, for generation gen. */
void box_move_names(const char *id, uint64_t gen, char snap_name[64], char manifest[48]);
/* A box's memory and disks into the store at a generation (a stop's, a checkpoint's). */
struct box_push {
	char box_id[SD_ID_LEN + 1];
	char sandbox[40];
	char workspace[SD_WORKSPACE_MAX + 1];
	char snap_name[64];
	char manifest[48];
	uint64_t gen;
	unsigned max_frozen; /* refused (-ELOOP) at this many frozen disk layers; 0: no bound */
};
/* Filled for b at generation gen (on the loop). */
void box_push_init(struct box_push *p, const struct box *b, uint64_t gen);
/* On a worker: the lifecycle snapshot p->snap_name of its sandbox (found into *sb), pushed
 * as p->manifest at p->gen. 0, or -errno with r->error. */
int box_push_run(const struct box_push *p, struct sandbox *sb, struct lc_report *r);

/* A WebSocket waiting for its box: `then` runs when it is ready (err 0) or cannot be. */
void box_wake_ws(struct box *b, void *ws,
		 void (*then)(void *ws, struct box *b, int err, const char *msg));
void box_wake_cancel(void *ws);
/* snap.c: a capture's job ended. */
void snap_capture_done(const char *snap_id, int err, const char *msg);

/* ---- agent_link.c ---- */

struct proto_frame;
/* A frame of the call `call` for its owner; f NULL: the link is gone (no more frames). */
typedef void (*link_frame_fn)(void *owner, uint64_t call, const struct proto_frame *f);
void link_set_vhost(struct lws_vhost *vh);
/* Start a call on the box's agent link (connecting it first when needed): *id gets its id. */
int link_call_start(struct box *b, uint16_t type, const void *payload, uint32_t len,
		    link_frame_fn on_frame, void *owner, uint64_t *id) __must_check;
/* A frame about call `id` (STDIN, STDIN_CLOSE, SESSION_DETACH) or of id 0 (SIGNAL). */
int link_send(struct box *b, uint16_t type, uint64_t id, const void *payload,
	      uint32_t len) __must_check;
/* Its owner is gone: drop its frames until its final one. */
void link_call_orphan(struct box *b, uint64_t id);
/* Close the box's link: every call's owner hears f NULL. */
void link_close(struct box *b);
/* fd, a connection to b's agent past its HELLO with no call in flight (a warm pool's), as b's
 * link; closed when b has one already. */
void link_adopt(struct box *b, int fd);
int link_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
		  size_t len);

/* ---- exec_req.c ---- */

struct exec_req {
	struct session_req req;
	char *argv[6];
	char **env;
	unsigned envc;
	char *command, *shell, *cwd;
	char image_workdir[4097];
};
/* From a WebSocket execute frame (http false) or POST /execute's body (http true). 0, or
 * -errno with `why`. */
int exec_req_from_json(json_t *o, struct box *b, const char *cmd_id, bool http, struct exec_req *x,
		       char *why, size_t len) __must_check;
void exec_req_free(struct exec_req *x);
/* x's SESSION_EXEC started on b's link (link_call_start): 0, -EMSGSIZE (over a frame) or
 * -errno. */
int exec_req_start(struct box *b, const struct exec_req *x, link_frame_fn on_frame, void *owner,
		   uint64_t *id) __must_check;

/* ---- ws_exec.c, http.c: connections ---- */

struct ws_sess;
struct sd_conn {
	struct sd_req *req; /* an HTTP request's (calloc'ed at the first) */
	struct ws_sess *ws; /* a WebSocket's */
};
int http_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
		  size_t len);
/* Answer an upgrade or a request right away with an error, then close: for the callback's
 * return (1). */
int http_reject(struct lws *wsi, int status, const char *type, const char *msg);
int ws_confirm_upgrade(struct lws *wsi, struct sd_conn *c, const char *proto, bool op);
int ws_callback(struct lws *wsi, enum lws_callback_reasons reason, struct sd_conn *c, void *in,
		size_t len);
/* dp_relay.c: an execute WebSocket for a box another host of the fleet holds, relayed there.
 * The client's side: made at its upgrade (NULL: out of memory), then its messages, its
 * writable turns (-1: close it now) and its end. */
struct dp_relay;
struct dp_relay *dp_relay_new(struct lws *user, const char *id, const char *workspace,
			      const char *key_id, const char *key);
int dp_relay_user_rx(struct dp_relay *r, const void *in, size_t len);
int dp_relay_user_writable(struct dp_relay *r);
void dp_relay_user_closed(struct dp_relay *r);
/* The upstream side's protocol ("dp-relay"), on the vhost given. */
int dp_relay_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
		      size_t len);
void dp_relay_set_vhost(struct lws_vhost *vh);
/* Close every WebSocket whose key is revoked (1008), or all of them (SIGTERM: 1001). */
void ws_close_revoked(void);
void ws_close_all(unsigned short code);
/* A box stops or goes: its WebSockets close with 1001. */
void ws_box_gone(const char *box_id);
int ws_attached_count(void);
/* The key `id` exists and is not revoked (and is workspace's). */
bool keys_live(const char *id);
bool keys_live_in(const char *id, const char *workspace);
const struct sd_key *auth_check(struct lws *wsi, const char *peer, int *status);
bool auth_limited(const char *peer);
void auth_failed(const char *peer);
void links_handle(struct sd_req *q);
/* The control plane's link routes: download-url, service-url(s). */
void links_make(struct sd_req *q, struct box *b, json_t *o);
/* GET /boxes/{name}/commands: the box's command sessions (the agent's SESSION_LIST). */
void commands_list(struct sd_req *q, struct box *b);
/* snap.c */
bool valid_snap_name(const char *s);
void snap_capture(struct sd_req *q, struct box *b, json_t *o);
void snap_handle(struct sd_req *q, json_t *o);
/* Remove the lifecycle's snapshot `store_name` (a worker) once no box uses it. */
void snap_remove_store(const char *store_name);
/* The same for the image a snapshot from a Docker image stands for. */
void snap_remove_image(const char *image);
/* image_snap.c: POST /snapshots (from a Docker image). */
void image_snapshot_create(struct sd_req *q, json_t *o);
/* registry.c: the workspace's registries and their credentials. */
void registry_handle(struct sd_req *q, json_t *o);
/* The record of registry `name` of `workspace` (no password in it): 0 or -ENOENT. */
int registry_load(const char *workspace, const char *name, json_t **out) __must_check;
/* The same by name or id. */
int registry_find(const char *workspace, const char *ref, json_t **out) __must_check;
/* tenancy.c */
bool quota_refuse_box(struct sd_req *q, unsigned vcpus, uint64_t mem_bytes, uint64_t fs_bytes);
bool quota_refuse_snapshot(struct sd_req *q);
/* usage.c: counted each tick, kept in the state directory (usage_load at start, usage_flush
 * at SIGTERM). */
int usage_load(void) __must_check;
void usage_flush(void);
void usage_tick(uint64_t elapsed_ms);
void usage_handle(struct sd_req *q);
/* control.c */
bool valid_box_name(const char *s);
/* A create's body checked as box_create checks it (a fleet's placing host, before it claims
 * the name): true when refused (answered). */
bool box_create_refused(struct sd_req *q, json_t *o);
/* In a fleet (fleetd.c sets them): creates, lists and calls for boxes of other hosts go
 * there. A request made from another host's call is never sent on again. */
struct fleet_hooks {
	void (*create)(struct sd_req *q, json_t *body);
	void (*list)(struct sd_req *q);
	void (*forward)(struct sd_req *q);
	void (*deleted)(struct sd_req *q, struct box *b);
	void (*rename)(struct sd_req *q, struct box *b, const char *name);
	/* on a worker: box id stopped into the store, its record (JSON text) kept by the fleet
	 * and its ownership released. 0 or -errno with err. */
	int (*release)(const char *id, const char *record, char *err, size_t len);
	/* a dataplane request (q->dp_remote) sent on to the box's host (dp_proxy.c) */
	void (*dp)(struct sd_req *q);
	/* POST /drain (operator): take no more creates, and stop every box into the store */
	void (*drain)(struct sd_req *q);
	/* POST /gc (operator): a collection of a workspace's chunks (fleet_gc.c) */
	void (*gc)(struct sd_req *q);
	/* a sandbox pushed to the fleet's store or pulled from it: R_CHUNKS_MISSING, R_CHUNK,
	 * R_IMPORTS, and R_BOX_EXPORT of a box this host does not hold (fleet_xfer.c) */
	void (*xfer)(struct sd_req *q);
	/* on the loop: box id's stop into the store is over (it went, or it stays here; deleted:
	 * a delete came meanwhile) */
	void (*released)(const char *id, bool deleted);
	/* on a worker: released box id of workspace deleted from the fleet (its records, name,
	 * ownership and quota): 0 or -errno */
	int (*released_delete)(const char *workspace, const char *id);
};
extern const struct fleet_hooks *fleet_hooks;
void create_timed_out(struct sd_req *q, struct box *b);
/* proxy_config.c: the API's proxy_config, checked (a 422 answered: -EINVAL) and as the
 * proxy's policy words. */
int proxy_config_check(struct sd_req *q, json_t *pc) __must_check;
int proxy_config_words(const struct box *b, char ***words, unsigned *n) __must_check;
/* Remove the files proxy_config_words made for box `box_id`. */
void proxy_config_cleanup(const char *box_id);
/* multipart.c, range.c */
int multipart_file(const char *ctype, const char *body, size_t len, const char **data,
		   size_t *dlen) __must_check;
int range_parse(const char *v, uint64_t size, uint64_t *first, uint64_t *last) __must_check;
struct proto_stat;
void range_reply(struct sd_req *q, char *data, uint64_t size, const struct proto_stat *st);

/* ---- jsonx.c: JSON with our limits ---- */

/* Parse `len` bytes: strict RFC 8259 (jansson), UTF-8 checked, duplicate keys refused, nesting
 * at most SD_JSON_DEPTH_MAX, integers within int64. NULL with err on failure. */
json_t *jsonx_parse(const char *text, size_t len, json_error_t *err);
/* `in` (valid UTF-8) as a JSON string, its quotes and escapes included, NUL-terminated in out
 * (cap >= 3; 6 x strlen + 3 always holds it whole). Returns its length. */
size_t jsonx_quote(const char *in, char *out, size_t cap);

/* ---- metrics.c ---- */

void metrics_request(enum route_kind k, int status, uint64_t ms);
void metrics_duration(const char *what, uint64_t ms);
void metrics_conn(bool open);
void metrics_ws(bool open);
void metrics_auth_failed(void);
/* The Prometheus text (malloc'ed). */
char *metrics_text(size_t *len);
void access_log(const struct sd_req *q);

/* ---- pool.c: warm pools ---- */

/* --pool IMAGE:VCPUS:MEM_MIB=N: 0 or -EINVAL. */
int pool_add(const char *spec) __must_check;
/* At start: remove the pool sandboxes a crash left, then fill every pool. */
void pools_clean(void);
void pools_start(void);
/* A ready sandbox of that image and size into id, its warmed-up agent connection into *fd (or
 * -1; the caller's to close or adopt), and the pool refills: true, else false. */
bool pool_take(const char *image, unsigned cpus, uint64_t mem_mib, char id[16], int *fd);
/* The pools' sizes as metrics lines into out; how many pools. */
unsigned pool_sizes(char *out, size_t len);

/* ---- idle.c: the lifecycle policy ---- */

/* The lifecycle layer's name of a box's sandbox: "sd-" and the id's hex (found after a crash
 * that cut a create short). */
void box_sandbox_name(const struct box *b, char out[40]);
void box_sandbox_name_of(const char *id, char out[40]);
void adopt_boxes(void);
void idle_tick(uint64_t now);

/* ---- the server's options (main.c) ---- */
struct sd_config {
	char public_url[512];
	char default_image[64];
	uint64_t default_mem_bytes;
	unsigned default_vcpus;
	bool registry_loopback; /* --registry-allow-loopback: pulls from this host's registries */
	unsigned registry_stall_s; /* --registry-stall: a registry silent this long is refused */
};
extern struct sd_config sd_conf;

/* ---- work.c: the worker pool ---- */

/* A job: `run` on a worker (no loop state touched: only the job's own copy), then `done` on
 * the loop thread. */
struct sd_job {
	void (*run)(struct sd_job *j);
	void (*done)(struct sd_job *j);
	struct sd_job *next;
};
/* WORK_FLEET: calls to other hosts over NATS (fleet_rpc.c), which wait on their answer;
 * WORK_FLEET_BG: the fleet's own records (names, snapshots): short, never a tenant's wait;
 * WORK_XFER: sandboxes pushed and pulled through the API (fleet_xfer.c): long, a tenant's. */
enum work_class { WORK_LIFECYCLE, WORK_IO, WORK_FLEET, WORK_FLEET_BG, WORK_XFER, WORK_CLASSES };
int work_start(unsigned nlifecycle, unsigned nio, struct lws_context *ctx) __must_check;
/* n more threads for class c (after work_start). */
int work_add_threads(enum work_class c, unsigned n) __must_check;
/* Jobs run one at a time in the order added, on class c's threads: a record's put never
 * overtaken by an older one. The loop's: work_serial_add on the loop, and each job's done
 * calls work_serial_next once it is finished with (before or after freeing the job). */
struct work_serial {
	struct sd_job *head, *tail; /* waiting */
	struct sd_job *cur;	    /* running (NULL: none) */
	enum work_class c;
};
void work_serial_add(struct work_serial *s, struct sd_job *j);
void work_serial_next(struct work_serial *s);
/* From any thread: j's done runs on the loop (j->run is not called). */
void work_post(struct sd_job *j);
/* Queue `j` (a lifecycle job); its done runs on the loop later. */
void work_queue(struct sd_job *j);
/* Queue an I/O job (files, pulls, service requests, agent connects): threads of their own. */
void work_queue_io(struct sd_job *j);
void work_queue_class(struct sd_job *j, enum work_class c);
/* On the loop (LWS_CALLBACK_EVENT_WAIT_CANCELLED): run the done of every finished job. */
void work_reap(void);
/* Lifecycle verbs of the client layer are not thread-safe with each other (static buffers):
 * a worker holds this around them. Streams never wait on it. */
extern pthread_mutex_t lifecycle_lock;

/* ---- util ---- */
uint64_t sd_now_ms(void);
void sd_uuid(char out[SD_ID_LEN + 1]);
/* ISO 8601 UTC with milliseconds, "" for 0. */
void sd_iso(uint64_t ms, char out[32]);
/* One line of log on stderr: "sandboxd: ...". */
void sd_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif

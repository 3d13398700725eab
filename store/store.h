/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fleet's object store (docs/fleet.md): the S3 API over libcurl (s3.c), and snapshots as
 * content-addressed chunks in it (chunk.c, chunk_store.c, manifest.c). Every byte read from
 * the store is hostile until checked: responses are bounded, a chunk is checked against its
 * name, a manifest against its MAC, before anything uses them.
 *
 * Functions return 0 (or a count) or -errno; where they take `err`, a failure also leaves a
 * message there naming what failed (the object, the chunk), fit for a user.
 */
#ifndef SANDBOX_STORE_H
#define SANDBOX_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STORE_ERR_MAX 512

/* ---- s3.c: the S3 API (path-style, Signature Version 4 by libcurl) ---- */

#define S3_KEY_MAX    512	  /* an object key's bytes */
#define S3_OBJECT_MAX (64u << 20) /* the largest object this code reads whole */

/* Where the store is and who we are to it. */
struct s3_conf {
	char endpoint[256]; /* http://HOST[:PORT] or https://..., no path */
	char region[64];    /* us-east-1 where the store does not care */
	char bucket[64];    /* 3 to 63 of [a-z0-9.-] */
	char access[128];   /* the access key id (may hold a ':', as Swift's tempauth's) */
	char secret[128];
	char ca_file[256];   /* "" : the system's CAs (https) */
	unsigned timeout_ms; /* one request, whole (0: 30 s) */
};

/* One connection's worth of state: use from one thread at a time. */
struct s3 {
	struct s3_conf conf;
	void *curl;		       /* CURL *, kept so connections are reused */
	uint64_t bytes_up, bytes_down; /* bodies sent and received, all requests */
	unsigned requests;
	char err[STORE_ERR_MAX];
	char curl_err[256]; /* libcurl's CURLOPT_ERRORBUFFER (CURL_ERROR_SIZE) */
	/* NULL, or a flag another thread may set (__atomic): a request under way then ends at
	 * once (-ECANCELED), as one that stalled would */
	const int *abort;
};

/* Check c (names, lengths, scheme) and open a handle. -EINVAL (s->err says which field). */
int s3_open(struct s3 *s, const struct s3_conf *c) __attribute__((warn_unused_result));
void s3_close(struct s3 *s);
/* Create the bucket; one that exists and is ours is not an error. */
int s3_bucket_create(struct s3 *s) __attribute__((warn_unused_result));
/* PUT key with len bytes (x-amz-content-sha256 their SHA-256, so the store checks them). */
int s3_put(struct s3 *s, const char *key, const void *data, size_t len)
	__attribute__((warn_unused_result));
/* GET key into *out (malloc'd, *out_len bytes): all of it when len is 0, else bytes [off,
 * off + len) by a ranged GET (exactly len, or -EBADMSG). At most max bytes (-EFBIG beyond).
 * -ENOENT when there is no such key. */
int s3_get(struct s3 *s, const char *key, uint64_t off, size_t len, size_t max, uint8_t **out,
	   size_t *out_len) __attribute__((warn_unused_result));
/* Whether key exists (0, its size in *size) or not (-ENOENT). */
int s3_head(struct s3 *s, const char *key, uint64_t *size) __attribute__((warn_unused_result));
/* One page (max_keys, at most and by default (0) S3_LIST_KEYS) of the keys under prefix after
 * marker, in order: fn called with each, marker left at the last; *more when the store has
 * more after it. The count of keys, or -errno (fn's own, or -EBADMSG for an answer that is
 * not a listing of keys under prefix in order). */
#define S3_LIST_KEYS 1000
struct s3_entry {
	const char *key;
	uint64_t size;	  /* its Size (0 when the listing gives none) */
	int64_t modified; /* its LastModified, seconds since the epoch; -1 when not given */
};
int s3_list(struct s3 *s, const char *prefix, char marker[S3_KEY_MAX + 1], unsigned max_keys,
	    int (*fn)(const struct s3_entry *e, void *arg), void *arg, bool *more)
	__attribute__((warn_unused_result));
/* DELETE key (one that is not there is not an error, as S3 says). */
int s3_delete(struct s3 *s, const char *key) __attribute__((warn_unused_result));
/* Whether key is one this code sends: 1 to S3_KEY_MAX of [A-Za-z0-9._/-], no "//", no
 * leading '/', no "." or ".." part (no escaping, so the signed path is the path sent). */
bool s3_key_ok(const char *key);

/* ---- chunk.c: one chunk, sealed: AES-256-GCM under the workspace's key ---- */

#define CHUNK_HASH_LEN	 32
#define CHUNK_SEAL_HEAD	 8  /* "SBCK", version 1, 3 bytes 0 */
#define CHUNK_SEAL_TAG	 16 /* GCM's tag, after the ciphertext */
#define CHUNK_SEAL_EXTRA (CHUNK_SEAL_HEAD + CHUNK_SEAL_TAG)
#define CHUNK_SIZE_MAX	 (4u << 20)

/* A workspace's keys, derived from its 32-byte secret: chunks of one workspace are sealed
 * and named under its keys only, so no tenant's chunk is another's (nor tells one whether
 * another holds some bytes: no deduplication across workspaces). */
struct chunk_keys {
	uint8_t enc[32];   /* AES-256-GCM */
	uint8_t name[32];  /* an object's name: HMAC-SHA256(name, the chunk's SHA-256) */
	uint8_t nonce[32]; /* a chunk's nonce: HMAC-SHA256(nonce, its SHA-256), 12 bytes */
	uint8_t mac[32];   /* a manifest's MAC */
};
void chunk_keys_derive(const uint8_t secret[32], struct chunk_keys *k);
void chunk_keys_wipe(struct chunk_keys *k);
/* SHA-256 of len bytes. */
void chunk_hash(const void *data, size_t len, uint8_t out[CHUNK_HASH_LEN]);
/* The hash as 64 lower-case hex digits and a NUL. */
void chunk_hex(const uint8_t hash[CHUNK_HASH_LEN], char out[2 * CHUNK_HASH_LEN + 1]);
/* The 64 lower-case hex digits at s (no NUL needed after them) as a hash: 0, or -EBADMSG. */
int chunk_unhex(const char *s, uint8_t out[CHUNK_HASH_LEN]) __attribute__((warn_unused_result));
/* Two hashes compared (memcmp), for qsort and bsearch of hash arrays. */
int chunk_hash_cmp(const void *a, const void *b);
/* The store's id of the chunk of that hash: HMAC-SHA256 under the name key. */
void chunk_object_id(const struct chunk_keys *k, const uint8_t hash[CHUNK_HASH_LEN],
		     uint8_t out[CHUNK_HASH_LEN]);
/* That id as the object's name, 64 hex digits (its content is not told). */
void chunk_object_name(const struct chunk_keys *k, const uint8_t hash[CHUNK_HASH_LEN],
		       char out[2 * CHUNK_HASH_LEN + 1]);
/* Seal len plaintext bytes of that hash into out (len + CHUNK_SEAL_EXTRA bytes). The nonce
 * is derived from the hash: the same bytes always seal the same, two others never share a
 * nonce. 0 or -EIO. */
int chunk_seal(const struct chunk_keys *k, const uint8_t hash[CHUNK_HASH_LEN], const void *pt,
	       size_t len, uint8_t *out) __attribute__((warn_unused_result));
/* Open sealed bytes into out (cap bytes): *len the plaintext's. -EBADMSG when the head, the
 * tag or the plaintext's SHA-256 is not what the hash says; -EFBIG over cap. */
int chunk_open(const struct chunk_keys *k, const uint8_t hash[CHUNK_HASH_LEN], const uint8_t *in,
	       size_t in_len, uint8_t *out, size_t cap, size_t *len)
	__attribute__((warn_unused_result));

/* ---- chunk_patch.c: a chunk stored as a patch of another ---- */

#define CHUNK_PATCH_PAGE 4096 /* a patch's unit: the guest's page */

/* Chunk `hash` is not stored: it is chunk `base` (a stored one) with chunk `patch` (its
 * changed pages) applied. A manifest lists its recipes; a restore checks what they make. */
struct chunk_recipe {
	uint8_t hash[CHUNK_HASH_LEN], base[CHUNK_HASH_LEN], patch[CHUNK_HASH_LEN];
};
/* The patch making cur (clen bytes) of base (blen bytes) into out (cap bytes): its length, or
 * 0 when it would not be under half of clen (or fit), or the lengths differ: the chunk then
 * goes up whole. */
size_t chunk_patch_make(const uint8_t *base, size_t blen, const uint8_t *cur, size_t clen,
			uint8_t *out, size_t cap);
/* Apply a patch (plen bytes, from the store: checked whole before buf changes) to the base in
 * buf (blen bytes, cap the buffer's): *len the chunk's length, always blen. -EBADMSG for a
 * malformed one, or one of another length. */
int chunk_patch_apply(uint8_t *buf, size_t blen, size_t cap, const uint8_t *patch, size_t plen,
		      size_t *len) __attribute__((warn_unused_result));
/* The recipe of hash among r[0..n) (ascending by hash), or NULL. */
const struct chunk_recipe *chunk_recipe_find(const struct chunk_recipe *r, uint64_t n,
					     const uint8_t hash[CHUNK_HASH_LEN]);
/* One stored chunk of hash into out (cap bytes), checked: *len; -errno with msg naming it. */
typedef int (*chunk_part_fn)(void *arg, const uint8_t hash[CHUNK_HASH_LEN], uint8_t *out,
			     size_t cap, size_t *len, char *msg, size_t msg_len);
/* Chunk r->hash made from its base and patch (each fetched by get) into out (cap bytes) and
 * checked against its hash: 0 (*len), or -errno with msg naming the chunk. */
int chunk_rebuild(const struct chunk_recipe *r, chunk_part_fn get, void *arg, uint8_t *out,
		  size_t cap, size_t *len, char *msg, size_t msg_len)
	__attribute__((warn_unused_result));

/* ---- chunk_cache.c: a host's cache of checked chunks, bounded ---- */

struct chunk_cache;
/* The cache in dir (made if missing; what is there is taken in, by last use), kept under
 * max_bytes by dropping the least recently used. */
int chunk_cache_open(const char *dir, uint64_t max_bytes, struct chunk_cache **out)
	__attribute__((warn_unused_result));
void chunk_cache_close(struct chunk_cache *c);
/* The chunk of object id oid into out (cap bytes) if it is cached and its bytes are those of
 * hash: 1 (*len), else 0 (a damaged entry is dropped). */
int chunk_cache_get(struct chunk_cache *c, const uint8_t oid[CHUNK_HASH_LEN],
		    const uint8_t hash[CHUNK_HASH_LEN], uint8_t *out, size_t cap, size_t *len);
/* Keep len checked bytes as oid's (not one larger than the bound): 0 or -errno. */
int chunk_cache_put(struct chunk_cache *c, const uint8_t oid[CHUNK_HASH_LEN], const void *data,
		    size_t len);
uint64_t chunk_cache_bytes(struct chunk_cache *c);
unsigned chunk_cache_count(struct chunk_cache *c);

/* ---- chunk_store.c: a workspace's chunks in the store ---- */

struct chunk_set; /* the hashes known to be in the store (chunk_store.c) */
/* Where a handle of no store gets its chunks, e.g. a client fetching them through the API:
 * -errno with err set, else *len bytes in out. */
typedef int (*chunk_fetch_fn)(void *arg, const uint8_t hash[CHUNK_HASH_LEN], uint8_t *out,
			      size_t cap, size_t *len, char *err, size_t err_len);

struct chunk_store {
	struct s3 *s3;
	char prefix[128]; /* the workspace's part of the bucket: chunks under PREFIX/c/ */
	struct chunk_keys keys;
	struct chunk_set *known;
	struct chunk_cache *cache; /* NULL, or the host's cache: gets look there first */
	bool listed;		   /* known holds every chunk the store had (chunk_store_learn) */
	unsigned transfers;	   /* a file's chunks sent or fetched at once (0, 1: one by one) */
	/* what this handle did */
	uint64_t put_chunks, put_bytes;	  /* uploaded (sealed bytes) */
	uint64_t skip_chunks, skip_bytes; /* already in the store: not uploaded */
	uint64_t got_chunks, got_bytes;	  /* downloaded (sealed bytes) */
	uint64_t cache_hits;		  /* gets the cache answered */
	uint64_t patched;		  /* chunks sent as patches of a parent's (chunk_patch.c) */
	/* A handle of no store (chunk_store_local): where its gets come from, e.g. a client
	 * fetching chunks through the API (-errno with *err set, else *len bytes in out); what
	 * it gives is checked against the hash asked for, as the store's is. */
	chunk_fetch_fn fetch;
	void *fetch_arg;
	/* fetch_args[0..nfetch_args): one arg a transfer at once (chunk_par.c), for a fetch that
	 * may run in as many threads (each its own connection); none: one at a time */
	void *const *fetch_args;
	unsigned nfetch_args;
	/* When set, manifest_put writes only while may_publish(arg) says so (true): a push's
	 * lease against the collector is still held (fleet_lease_fresh). */
	bool (*may_publish)(void *arg);
	void *may_publish_arg;
	/* A manifest's recipes (chunk_store_recipes, borrowed): a get of a chunk listed there
	 * fetches its base and patch (chunk_get, chunk_par_get) */
	const struct chunk_recipe *recipe;
	uint64_t nrecipes;
	char err[STORE_ERR_MAX];
};
/* Say why in cs->err (printf), and return ret: the errors of this store's calls. */
int chunk_store_fail(struct chunk_store *cs, int ret, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A handle on prefix's chunks (a key's part: s3_key_ok), sealed under secret's keys. */
int chunk_store_open(struct chunk_store *cs, struct s3 *s3, const char *prefix,
		     const uint8_t secret[32]) __attribute__((warn_unused_result));
void chunk_store_close(struct chunk_store *cs);
/* A handle of no store: a put only hashes (a manifest of local files, nothing uploaded), a get
 * calls fetch (set it after) and checks what it gives. */
int chunk_store_local(struct chunk_store *cs) __attribute__((warn_unused_result));
/* Whether the store holds the chunk of hash: 1, 0, or -errno with cs->err (known chunks, else
 * a whole listing's word, else a HEAD). */
int chunk_has(struct chunk_store *cs, const uint8_t hash[CHUNK_HASH_LEN])
	__attribute__((warn_unused_result));
/* Store len bytes of a chunk whose SHA-256 the caller gives (a client's upload: checked here
 * against the bytes, -EBADMSG if they differ), unless the store has it. */
int chunk_put_hashed(struct chunk_store *cs, const void *data, size_t len,
		     const uint8_t hash[CHUNK_HASH_LEN]) __attribute__((warn_unused_result));
/* Learn the chunks the store holds under the prefix, by listing up to max_pages pages (1000
 * each): puts skip what was listed, and when the listing was whole (cs->listed) upload what
 * was not without asking (a HEAD a chunk). Before a push: one request a thousand chunks
 * instead of one a chunk. 0, or -errno with cs->err. */
int chunk_store_learn(struct chunk_store *cs, unsigned max_pages)
	__attribute__((warn_unused_result));
/* Store len bytes as a chunk, unless the store has it: *hash its SHA-256. "Has it" is the
 * store's HEAD: a store that lies there loses the chunk, which the restore then names. */
int chunk_put(struct chunk_store *cs, const void *data, size_t len, uint8_t hash[CHUNK_HASH_LEN])
	__attribute__((warn_unused_result));
/* Fetch the chunk of hash into out (cap bytes), checked: *len its length. A chunk that is
 * missing (-ENOENT) or not what its name says (-EBADMSG) is named in cs->err. One of the
 * handle's recipes is made from its base and patch (and kept in the cache as itself). */
int chunk_get(struct chunk_store *cs, const uint8_t hash[CHUNK_HASH_LEN], uint8_t *out, size_t cap,
	      size_t *len) __attribute__((warn_unused_result));
/* chunk_get for a guest that waits on it (a lazy restore's pager): a missing or corrupt chunk
 * is final; the store's other failures (a timeout, a 5xx, a reset) are tried again, 3 times,
 * 0.2, 0.4 then 0.8 s apart. */
int chunk_get_waited(struct chunk_store *cs, const uint8_t hash[CHUNK_HASH_LEN], uint8_t *out,
		     size_t cap, size_t *len) __attribute__((warn_unused_result));

/* The store's key of the chunk of hash (PREFIX/c/<object name>) and its object id; whether
 * the handle knows the store holds that id; that it does (chunk_store.c, for chunk_par.c). */
void chunk_store_key(const struct chunk_store *cs, const uint8_t hash[CHUNK_HASH_LEN],
		     char key[S3_KEY_MAX + 1], uint8_t oid[CHUNK_HASH_LEN]);
bool chunk_store_knows(const struct chunk_store *cs, const uint8_t oid[CHUNK_HASH_LEN]);
void chunk_store_learned(struct chunk_store *cs, const uint8_t oid[CHUNK_HASH_LEN]);

/* ---- chunk_xfer.c: one chunk's transfer, no handle's state touched ---- */

/* Upload the chunk of hash (len bytes of data, its hash right) sealed under k as key, unless
 * the store has it (a HEAD, not asked when listed: a whole listing did not have it): 1 when it
 * had it, 0 when sent (*wire the sealed bytes), else -errno with msg naming the chunk. */
int chunk_xfer_put(struct s3 *s, const struct chunk_keys *k, bool listed, const char *key,
		   const uint8_t hash[CHUNK_HASH_LEN], const void *data, size_t len, uint64_t *wire,
		   char *msg, size_t msg_len) __attribute__((warn_unused_result));
/* Download key and open it under k into out (at most cap bytes, CHUNK_SIZE_MAX at most):
 * *len its bytes, *wire the sealed bytes that came. Missing (-ENOENT), too long or not of
 * that hash (-EBADMSG): -errno with msg naming the chunk. */
int chunk_xfer_get(struct s3 *s, const struct chunk_keys *k, const char *key,
		   const uint8_t hash[CHUNK_HASH_LEN], uint8_t *out, size_t cap, size_t *len,
		   uint64_t *wire, char *msg, size_t msg_len) __attribute__((warn_unused_result));
/* fetch(arg) the chunk of hash into out (cap bytes), checked against the hash as a get's. */
int chunk_xfer_fetch(chunk_fetch_fn fetch, void *arg, const uint8_t hash[CHUNK_HASH_LEN],
		     uint8_t *out, size_t cap, size_t *len, char *msg, size_t msg_len)
	__attribute__((warn_unused_result));

/* ---- chunk_par.c: chunk transfers several at once ---- */

#define CHUNK_PAR_MAX 16 /* transfers in flight, at most */

/* A fetched chunk (len checked bytes) for the caller, who asked for it with tag: 0, or -errno
 * with cs->err (which ends the run). Called in the caller's thread. */
typedef int (*chunk_par_got_fn)(void *arg, uint64_t tag, const uint8_t *data, size_t len);
struct chunk_par;
/* Up to width (1 to CHUNK_PAR_MAX) of cs's uploads and downloads at once, each on a
 * connection of its own; gets give chunks of at most get_cap bytes to got. A handle of no
 * store has at most nfetch_args gets at once (none: one at a time); where no worker could
 * start, one at a time in the caller's thread. NULL (cs->err) when out of memory. */
struct chunk_par *chunk_par_open(struct chunk_store *cs, unsigned width, size_t get_cap,
				 chunk_par_got_fn got, void *got_arg);
/* As chunk_put (*hash its SHA-256), the upload done later: the bytes are copied. Returns the
 * run's first failure (cs->err), if any, here and in every later call. */
int chunk_par_put(struct chunk_par *p, const void *data, size_t len, uint8_t hash[CHUNK_HASH_LEN])
	__attribute__((warn_unused_result));
/* The same for bytes whose SHA-256 the caller has just computed (hash): not computed again. */
int chunk_par_put_hashed(struct chunk_par *p, const void *data, size_t len,
			 const uint8_t hash[CHUNK_HASH_LEN]) __attribute__((warn_unused_result));
/* As chunk_get, the chunk given to got with tag once it came (here or in a later call). */
int chunk_par_get(struct chunk_par *p, const uint8_t hash[CHUNK_HASH_LEN], uint64_t tag)
	__attribute__((warn_unused_result));
/* Every transfer ended (and every fetched chunk given to got): 0, or the first failure. */
int chunk_par_wait(struct chunk_par *p) __attribute__((warn_unused_result));
/* Wait for what is in flight (what is queued is dropped, nothing more is given to got); free. */
void chunk_par_close(struct chunk_par *p);

/* ---- chunk_ahead.c: a lazy restore's chunks read ahead into the host's cache ---- */

struct chunk_ahead;
/* width workers (each its own connection) fetching the n chunks of hash (each at most cap
 * bytes; all-zero hashes: none) into cs's cache, the next one after the last claimed first.
 * With hot (NULL, or a byte a chunk, copied): the hot chunks first, in order, and no other
 * until chunk_ahead_release. NULL when cs has no store or no cache, or nothing could start:
 * no read-ahead. cs and hash must outlive it. */
struct chunk_ahead *chunk_ahead_start(struct chunk_store *cs, const uint8_t (*hash)[CHUNK_HASH_LEN],
				      uint64_t n, size_t cap, unsigned width, const uint8_t *hot);
/* The rest may come too (after the hot chunks): the restored box answered. */
void chunk_ahead_release(struct chunk_ahead *a);
/* Before the caller fetches chunk i itself (through the cache): waits while a worker fetches
 * it; 1 when a worker put it in the cache, else 0 (and no worker takes it after). */
int chunk_ahead_claim(struct chunk_ahead *a, uint64_t i);
/* The chunks the workers have put in the cache so far. */
uint64_t chunk_ahead_fetched(struct chunk_ahead *a);
/* The bytes the workers fetched from the store (sealed, as cs->got_bytes counts them) that
 * the caller has not taken yet. */
uint64_t chunk_ahead_unused_bytes(struct chunk_ahead *a);
/* Stop the workers (waiting for what they fetch) and free a (NULL: nothing): the chunks
 * they put in the cache. */
uint64_t chunk_ahead_stop(struct chunk_ahead *a);

/* ---- manifest.c: a snapshot's files as lists of chunks ---- */

#define MANIFEST_FILES_MAX   64
#define MANIFEST_NAME_MAX    63		  /* [A-Za-z0-9._-] */
#define MANIFEST_FILE_MAX    (1ull << 40) /* bytes of one file */
#define MANIFEST_CHUNK_MIN   4096
#define MANIFEST_EXTENTS_MAX 65536 /* data extents of one file (more: too fragmented) */

struct manifest_file {
	char name[MANIFEST_NAME_MAX + 1];
	uint64_t size;
	uint64_t nchunks;		 /* size / chunk_size, rounded up */
	uint8_t (*hash)[CHUNK_HASH_LEN]; /* all zero: a chunk of zeros, not stored */
	/* Its data extents (offset, length), ascending: the rest is holes. A restore writes
	 * these and leaves the rest holes, so the file's layout is the original's (a disk
	 * layer's digest covers its extents, docs/snapshots.md). */
	uint64_t nextents;
	uint64_t (*extent)[2];
};

struct manifest {
	uint32_t chunk_size; /* a power of two, MANIFEST_CHUNK_MIN to CHUNK_SIZE_MAX */
	/* Its chunks stored as patches (chunk_patch.c), ascending by hash, each hash once; a
	 * base is always a stored chunk (never one of these) */
	struct chunk_recipe *recipe;
	uint64_t nrecipes, recipe_cap;
	/* Set by the caller before adding files (borrowed, NULL: none): the snapshot before this
	 * one of the same sandbox. A chunk that changed since goes up as a patch of its chunk
	 * there when that is in the host's cache and the patch is under half of it. */
	const struct manifest *parent;
	uint64_t generation; /* set by the caller before a put: one more than the last of that
				id, kept where the store cannot change it (JetStream KV) */
	size_t text_bytes;   /* the plaintext it would take at most (bounded at add) */
	unsigned nfiles;
	struct manifest_file file[MANIFEST_FILES_MAX];
};

/* An empty manifest of chunk_size chunks (-EINVAL: not a power of two in range). */
int manifest_init(struct manifest *m, uint32_t chunk_size) __attribute__((warn_unused_result));
void manifest_free(struct manifest *m);
/* All the files' bytes. */
uint64_t manifest_bytes(const struct manifest *m);
/* The bytes of all the files' data extents: what fetching every file writes (zeros of an
 * extent included), the rest being holes. */
uint64_t manifest_data_bytes(const struct manifest *m);
/* The file of that name, or NULL. */
const struct manifest_file *manifest_find(const struct manifest *m, const char *name);
/* Add path's bytes as file `name`: the chunks the store lacks are uploaded, zeros are not,
 * and a chunk m->parent's same file had otherwise may go up as a patch of it (a recipe). */
int manifest_add_file(struct manifest *m, struct chunk_store *cs, const char *name,
		      const char *path) __attribute__((warn_unused_result));
/* Write file `name` to path, every chunk checked. It is written to PATH.part-<random>,
 * synced and renamed to path (-EEXIST if path is there): a failure removes the part, and a
 * restore killed half-way leaves a .part file, never a path that looks whole. */
/* Chunk ci of file f of m (len bytes, checked by the caller: chunk_get) into fd (at path, for
 * messages), at its place: only its parts in f's data extents, the rest left holes. A length
 * other than the chunk's is -EBADMSG naming the chunk. */
int manifest_write_chunk(const struct manifest *m, const struct manifest_file *f,
			 struct chunk_store *cs, uint64_t ci, const uint8_t *data, size_t len,
			 int fd, const char *path) __attribute__((warn_unused_result));
int manifest_fetch_file(const struct manifest *m, struct chunk_store *cs, const char *name,
			const char *path) __attribute__((warn_unused_result));
/* Store m as PREFIX/m/<id> (id: [A-Za-z0-9._-], 1 to 64), sealed under the workspace's keys
 * (AES-256-GCM, the id bound in: a manifest does not open under another id). */
int manifest_put(const struct manifest *m, struct chunk_store *cs, const char *id)
	__attribute__((warn_unused_result));
/* m's plaintext (manifest.c's format: what an API client sends and gets), malloc'd, *len bytes;
 * NULL when too large or out of memory. */
char *manifest_encode(const struct manifest *m, size_t *len);
/* Parse that plaintext (len bytes, from anyone) into m, strictly: -EBADMSG (m freed). cs is for
 * the message only. */
int manifest_parse(const char *text, size_t len, struct manifest *m, struct chunk_store *cs)
	__attribute__((warn_unused_result));
/* The chunks m needs from the store, each once, ascending (malloc'd, *n; NULL when out of
 * memory): its chunks but zeros, a patched one's base and patch in its stead. */
uint8_t (*manifest_stored_hashes(const struct manifest *m, size_t *n))[CHUNK_HASH_LEN];
/* m's recipes of chunks its files still list, and no others (a manifest some files were
 * taken from, an export's): 0, or -ENOMEM. */
int manifest_keep_listed_recipes(struct manifest *m) __attribute__((warn_unused_result));
/* Gets through cs make m's patched chunks (NULL: none); m must outlive their use. */
void chunk_store_recipes(struct chunk_store *cs, const struct manifest *m);
/* Remove PREFIX/m/<id> (one that is not there is not an error). */
int manifest_delete(struct chunk_store *cs, const char *id) __attribute__((warn_unused_result));
/* Load PREFIX/m/<id> into m (manifest_free it; m is overwritten: free a loaded one first),
 * checked before a byte is parsed, then parsed strictly. -ENOENT, -EBADMSG named in cs->err,
 * or -ESTALE when its generation is under min_generation (an older copy put back: the store
 * can replay what it once held, the generation kept outside it tells). */
int manifest_get(struct manifest *m, struct chunk_store *cs, const char *id,
		 uint64_t min_generation) __attribute__((warn_unused_result));

/* ---- gc.c: chunks no manifest names, collected ---- */

struct store_gc_report {
	uint64_t manifests;	   /* read and opened */
	uint64_t chunks;	   /* listed */
	uint64_t kept, kept_bytes; /* named by a manifest, or young: what the store holds now */
	uint64_t young;		   /* of those, named by none but not older than the cutoff */
	uint64_t deleted, deleted_bytes; /* (or would be, in a dry run) */
};
/* Delete cs's chunks that no manifest under its prefix names and that the store says were
 * last modified before older_than (seconds since the epoch). Every manifest must open, or
 * nothing is deleted (-EBADMSG and the like, named in cs->err). A dry run deletes nothing and
 * says what it would. go_on(arg), when given, is asked after each page of a listing and
 * before each delete: nonzero stops the collection (-ECANCELED; a collector whose lock is no
 * longer held, or that yields to a push). The caller keeps pushes of this prefix from racing it
 * (docs/fleet.md, "The collector": fleet_lease_collect). 0 or -errno with cs->err. */
int store_gc(struct chunk_store *cs, int64_t older_than, bool dry_run, struct store_gc_report *rep,
	     int (*go_on)(void *arg), void *arg) __attribute__((warn_unused_result));

#endif /* SANDBOX_STORE_H */

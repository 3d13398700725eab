/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A fleet's snapshots in its object store (docs/fleet.md, "Snapshots in the store"): a capture
 * is pushed (store/snap_remote.c: sealed chunks the store lacks, then the manifest) before it
 * is ready, and a create from a snapshot this host does not hold pulls it first (every chunk
 * checked; nothing half-made is left). Chunks are kept per workspace and sealed under keys
 * derived from the fleet's key and the workspace (HMAC-SHA256): no tenant reads, or learns
 * anything of, another's. Every host has the same fleet key file; it never leaves the host.
 *
 *   --store-endpoint URL --store-bucket NAME [--store-region R] --store-credentials FILE
 *   --fleet-key FILE [--chunk-kib N] [--store-cache-mib N] [--restore-memory lazy|eager]
 *   [--store-transfers N]
 *
 * A push or a pull has up to --store-transfers (4 unless said, 1 to 16) of a file's chunks in
 * flight, each on a connection of its own (store/chunk_par.c): every S3 request is a round
 * trip, and one at a time a push waits for all of them end to end.
 *
 * The host's chunk cache (store/chunk_cache.c, in service/chunk-cache, 2 GiB unless said; 0:
 * none) keeps the chunks this host pushed and pulled: a box woken where it was stopped, or a
 * snapshot sharing its image's chunks with one pulled before, fetches only what it lacks.
 *
 * A restore from the store is lazy unless said (box_lazy.c): the memory comes page by page
 * as the guest touches it, the rest after its first answer.
 *
 * FILE of the credentials: the access key id on its first line, the secret on its second.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include "fleetd.h"
#include "box_lazy.h"
#include "snap_remote.h"
#include "fstore.h"

#define KEY_FILE_MAX	  4096
#define CHUNK_KIB_DEFAULT 1024
#define CACHE_MIB_DEFAULT 2048
#define TRANSFERS_DEFAULT 4

static struct s3_conf s3c = {.region = "us-east-1", .timeout_ms = 60000};
static char cred_file[4096], key_file[4096];
static uint8_t fleet_key[32];
static uint32_t chunk_size = CHUNK_KIB_DEFAULT << 10;
static bool configured;
static uint64_t cache_mib = CACHE_MIB_DEFAULT;
static struct chunk_cache *cache; /* NULL: none */
static bool lazy_memory = true;	  /* --restore-memory lazy (box_lazy.c) or eager */
static uint64_t transfers = TRANSFERS_DEFAULT;

int fstore_option(const char *name, const char *val)
{
	uint64_t v;

	if (strcmp(name, "store-endpoint") == 0 || strcmp(name, "store-bucket") == 0 ||
	    strcmp(name, "store-region") == 0) {
		char *dst = name[6] == 'e'   ? s3c.endpoint
			    : name[6] == 'b' ? s3c.bucket
					     : s3c.region;
		size_t cap = name[6] == 'e'   ? sizeof(s3c.endpoint)
			     : name[6] == 'b' ? sizeof(s3c.bucket)
					      : sizeof(s3c.region);

		if (strlen(val) >= cap) {
			fprintf(stderr, "sandboxd: --%s is at most %zu bytes\n", name, cap - 1);
			return -1;
		}
		snprintf(dst, cap, "%s", val);
		configured = true;
		return 1;
	}
	if (strcmp(name, "store-credentials") == 0 || strcmp(name, "fleet-key") == 0) {
		char *dst = name[0] == 's' ? cred_file : key_file;

		if (strlen(val) >= sizeof(cred_file)) {
			fprintf(stderr, "sandboxd: --%s: the path is too long\n", name);
			return -1;
		}
		snprintf(dst, sizeof(cred_file), "%s", val);
		return 1;
	}
	if (strcmp(name, "store-cache-mib") == 0) {
		if (!parse_u64(val, 0, 1u << 24, &cache_mib)) {
			fprintf(stderr, "sandboxd: --store-cache-mib takes 0 (none) to 16777216\n");
			return -1;
		}
		return 1;
	}
	if (strcmp(name, "restore-memory") == 0) {
		if (strcmp(val, "lazy") != 0 && strcmp(val, "eager") != 0) {
			fprintf(stderr, "sandboxd: --restore-memory takes lazy or eager\n");
			return -1;
		}
		lazy_memory = strcmp(val, "lazy") == 0;
		return 1;
	}
	if (strcmp(name, "store-transfers") == 0) {
		if (!parse_u64(val, 1, CHUNK_PAR_MAX, &transfers)) {
			fprintf(stderr, "sandboxd: --store-transfers takes 1 to %u\n",
				CHUNK_PAR_MAX);
			return -1;
		}
		return 1;
	}
	if (strcmp(name, "chunk-kib") == 0) {
		if (!parse_u64(val, 4, 4096, &v) || (v & (v - 1))) {
			fprintf(stderr, "sandboxd: --chunk-kib takes a power of two, 4 to 4096\n");
			return -1;
		}
		chunk_size = (uint32_t)(v << 10);
		return 1;
	}
	return 0;
}

/* The workspace's secret: HMAC-SHA256(fleet key, "sandbox-chunks\0" workspace). */
static void ws_secret(const char *workspace, uint8_t out[32])
{
	unsigned char msg[16 + SD_WORKSPACE_MAX];
	unsigned int len = 32;
	size_t wl = strnlen(workspace, SD_WORKSPACE_MAX);

	memcpy(msg, "sandbox-chunks", 15); /* and its NUL */
	memcpy(msg + 15, workspace, wl);
	HMAC(EVP_sha256(), fleet_key, sizeof(fleet_key), msg, 15 + wl, out, &len);
}

int fstore_open(struct fstore *h, const char *workspace, char *err, size_t len)
{
	char prefix[96];
	int r;

	memset(h, 0, sizeof(*h));
	if ((r = s3_open(&h->s3, &s3c)) < 0) {
		snprintf(err, len, "the object store: %s", h->s3.err);
		return r;
	}
	ws_secret(workspace, h->secret);
	snprintf(prefix, sizeof(prefix), "w/%s", workspace);
	if ((r = chunk_store_open(&h->cs, &h->s3, prefix, h->secret)) < 0) {
		snprintf(err, len, "the object store: %s", h->cs.err);
		s3_close(&h->s3);
		OPENSSL_cleanse(h->secret, sizeof(h->secret));
		return r;
	}
	h->cs.cache = cache; /* (its own lock: every worker's handle shares it) */
	h->cs.transfers = (unsigned)transfers;
	return 0;
}

void fstore_close(struct fstore *h)
{
	fstore_unlease(h);
	chunk_store_close(&h->cs);
	s3_close(&h->s3);
	OPENSSL_cleanse(h->secret, sizeof(h->secret));
}

static int push(const char *workspace, const char *store_name, const char *manifest, uint64_t gen,
		const char *parent, char *err, size_t len)
{
	struct fstore h;
	uint64_t t0 = sd_now_ms();
	char owner[FLEET_ID_MAX + 1];
	bool box = strncmp(manifest, "box-", 4) == 0;
	struct manifest old;
	bool have_old = false;

	int r = fstore_open(&h, workspace, err, len);

	if (r < 0)
		return r;
	/* the lease first (it may wait for a collection): what is checked below holds after.
	 * A box's state goes into the store only from its owner, and only newer than what is
	 * there: a host the fleet took for lost and whose box woke elsewhere never overwrites
	 * it with its stale copy. */
	if ((r = fstore_lease(&h, workspace, false, err, len)) < 0) {
		fstore_close(&h);
		return r;
	}
	if (box && fleetd_owner_fresh(manifest + 4, owner, 0) == 0 && !fleetd_self(owner)) {
		snprintf(err, len, "the fleet gave it to %s: this host's copy is stale", owner);
		fstore_close(&h);
		return -ESTALE;
	}
	/* the snapshot before it (a box's own last state, or the caller's parent): what changed
	 * since may go up as patches of its chunks (store/chunk_patch.c); none readable, none */
	if (box || parent)
		have_old = manifest_get(&old, &h.cs, box ? manifest : parent, 0) == 0;
	h.cs.err[0] = 0;
	if (box && have_old && old.generation >= gen) {
		snprintf(
			err, len,
			"the store holds generation %llu of it, not under %llu: this copy is stale",
			(unsigned long long)old.generation, (unsigned long long)gen);
		manifest_free(&old);
		fstore_close(&h);
		return -ESTALE;
	}
	/* a box's parent only its generation just before (a lagging copy's chunks may be gone) */
	bool parent_ok = have_old && (!box || old.generation + 1 == gen);

	r = snap_push(store_name, &h.cs, manifest, gen, parent_ok ? &old : NULL, chunk_size, err,
		      len);
	if (r == 0)
		sd_log("snapshot %s: in the store in %llu ms: %llu chunks up (%llu bytes), %llu "
		       "there already; %llu patched of %s",
		       manifest, (unsigned long long)(sd_now_ms() - t0),
		       (unsigned long long)h.cs.put_chunks, (unsigned long long)h.cs.put_bytes,
		       (unsigned long long)h.cs.skip_chunks, (unsigned long long)h.cs.patched,
		       parent_ok ? (box ? "its last state" : parent) : "none");
	if (have_old)
		manifest_free(&old);
	fstore_close(&h);
	return r;
}

int fstore_forget(const char *workspace, const char *manifest, char *err, size_t len)
{
	struct fstore h;
	int r;

	if (!configured)
		return 0;
	if ((r = fstore_open(&h, workspace, err, len)) < 0)
		return r;
	if ((r = manifest_delete(&h.cs, manifest)) == -ENOENT)
		r = 0; /* never pushed (a capture that failed), or deleted before */
	else if (r < 0)
		snprintf(err, len, "%s", h.cs.err);
	fstore_close(&h);
	return r;
}

int fleetd_forget_box_state(const char *workspace, const char *id, char *err, size_t len)
{
	char snap_name[64], manifest[48];

	box_move_names(id, 0, snap_name, manifest);
	return fstore_forget(workspace, manifest, err, len);
}

bool fstore_held(const char *store_name)
{
	char dir[4200];
	struct stat st;

	if (!store_name[0] || strchr(store_name, '/'))
		return false;
	snprintf(dir, sizeof(dir), "%s/snapshots/%s", state_home(), store_name);
	return lstat(dir, &st) == 0 && S_ISDIR(st.st_mode);
}

static int pull(const char *workspace, const char *manifest, uint64_t min_gen,
		const char *store_name, char *err, size_t len)
{
	char dir[4200];
	struct stat st;
	struct fstore h;
	uint64_t t0 = sd_now_ms();
	int r;

	snprintf(dir, sizeof(dir), "%s/snapshots/%s", state_home(), store_name);
	if (lstat(dir, &st) == 0)
		return 0; /* this host made it, or pulled it before */
	if ((r = fstore_open(&h, workspace, err, len)) < 0)
		return r;
	r = snap_pull(&h.cs, manifest, min_gen, store_name, err, len);
	if (r == -EEXIST) /* another create pulled it meanwhile */
		r = 0;
	if (r == 0)
		sd_log("snapshot %s: pulled in %llu ms: %llu chunks (%llu bytes), %llu from the "
		       "cache",
		       manifest, (unsigned long long)(sd_now_ms() - t0),
		       (unsigned long long)h.cs.got_chunks, (unsigned long long)h.cs.got_bytes,
		       (unsigned long long)h.cs.cache_hits);
	fstore_close(&h);
	return r;
}

/* A lazy restore's source: the store's handle and the manifest, whose memory file's chunks
 * the pager asks for (through the host's chunk cache), each checked against its hash. */
struct lazy_store {
	struct fstore h;
	struct manifest mf;
	const struct manifest_file *mem;
	uint64_t t0;
	/* the memory's chunks read ahead into the host's cache by --store-transfers workers
	 * (store/chunk_ahead.c; none without a cache), and how many of those the pager took */
	struct chunk_ahead *ahead;
	uint64_t ahead_used;	 /* (__atomic) */
	struct lazy_disks disks; /* its disk layers, as the VMM reads them (the pager's thread) */
};

static int lazy_disk_get(void *arg, const uint8_t id[16], uint64_t off, uint64_t len, char *err,
			 size_t err_len)
{
	struct lazy_store *ls = arg;

	return lazy_disks_get(&ls->disks, &ls->h.cs, id, off, len, err, err_len);
}

static int lazy_disk_next(void *arg, char *err, size_t err_len)
{
	struct lazy_store *ls = arg;

	return lazy_disks_next(&ls->disks, &ls->h.cs, err, err_len);
}

static uint64_t lazy_unused(void *arg)
{
	return chunk_ahead_unused_bytes(((struct lazy_store *)arg)->ahead);
}

static void lazy_answered(void *arg)
{
	chunk_ahead_release(((struct lazy_store *)arg)->ahead);
}

/* The memory's chunks the snapshot's last run touched (a byte a chunk), read ahead first; NULL
 * when its state does not say (an older VMM's, a VM that could not tell: in order, as before),
 * and *nhot how many. */
static uint8_t *lazy_hot(const struct lazy_store *ls, const char *dir, uint64_t *nhot)
{
	char path[4400], err[256];
	uint8_t *hot;

	*nhot = 0;
	if (ls->mf.chunk_size == 0 ||
	    (ls->mem->size + ls->mf.chunk_size - 1) / ls->mf.chunk_size != ls->mem->nchunks)
		return NULL;
	snprintf(path, sizeof(path), "%s/state.fdt", dir);
	if (snap_touched_chunks(path, ls->mem->size, ls->mf.chunk_size, &hot, nhot, err,
				sizeof(err)) < 0) {
		sd_log("lazy restore: no pages its last run touched to read first: %s", err);
		return NULL;
	}
	if (*nhot == 0) { /* none: nothing to hold the read-ahead for */
		free(hot);
		return NULL;
	}
	return hot;
}

static int lazy_get(void *arg, uint64_t i, uint8_t *buf, char *err, size_t len)
{
	static const uint8_t zero[CHUNK_HASH_LEN];
	struct lazy_store *ls = arg;
	uint32_t cs = ls->mf.chunk_size;
	size_t want, got = 0;
	int r;

	if (i >= ls->mem->nchunks) {
		snprintf(err, len, "no chunk %llu of the memory", (unsigned long long)i);
		return -EINVAL;
	}
	want = ls->mem->size - i * cs < cs ? (size_t)(ls->mem->size - i * cs) : cs;
	if (memcmp(ls->mem->hash[i], zero, sizeof(zero)) == 0)
		return 1;
	/* read ahead by a worker: waited for, then in the cache (unless the cache let it go) */
	if (chunk_ahead_claim(ls->ahead, i) == 1)
		__atomic_add_fetch(&ls->ahead_used, 1, __ATOMIC_RELAXED);
	/* a running guest waits on it: the store's passing failures tried again */
	r = chunk_get_waited(&ls->h.cs, ls->mem->hash[i], buf, cs, &got);
	if (r < 0) {
		snprintf(err, len, "%s", ls->h.cs.err);
		return r;
	}
	if (got != want) {
		snprintf(err, len, "a chunk of the memory has %zu bytes where it wants %zu", got,
			 want);
		return -EBADMSG;
	}
	return 0;
}

static int pull_lazy(const char *workspace, const char *manifest, uint64_t min_gen,
		     struct lazy_pull *out, char *err, size_t len)
{
	struct lazy_store *ls = calloc(1, sizeof(*ls));
	uint64_t nhot;
	uint8_t *hot;
	int r;

	if (!ls)
		return -ENOMEM;
	ls->t0 = sd_now_ms();
	if ((r = fstore_open(&ls->h, workspace, err, len)) < 0) {
		free(ls);
		return r;
	}
	/* a lease until the pager is done (lazy_close): the memory's chunks are read while the
	 * box runs, and a collection after its snapshot's delete would take them */
	if ((r = fstore_lease(&ls->h, workspace, true, err, len)) < 0) {
		fstore_close(&ls->h);
		free(ls);
		return r;
	}
	r = snap_pull_lazy(&ls->h.cs, manifest, min_gen, out->dir, &ls->mf, &out->m, err, len);
	if (r < 0) {
		fstore_close(&ls->h);
		free(ls);
		return r;
	}
	ls->mem = manifest_find(&ls->mf, "memory");
	if ((r = lazy_disks_open(&ls->disks, &ls->mf, out->dir, err, len)) < 0) {
		snap_pull_lazy_done(out->dir);
		manifest_free(&ls->mf);
		fstore_close(&ls->h);
		free(ls);
		return r;
	}
	chunk_store_recipes(&ls->h.cs, &ls->mf); /* its patched chunks made as they come */
	hot = lazy_hot(ls, out->dir, &nhot);
	ls->ahead =
		chunk_ahead_start(&ls->h.cs, (const uint8_t(*)[CHUNK_HASH_LEN])ls->mem->hash,
				  ls->mem->nchunks, ls->mf.chunk_size, (unsigned)transfers, hot);
	free(hot);
	out->src = (struct pager_src){.get = lazy_get,
				      .arg = ls,
				      .chunk_size = ls->mf.chunk_size,
				      .unused_bytes = lazy_unused,
				      .answered = lazy_answered,
				      .disk_get = lazy_disk_get,
				      .disk_next = lazy_disk_next};
	out->store = ls;
	sd_log("snapshot %s: pulled but its memory in %llu ms: %llu chunks (%llu bytes), %llu "
	       "from the cache; its memory (%llu MiB) to come lazily, %llu of its %llu chunks "
	       "(those its last run touched) read ahead first",
	       manifest, (unsigned long long)(sd_now_ms() - ls->t0),
	       (unsigned long long)ls->h.cs.got_chunks, (unsigned long long)ls->h.cs.got_bytes,
	       (unsigned long long)ls->h.cs.cache_hits, (unsigned long long)(ls->mem->size >> 20),
	       (unsigned long long)nhot, (unsigned long long)ls->mem->nchunks);
	return 0;
}

static void lazy_close(struct lazy_pull *lp)
{
	struct lazy_store *ls = lp->store;

	if (!ls)
		return;
	if (ls->ahead) {
		/* (the pager is done: it asks nothing more) */
		uint64_t ahead = chunk_ahead_stop(ls->ahead);

		sd_log("lazy restore: %llu of the memory's %llu chunks read ahead, %llu of them "
		       "taken by the pager",
		       (unsigned long long)ahead, (unsigned long long)ls->mem->nchunks,
		       (unsigned long long)ls->ahead_used);
	}
	sd_log("lazy restore: %llu chunks of its disk layers fetched for the VMM's reads, %llu "
	       "after",
	       (unsigned long long)ls->disks.want_chunks,
	       (unsigned long long)ls->disks.fill_chunks);
	lazy_disks_close(&ls->disks);
	manifest_free(&ls->mf);
	fstore_close(&ls->h);
	free(ls);
	lp->store = NULL;
}

/* The first line of text into out (trailing blanks gone); the rest after it. */
static const char *line(const char *text, char *out, size_t cap)
{
	size_t n = strcspn(text, "\r\n");

	if (n >= cap)
		return NULL;
	memcpy(out, text, n);
	out[n] = 0;
	while (n && (out[n - 1] == ' ' || out[n - 1] == '\t'))
		out[--n] = 0;
	text += n;
	while (*text == '\r' || *text == '\n')
		text++;
	return text;
}

int fstore_start(void)
{
	static const struct snap_store_hooks lazy_hooks = {
		.push = push, .pull = pull, .pull_lazy = pull_lazy, .lazy_close = lazy_close};
	static const struct snap_store_hooks eager_hooks = {.push = push, .pull = pull};
	char *text = NULL;
	size_t len;
	const char *rest;
	struct s3 s3;
	int r;

	if (!configured)
		return 0;
	if (!cred_file[0] || !key_file[0] || !s3c.bucket[0] || !s3c.endpoint[0]) {
		sd_log("the object store needs --store-endpoint, --store-bucket, "
		       "--store-credentials and --fleet-key");
		return -EINVAL;
	}
	if ((r = read_file_follow(cred_file, KEY_FILE_MAX, &text, &len)) < 0) {
		sd_log("%s: %s", cred_file, strerror(-r));
		return r;
	}
	rest = line(text, s3c.access, sizeof(s3c.access));
	rest = rest ? line(rest, s3c.secret, sizeof(s3c.secret)) : NULL;
	OPENSSL_cleanse(text, len);
	free(text);
	if (!rest || !s3c.access[0] || !s3c.secret[0]) {
		sd_log("%s: not an access key id and a secret, a line each", cred_file);
		return -EINVAL;
	}
	if ((r = read_file_follow(key_file, KEY_FILE_MAX, &text, &len)) < 0 || len < 32) {
		sd_log("%s: %s", key_file, r < 0 ? strerror(-r) : "under 32 bytes");
		free(text);
		return r < 0 ? r : -EINVAL;
	}
	SHA256((const uint8_t *)text, len, fleet_key);
	OPENSSL_cleanse(text, len);
	free(text);
	if ((r = s3_open(&s3, &s3c)) < 0 || (r = s3_bucket_create(&s3)) < 0) {
		sd_log("the object store %s: %s", s3c.endpoint, s3.err);
		s3_close(&s3);
		return r;
	}
	s3_close(&s3);
	if (cache_mib) {
		char dir[4200];

		snprintf(dir, sizeof(dir), "%s/chunk-cache", sd_dir());
		if ((r = chunk_cache_open(dir, cache_mib << 20, &cache)) < 0) {
			sd_log("the chunk cache %s: %s", dir, strerror(-r));
			return r;
		}
	}
	snap_store_hooks = lazy_memory ? &lazy_hooks : &eager_hooks;
	sd_log("snapshots go to %s, bucket %s, in chunks of %u KiB (a cache of %llu MiB here; "
	       "memory restored %s)",
	       s3c.endpoint, s3c.bucket, chunk_size >> 10, (unsigned long long)cache_mib,
	       lazy_memory ? "lazily" : "eagerly");
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The store's side of a sandbox pushed and pulled through the API (fleetd.h, fstore_missing
 * to fstore_export; fleet_xfer.c answers the routes): a client's manifest parsed strictly and
 * bounded, the chunks it lacks said (each once, a bounded number of questions to the store),
 * a client's chunks checked against their names, an import put and pulled here as a snapshot
 * from elsewhere, an export without the proxy's files, and the chunks a workspace may fetch:
 * only those of what this host exported to it lately.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "fleetd.h"
#include "fstore.h"
#include "snap_remote.h"

#define IMPORT_MEMORY_MAX (64ull << 30)	 /* a pushed sandbox's RAM (the API's mem_bytes bound) */
#define IMPORT_DATA_MAX	  (128ull << 30) /* the bytes a pushed sandbox's pull writes */
#define IMPORT_CHUNKS_MAX (1u << 19)	 /* its distinct chunks */
#define LACKING_ASKS_MAX  4096		 /* a missing list's questions to the store */

/* A chunk's name (its SHA-256 in lower-case hex) into out: 0, or -EINVAL said in err. */
static int hash_of(const char *hex, uint8_t out[CHUNK_HASH_LEN], char *err, size_t elen)
{
	if (strlen(hex) == 2 * CHUNK_HASH_LEN && chunk_unhex(hex, out) == 0)
		return 0;
	snprintf(err, elen, "a chunk is named by its SHA-256: 64 lower-case hex digits");
	return -EINVAL;
}

/* The workspace's store open, and a client's manifest text parsed into mf (strictly). */
static int open_parsed(struct fstore *h, const char *workspace, const char *text, size_t len,
		       struct manifest *mf, char *err, size_t elen)
{
	int r = fstore_open(h, workspace, err, elen);

	if (r < 0)
		return r;
	if ((r = manifest_parse(text, len, mf, &h->cs)) < 0) {
		snprintf(err, elen, "%s", h->cs.err);
		fstore_close(h);
	} else if (mf->nrecipes) {
		/* a client's chunks are whole: a recipe of its making could rebuild, from a chunk
		 * of the workspace it may not read, bytes it then learns of */
		snprintf(err, elen,
			 "the manifest lists recipes: a pushed sandbox's chunks are whole");
		manifest_free(mf);
		fstore_close(h);
		r = -EINVAL;
	}
	return r;
}

/* The chunks of mf the store lacks, each once, appended to out as hex; out NULL: the first
 * one is an error (-ENOENT) naming it. Past LACKING_ASKS_MAX questions to the store (a store
 * too large to list whole), the rest are said to be missing without asking: the client
 * sends them, and a put skips what the store has. */
static int lacking(struct fstore *h, const struct manifest *mf, json_t *out, char *err, size_t elen)
{
	size_t n = 0;
	uint8_t(*u)[CHUNK_HASH_LEN] = manifest_stored_hashes(mf, &n);
	unsigned asked0 = h->s3.requests;
	int r = 0;

	if (!u)
		return -ENOMEM;
	if (!out && n > IMPORT_CHUNKS_MAX) {
		snprintf(err, elen, "over %u chunks in a pushed sandbox", IMPORT_CHUNKS_MAX);
		free(u);
		return -EFBIG;
	}
	if (chunk_store_learn(&h->cs, 16) < 0) /* one that cannot list asks a HEAD a chunk */
		h->cs.err[0] = 0;
	for (size_t i = 0; i < n && r == 0; i++) {
		char hex[2 * CHUNK_HASH_LEN + 1];
		int has = out && h->s3.requests - asked0 >= LACKING_ASKS_MAX
				  ? 0
				  : chunk_has(&h->cs, u[i]);

		if (has < 0) {
			snprintf(err, elen, "%s", h->cs.err);
			r = has;
			break;
		}
		if (has)
			continue;
		chunk_hex(u[i], hex);
		if (!out) {
			snprintf(err, elen, "chunk %s was not sent", hex);
			r = -ENOENT;
		} else if (json_array_append_new(out, json_string(hex)) < 0) {
			r = -ENOMEM;
		}
	}
	free(u);
	return r;
}

/* A pushed manifest's bounds: its data (what a pull writes, zeros included: a layer's layout
 * is kept), its memory, and room for it on this host's disk. */
static int import_bounds(const struct manifest *mf, char *err, size_t elen)
{
	const struct manifest_file *mem = manifest_find(mf, "memory");
	uint64_t data = manifest_data_bytes(mf);
	struct statvfs sv;

	if (!mem || mem->size > IMPORT_MEMORY_MAX || data > IMPORT_DATA_MAX) {
		snprintf(err, elen,
			 "a pushed sandbox has a memory file of at most %llu GiB and at most %llu "
			 "GiB of data",
			 (unsigned long long)(IMPORT_MEMORY_MAX >> 30),
			 (unsigned long long)(IMPORT_DATA_MAX >> 30));
		return mem ? -EFBIG : -EINVAL;
	}
	if (statvfs(state_home(), &sv) == 0 &&
	    data + (1ull << 30) > (uint64_t)sv.f_bavail * sv.f_frsize) {
		snprintf(err, elen, "this host has no room for %llu MiB of a pushed sandbox",
			 (unsigned long long)(data >> 20));
		return -ENOSPC;
	}
	return 0;
}

int fstore_missing(const char *workspace, const char *text, size_t len, json_t **missing, char *err,
		   size_t elen)
{
	struct manifest mf;
	struct fstore h;
	int r = open_parsed(&h, workspace, text, len, &mf, err, elen);

	*missing = NULL;
	if (r < 0)
		return r;
	if (!(*missing = json_array()))
		r = -ENOMEM;
	if (r == 0)
		r = lacking(&h, &mf, *missing, err, elen);
	if (r < 0) {
		json_decref(*missing);
		*missing = NULL;
	}
	manifest_free(&mf);
	fstore_close(&h);
	return r;
}

int fstore_chunk_put(const char *workspace, const char *hex, const void *data, size_t len,
		     char *err, size_t elen)
{
	uint8_t hash[CHUNK_HASH_LEN];
	struct fstore h;
	int r;

	if ((r = hash_of(hex, hash, err, elen)) < 0)
		return r;
	if ((r = fstore_open(&h, workspace, err, elen)) < 0)
		return r;
	if ((r = chunk_put_hashed(&h.cs, data, len, hash)) < 0)
		snprintf(err, elen, "%s", h.cs.err);
	fstore_close(&h);
	return r;
}

/* The chunks a workspace may fetch through the API: those of the manifests this host exported
 * to it lately (a pull's), so never one only a proxy file holds (its digest is in meta.yaml:
 * the credentials, the CA's key), nor one of a box it did not export. */
#define EXPORTS_MAX    16
#define EXPORT_KEEP_MS 3600000
#define EXPORTS_HASHES (1u << 22) /* all exports' hashes kept (128 MiB) */
static pthread_mutex_t exports_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char workspace[SD_WORKSPACE_MAX + 1];
	uint8_t (*h)[CHUNK_HASH_LEN]; /* sorted */
	size_t n;
	uint64_t at_ms;
} exports[EXPORTS_MAX];

static void export_remember(const char *workspace, const struct manifest *mf)
{
	size_t n = 0, total = 0;
	uint8_t(*h)[CHUNK_HASH_LEN] = manifest_stored_hashes(mf, &n);
	unsigned oldest = 0;

	if (!h)
		return;
	pthread_mutex_lock(&exports_lock);
	for (unsigned i = 0; i < EXPORTS_MAX; i++) {
		if (exports[i].at_ms < exports[oldest].at_ms)
			oldest = i;
		total += exports[i].n;
	}
	/* the oldest goes; while all would hold too many, the next oldest too */
	for (;;) {
		total -= exports[oldest].n;
		free(exports[oldest].h);
		exports[oldest].h = NULL;
		exports[oldest].n = 0;
		exports[oldest].at_ms = 0;
		if (total + n <= EXPORTS_HASHES)
			break;
		for (unsigned i = 0; i < EXPORTS_MAX; i++)
			if (exports[i].n &&
			    (!exports[oldest].n || exports[i].at_ms < exports[oldest].at_ms))
				oldest = i;
		if (!exports[oldest].n)
			break;
	}
	if (total + n <= EXPORTS_HASHES) {
		snprintf(exports[oldest].workspace, sizeof(exports[0].workspace), "%s", workspace);
		exports[oldest].h = h;
		exports[oldest].n = n;
		exports[oldest].at_ms = sd_now_ms();
		h = NULL;
	}
	pthread_mutex_unlock(&exports_lock);
	free(h);
}

static bool export_has(const char *workspace, const uint8_t hash[CHUNK_HASH_LEN])
{
	uint64_t now = sd_now_ms();
	bool found = false;

	pthread_mutex_lock(&exports_lock);
	for (unsigned i = 0; i < EXPORTS_MAX && !found; i++)
		found = exports[i].n && now - exports[i].at_ms < EXPORT_KEEP_MS &&
			strcmp(exports[i].workspace, workspace) == 0 &&
			bsearch(hash, exports[i].h, exports[i].n, CHUNK_HASH_LEN, chunk_hash_cmp);
	pthread_mutex_unlock(&exports_lock);
	return found;
}

int fstore_chunk_get(const char *workspace, const char *hex, uint8_t **data, size_t *len, char *err,
		     size_t elen)
{
	uint8_t hash[CHUNK_HASH_LEN];
	struct fstore h;
	int r;

	*data = NULL;
	if ((r = hash_of(hex, hash, err, elen)) < 0)
		return r;
	if (!export_has(workspace, hash)) {
		snprintf(err, elen,
			 "chunk %s is in no sandbox this host exported to you lately (GET "
			 "/boxes/<name>/export first, through this host)",
			 hex);
		return -ENOENT;
	}
	if (!(*data = malloc(CHUNK_SIZE_MAX)))
		return -ENOMEM;
	if ((r = fstore_open(&h, workspace, err, elen)) < 0) {
		free(*data);
		*data = NULL;
		return r;
	}
	if ((r = chunk_get(&h.cs, hash, *data, CHUNK_SIZE_MAX, len)) < 0) {
		snprintf(err, elen, "%s", h.cs.err);
		free(*data);
		*data = NULL;
	}
	fstore_close(&h);
	return r;
}

int fstore_import(const char *workspace, const char *text, size_t len, const char *id,
		  const char *store_name, struct snap_meta *m, char *err, size_t elen)
{
	char dir[4200];
	struct manifest mf;
	struct fstore h;
	int r = open_parsed(&h, workspace, text, len, &mf, err, elen);

	if (r < 0)
		return r;
	/* a sandbox's state, memory, disk layers and meta.yaml only: no proxy files (its
	 * network here is the service's), nothing else */
	for (unsigned i = 0; i < mf.nfiles && r == 0; i++) {
		const char *n = mf.file[i].name;

		if (strcmp(n, "state.fdt") != 0 && strcmp(n, "memory") != 0 &&
		    strcmp(n, "meta.yaml") != 0 && !snap_valid_layer_name(n)) {
			snprintf(err, elen,
				 "the manifest holds %.64s: a pushed sandbox holds only "
				 "its state, memory, disk layers and meta.yaml",
				 n);
			r = -EINVAL;
		}
	}
	if (r == 0 && !manifest_find(&mf, "memory")) {
		snprintf(err, elen,
			 "the manifest has no memory: a pushed sandbox keeps its "
			 "processes");
		r = -EINVAL;
	}
	if (r == 0)
		r = import_bounds(&mf, err, elen);
	/* every chunk there, checked under the workspace's lease: a collection may have taken
	 * one the client was told the store had (no lease spans a client's requests) */
	if (r == 0)
		r = fstore_lease(&h, workspace, false, err, elen);
	if (r == 0 && (r = lacking(&h, &mf, NULL, err, elen)) == -ENOENT)
		r = -EINVAL; /* (the client's fault: a 400, not a 404) */
	mf.generation = 1;
	if (r == 0 && (r = manifest_put(&mf, &h.cs, id)) < 0)
		snprintf(err, elen, "%s", h.cs.err);
	fstore_unlease(&h);
	bool put = r == 0;

	manifest_free(&mf);
	/* pulled here at once: every chunk checked, the snapshot checked as one from elsewhere
	 * (its layers' parents its own or its image's: snap_layers_check) before it is a box */
	if (r == 0 && (r = snap_pull_import(&h.cs, id, store_name, err, elen)) == -ENOENT)
		r = -EBADMSG; /* (a file the snapshot lacks: the client's, a 400) */
	if (r == 0) {
		snprintf(dir, sizeof(dir), "%s/snapshots/%s", state_home(), store_name);
		r = snap_open(dir, m, err, elen);
	}
	if (r == 0 && (m->memory_mib > IMPORT_MEMORY_MAX >> 20 ||
		       m->memory_bytes > (m->memory_mib << 20) + (256ull << 20))) {
		/* (the quota counts memory_mib: the file may not be larger than that RAM) */
		snprintf(err, elen, "the snapshot's memory file is larger than its RAM");
		r = -EINVAL;
	}
	if (r < 0 && put && manifest_delete(&h.cs, id) < 0)
		sd_log("import %s: its manifest stays in the store: %s", id, h.cs.err);
	fstore_close(&h);
	return r;
}

int fstore_export(const char *workspace, const char *id, uint64_t gen, char **text, size_t *len,
		  char *err, size_t elen)
{
	struct manifest mf;
	struct fstore h;
	unsigned keep = 0;
	int r = fstore_open(&h, workspace, err, elen);

	*text = NULL;
	if (r < 0)
		return r;
	if ((r = manifest_get(&mf, &h.cs, id, gen)) < 0) {
		snprintf(err, elen, "%s", h.cs.err);
		fstore_close(&h);
		return r;
	}
	/* its proxy files stay: the service's policy, credentials and CA are not the client's */
	for (unsigned i = 0; i < mf.nfiles; i++) {
		if (snap_valid_net_file(mf.file[i].name)) {
			free(mf.file[i].hash);
			free(mf.file[i].extent);
			continue;
		}
		mf.file[keep++] = mf.file[i];
	}
	mf.nfiles = keep;
	/* and the recipes of their chunks only (a kept file's may lean on nothing else) */
	if (manifest_keep_listed_recipes(&mf) < 0) {
		snprintf(err, elen, "out of memory");
		r = -ENOMEM;
	} else if (!(*text = manifest_encode(&mf, len))) {
		snprintf(err, elen, "the manifest is too large");
		r = -E2BIG;
	} else {
		export_remember(workspace, &mf); /* what its chunk GETs may fetch */
	}
	manifest_free(&mf);
	fstore_close(&h);
	return r;
}

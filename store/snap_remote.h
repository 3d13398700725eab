/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A host's snapshot to and from the fleet's object store (snap_remote.c): the lifecycle
 * layer's snapshots (client/, docs/snapshots.md) as the store's manifests (store.h).
 */
#ifndef SANDBOX_STORE_SNAP_REMOTE_H
#define SANDBOX_STORE_SNAP_REMOTE_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* Upload $SANDBOX_HOME/snapshots/<name>, authenticated here first (snap_open), as manifest id
 * of cs at that generation, in chunks of chunk_size: the chunks the store lacks only. A
 * snapshot with extra disks (this host's paths) is refused (-EXDEV). parent (NULL: none): the
 * sandbox's snapshot before it, whose chunks its changed ones may go up as patches of. */
int snap_push(const char *name, struct chunk_store *cs, const char *id, uint64_t generation,
	      const struct manifest *parent, uint32_t chunk_size, char *err, size_t err_len)
	__attribute__((warn_unused_result));
/* Fetch manifest id (its generation at least min_generation) as snapshots/<name>, which must
 * not exist (-EEXIST): every chunk checked, the snapshot made this host's (snap_adopt) and
 * checked as any (snap_open) in a hidden directory, then renamed into place; on any failure
 * nothing is left. */
int snap_pull(struct chunk_store *cs, const char *id, uint64_t min_generation, const char *name,
	      char *err, size_t err_len) __attribute__((warn_unused_result));

/* snap_pull of a snapshot a client pushed from another machine (generation 1): its layers
 * whose parent is an image's file pointed at this host's file of that image first
 * (snap_layers_rebase), then sealed again and checked as any pull's. */
int snap_pull_import(struct chunk_store *cs, const char *id, const char *name, char *err,
		     size_t err_len) __attribute__((warn_unused_result));

/* For a lazy restore: fetch manifest id into a new hidden directory (its path in dir) with
 * every file but the memory, made this host's and checked as snap_pull does (snap_open_lazy:
 * no memory file); *mf the manifest, whose "memory" file the pager pages in chunk by chunk,
 * *m the snapshot. The caller restores from dir, then snap_pull_lazy_done(dir) and
 * manifest_free(mf). On failure nothing is left. */
struct snap_meta;
int snap_pull_lazy(struct chunk_store *cs, const char *id, uint64_t min_generation, char dir[4300],
		   struct manifest *mf, struct snap_meta *m, char *err, size_t err_len)
	__attribute__((warn_unused_result));
void snap_pull_lazy_done(const char *dir);

/* snap_lazy_disk.c: a lazy restore's disk layers (docs/fleet.md, "Lazy restore"). The pull
 * writes layer `name` of mf at path at its size, with only the chunks of its header and
 * bitmap (checked); lazy_disks then serves the pager's wants (each layer by its id) and fills
 * the rest. Used by one thread at a time. */
int snap_lazy_disk_head(const struct manifest *mf, struct chunk_store *cs, const char *name,
			const char *path, char *err, size_t err_len)
	__attribute__((warn_unused_result));
struct lazy_disk {
	const struct manifest_file *f;
	uint8_t id[16]; /* its header's layer_id */
	int fd;
	uint8_t *in;   /* a byte a chunk: in the file (the head, zeros, or fetched) */
	uint64_t left; /* chunks not in yet */
};
struct lazy_disks {
	const struct manifest *mf; /* the caller's, outliving this */
	struct lazy_disk d[MANIFEST_FILES_MAX];
	unsigned n, next; /* the fill's place: disk next, its chunk next_chunk */
	uint64_t next_chunk;
	uint8_t *buf;
	uint64_t want_chunks, fill_chunks; /* fetched for a want of the VMM, and by the fill */
	bool synced;
};
/* Whether a lazy pull of mf pulls its layers lazily: not past RESTORE_FLATTEN_AT of them (the
 * restore then makes them one, reading them all: they are pulled whole). */
bool snap_lazy_layers(const struct manifest *mf);
/* The layers of mf pulled lazily into dir (snap_pull_lazy): their files opened, their ids
 * read. 0, or -errno with err. */
int lazy_disks_open(struct lazy_disks *ld, const struct manifest *mf, const char *dir, char *err,
		    size_t err_len) __attribute__((warn_unused_result));
/* [off, off + len) of the layer whose id is id in its file (every chunk of it fetched that
 * is not in yet): 0, or the chunk's failure in err. A layer not from the snapshot: 0. */
int lazy_disks_get(struct lazy_disks *ld, struct chunk_store *cs, const uint8_t id[16],
		   uint64_t off, uint64_t len, char *err, size_t err_len)
	__attribute__((warn_unused_result));
/* One more chunk of the layers in: 1, 0 when every layer is whole (and synced), or the
 * failure. */
int lazy_disks_next(struct lazy_disks *ld, struct chunk_store *cs, char *err, size_t err_len)
	__attribute__((warn_unused_result));
void lazy_disks_close(struct lazy_disks *ld);

/* snap_touched.c: the memory's chunks (chunk_size bytes each, the memory mem_bytes) that hold
 * a page the snapshot's last run touched, from its state file (the VMM's "touched-pages"):
 * *hot a byte a chunk (1: touched; the caller frees), *nhot how many. -ENOENT for a state
 * without them, -EBADMSG for one that is not a state or whose bitmap is not the memory's. */
int snap_touched_chunks(const char *state_path, uint64_t mem_bytes, uint32_t chunk_size,
			uint8_t **hot, uint64_t *nhot, char *err, size_t err_len)
	__attribute__((warn_unused_result));

#endif /* SANDBOX_STORE_SNAP_REMOTE_H */

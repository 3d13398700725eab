/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Layered copy-on-write disks (docs/disk-format.md). A disk is a chain of layers, top first:
 * overlays in our layer format over, at the bottom, an optional raw base image. A read goes to
 * the topmost layer that holds the cluster; a write goes to the top overlay, which first copies
 * a partly written cluster up from the layers below.
 *
 * This header has three parts: the on-disk format (self-contained: fixed-width little-endian
 * fields only), the API, and the interface between disk.c (chains) and disk_layer.c (one layer
 * file), which no other file uses. Functions return 0 or -errno unless their comment says
 * otherwise. A struct disk is not thread-safe: one thread (the I/O thread) uses it at a time.
 */
#ifndef SANDBOX_DISK_H
#define SANDBOX_DISK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef __must_check
#define __must_check __attribute__((warn_unused_result))
#endif

/* ---- The layer file, format version 1 ---- */

/* The magic and the version sit at the same offsets in every version of the format. */
#define DISK_MAGIC	       "SBXLAYER" /* 8 bytes, no NUL */
#define DISK_MAGIC_LEN	       8
#define DISK_VERSION	       1
#define DISK_HEADER_LEN	       4096
#define DISK_SECTOR_LEN	       512 /* the smallest disk: one sector */
#define DISK_CLUSTER_MIN       (4u << 10)
#define DISK_CLUSTER_MAX       (2u << 20)
#define DISK_CLUSTER_DEFAULT   (64u << 10)
/* The bitmap is held in memory: at most 2^28 clusters (16 TiB at 64 KiB clusters). */
#define DISK_BITMAP_MAX_LEN    (32u << 20)
#define DISK_BITMAP_ALIGN      4096 /* bitmap_len is a multiple; flushes write whole pages */
#define DISK_PARENT_PATH_MAX   2048
#define DISK_ID_LEN	       16
#define DISK_HASH_LEN	       32 /* SHA-256 */
/* A raw base's identity hashes its first and last 64 KiB (docs/disk-format.md, "Identity");
 * layers made before 2026-12 recorded the older one over the first and last MiB. */
#define DISK_RAW_SAMPLE_LEN    (64u << 10)
#define DISK_RAW_V1_SAMPLE_LEN (1u << 20)

enum disk_parent_kind {
	DISK_PARENT_NONE = 0,  /* a blank disk: unallocated clusters read as zeros */
	DISK_PARENT_RAW = 1,   /* a raw image (ext4), never written through this module */
	DISK_PARENT_LAYER = 2, /* another layer file */
};

/* A commit into the parent was started and has not finished (disk_commit). */
#define DISK_FLAG_COMMITTING 0x1u
#define DISK_FLAGS_KNOWN     DISK_FLAG_COMMITTING

/* The first 4 KiB of a layer file. Then the bitmap at bitmap_offset (bit i, LSB first in byte
 * i / 8, says the layer holds cluster i), then cluster i at data_offset + i * cluster_len. */
struct disk_header {
	uint8_t magic[DISK_MAGIC_LEN]; /* DISK_MAGIC */
	uint32_t version;	       /* DISK_VERSION */
	uint32_t header_len;	       /* DISK_HEADER_LEN */
	uint32_t cluster_len;	       /* a power of 2, DISK_CLUSTER_MIN..DISK_CLUSTER_MAX */
	uint32_t flags;		       /* DISK_FLAG_* */
	uint64_t virtual_len;	       /* the disk's size in bytes, >= DISK_SECTOR_LEN */
	uint64_t bitmap_offset;	       /* = header_len */
	uint64_t bitmap_len;	       /* ceil(clusters / 8), rounded up to DISK_BITMAP_ALIGN */
	uint64_t data_offset;	       /* bitmap end rounded up to cluster_len */
	uint8_t layer_id[DISK_ID_LEN]; /* random, chosen at creation */
	uint64_t generation;	       /* + 1 before the first write of every writable open */
	uint32_t parent_kind;	       /* enum disk_parent_kind */
	uint32_t parent_path_len;      /* bytes of parent_path used; 0 without a parent */
	/* What the parent was when this layer was created. parent_identity is what open checks;
	 * the rest only makes the "parent changed" message say what changed. */
	uint64_t parent_len;			   /* its size in bytes */
	uint64_t parent_mtime_ns;		   /* raw parent: its st_mtim */
	uint64_t parent_generation;		   /* layer parent: its generation */
	uint8_t parent_layer_id[DISK_ID_LEN];	   /* layer parent: its layer_id */
	uint8_t parent_identity[DISK_HASH_LEN];	   /* disk_layer_identity() of the parent */
	uint8_t commit_identity[DISK_HASH_LEN];	   /* DISK_FLAG_COMMITTING: the parent's next one */
	uint8_t parent_path[DISK_PARENT_PATH_MAX]; /* relative to this file's directory, no NUL */
	uint8_t reserved[1824];			   /* zero */
	uint8_t checksum[DISK_HASH_LEN];	   /* SHA-256 of every byte before this field */
};
_Static_assert(sizeof(struct disk_header) == DISK_HEADER_LEN, "the header is 4 KiB");
_Static_assert(offsetof(struct disk_header, version) == 8, "version stays at 8");
_Static_assert(offsetof(struct disk_header, parent_path) == 192, "no padding");
_Static_assert(offsetof(struct disk_header, checksum) == DISK_HEADER_LEN - 32,
	       "the checksum ends the header");

/* ---- The API ---- */

struct disk;

/* Why an open, create or commit failed: one line naming the file at fault. */
struct disk_error {
	char msg[640];
};

#define DISK_OPEN_RDONLY 0x1u /* every layer read-only: writes fail with -EROFS */
#define DISK_OPEN_RAW	 0x2u /* `path` is a raw image, opened alone and read-only */

/* Open the chain whose top is the layer file `path`, following each layer's parent path.
 * The top is opened for writing unless DISK_OPEN_RDONLY; every lower layer read-only. Every
 * header and bitmap is checked, and every parent against the identity its child recorded.
 * Locks: a writable layer is flock()ed exclusively, the others shared, so two processes
 * cannot write one layer and no layer is written while another process reads it as a lower
 * layer (-EBUSY). Errors: -ENOENT missing file, -EMEDIUMTYPE not a layer (bad magic),
 * -EPROTONOSUPPORT unknown version or flags, -EBADMSG header checksum, -EINVAL an impossible
 * field, -ENODATA truncated bitmap or data, -ESTALE parent changed, -EUCLEAN an interrupted
 * commit, -ELOOP chain too long; `err` (may be NULL) says which file and what. */
int disk_open(const char *path, unsigned flags, struct disk **out,
	      struct disk_error *err) __must_check;
/* Close every layer. Unflushed writes may or may not be on disk: call disk_flush first. */
void disk_close(struct disk *d);

/* The disk's size in bytes. */
uint64_t disk_size(const struct disk *d);
/* True when writes fail with -EROFS (DISK_OPEN_RDONLY or DISK_OPEN_RAW). */
bool disk_read_only(const struct disk *d);
/* Number of layers in the chain, the top's cluster size (DISK_CLUSTER_DEFAULT for a raw
 * image opened alone). */
unsigned disk_layer_count(const struct disk *d);
uint32_t disk_cluster_len(const struct disk *d);

/* Read or write [offset, offset + len); -EINVAL when any of it is beyond the disk, -EIO when a
 * layer file is shorter than its bitmap says. Any alignment and length work. */
int disk_read(struct disk *d, uint64_t offset, void *buf, uint64_t len) __must_check;
int disk_write(struct disk *d, uint64_t offset, const void *buf, uint64_t len) __must_check;
/* Make the range read as zeros (serves write-zeroes and discard). Whole clusters become holes
 * in the top layer's file where the filesystem can punch them. */
int disk_write_zeroes(struct disk *d, uint64_t offset, uint64_t len) __must_check;
/*
 * Lazy lower layers (docs/fleet.md, "Lazy restore"): a layer file pulled from the fleet's store
 * holds its header and bitmap, and its clusters' bytes only once fetched. With a fetch
 * function set, every read-only layer file below the top (not a raw image) is lazy: before
 * the bytes of a cluster of one are read the first time (a guest's read, a copy-up), `fetch`
 * is asked for them (the layer's id, the file range, whole clusters) and must return 0 only
 * once they are in the file. Its failure fails that read (-EIO). disk_fetch_extents is the
 * same for the extents disk_map gave, before the caller reads them itself.
 */
typedef int (*disk_fetch_fn)(void *arg, const uint8_t layer_id[DISK_ID_LEN], uint64_t file_offset,
			     uint64_t len);
int disk_set_fetch(struct disk *d, disk_fetch_fn fetch, void *arg) __must_check;
struct disk_extent;
int disk_fetch_extents(struct disk *d, const struct disk_extent *ext, unsigned n) __must_check;

/* Make every completed write durable: the top's data, then its bitmap (see disk_layer.c).
 * -EBUSY while an asynchronous write is in flight; -EIO after one failed. */
int disk_flush(struct disk *d) __must_check;

/* Asynchronous writes (virtio-blk on io_uring). disk_write_begin prepares a write of
 * [offset, offset + len) (len > 0): it copies the partly covered clusters at either end up into
 * the top when the top lacks them, marks every cluster of the range as the top's, and says
 * where the bytes go: one contiguous range of the top's file, at *file_offset of fd *fd. The
 * caller writes exactly len bytes there, then calls disk_write_end with 0 or the write's
 * -errno. A failed write leaves the disk failed: later writes and flushes return -EIO. Until
 * disk_write_end, a read of the range may see old, new or (in clusters the top did not hold)
 * zero bytes: a guest that reads what it is writing gets no promise, as from any disk. */
int disk_write_begin(struct disk *d, uint64_t offset, uint64_t len, int *fd,
		     uint64_t *file_offset) __must_check;
void disk_write_end(struct disk *d, int result);

/* Where a read of [offset, offset + len) finds its bytes, in order: a file range of one
 * layer, or fd -1 for bytes that read as zeros. Adjacent clusters of one layer are merged. */
struct disk_extent {
	int fd;
	uint64_t file_offset;
	uint64_t len;
};
/* Fill up to `max` extents; *n says how many. When `max` runs out first, the extents cover a
 * prefix of the range: map again from where they end. The fds stay valid until the disk is
 * closed, and the map until the next write, write-zeroes, snapshot or close. */
int disk_map(const struct disk *d, uint64_t offset, uint64_t len, struct disk_extent *ext,
	     unsigned max, unsigned *n) __must_check;

/* The most bytes the top layer's file can hold (its data area full): what RLIMIT_FSIZE must
 * allow a writer of this disk. A raw or read-only disk is never written: 0. */
uint64_t disk_max_file_len(const struct disk *d);
/* After the VMM's root moved to `root` (jail.c): every layer path under `root` becomes the
 * path from there (the paths new layers are recorded relative to). 0 or -ENOMEM. */
int disk_rebase(struct disk *d, const char *root) __must_check;
/* Freeze the top: flush it, create the empty layer `path` above it and make that the new
 * writable top. The old top stays open read-only, so the cost is one small file. */
int disk_snapshot(struct disk *d, const char *path, struct disk_error *err) __must_check;

/* Create `path` (it must not exist), an empty layer of `virtual_len` bytes with no parent. */
int disk_create(const char *path, uint64_t virtual_len, uint32_t cluster_len,
		struct disk_error *err) __must_check;
/* Create `path`, an empty layer above `parent_path`: a layer file (its whole chain is checked
 * and must not be open for writing) or else a raw image. The cost does not depend on the
 * disk's size: a header, a hole for the bitmap, no data. `cluster_len` 0 picks the parent's, or
 * DISK_CLUSTER_DEFAULT above a raw image; it must equal a layer parent's. */
int disk_create_overlay(const char *path, const char *parent_path, uint32_t cluster_len,
			struct disk_error *err) __must_check;
/* The same with a size: `virtual_len` 0 is the parent's; a larger one grows the disk (what
 * lies beyond the parent reads as zeros); a smaller one is refused (-EINVAL). */
int disk_create_overlay_len(const char *path, const char *parent_path, uint32_t cluster_len,
			    uint64_t virtual_len, struct disk_error *err) __must_check;
/* Merge the layer `path` into its parent, which must be a layer (a raw base is never written),
 * then empty `path` and point it at the parent's new identity, so `path` still opens to the
 * same contents. The parent's other children are refused afterwards (-ESTALE): it changed.
 * A commit cut short by a crash leaves `path` refused with -EUCLEAN until it is run again. */
int disk_commit(const char *path, struct disk_error *err) __must_check;
/* Make `out` (it must not exist) one layer with the contents of the chain whose top is `top`:
 * over the chain's raw base, or over nothing, holding every cluster a layer of the chain
 * holds (disk_flatten.c). The chain is only read; a failure leaves no `out`. */
int disk_flatten(const char *top, const char *out, struct disk_error *err) __must_check;

/* Write PATH.identity beside the raw image `path`: the SHA-256 of its bytes, its size and its
 * mtime (a read of the whole image). Layers made over it from then on record its identity by
 * content, which a copy of the same bytes elsewhere, with its own such file, matches whatever
 * its mtime (docs/disk-format.md, "Identity"). For an image's installer; 0 or -errno. */
int disk_raw_identity_write(const char *path, struct disk_error *err) __must_check;

/* One layer file, for `sandbox-disk info`. */
struct disk_layer_info {
	struct disk_header hdr;	 /* host byte order */
	uint64_t file_len;	 /* apparent size */
	uint64_t file_alloc_len; /* bytes the filesystem allocated */
	uint64_t allocated_clusters;
	uint8_t identity[DISK_HASH_LEN];
	char parent_path[4096]; /* resolved; "" without a parent */
	int chain_status;	/* disk_open of the chain, read-only and without locks */
	struct disk_error chain_error;
};
/* Check the layer file `path` alone (the errors of disk_open) and describe it; then open its
 * chain and report in chain_status whether its parents still match. */
int disk_inspect(const char *path, struct disk_layer_info *info,
		 struct disk_error *err) __must_check;

/* Compute the checksum of `h`, a header in on-disk byte order (for tools and tests that
 * write headers). */
void disk_header_seal(struct disk_header *h);

/* ---- Between disk.c and disk_layer.c only ---- */

#define DISK_MAX_LAYERS 128

struct disk_layer {
	int fd;
	bool raw; /* a raw image: holds every cluster, has no header */
	bool writable;
	bool written;	     /* the generation was bumped in this open */
	bool unsynced;	     /* data written since the last fdatasync */
	bool identity_known; /* identity is computed (a raw image's costs a 128 KiB read) */
	char *path;	     /* canonical */
	uint64_t virtual_len;
	uint32_t cluster_len; /* 0 for a raw image */
	uint64_t nclusters;
	uint64_t file_len;
	uint64_t mtime_ns;
	struct disk_header hdr; /* host byte order; layers only */
	uint8_t *bitmap;	/* hdr.bitmap_len bytes */
	uint8_t *dirty;		/* one byte per DISK_BITMAP_ALIGN page of the bitmap */
	uint8_t identity[DISK_HASH_LEN];
	uint8_t *fetched; /* a lazy layer's (disk_set_fetch): a bit a cluster, its bytes in */
};

#define DISK_LAYER_WRITABLE 0x1u
#define DISK_LAYER_RAW	    0x2u /* open a raw image, not a layer file */
#define DISK_LAYER_NOLOCK   0x4u

/* Fill `err` from the format and return `ret`. */
int disk_fail(struct disk_error *err, int ret, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Whether len bytes at buf are all zero. */
bool disk_all_zero(const void *buf, size_t len);
/* pread/pwrite all of `len` bytes; a short read is -EIO. */
int disk_pread_full(int fd, void *buf, uint64_t len, uint64_t off) __must_check;
int disk_pwrite_full(int fd, const void *buf, uint64_t len, uint64_t off) __must_check;

/* Open and check one layer file (or, with DISK_LAYER_RAW, a raw image) into `l`. */
int disk_layer_open(struct disk_layer *l, const char *path, unsigned lflags,
		    struct disk_error *err) __must_check;
/* The same with `fd` (>= 0) already open on `path`: the layer owns it from here. */
int disk_layer_open_fd(struct disk_layer *l, int fd, const char *path, unsigned lflags,
		       struct disk_error *err) __must_check;
void disk_layer_close(struct disk_layer *l);
/* The identity children record: SHA-256 over what makes the layer's contents what they are. */
int disk_layer_identity(struct disk_layer *l, uint8_t out[DISK_HASH_LEN]) __must_check;
/* A raw image's identity as layers made before 2026-12 recorded it (open accepts either). */
int disk_layer_raw_identity_v1(struct disk_layer *l, uint8_t out[DISK_HASH_LEN]) __must_check;
/* Its v2 identity (size, mtime, first and last 64 KiB): what disk_layer_identity gives when no
 * identity file vouches for the image's bytes. */
int disk_layer_raw_identity_v2(struct disk_layer *l, uint8_t out[DISK_HASH_LEN]) __must_check;
/* Its v3 identity (its size and the SHA-256 of its bytes) from PATH.identity, when that file
 * records the image's present size and mtime (disk_raw_id.c): 0, or -ENOENT (none), -EBADMSG,
 * -ESTALE (the image was written since). */
int disk_layer_raw_identity_v3(struct disk_layer *l, uint8_t out[DISK_HASH_LEN]) __must_check;
/* Does the layer hold cluster `idx`? Set that it does (in memory until the next flush). */
bool disk_layer_has(const struct disk_layer *l, uint64_t idx);
/* disk_lazy.c: make [file_offset, + len) of lazy layer l's file fetched (whole clusters). */
int disk_layer_fetch(struct disk_layer *l, disk_fetch_fn fetch, void *arg, uint64_t file_offset,
		     uint64_t len) __must_check;
void disk_layer_set(struct disk_layer *l, uint64_t idx);
/* Durably bump the generation before the first write of this open, so children recorded
 * against the old contents are refused from then on. */
int disk_layer_begin_write(struct disk_layer *l) __must_check;
/* Write [off, off + len) of the layer's data area (an offset in the disk); file_len follows. */
int disk_layer_pwrite(struct disk_layer *l, const void *buf, uint64_t len,
		      uint64_t off) __must_check;
/* fdatasync the data, then write the dirty bitmap pages, then fdatasync again. */
int disk_layer_flush(struct disk_layer *l) __must_check;
/* Seal and write the header (no sync). */
int disk_layer_write_header(struct disk_layer *l) __must_check;
/* Create the empty layer file `path` atomically (it must not exist) above `parent` (NULL for
 * none); `parent` must be open. */
int disk_layer_create(const char *path, uint64_t virtual_len, uint32_t cluster_len,
		      struct disk_layer *parent, struct disk_error *err) __must_check;
/* The same, and the new file's fd (read-write) in *fd_out when it succeeds. */
int disk_layer_create_fd(const char *path, uint64_t virtual_len, uint32_t cluster_len,
			 struct disk_layer *parent, int *fd_out,
			 struct disk_error *err) __must_check;
/* Where the parent of the layer at `child` (a canonical path) with header `h` is: its
 * recorded path, resolved against `child`'s directory unless absolute. */
int disk_layer_parent_path(const char *child, const struct disk_header *h, char *out,
			   size_t out_len) __must_check;

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandboxctl images import --oci: an OCI image layout or a `docker save` archive made into an
 * image (docs/images.md, "Importing an OCI or Docker image"). Every byte of the archive is
 * hostile: the pieces below bound every count, length and total, and every error names what
 * was wrong in one message (struct oci_msg) that the command prints after the archive's name.
 *
 *   oci_json.c   a strict JSON parser (RFC 8259: UTF-8 and escapes checked, duplicate keys
 *                refused), into a small tree
 *   oci_tar.c    a tar reader: ustar, pax extended headers, GNU long names
 *   oci_tree.c   the staging tree: paths beneath its root (openat2 RESOLVE_IN_ROOT), every
 *                directory's depth bounded as it is made, removal that depth cannot stop
 *   oci_layer.c  a layer's tar applied under the staging root: whiteouts, owners, modes, links
 *   oci_archive.c  the archive's files: a tar indexed in place, or a layout's directory
 *   oci_image.c  the archive's index or manifest, the one image for linux/amd64, its blobs'
 *                digests, its config, each layer's stream (gzip, digests)
 *   oci_build.c  the whole import: layers in order, the image's user and exec.conf, mke2fs -d
 */
#ifndef SANDBOXCTL_OCI_H
#define SANDBOXCTL_OCI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client.h"

/* The bounds on what an archive may hold. */
#define OCI_JSON_MAX	   (4u << 20)	 /* an index, a manifest or a config */
#define OCI_JSON_DEPTH	   64		 /* nested arrays and objects */
#define OCI_JSON_ITEMS	   65536	 /* elements of one array */
#define OCI_JSON_KEYS	   4096		 /* members of one object */
#define OCI_JSON_NODES	   (1u << 18)	 /* values in one document */
#define OCI_PATH_MAX	   4096		 /* an entry's path or link target */
#define OCI_NAME_MAX	   255		 /* one path component */
#define OCI_DEPTH_MAX	   128		 /* components of a path in the image */
#define OCI_REAL_DEPTH	   256		 /* a directory's depth, symlinks followed */
#define OCI_PAX_MAX	   (1u << 20)	 /* one pax extended header or GNU long name */
#define OCI_XATTRS_MAX	   32		 /* per entry */
#define OCI_XATTR_VAL_MAX  65536	 /* one xattr's value */
#define OCI_LAYERS_MAX	   128		 /* an image's layers */
#define OCI_ENTRIES_MAX	   2000000u	 /* entries in all the layers together */
#define OCI_RECORDS_MAX	   (256u << 20)	 /* the paths one layer made, kept for its whiteouts */
#define OCI_OUTER_ENTRIES  65536u	 /* files of an archive (docker save's tar) */
#define OCI_UNPACKED_MAX   (64ull << 30) /* the layers' tars together, uncompressed */
#define OCI_CANDIDATES_MAX 64		 /* images an index may list */
#define OCI_JSON_READS_MAX 256		 /* nested indexes read to find them */
#define OCI_JSON_TOTAL_MAX (32u << 20)	 /* JSON read for one import, all files together */

/* What went wrong, one line: the first failure's message is kept. */
struct oci_msg {
	char text[1024];
};
/* Set m's text (unless one is set already) and return `err` (a -errno). */
int oci_fail(struct oci_msg *m, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Set by the signal handler of an import: the long loops stop at the next entry or chunk. */
extern volatile int oci_interrupted;

/* ---- oci_json.c ---- */

enum oci_json_type { OJ_NULL, OJ_FALSE, OJ_TRUE, OJ_NUMBER, OJ_STRING, OJ_ARRAY, OJ_OBJECT };
struct oci_json {
	enum oci_json_type type;
	char *str;  /* a string's bytes (NUL-terminated, may hold a NUL), a number's text */
	size_t len; /* of str */
	struct oci_json *items; /* an array's elements, an object's values */
	char **keys;		/* an object's keys (NUL-terminated, no NUL inside) */
	size_t n;
};
/* Parse the `len` bytes at `text` as one JSON value (whitespace around it), within the bounds
 * above. On failure `m` says where and why; *out is NULL. */
int oci_json_parse(const char *text, size_t len, struct oci_json **out,
		   struct oci_msg *m) __must_check;
void oci_json_free(struct oci_json *v);
/* The member `key` of object `v`, or NULL (also when `v` is not an object). */
const struct oci_json *oci_json_get(const struct oci_json *v, const char *key);
/* A string member without NUL bytes, or NULL. */
const char *oci_json_cstr(const struct oci_json *v);
/* A non-negative integer number (no fraction, no exponent) up to `max`. */
bool oci_json_u64(const struct oci_json *v, uint64_t max, uint64_t *out);

/* ---- oci_tar.c ---- */

/* Read up to `len` bytes: *got 0 at the end. */
typedef int (*oci_read_fn)(void *arg, void *buf, size_t len, size_t *got);
/* Skip `len` bytes (NULL: read and drop them). */
typedef int (*oci_skip_fn)(void *arg, uint64_t len);

struct oci_xattr {
	char name[256];
	uint8_t *value;
	size_t len;
};
struct oci_tar_entry {
	char type; /* '0' file, '1' hard link, '2' symlink, '3' char, '4' block, '5' dir, '6' fifo
		    */
	char path[OCI_PATH_MAX + 1];
	char link[OCI_PATH_MAX + 1]; /* the target of a link */
	uint64_t size;		     /* of a file's data */
	uint32_t mode;		     /* the permission bits and setuid, setgid, sticky */
	uint32_t uid, gid;
	int64_t mtime;
	uint32_t mtime_nsec;
	uint32_t devmajor, devminor;
	struct oci_xattr xattrs[OCI_XATTRS_MAX];
	unsigned nxattrs;
	uint64_t offset; /* of its data in the stream */
};
struct oci_tar {
	oci_read_fn read;
	oci_skip_fn skip;
	void *arg;
	struct oci_msg *msg;
	uint64_t pos;	    /* bytes of the stream consumed */
	uint64_t left, pad; /* the current entry's data not read yet, and its padding */
	unsigned count;	    /* entries so far */
	bool end;
};
void oci_tar_init(struct oci_tar *t, oci_read_fn read, oci_skip_fn skip, void *arg,
		  struct oci_msg *m);
/* The next entry: 1, 0 at the archive's end, or -errno (m says why, naming the entry). The
 * previous entry's unread data is skipped. Free its xattrs with oci_tar_entry_clear. */
int oci_tar_next(struct oci_tar *t, struct oci_tar_entry *e) __must_check;
/* Read the current entry's data: *got 0 at its end. */
int oci_tar_data(struct oci_tar *t, void *buf, size_t len, size_t *got) __must_check;
void oci_tar_entry_clear(struct oci_tar_entry *e);
/* Normalise an entry's path into `out`: no leading "/" or "./", no "." or empty components,
 * ".." taken back; "" is the root. -EPERM when ".." climbs above the root, -ENAMETOOLONG past
 * the bounds. */
int oci_path_norm(const char *in, char *out, size_t out_len) __must_check;

/* ---- oci_tree.c ---- */

/* The staging tree: its root, and the depth of each directory made in it. */
struct oci_tree_dir {
	uint64_t ino;
	unsigned depth1; /* its depth plus one; 0: an empty slot */
};
struct oci_tree {
	int rootfd;
	uint64_t dev;
	uint64_t key[2]; /* of oci_hash, for this import */
	struct oci_tree_dir *dirs;
	size_t cap, n;
};
/* Start the tree at the directory `rootfd` (not owned). */
int oci_tree_init(struct oci_tree *t, int rootfd) __must_check;
void oci_tree_free(struct oci_tree *t);
/* mkdirat(dirfd, name, mode) for a directory of the tree: -ELOOP (nothing made) when it would
 * lie deeper than OCI_REAL_DEPTH below the root; -EEXIST as mkdirat. */
int oci_tree_mkdir(struct oci_tree *t, int dirfd, const char *name, unsigned mode) __must_check;
/* Open the directory `path` (normalised) beneath the root, making missing components (0755,
 * root's, each through oci_tree_mkdir) when `create`. */
int oci_open_dir(struct oci_tree *t, const char *path, bool create) __must_check;
/* openat2 with RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV. */
int oci_openat_in_root(int rootfd, const char *path, int flags, unsigned mode) __must_check;
/* Remove `name` in `dirfd` and all below it, never following a link, however deep. */
int oci_rmtree(int dirfd, const char *name);
/* SipHash-2-4 of `len` bytes under `key`; a fresh key from getrandom. */
uint64_t oci_hash(const uint64_t key[2], const void *data, size_t len);
int oci_hash_key(uint64_t key[2]) __must_check;

/* ---- oci_layer.c ---- */

struct oci_layer_stats {
	uint64_t entries, files, bytes, skipped_devices;
};
/* Apply one layer's tar, read from `t`, under the staging tree `tree`. `what` names the layer
 * in messages ("layer 2 of 3 (sha256:...)"). */
int oci_layer_apply(struct oci_tree *tree, struct oci_tar *t, const char *what,
		    struct oci_layer_stats *st, struct oci_msg *m) __must_check;

/* ---- oci_archive.c: the archive's files ---- */

struct oci_image;
/* Where a file's bytes are: fd (ours to close when `own`), off, size. */
struct oci_blob_at {
	int fd;
	bool own;
	uint64_t off, size;
};
/* Index the tar img->fd into img->outer. */
int oci_archive_index(struct oci_image *img, struct oci_msg *m) __must_check;
void oci_archive_free(struct oci_image *img);
/* Find the file `name` (normalised) of the archive; -ENOENT when it has none, -EPERM for a
 * symlink in a directory layout. */
int oci_archive_open(const struct oci_image *img, const char *name,
		     struct oci_blob_at *b) __must_check;
void oci_blob_close(struct oci_blob_at *b);
/* "sha256:" and 64 lowercase hex digits. */
bool oci_valid_digest(const char *d);
void oci_sha256_hex(const uint8_t md[32], char out[72]);
/* Read the JSON file `name`, its size `want_size` (UINT64_MAX: any) and digest (NULL:
 * unchecked) checked before it is parsed. */
int oci_read_json(const struct oci_image *img, const char *name, const char *digest,
		  uint64_t want_size, struct oci_json **out, struct oci_msg *m) __must_check;

/* ---- oci_image.c ---- */

/* A file of a docker save or OCI layout tar: where its data is. */
struct oci_outer_file {
	char *name; /* normalised */
	char *link; /* a symlink's target (normalised from the root) or a hard link's, or NULL */
	uint64_t off, size;
};
/* The image an archive holds, its blobs located and not yet read. */
struct oci_blob {
	uint64_t off, size;
	char digest[72]; /* "sha256:" and 64 hex digits; "" when only the diff id can check it */
	char diff_id[72];
	char name[OCI_PATH_MAX + 1]; /* in the archive, for messages */
};
struct oci_image {
	int fd;	   /* the archive (a tar), or -1 */
	int dirfd; /* the layout's directory, or -1 */
	struct oci_json *config;
	char config_digest[72];
	struct oci_blob layers[OCI_LAYERS_MAX];
	unsigned nlayers;
	char what[256]; /* "OCI layout" or "docker save archive", and the image's name */
	struct oci_outer_file *outer; /* a tar's files, sorted by name */
	size_t nouter;
	uint64_t unpacked;			 /* the layers' tars so far, uncompressed */
	unsigned json_reads;			 /* indexes and manifests read to find the image */
	char index_read[OCI_JSON_READS_MAX][72]; /* the nested indexes' digests, each read once */
	/* the JSON bytes read for the import (its probes share the count), or NULL: unbounded */
	uint64_t *json_bytes, json_total;
};
/* Open `path` (a directory or a tar), pick its one linux/amd64 image, read and check its
 * manifest and config. */
int oci_image_open(const char *path, struct oci_image *img, struct oci_msg *m) __must_check;
void oci_image_close(struct oci_image *img);
/* Stream layer `i` (checked against its digest and diff id as it is read; gzip undone) into
 * oci_layer_apply under `tree`. */
int oci_image_apply_layer(struct oci_image *img, unsigned i, struct oci_tree *tree,
			  struct oci_layer_stats *st, struct oci_msg *m) __must_check;

/* ---- oci_build.c ---- */

/* Build the image from `archive` into the new image directory `dirfd` (called `dir`): its
 * `rootfs` and `exec.conf`, through a staging tree `dirfd`/staging that is removed whatever
 * happens. `name` labels the file system. Prints progress on stderr. */
int oci_build(const char *archive, const char *name, int dirfd, const char *dir,
	      struct oci_msg *m) __must_check;

#endif

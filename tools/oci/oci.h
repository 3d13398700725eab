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

/* ---- pulling from a registry (docs/images.md, "Pulling from a registry") ----
 *
 *   oci_www_auth.c          a WWW-Authenticate header's challenges (RFC 7235): Bearer or Basic
 *   oci_registry_ref.c      a reference (host[:port]/repo[:tag|@sha256:...])
 *   oci_registry_manifest.c a registry's manifest or index, its descriptors, the linux/amd64 one
 *   oci_registry_http.c     one GET over libcurl: bounded, redirects checked, auth per origin
 *   oci_registry.c          the pull: /v2/, the token, the manifest, the blobs, an OCI layout
 *
 * No globals: two pulls may run at once in two threads (sandboxd's). */
#define OCI_REF_MAX		512	      /* a reference's text */
#define OCI_CHALLENGE_MAX	8192	      /* the WWW-Authenticate headers of one answer */
#define OCI_REALM_MAX		2048	      /* a token realm's URL */
#define OCI_TOKEN_MAX		(16u << 10)   /* a bearer token (Docker Hub's: ~2 KiB) */
#define OCI_TOKEN_ANSWER_MAX	(64u << 10)   /* the token server's JSON */
#define OCI_PULL_LAYERS_DEFAULT (16ull << 30) /* the layers' blobs together, unless told */
#define OCI_REDIRECTS_MAX	5	      /* hops of one GET (a blob store's redirect) */

struct oci_ref {
	bool https;	 /* the scheme to the registry */
	bool loopback;	 /* the host is localhost, 127.0.0.0/8 or [::1] */
	char host[262];	 /* host[:port] as in the URL ("registry-1.docker.io" for Docker Hub) */
	char repo[256];	 /* "library/debian" */
	char tag[129];	 /* "" when by digest */
	char digest[72]; /* "" when by tag */
};
/* Parse `text`: [http://|https://]host[:port]/repo[:tag][@sha256:HEX]; a first component
 * without '.' or ':' and not "localhost" is Docker Hub's repository (docker.io, library/ for
 * one component); the tag defaults to "latest". http:// (the default for a loopback host) is
 * refused for another host unless `insecure`. */
int oci_ref_parse(const char *text, bool insecure, struct oci_ref *r,
		  struct oci_msg *m) __must_check;
/* Is the host of `host` (host[:port], [v6]:port) a loopback one, by its text (no DNS)? */
bool oci_host_loopback(const char *host);

enum oci_auth_scheme { OCI_AUTH_NONE, OCI_AUTH_BASIC, OCI_AUTH_BEARER };
struct oci_challenge {
	enum oci_auth_scheme scheme;
	char realm[OCI_REALM_MAX + 1];
	char service[256];
	char scope[512];
};
/* Parse the WWW-Authenticate value(s) `v` (`len` bytes, several headers joined by ", "): the
 * Bearer challenge if there is one, else the Basic one. -EBADMSG when it does not parse,
 * -ENOTSUP when it offers neither, -E2BIG for a parameter longer than its field. */
int oci_www_auth_parse(const char *v, size_t len, struct oci_challenge *c,
		       struct oci_msg *m) __must_check;

struct oci_desc {
	char media_type[128]; /* "" when the descriptor has none */
	char digest[72];
	uint64_t size;
	char platform[72]; /* an index's: "os/architecture[/variant]", "" for none */
	bool attestation;  /* an index's buildx attestation manifest (not an image) */
};
enum oci_manifest_kind { OCI_MANIFEST_IMAGE, OCI_MANIFEST_INDEX };
struct oci_manifest {
	enum oci_manifest_kind kind;
	char media_type[128];
	struct oci_desc config; /* an image's */
	struct oci_desc *descs; /* an image's layers, or an index's manifests */
	size_t n;
};
/* Parse a manifest's `len` bytes, served as `content_type` (NULL: none), into `man`: an OCI or
 * Docker v2 image manifest (a config, 1 to OCI_LAYERS_MAX layers) or an index (at most
 * OCI_CANDIDATES_MAX manifests). The media type is the document's, which its digest covers;
 * a Content-Type that names another is refused. Free with oci_manifest_free. */
int oci_manifest_parse(const char *body, size_t len, const char *content_type,
		       struct oci_manifest *man, struct oci_msg *m) __must_check;
void oci_manifest_free(struct oci_manifest *man);
/* The image manifest of index `idx` for linux/amd64 (the first listed): its place in *pick. */
int oci_index_choose(const struct oci_manifest *idx, size_t *pick, struct oci_msg *m) __must_check;

/* ---- oci_registry_http.c ---- */

/* One pull's connection: a curl handle reused across its GETs, and the bounds. */
struct oci_http {
	void *curl;	      /* CURL * */
	uint64_t deadline_ms; /* now_ms() past which nothing more is read */
	unsigned connect_timeout_s, stall_s;
	bool insecure;	     /* http:// to hosts not on loopback */
	bool allow_loopback; /* a URL to a loopback host (only when the registry is on one) */
	const char *ca_file; /* NULL: the system's CAs */
};
struct oci_http_get {
	const char *url;
	const char *accept;	 /* an Accept value, or NULL */
	const char *auth_header; /* "Authorization: ...", sent to the origin of `url` only */
	uint64_t max;		 /* bytes of a 2xx body: past it the GET is refused */
	int fd;			 /* a 2xx body written here; -1: into body/len */
	/* what came back */
	long status;
	char *body; /* a 2xx body when fd < 0; an error's first bytes otherwise (NUL-ended) */
	size_t len;
	uint64_t got;		/* the 2xx body's bytes */
	char sha256[72];	/* of the 2xx body */
	char content_type[128]; /* printable */
	char docker_digest[72]; /* Docker-Content-Digest when it is a sha256 digest, else "" */
	char www_auth[OCI_CHALLENGE_MAX + 1];
	size_t www_auth_len;
};
int oci_http_init(struct oci_http *h, struct oci_msg *m) __must_check;
void oci_http_free(struct oci_http *h);
/* GET g->url, following at most OCI_REDIRECTS_MAX redirects to http(s) (http only where the
 * URL's host is loopback or h->insecure), the auth header dropped for another origin. 0 with
 * g->status set for any final answer; -errno with `m` naming `what` for a transport failure,
 * a deadline, a stall, or a body past g->max. Free g->body with free(). */
int oci_http_get(struct oci_http *h, struct oci_http_get *g, const char *what,
		 struct oci_msg *m) __must_check;
/* May a request go to `url`: https, or http to loopback or when insecure; a loopback host only
 * when h->allow_loopback; no user name in it. */
bool oci_http_url_allowed(const struct oci_http *h, const char *url);

/* ---- oci_registry.c ---- */

struct oci_pull_req {
	const char *ref;	     /* see oci_ref_parse */
	const char *user, *password; /* NULL: anonymous. Never logged, never in a message */
	const char *ca_file;	     /* NULL: the system's CAs */
	bool insecure;		     /* http:// to a registry not on loopback */
	bool refuse_loopback; /* a reference to a loopback host refused (sandboxd's tenants) */
	uint64_t layers_max;  /* the layers' bytes (0: OCI_PULL_LAYERS_DEFAULT) */
	unsigned connect_timeout_s; /* 0: 10 s */
	unsigned stall_s;	    /* no byte for this long ends a GET (0: 30 s) */
	unsigned deadline_s;	    /* the whole pull (0: 3600 s) */
	void (*progress)(void *arg, const char *line); /* NULL: silent */
	void *progress_arg;
};
/* Pull q->ref's linux/amd64 image into `layout_dir` (made 0700 when missing; it must be empty)
 * as an OCI image layout (oci-layout, index.json, blobs/sha256/) that oci_build imports: the
 * manifest and every blob checked against its digest and size as it streams. On failure `m`
 * says why in one line (naming the digest of a blob that does not match) and what was written
 * stays for the caller to remove. */
int oci_pull(const struct oci_pull_req *q, const char *layout_dir, struct oci_msg *m) __must_check;

/* ---- oci_install.c: an image installed under $SANDBOX_HOME/images ---- */

/* The image's hash (docs/images.md): SHA-256 of the kernel, the initrd, and the rootfs's size
 * with its first and last MiB; 64 hex digits. */
int oci_image_hash(const char *kernel, const char *initrd, const char *rootfs,
		   char out[65]) __must_check;
/* Copy `src` to the new file `dst`, keeping holes. */
int oci_copy_sparse(const char *src, const char *dst, mode_t mode) __must_check;
/* Remove what imports of `name` killed before they could clean up left (.NAME.PID*). */
void oci_remove_stale_tmp(const char *name);
/* Copy the kernel and initrd into `tmp` and link or copy `rootfs` there (have_rootfs: tmp has
 * its rootfs already, and its hash is computed here), write the hash, swap tmp in as `dst`. */
int oci_image_install(const char *tmp, const char *dst, const char *kernel, const char *initrd,
		      bool have_rootfs, const char *rootfs, char hash[65]) __must_check;
/* Import image `name` from the OCI layout or archive `archive` (docs/images.md): built in a
 * new directory beside its place (made 0700; `prepare`, when not NULL, may first put a layout
 * in it, tmp/layout, and point *archive at it: the pull), then installed. *hash gets its hash.
 * 0, or -errno with m saying why; whatever fails, nothing of it is left. */
int oci_import(const char *name, const char *archive, const char *kernel, const char *initrd,
	       int (*prepare)(void *arg, int dirfd, const char *tmp, const char **archive),
	       void *arg, char hash[65], struct oci_msg *m) __must_check;

#endif

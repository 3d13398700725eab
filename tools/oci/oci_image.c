/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The archive of an imported image (oci.h): an OCI image layout (a directory with oci-layout,
 * index.json and blobs/sha256/, or a tar of one) or a `docker save` tar (manifest.json, each
 * image's config and layer tars; newer Dockers put an OCI layout in it too, which is then
 * what is read). The one image to import is the only one for linux/amd64 among those the
 * index or manifest.json lists (nested indexes followed, attestation manifests skipped); the
 * platform is the config's, which the digest covers, not the index's say-so.
 *
 * Every blob is checked: an OCI descriptor's size and sha256 before its JSON is parsed, a
 * layer's sha256 as it streams (and its uncompressed sha256 against the config's diff_ids).
 * docker save's old layout names layers by ids that are no digests: there the diff_ids check
 * them, and the config's file name (its digest) checks the config. A tar archive is indexed
 * once (names to offsets, bounded); blobs are read from it in place. A directory's files are
 * opened beneath it with no symlink followed.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <zlib.h>

#include "oci.h"

/* blobs/sha256/HEX for a digest. */
static void blob_name(const char *digest, char *out, size_t len)
{
	snprintf(out, len, "blobs/sha256/%s", digest + 7);
}

/* ---- choosing the image ---- */

struct candidate {
	char manifest[72]; /* its digest (OCI), or "" (docker save) */
	uint64_t manifest_size;
	unsigned docker_index; /* docker save: its place in manifest.json */
	char ref[128];	       /* a name for messages: a ref name, a tag (made printable) */
	char platform[64];     /* os/architecture from the config */
};

static bool is_index_type(const char *t)
{
	return t && (strcmp(t, "application/vnd.oci.image.index.v1+json") == 0 ||
		     strcmp(t, "application/vnd.docker.distribution.manifest.list.v2+json") == 0);
}

static bool is_manifest_type(const char *t)
{
	return t && (strcmp(t, "application/vnd.oci.image.manifest.v1+json") == 0 ||
		     strcmp(t, "application/vnd.docker.distribution.manifest.v2+json") == 0);
}

/* Collect the image manifests an index lists, following nested indexes. */
static int walk_index(struct oci_image *img, const struct oci_json *idx, const char *where,
		      unsigned depth, struct candidate *c, unsigned *nc, struct oci_msg *m)
{
	const struct oci_json *mans = oci_json_get(idx, "manifests"), *sv;
	uint64_t v;
	int err;

	sv = oci_json_get(idx, "schemaVersion");
	if (!oci_json_u64(sv, 10, &v) || v != 2)
		return oci_fail(m, -EBADMSG, "%s: not an image index (schemaVersion 2)", where);
	if (!mans || mans->type != OJ_ARRAY)
		return oci_fail(m, -EBADMSG, "%s: no manifests array", where);
	for (size_t i = 0; i < mans->n; i++) {
		const struct oci_json *d = &mans->items[i];
		const char *type = oci_json_cstr(oci_json_get(d, "mediaType"));
		const char *digest = oci_json_cstr(oci_json_get(d, "digest"));
		const struct oci_json *ann = oci_json_get(d, "annotations");
		const char *reftype = oci_json_cstr(oci_json_get(ann, "vnd.docker.reference.type"));
		const char *ref =
			oci_json_cstr(oci_json_get(ann, "org.opencontainers.image.ref.name"));
		uint64_t size;

		if (!oci_valid_digest(digest) ||
		    !oci_json_u64(oci_json_get(d, "size"), OCI_JSON_MAX, &size))
			return oci_fail(
				m, -EBADMSG,
				"%s: manifest %zu: no sha256 digest, or no size (a JSON file "
				"is at most %u bytes)",
				where, i + 1, OCI_JSON_MAX);
		if (reftype && strcmp(reftype, "attestation-manifest") == 0)
			continue; /* buildx's provenance, not an image */
		if (is_index_type(type)) {
			char name[96];
			struct oci_json *sub;

			if (depth >= 2)
				return oci_fail(m, -EBADMSG, "%s: indexes nested too deep", where);
			for (unsigned k = 0; k < img->json_reads; k++)
				if (strcmp(img->index_read[k], digest) == 0)
					/* a nested index listed twice, or in a loop: read once */
					return oci_fail(m, -EBADMSG,
							"%s: the index %.19s listed twice", where,
							digest);
			if (img->json_reads == OCI_JSON_READS_MAX)
				return oci_fail(m, -EFBIG, "%s: more than %u nested indexes", where,
						OCI_JSON_READS_MAX);
			snprintf(img->index_read[img->json_reads++], sizeof(img->index_read[0]),
				 "%s", digest);
			blob_name(digest, name, sizeof(name));
			if ((err = oci_read_json(img, name, digest, size, &sub, m)) < 0)
				return err;
			err = walk_index(img, sub, name, depth + 1, c, nc, m);
			oci_json_free(sub);
			if (err < 0)
				return err;
			continue;
		}
		if (!is_manifest_type(type))
			continue; /* not an image (an artifact, a signature) */
		if (*nc == OCI_CANDIDATES_MAX)
			return oci_fail(m, -EFBIG, "%s: more than %u images", where,
					OCI_CANDIDATES_MAX);
		memset(&c[*nc], 0, sizeof(c[*nc]));
		snprintf(c[*nc].manifest, sizeof(c[*nc].manifest), "%s", digest);
		c[*nc].manifest_size = size;
		snprintf(c[*nc].ref, sizeof(c[*nc].ref), "%s", ref ? ref : "");
		/* the archive's bytes, printed as the import's first line: no terminal escapes */
		printable(c[*nc].ref, strlen(c[*nc].ref), false);
		(*nc)++;
	}
	return 0;
}

/* The os/architecture of a config, as "linux/amd64". */
static void config_platform(const struct oci_json *cfg, char *out, size_t len)
{
	const char *os = oci_json_cstr(oci_json_get(cfg, "os"));
	const char *arch = oci_json_cstr(oci_json_get(cfg, "architecture"));

	snprintf(out, len, "%.20s/%.20s", os ? os : "?", arch ? arch : "?");
}

static bool is_layer_type(const char *t, bool *zstd)
{
	static const char *const ok[] = {
		"application/vnd.oci.image.layer.v1.tar",
		"application/vnd.oci.image.layer.v1.tar+gzip",
		"application/vnd.oci.image.layer.nondistributable.v1.tar",
		"application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
		"application/vnd.docker.image.rootfs.diff.tar.gzip",
		"application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
	};

	*zstd = t && strstr(t, "zstd") != NULL;
	for (size_t i = 0; t && i < sizeof(ok) / sizeof(ok[0]); i++)
		if (strcmp(t, ok[i]) == 0)
			return true;
	return false;
}

/* The config's diff_ids into img->layers[].diff_id (they must be as many as the layers). */
static int take_diff_ids(struct oci_image *img, const char *where, struct oci_msg *m)
{
	const struct oci_json *rootfs = oci_json_get(img->config, "rootfs");
	const struct oci_json *ids = oci_json_get(rootfs, "diff_ids");
	const char *type = oci_json_cstr(oci_json_get(rootfs, "type"));

	if (!type || strcmp(type, "layers") != 0 || !ids || ids->type != OJ_ARRAY)
		return oci_fail(m, -EBADMSG, "%s: no rootfs.diff_ids of type layers", where);
	if (ids->n != img->nlayers)
		return oci_fail(m, -EBADMSG, "%s: %zu diff_ids for %u layers", where, ids->n,
				img->nlayers);
	for (unsigned i = 0; i < img->nlayers; i++) {
		const char *d = oci_json_cstr(&ids->items[i]);

		if (!oci_valid_digest(d))
			return oci_fail(m, -EBADMSG, "%s: diff_ids[%u] is not a sha256 digest",
					where, i);
		snprintf(img->layers[i].diff_id, sizeof(img->layers[i].diff_id), "%s", d);
	}
	return 0;
}

/* An OCI manifest (checked by its digest) into img: its config and layers. */
static int load_manifest(struct oci_image *img, const struct candidate *c, struct oci_msg *m)
{
	char name[96];
	struct oci_json *man;
	const struct oci_json *cfg, *layers;
	const char *cdigest;
	uint64_t csize, v;
	int err;

	blob_name(c->manifest, name, sizeof(name));
	if ((err = oci_read_json(img, name, c->manifest, c->manifest_size, &man, m)) < 0)
		return err;
	cfg = oci_json_get(man, "config");
	layers = oci_json_get(man, "layers");
	cdigest = oci_json_cstr(oci_json_get(cfg, "digest"));
	if (!oci_json_u64(oci_json_get(man, "schemaVersion"), 10, &v) || v != 2 ||
	    !oci_valid_digest(cdigest) ||
	    !oci_json_u64(oci_json_get(cfg, "size"), OCI_JSON_MAX, &csize) || !layers ||
	    layers->type != OJ_ARRAY) {
		err = oci_fail(m, -EBADMSG,
			       "%s: not an image manifest (schemaVersion 2, a config, layers)",
			       name);
		goto out;
	}
	if (layers->n > OCI_LAYERS_MAX || layers->n == 0) {
		err = oci_fail(m, -EFBIG, "%s: %zu layers (1 to %u)", name, layers->n,
			       OCI_LAYERS_MAX);
		goto out;
	}
	for (size_t i = 0; i < layers->n; i++) {
		const struct oci_json *d = &layers->items[i];
		const char *type = oci_json_cstr(oci_json_get(d, "mediaType"));
		const char *digest = oci_json_cstr(oci_json_get(d, "digest"));
		struct oci_blob *b = &img->layers[i];
		bool zstd;

		if (!is_layer_type(type, &zstd)) {
			err = oci_fail(m, -ENOTSUP, "%s: layer %zu: %s%s", name, i + 1,
				       type ? type : "no mediaType",
				       zstd ? ": zstd layers are not supported (no libzstd in this "
					      "build): re-push it with gzip"
					    : ": not a layer type we take (tar, tar+gzip)");
			goto out;
		}
		if (!oci_valid_digest(digest) ||
		    !oci_json_u64(oci_json_get(d, "size"), OCI_UNPACKED_MAX, &b->size)) {
			err = oci_fail(m, -EBADMSG, "%s: layer %zu: no sha256 digest or no size",
				       name, i + 1);
			goto out;
		}
		snprintf(b->digest, sizeof(b->digest), "%s", digest);
		blob_name(digest, b->name, sizeof(b->name));
	}
	img->nlayers = (unsigned)layers->n;
	snprintf(img->config_digest, sizeof(img->config_digest), "%s", cdigest);
	blob_name(cdigest, name, sizeof(name));
	if ((err = oci_read_json(img, name, cdigest, csize, &img->config, m)) < 0)
		goto out;
	err = take_diff_ids(img, name, m);
out:
	oci_json_free(man);
	return err;
}

/* docker save's manifest.json entry `i` into img. */
static int load_docker(struct oci_image *img, const struct oci_json *list, unsigned i,
		       struct oci_msg *m)
{
	const struct oci_json *ent = &list->items[i], *layers = oci_json_get(ent, "Layers");
	const char *cfg = oci_json_cstr(oci_json_get(ent, "Config"));
	char name[OCI_PATH_MAX + 1], digest[72];
	const char *base;
	int err;

	if (!cfg || !layers || layers->type != OJ_ARRAY ||
	    oci_path_norm(cfg, name, sizeof(name)) < 0 || !name[0])
		return oci_fail(m, -EBADMSG, "manifest.json: image %u: no Config or Layers", i + 1);
	/* the config's name is its digest: HEX.json (old) or blobs/sha256/HEX (new) */
	base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
	snprintf(digest, sizeof(digest), "sha256:%.64s", base);
	if (!oci_valid_digest(digest) ||
	    !(strcmp(base + 64, ".json") == 0 ||
	      (base[64] == '\0' && strncmp(name, "blobs/sha256/", 13) == 0)))
		return oci_fail(
			m, -EBADMSG,
			"manifest.json: image %u: its Config %s is not named by its digest, "
			"which would check it",
			i + 1, cfg);
	if (layers->n > OCI_LAYERS_MAX || layers->n == 0)
		return oci_fail(m, -EFBIG, "manifest.json: image %u: %zu layers (1 to %u)", i + 1,
				layers->n, OCI_LAYERS_MAX);
	for (size_t j = 0; j < layers->n; j++) {
		const char *l = oci_json_cstr(&layers->items[j]);
		struct oci_blob *b = &img->layers[j];
		const char *lb;

		if (!l || oci_path_norm(l, b->name, sizeof(b->name)) < 0 || !b->name[0])
			return oci_fail(m, -EBADMSG,
					"manifest.json: image %u: layer %zu: a bad path", i + 1,
					j + 1);
		b->digest[0] = '\0';
		lb = b->name + 13;
		if (strncmp(b->name, "blobs/sha256/", 13) == 0 && strlen(lb) == 64) {
			snprintf(b->digest, sizeof(b->digest), "sha256:%s", lb);
			if (!oci_valid_digest(b->digest))
				b->digest[0] = '\0';
		}
		b->size = UINT64_MAX; /* whatever the archive holds */
	}
	img->nlayers = (unsigned)layers->n;
	snprintf(img->config_digest, sizeof(img->config_digest), "%s", digest);
	if ((err = oci_read_json(img, name, digest, UINT64_MAX, &img->config, m)) < 0)
		return err;
	return take_diff_ids(img, name, m);
}

/* Pick the one linux/amd64 candidate, or say why not, naming them. */
static int choose(struct candidate *c, unsigned nc, const char *where, unsigned *out,
		  struct oci_msg *m)
{
	char list[700] = "";
	unsigned amd64 = 0, pick = 0;
	size_t len = 0;

	for (unsigned i = 0; i < nc; i++)
		if (strcmp(c[i].platform, "linux/amd64") == 0)
			amd64++, pick = i;
	if (amd64 == 1) {
		*out = pick;
		return 0;
	}
	for (unsigned i = 0; i < nc && len < sizeof(list) - 1; i++) {
		int n = snprintf(list + len, sizeof(list) - len, "%s%s%s%s (%.19s)", i ? ", " : "",
				 c[i].platform, c[i].ref[0] ? " " : "", c[i].ref,
				 c[i].manifest[0] ? c[i].manifest : "manifest.json");
		if (n < 0)
			break;
		len += (size_t)n;
	}
	if (nc == 0)
		return oci_fail(m, -ENOENT, "%s lists no image", where);
	if (amd64 == 0)
		return oci_fail(m, -ENOENT,
				"%s has no linux/amd64 image (only linux/amd64 runs "
				"here): %s",
				where, list);
	return oci_fail(m, -EBADMSG, "%s has %u linux/amd64 images, import one at a time: %s",
			where, amd64, list);
}

static int open_oci(struct oci_image *img, struct oci_msg *m)
{
	struct oci_json *layout, *idx;
	struct candidate *c = calloc(OCI_CANDIDATES_MAX, sizeof(*c));
	const char *ver;
	unsigned nc = 0, pick;
	int err;

	if (!c)
		return -ENOMEM;
	if ((err = oci_read_json(img, "oci-layout", NULL, UINT64_MAX, &layout, m)) < 0)
		goto out;
	ver = oci_json_cstr(oci_json_get(layout, "imageLayoutVersion"));
	if (!ver || strncmp(ver, "1.", 2) != 0) {
		/* the message before the tree it quotes is freed (the fuzz target found it) */
		err = oci_fail(m, -ENOTSUP, "oci-layout: imageLayoutVersion %.40s, not 1.x",
			       ver ? ver : "missing");
		oci_json_free(layout);
		goto out;
	}
	oci_json_free(layout);
	if ((err = oci_read_json(img, "index.json", NULL, UINT64_MAX, &idx, m)) < 0)
		goto out;
	err = walk_index(img, idx, "index.json", 0, c, &nc, m);
	oci_json_free(idx);
	if (err < 0)
		goto out;
	/* the platform from each config, which its digest covers */
	for (unsigned i = 0; i < nc; i++) {
		struct oci_image probe = {.fd = img->fd,
					  .dirfd = img->dirfd,
					  .outer = img->outer,
					  .nouter = img->nouter,
					  .json_bytes = img->json_bytes};

		if ((err = load_manifest(&probe, &c[i], m)) < 0) {
			oci_json_free(probe.config);
			goto out;
		}
		config_platform(probe.config, c[i].platform, sizeof(c[i].platform));
		oci_json_free(probe.config);
	}
	if ((err = choose(c, nc, "index.json", &pick, m)) < 0)
		goto out;
	err = load_manifest(img, &c[pick], m);
	snprintf(img->what, sizeof(img->what), "OCI image %.100s%s%.19s", c[pick].ref,
		 c[pick].ref[0] ? " " : "", c[pick].manifest);
out:
	free(c);
	return err;
}

static int open_docker(struct oci_image *img, struct oci_msg *m)
{
	struct oci_json *list;
	struct candidate *c = NULL;
	unsigned pick;
	int err;

	if ((err = oci_read_json(img, "manifest.json", NULL, UINT64_MAX, &list, m)) < 0)
		return err;
	if (list->type != OJ_ARRAY || list->n > OCI_CANDIDATES_MAX) {
		err = oci_fail(m, -EBADMSG, "manifest.json: not an array of at most %u images",
			       OCI_CANDIDATES_MAX);
		goto out;
	}
	if (!(c = calloc(list->n ? list->n : 1, sizeof(*c)))) {
		err = -ENOMEM;
		goto out;
	}
	for (unsigned i = 0; i < list->n; i++) {
		struct oci_image probe = {.fd = img->fd,
					  .dirfd = img->dirfd,
					  .outer = img->outer,
					  .nouter = img->nouter,
					  .json_bytes = img->json_bytes};
		const struct oci_json *tags = oci_json_get(&list->items[i], "RepoTags");
		const char *tag = tags && tags->type == OJ_ARRAY && tags->n
					  ? oci_json_cstr(&tags->items[0])
					  : NULL;

		if ((err = load_docker(&probe, list, i, m)) < 0) {
			oci_json_free(probe.config);
			goto out;
		}
		config_platform(probe.config, c[i].platform, sizeof(c[i].platform));
		snprintf(c[i].ref, sizeof(c[i].ref), "%s", tag ? tag : "");
		printable(c[i].ref, strlen(c[i].ref), false); /* as an index's ref names */
		oci_json_free(probe.config);
	}
	if ((err = choose(c, (unsigned)list->n, "manifest.json", &pick, m)) < 0)
		goto out;
	err = load_docker(img, list, pick, m);
	snprintf(img->what, sizeof(img->what), "docker image %.100s", c[pick].ref);
out:
	free(c);
	oci_json_free(list);
	return err;
}

int oci_image_open(const char *path, struct oci_image *img, struct oci_msg *m)
{
	struct oci_blob_at b;
	struct stat st;
	unsigned char magic[4] = {0};
	int err;

	memset(img, 0, sizeof(*img));
	img->fd = img->dirfd = -1;
	img->json_bytes = &img->json_total;
	if (stat(path, &st) < 0)
		return oci_fail(m, -errno, "%s", strerror(errno));
	if (S_ISDIR(st.st_mode)) {
		if ((img->dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
			return oci_fail(m, -errno, "%s", strerror(errno));
	} else if (S_ISREG(st.st_mode)) {
		if ((img->fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			return oci_fail(m, -errno, "%s", strerror(errno));
		if (pread(img->fd, magic, sizeof(magic), 0) >= 2 && magic[0] == 0x1f &&
		    magic[1] == 0x8b)
			return oci_fail(m, -ENOTSUP,
					"a gzip-compressed archive: decompress it first (gunzip)");
		if ((err = oci_archive_index(img, m)) < 0)
			return err;
	} else {
		return oci_fail(m, -EINVAL, "neither a directory nor a tar file");
	}
	if (oci_archive_open(img, "index.json", &b) == 0) {
		oci_blob_close(&b);
		return open_oci(img, m);
	}
	if (oci_archive_open(img, "manifest.json", &b) == 0) {
		oci_blob_close(&b);
		return open_docker(img, m);
	}
	return oci_fail(m, -EBADMSG,
			"neither an OCI image layout (index.json) nor a docker save "
			"archive (manifest.json)");
}

void oci_image_close(struct oci_image *img)
{
	if (img->fd >= 0)
		close(img->fd);
	if (img->dirfd >= 0)
		close(img->dirfd);
	oci_json_free(img->config);
	img->config = NULL;
	img->fd = img->dirfd = -1;
	oci_archive_free(img);
}

/* ---- a layer's stream: the blob, its digest, gzip, the diff id ---- */

struct layer_stream {
	struct oci_blob_at b;
	uint64_t pos; /* of the blob read so far */
	EVP_MD_CTX *blob_md, *diff_md;
	bool gz, gz_end;
	z_stream z;
	uint8_t in[1 << 16];
	uint64_t out_total, before; /* unpacked: of this layer, of those before it */
	struct oci_msg *m;
	const char *what;
};

static int raw_read(struct layer_stream *s, void *buf, size_t len, size_t *got)
{
	uint64_t left = s->b.size - s->pos;
	ssize_t n;

	*got = 0;
	if (left == 0)
		return 0;
	n = pread(s->b.fd, buf, len < left ? len : (size_t)left, (off_t)(s->b.off + s->pos));
	if (n < 0)
		return oci_fail(s->m, -errno, "%s: %s", s->what, strerror(errno));
	if (n == 0)
		return oci_fail(s->m, -EBADMSG, "%s: truncated", s->what);
	EVP_DigestUpdate(s->blob_md, buf, (size_t)n);
	s->pos += (uint64_t)n;
	*got = (size_t)n;
	return 0;
}

/* After a gzip member: another may follow (pigz, cat a.gz b.gz), or zeros that pad the blob;
 * anything else is refused. */
static int gz_member_end(struct layer_stream *s)
{
	size_t have = s->z.avail_in, n;
	int err;

	memmove(s->in, s->z.next_in, have);
	if (have < 2 && s->pos < s->b.size) {
		if ((err = raw_read(s, s->in + have, sizeof(s->in) - have, &n)) < 0)
			return err;
		have += n;
	}
	s->z.next_in = s->in;
	s->z.avail_in = (uInt)have;
	if (have >= 2 && s->in[0] == 0x1f && s->in[1] == 0x8b) {
		inflateReset(&s->z);
		return 0;
	}
	s->gz_end = true;
	for (;;) {
		for (size_t i = 0; i < have; i++)
			if (s->in[i] != 0)
				return oci_fail(s->m, -EBADMSG, "%s: data after the gzip stream",
						s->what);
		if ((err = raw_read(s, s->in, sizeof(s->in), &have)) < 0)
			return err;
		if (have == 0)
			break;
	}
	s->z.avail_in = 0;
	return 0;
}

static int stream_read(void *arg, void *buf, size_t len, size_t *got)
{
	struct layer_stream *s = arg;
	int err;

	*got = 0;
	if (!s->gz) {
		if ((err = raw_read(s, buf, len, got)) < 0)
			return err;
	} else {
		while (*got == 0 && !s->gz_end) {
			int zr;

			if (s->z.avail_in == 0) {
				size_t n;

				if ((err = raw_read(s, s->in, sizeof(s->in), &n)) < 0)
					return err;
				if (n == 0)
					return oci_fail(s->m, -EBADMSG, "%s: truncated gzip stream",
							s->what);
				s->z.next_in = s->in;
				s->z.avail_in = (uInt)n;
			}
			s->z.next_out = buf;
			s->z.avail_out = (uInt)(len > (1u << 30) ? (1u << 30) : len);
			zr = inflate(&s->z, Z_NO_FLUSH);
			if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR)
				return oci_fail(s->m, -EBADMSG, "%s: bad gzip data: %s", s->what,
						s->z.msg ? s->z.msg : "inflate failed");
			*got = (size_t)((uint8_t *)s->z.next_out - (uint8_t *)buf);
			if (zr == Z_STREAM_END && (err = gz_member_end(s)) < 0)
				return err;
		}
	}
	s->out_total += *got;
	if (s->out_total > OCI_UNPACKED_MAX - s->before)
		return oci_fail(s->m, -EFBIG, "%s: the layers unpack to more than %llu GiB",
				s->what, (unsigned long long)(OCI_UNPACKED_MAX >> 30));
	EVP_DigestUpdate(s->diff_md, buf, *got);
	return 0;
}

int oci_image_apply_layer(struct oci_image *img, unsigned i, struct oci_tree *tree,
			  struct oci_layer_stats *st, struct oci_msg *m)
{
	struct oci_blob *l = &img->layers[i];
	struct layer_stream *s = calloc(1, sizeof(*s));
	char what[200], got[72];
	uint8_t md[32], magic[6] = {0}, buf[4096];
	unsigned mdlen;
	struct oci_tar t;
	int err;

	if (!s)
		return -ENOMEM;
	if (strncmp(l->name, "blobs/sha256/", 13) == 0)
		snprintf(what, sizeof(what), "layer %u of %u (sha256:%.12s)", i + 1, img->nlayers,
			 l->name + 13);
	else
		snprintf(what, sizeof(what), "layer %u of %u (%.100s)", i + 1, img->nlayers,
			 l->name);
	s->m = m;
	s->what = what;
	s->before = img->unpacked;
	s->b.fd = -1;
	if ((err = oci_archive_open(img, l->name, &s->b)) < 0) {
		err = oci_fail(m, err, "%s: %s", what,
			       err == -ENOENT ? "missing from the archive" : strerror(-err));
		goto out;
	}
	if (l->size != UINT64_MAX && s->b.size != l->size) {
		err = oci_fail(m, -EBADMSG, "%s: %llu bytes, its descriptor says %llu", what,
			       (unsigned long long)s->b.size, (unsigned long long)l->size);
		goto out;
	}
	if (pread(s->b.fd, magic, sizeof(magic), (off_t)s->b.off) < 0) {
		err = oci_fail(m, -errno, "%s: %s", what, strerror(errno));
		goto out;
	}
	if (s->b.size >= 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f &&
	    magic[3] == 0xfd) {
		err = oci_fail(m, -ENOTSUP,
			       "%s: zstd-compressed: not supported (no libzstd in this "
			       "build)",
			       what);
		goto out;
	}
	if (s->b.size >= 6 && (memcmp(magic,
				      "\xfd"
				      "7zXZ\0",
				      6) == 0 ||
			       memcmp(magic, "BZh", 3) == 0)) {
		err = oci_fail(m, -ENOTSUP, "%s: xz or bzip2-compressed: not supported", what);
		goto out;
	}
	s->gz = s->b.size >= 2 && magic[0] == 0x1f && magic[1] == 0x8b;
	if (s->gz && inflateInit2(&s->z, 16 + MAX_WBITS) != Z_OK) {
		s->gz = false;
		err = -ENOMEM;
		goto out;
	}
	s->blob_md = EVP_MD_CTX_new();
	s->diff_md = EVP_MD_CTX_new();
	if (!s->blob_md || !s->diff_md || !EVP_DigestInit_ex(s->blob_md, EVP_sha256(), NULL) ||
	    !EVP_DigestInit_ex(s->diff_md, EVP_sha256(), NULL)) {
		err = -ENOMEM;
		goto out;
	}
	oci_tar_init(&t, stream_read, NULL, s, m);
	if ((err = oci_layer_apply(tree, &t, what, st, m)) < 0)
		goto out;
	/* the rest (the tar's end blocks and padding) belongs to the digests too */
	for (size_t n = 1; n;)
		if ((err = stream_read(s, buf, sizeof(buf), &n)) < 0)
			goto out;
	if (s->pos != s->b.size) {
		err = oci_fail(m, -EBADMSG, "%s: truncated", what);
		goto out;
	}
	if (l->digest[0]) {
		EVP_DigestFinal_ex(s->blob_md, md, &mdlen);
		oci_sha256_hex(md, got);
		if (strcmp(got, l->digest) != 0) {
			err = oci_fail(m, -EBADMSG, "%s: digest mismatch: %s expected, %s read",
				       what, l->digest, got);
			goto out;
		}
	}
	EVP_DigestFinal_ex(s->diff_md, md, &mdlen);
	oci_sha256_hex(md, got);
	if (strcmp(got, l->diff_id) != 0)
		err = oci_fail(m, -EBADMSG,
			       "%s: digest mismatch: the config's diff_id %s expected, %s unpacked",
			       what, l->diff_id, got);
	img->unpacked += s->out_total;
out:
	if (s->gz)
		inflateEnd(&s->z);
	EVP_MD_CTX_free(s->blob_md);
	EVP_MD_CTX_free(s->diff_md);
	oci_blob_close(&s->b);
	free(s);
	return err;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The files of an imported image's archive (oci.h): a tar (docker save's, or an OCI layout's)
 * indexed once, names to offsets, sorted (bounded: OCI_OUTER_ENTRIES; a name twice is
 * refused, symlinks and hard links between its files followed a few hops, never out of it),
 * its blobs then read in place; or a layout's directory, whose files are opened beneath it
 * with no symlink followed (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS). JSON files are
 * read whole, their size and digest checked before they are parsed.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "oci.h"

#define LINK_HOPS 8 /* symlinks and hard links followed in a tar archive's index */

static int file_read(void *arg, void *buf, size_t len, size_t *got)
{
	int fd = *(int *)arg;
	ssize_t n;

	do
		n = read(fd, buf, len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	*got = (size_t)n;
	return 0;
}

static int file_skip(void *arg, uint64_t len)
{
	int fd = *(int *)arg;
	struct stat st;
	off_t cur = lseek(fd, 0, SEEK_CUR);

	if (cur < 0 || fstat(fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_size - (uint64_t)cur < len)
		return -EBADMSG;
	return lseek(fd, (off_t)len, SEEK_CUR) < 0 ? -errno : 0;
}

void oci_archive_free(struct oci_image *img)
{
	for (size_t i = 0; i < img->nouter; i++) {
		free(img->outer[i].name);
		free(img->outer[i].link);
	}
	free(img->outer);
	img->outer = NULL;
	img->nouter = 0;
}

/* Index the tar `fd`: its regular files and links by name. */
static int outer_cmp(const void *a, const void *b)
{
	return strcmp(((const struct oci_outer_file *)a)->name,
		      ((const struct oci_outer_file *)b)->name);
}

int oci_archive_index(struct oci_image *img, struct oci_msg *m)
{
	struct oci_tar t;
	struct oci_tar_entry *e = calloc(1, sizeof(*e));
	size_t cap = 0;
	int err;

	if (!e)
		return -ENOMEM;
	int fd = img->fd;

	oci_tar_init(&t, file_read, file_skip, &fd, m);
	while ((err = oci_tar_next(&t, e)) > 0) {
		char name[OCI_PATH_MAX + 1], link[OCI_PATH_MAX + 1] = "";
		struct oci_outer_file *f;

		if (e->type == '5')
			continue;
		if (e->type != '0' && e->type != '1' && e->type != '2') {
			err = oci_fail(m, -EBADMSG, "%s: a special file in the archive", e->path);
			break;
		}
		if (oci_path_norm(e->path, name, sizeof(name)) < 0 || !name[0]) {
			err = oci_fail(m, -EPERM, "%s: a path outside the archive", e->path);
			break;
		}
		if (e->type == '2') {
			char rel[2 * OCI_PATH_MAX + 2], *slash = strrchr(name, '/');

			/* relative to its directory; an absolute target means nothing here */
			snprintf(rel, sizeof(rel), "%.*s%s%s", slash ? (int)(slash - name) : 0,
				 name, slash ? "/" : "", e->link);
			if (e->link[0] == '/' || oci_path_norm(rel, link, sizeof(link)) < 0 ||
			    !link[0]) {
				err = oci_fail(m, -EPERM,
					       "%s: a symlink to %s, outside the archive", e->path,
					       e->link);
				break;
			}
		} else if (e->type == '1' &&
			   (oci_path_norm(e->link, link, sizeof(link)) < 0 || !link[0])) {
			err = oci_fail(m, -EPERM, "%s: a hard link to %s, outside the archive",
				       e->path, e->link);
			break;
		}
		if (img->nouter == OCI_OUTER_ENTRIES) {
			err = oci_fail(m, -EFBIG, "more than %u files", OCI_OUTER_ENTRIES);
			break;
		}
		if (img->nouter == cap) {
			size_t c = cap ? cap * 2 : 64;
			struct oci_outer_file *o = realloc(img->outer, c * sizeof(*o));

			if (!o) {
				err = -ENOMEM;
				break;
			}
			img->outer = o;
			cap = c;
		}
		f = &img->outer[img->nouter];
		f->off = e->offset;
		f->size = e->size;
		f->name = strdup(name);
		f->link = link[0] ? strdup(link) : NULL;
		img->nouter++;
		if (!f->name || (link[0] && !f->link)) {
			err = -ENOMEM;
			break;
		}
	}
	if (err == 0 && img->nouter) {
		/* sorted, for lookups; a name twice would mean two files to two readers */
		qsort(img->outer, img->nouter, sizeof(img->outer[0]), outer_cmp);
		for (size_t i = 1; i < img->nouter && !err; i++)
			if (strcmp(img->outer[i - 1].name, img->outer[i].name) == 0)
				err = oci_fail(m, -EBADMSG, "%s: in the archive twice",
					       img->outer[i].name);
	}
	oci_tar_entry_clear(e);
	free(e);
	return err < 0 ? err : 0;
}

/* Find the file `name` (normalised) of the archive. -ENOENT when it has none. */
int oci_archive_open(const struct oci_image *img, const char *name, struct oci_blob_at *b)
{
	if (img->dirfd >= 0) {
		struct open_how how = {
			.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
			.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
		};
		struct stat st;
		long fd = syscall(SYS_openat2, img->dirfd, name, &how, sizeof(how));

		if (fd < 0)
			return errno == ELOOP ? -EPERM : -errno;
		if (fstat((int)fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			close((int)fd);
			return -EINVAL;
		}
		*b = (struct oci_blob_at){.fd = (int)fd, .own = true, .size = (uint64_t)st.st_size};
		return 0;
	}
	for (int hop = 0; hop <= LINK_HOPS; hop++) {
		const struct oci_outer_file key = {.name = (char *)name}, *f;

		f = img->nouter ? bsearch(&key, img->outer, img->nouter, sizeof(key), outer_cmp)
				: NULL;
		if (!f)
			return -ENOENT;
		if (!f->link) {
			*b = (struct oci_blob_at){.fd = img->fd, .off = f->off, .size = f->size};
			return 0;
		}
		name = f->link;
	}
	return -ELOOP;
}

void oci_blob_close(struct oci_blob_at *b)
{
	if (b->own && b->fd >= 0)
		close(b->fd);
	b->fd = -1;
}

bool oci_valid_digest(const char *d)
{
	if (!d || strncmp(d, "sha256:", 7) != 0 || strlen(d) != 71)
		return false;
	for (int i = 7; i < 71; i++)
		if (!((d[i] >= '0' && d[i] <= '9') || (d[i] >= 'a' && d[i] <= 'f')))
			return false;
	return true;
}

void oci_sha256_hex(const uint8_t md[32], char out[72])
{
	memcpy(out, "sha256:", 7);
	for (int i = 0; i < 32; i++)
		snprintf(out + 7 + 2 * i, 3, "%02x", md[i]);
}

/* Read the JSON file `name`: its size `want_size` (UINT64_MAX: any) and digest `digest`
 * (NULL: unchecked) checked before it is parsed. */
int oci_read_json(const struct oci_image *img, const char *name, const char *digest,
		  uint64_t want_size, struct oci_json **out, struct oci_msg *m)
{
	struct oci_blob_at b;
	char *buf, got[72];
	uint8_t md[32];
	int err;

	*out = NULL;
	if ((err = oci_archive_open(img, name, &b)) < 0)
		return oci_fail(m, err, "%s: %s", name,
				err == -ENOENT	? "missing from the archive"
				: err == -EPERM ? "a symlink (not followed)"
						: strerror(-err));
	if (b.size > OCI_JSON_MAX) {
		oci_blob_close(&b);
		return oci_fail(m, -EFBIG, "%s: %llu bytes, more than the %u a JSON file may have",
				name, (unsigned long long)b.size, OCI_JSON_MAX);
	}
	if (want_size != UINT64_MAX && b.size != want_size) {
		oci_blob_close(&b);
		return oci_fail(m, -EBADMSG, "%s: %llu bytes, its descriptor says %llu", name,
				(unsigned long long)b.size, (unsigned long long)want_size);
	}
	if (img->json_bytes) {
		/* each file is bounded, and so is their number, but not what parsing them all
		 * costs: bound the sum */
		if (b.size > OCI_JSON_TOTAL_MAX - *img->json_bytes) {
			oci_blob_close(&b);
			return oci_fail(m, -EFBIG, "%s: more than %u MiB of JSON in all", name,
					OCI_JSON_TOTAL_MAX >> 20);
		}
		*img->json_bytes += b.size;
	}
	if (!(buf = malloc(b.size + 1))) {
		oci_blob_close(&b);
		return -ENOMEM;
	}
	for (uint64_t have = 0; have < b.size;) {
		ssize_t n = pread(b.fd, buf + have, b.size - have, (off_t)(b.off + have));

		if (n <= 0) {
			err = n < 0 ? -errno : -EBADMSG;
			oci_blob_close(&b);
			free(buf);
			return oci_fail(m, err, "%s: cannot read: %s", name,
					n < 0 ? strerror(errno) : "truncated");
		}
		have += (uint64_t)n;
	}
	oci_blob_close(&b);
	if (digest) {
		SHA256((const unsigned char *)buf, b.size, md);
		oci_sha256_hex(md, got);
		if (strcmp(got, digest) != 0) {
			free(buf);
			return oci_fail(m, -EBADMSG, "%s: digest mismatch: %s expected, %s read",
					name, digest, got);
		}
	}
	err = oci_json_parse(buf, b.size, out, m);
	free(buf);
	if (err < 0 && m->text[0] && strncmp(m->text, "bad JSON", 8) == 0) {
		char text[sizeof(m->text)];

		memcpy(text, m->text, sizeof(text));
		snprintf(m->text, sizeof(m->text), "%.300s: %.700s", name, text);
	}
	return err;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One layer file (docs/disk-format.md): its header, checked on open and sealed on write; its
 * allocation bitmap, kept in memory and written back on flush; its identity, which children
 * record; and creating a new one atomically. disk.c builds chains of these.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/sha.h>

#include "disk.h"

int disk_fail(struct disk_error *err, int ret, const char *fmt, ...)
{
	va_list ap;

	if (err) {
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return ret;
}

int disk_pread_full(int fd, void *buf, uint64_t len, uint64_t off)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = pread(fd, p, len > (1u << 30) ? (1u << 30) : len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* the file ends before the bitmap says it does */
		p += n;
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

int disk_pwrite_full(int fd, const void *buf, uint64_t len, uint64_t off)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len > (1u << 30) ? (1u << 30) : len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

/* Convert every integer field between little-endian and host order (the same operation both
 * ways). */
static void hdr_swap(struct disk_header *h)
{
	h->version = le32toh(h->version);
	h->header_len = le32toh(h->header_len);
	h->cluster_len = le32toh(h->cluster_len);
	h->flags = le32toh(h->flags);
	h->virtual_len = le64toh(h->virtual_len);
	h->bitmap_offset = le64toh(h->bitmap_offset);
	h->bitmap_len = le64toh(h->bitmap_len);
	h->data_offset = le64toh(h->data_offset);
	h->generation = le64toh(h->generation);
	h->parent_kind = le32toh(h->parent_kind);
	h->parent_path_len = le32toh(h->parent_path_len);
	h->parent_len = le64toh(h->parent_len);
	h->parent_mtime_ns = le64toh(h->parent_mtime_ns);
	h->parent_generation = le64toh(h->parent_generation);
}

void disk_header_seal(struct disk_header *h)
{
	SHA256((const uint8_t *)h, offsetof(struct disk_header, checksum), h->checksum);
}

static uint64_t round_up(uint64_t v, uint64_t align)
{
	return (v + align - 1) / align * align;
}

/* Where the bitmap and data of a layer of this size go. False if the size is impossible. */
static bool layout_compute(uint64_t virtual_len, uint32_t cluster_len, uint64_t *nclusters,
			   uint64_t *bitmap_len, uint64_t *data_offset)
{
	uint64_t n;

	if (cluster_len < DISK_CLUSTER_MIN || cluster_len > DISK_CLUSTER_MAX ||
	    (cluster_len & (cluster_len - 1)))
		return false;
	if (virtual_len < DISK_SECTOR_LEN)
		return false;
	n = virtual_len / cluster_len + (virtual_len % cluster_len != 0);
	if (n > (uint64_t)DISK_BITMAP_MAX_LEN * 8)
		return false;
	*nclusters = n;
	*bitmap_len = round_up((n + 7) / 8, DISK_BITMAP_ALIGN);
	*data_offset = round_up(DISK_HEADER_LEN + *bitmap_len, cluster_len);
	return true;
}

static void put_le64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

/*
 * A raw image's identity: its size, its mtime and a hash of its first and last `sample`
 * bytes. A full hash would make every open cost a read of the whole image;
 * docs/disk-format.md says what this catches and what it does not. v1 sampled 1 MiB at each
 * end, which cost ~0.2 s per open in the emulated host (SHA-256 runs at ~10 MB/s there); v2
 * samples 64 KiB, which still holds ext4's superblock and first group descriptors.
 */
static int raw_identity(struct disk_layer *l, const char *tag, size_t tag_len, uint64_t sample,
			uint8_t out[DISK_HASH_LEN])
{
	uint8_t material[32 + 16 + 2 * DISK_HASH_LEN];
	uint8_t *buf;
	int r;

	if (tag_len > 32)
		return -EINVAL;
	if (l->virtual_len < sample)
		sample = l->virtual_len;
	buf = malloc(sample);
	if (!buf)
		return -ENOMEM;
	memcpy(material, tag, tag_len);
	put_le64(material + tag_len, l->virtual_len);
	put_le64(material + tag_len + 8, l->mtime_ns);
	r = disk_pread_full(l->fd, buf, sample, 0);
	if (r < 0)
		goto out;
	SHA256(buf, sample, material + tag_len + 16);
	r = disk_pread_full(l->fd, buf, sample, l->virtual_len - sample);
	if (r < 0)
		goto out;
	SHA256(buf, sample, material + tag_len + 16 + DISK_HASH_LEN);
	SHA256(material, tag_len + 16 + 2 * DISK_HASH_LEN, out);
out:
	free(buf);
	return r;
}

int disk_layer_raw_identity_v2(struct disk_layer *l, uint8_t out[DISK_HASH_LEN])
{
	static const char tag[] = "sandbox-disk raw v2";

	if (!l->raw)
		return -EINVAL;
	return raw_identity(l, tag, sizeof(tag), DISK_RAW_SAMPLE_LEN, out);
}

int disk_layer_raw_identity_v1(struct disk_layer *l, uint8_t out[DISK_HASH_LEN])
{
	static const char tag[] = "sandbox-disk raw v1";

	if (!l->raw)
		return -EINVAL;
	return raw_identity(l, tag, sizeof(tag), DISK_RAW_V1_SAMPLE_LEN, out);
}

/* A layer's identity covers its id, its generation (bumped before any write), its geometry
 * and its parent's identity, so it changes when anything below it changes. */
static void layer_identity(const struct disk_header *h, uint8_t out[DISK_HASH_LEN])
{
	static const char tag[] = "sandbox-disk layer v1";
	uint8_t m[sizeof(tag) + DISK_ID_LEN + 8 + 4 + 8 + 4 + DISK_HASH_LEN], *p = m;
	uint32_t v32;

	memcpy(p, tag, sizeof(tag));
	p += sizeof(tag);
	memcpy(p, h->layer_id, DISK_ID_LEN);
	p += DISK_ID_LEN;
	put_le64(p, h->generation);
	p += 8;
	v32 = htole32(h->cluster_len);
	memcpy(p, &v32, 4);
	p += 4;
	put_le64(p, h->virtual_len);
	p += 8;
	v32 = htole32(h->parent_kind);
	memcpy(p, &v32, 4);
	p += 4;
	memcpy(p, h->parent_identity, DISK_HASH_LEN);
	SHA256(m, sizeof(m), out);
}

int disk_layer_identity(struct disk_layer *l, uint8_t out[DISK_HASH_LEN])
{
	int r;

	if (!l->raw) {
		layer_identity(&l->hdr, out);
		return 0;
	}
	if (!l->identity_known) {
		/* by content where a file beside it vouches for its bytes (disk_raw_id.c) */
		if (disk_layer_raw_identity_v3(l, l->identity) < 0 &&
		    (r = disk_layer_raw_identity_v2(l, l->identity)) < 0)
			return r;
		l->identity_known = true;
	}
	memcpy(out, l->identity, DISK_HASH_LEN);
	return 0;
}

bool disk_all_zero(const void *buf, size_t len)
{
	const uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		if (p[i])
			return false;
	return true;
}

/*
 * A header torn by a power cut. disk_layer_begin_write rewrites the header with only the
 * generation changed (sector 0) and so the checksum (sector 7), and a disk keeps no more than
 * 512-byte sectors whole: a cut during that write can leave the new generation under the old
 * checksum, or the old under the new. Either way the header is the old one or the new one
 * whole, and no data was written under the new one (the data waits for that write's
 * fdatasync). So when the checksum fails, try the generation's two neighbours: a match is that
 * header (the older generation keeps the layer's children valid, which they are; the newer
 * refuses them, which is merely cautious). `h` is in on-disk order; true when it was repaired.
 * Found by the crash test (tests/integration/crash.sh): without this, a cut there lost the
 * whole layer to "corrupt header".
 */
static bool hdr_untear_generation(struct disk_header *h)
{
	struct disk_header t = *h;
	uint8_t sum[DISK_HASH_LEN];
	uint64_t gen = le64toh(h->generation);

	for (int delta = -1; delta <= 1; delta += 2) {
		t.generation = htole64(gen + (uint64_t)(int64_t)delta);
		SHA256((const uint8_t *)&t, offsetof(struct disk_header, checksum), sum);
		if (!memcmp(sum, t.checksum, DISK_HASH_LEN)) {
			h->generation = t.generation;
			return true;
		}
	}
	return false;
}

/* Check the header read from `path` (`h` in on-disk order on entry, host order on return). */
static int hdr_check(struct disk_header *h, const char *path, struct disk_error *err)
{
	uint8_t sum[DISK_HASH_LEN];
	uint64_t n, bitmap_len, data_offset;

	if (memcmp(h->magic, DISK_MAGIC, DISK_MAGIC_LEN))
		return disk_fail(err, -EMEDIUMTYPE, "%s: not a layer (no %s magic)", path,
				 DISK_MAGIC);
	if (le32toh(h->version) != DISK_VERSION)
		return disk_fail(err, -EPROTONOSUPPORT,
				 "%s: layer format version %u is not supported (this build reads "
				 "version %u)",
				 path, le32toh(h->version), DISK_VERSION);
	SHA256((const uint8_t *)h, offsetof(struct disk_header, checksum), sum);
	if (memcmp(sum, h->checksum, DISK_HASH_LEN) && !hdr_untear_generation(h))
		return disk_fail(err, -EBADMSG, "%s: corrupt header (checksum mismatch)", path);
	hdr_swap(h);
	if (h->header_len != DISK_HEADER_LEN)
		return disk_fail(err, -EINVAL, "%s: header length %u, expected %u", path,
				 h->header_len, DISK_HEADER_LEN);
	if (h->flags & ~DISK_FLAGS_KNOWN)
		return disk_fail(err, -EPROTONOSUPPORT, "%s: unknown feature flags 0x%x", path,
				 h->flags & ~DISK_FLAGS_KNOWN);
	if (h->cluster_len < DISK_CLUSTER_MIN || h->cluster_len > DISK_CLUSTER_MAX ||
	    (h->cluster_len & (h->cluster_len - 1)))
		return disk_fail(err, -EINVAL,
				 "%s: cluster size %u is not a power of 2 from 4 KiB to 2 MiB",
				 path, h->cluster_len);
	if (h->virtual_len < DISK_SECTOR_LEN)
		return disk_fail(err, -EINVAL,
				 "%s: virtual size %llu is smaller than a 512-byte sector", path,
				 (unsigned long long)h->virtual_len);
	if (!layout_compute(h->virtual_len, h->cluster_len, &n, &bitmap_len, &data_offset))
		return disk_fail(err, -EINVAL,
				 "%s: virtual size %llu needs a bitmap over the %u MiB limit", path,
				 (unsigned long long)h->virtual_len, DISK_BITMAP_MAX_LEN >> 20);
	if (h->bitmap_offset != DISK_HEADER_LEN || h->bitmap_len != bitmap_len ||
	    h->data_offset != data_offset)
		return disk_fail(err, -EINVAL,
				 "%s: bitmap at %llu+%llu and data at %llu do not match the layout "
				 "of its size (%llu+%llu, %llu)",
				 path, (unsigned long long)h->bitmap_offset,
				 (unsigned long long)h->bitmap_len,
				 (unsigned long long)h->data_offset,
				 (unsigned long long)DISK_HEADER_LEN,
				 (unsigned long long)bitmap_len, (unsigned long long)data_offset);
	if (h->parent_kind > DISK_PARENT_LAYER)
		return disk_fail(err, -EINVAL, "%s: unknown parent kind %u", path, h->parent_kind);
	if ((h->parent_kind == DISK_PARENT_NONE) != (h->parent_path_len == 0) ||
	    h->parent_path_len > DISK_PARENT_PATH_MAX ||
	    memchr(h->parent_path, 0, h->parent_path_len) ||
	    !disk_all_zero(h->parent_path + h->parent_path_len,
			   DISK_PARENT_PATH_MAX - h->parent_path_len))
		return disk_fail(err, -EINVAL, "%s: malformed parent path", path);
	if (!disk_all_zero(h->reserved, sizeof(h->reserved)))
		return disk_fail(err, -EINVAL, "%s: reserved header bytes are set", path);
	return 0;
}

/* Read the bitmap and check it against the file: no bits past the last cluster, no cluster
 * whose data lies past the end of the file. */
static int bitmap_load(struct disk_layer *l, struct disk_error *err)
{
	const struct disk_header *h = &l->hdr;
	uint64_t used = (l->nclusters + 7) / 8, last, end;
	int r;

	if (l->file_len < h->bitmap_offset + h->bitmap_len)
		return disk_fail(err, -ENODATA,
				 "%s: truncated bitmap: the file has %llu bytes, the bitmap ends "
				 "at %llu",
				 l->path, (unsigned long long)l->file_len,
				 (unsigned long long)(h->bitmap_offset + h->bitmap_len));
	l->bitmap = malloc(h->bitmap_len);
	l->dirty = calloc(h->bitmap_len / DISK_BITMAP_ALIGN, 1);
	if (!l->bitmap || !l->dirty)
		return disk_fail(err, -ENOMEM, "%s: no memory for the bitmap", l->path);
	r = disk_pread_full(l->fd, l->bitmap, h->bitmap_len, h->bitmap_offset);
	if (r < 0)
		return disk_fail(err, r, "%s: reading the bitmap: %s", l->path, strerror(-r));
	if ((l->nclusters % 8 && (l->bitmap[used - 1] >> (l->nclusters % 8))) ||
	    !disk_all_zero(l->bitmap + used, h->bitmap_len - used))
		return disk_fail(err, -EINVAL, "%s: corrupt bitmap: bits set past cluster %llu",
				 l->path, (unsigned long long)l->nclusters);
	for (last = used; last > 0 && !l->bitmap[last - 1]; last--)
		;
	if (!last)
		return 0;
	/* The highest cluster held: the top bit set in the last non-zero byte. */
	last = (last - 1) * 8 + (31 - (uint64_t)__builtin_clz(l->bitmap[last - 1]));
	end = h->data_offset + (last + 1) * h->cluster_len;
	if (end > h->data_offset + h->virtual_len)
		end = h->data_offset + h->virtual_len;
	if (l->file_len < end)
		return disk_fail(err, -ENODATA,
				 "%s: truncated data: cluster %llu ends at %llu, the file has %llu "
				 "bytes",
				 l->path, (unsigned long long)last, (unsigned long long)end,
				 (unsigned long long)l->file_len);
	return 0;
}

static int layer_read_header(struct disk_layer *l, struct disk_error *err)
{
	uint8_t *raw = (uint8_t *)&l->hdr;
	uint64_t got = l->file_len < DISK_HEADER_LEN ? l->file_len : DISK_HEADER_LEN;
	int r;

	memset(&l->hdr, 0, sizeof(l->hdr));
	r = disk_pread_full(l->fd, raw, got, 0);
	if (r < 0)
		return disk_fail(err, r, "%s: reading the header: %s", l->path, strerror(-r));
	if (got < DISK_MAGIC_LEN || memcmp(raw, DISK_MAGIC, DISK_MAGIC_LEN))
		return disk_fail(err, -EMEDIUMTYPE, "%s: not a layer (no %s magic)", l->path,
				 DISK_MAGIC);
	if (got < DISK_HEADER_LEN)
		return disk_fail(err, -EBADMSG, "%s: corrupt header: the file has only %llu bytes",
				 l->path, (unsigned long long)got);
	r = hdr_check(&l->hdr, l->path, err);
	if (r < 0)
		return r;
	l->virtual_len = l->hdr.virtual_len;
	l->cluster_len = l->hdr.cluster_len;
	l->nclusters = l->virtual_len / l->cluster_len + (l->virtual_len % l->cluster_len != 0);
	return bitmap_load(l, err);
}

static int layer_open(struct disk_layer *l, int fd, const char *path, unsigned lflags,
		      struct disk_error *err)
{
	bool writable = lflags & DISK_LAYER_WRITABLE;
	struct stat st;
	int r;

	memset(l, 0, sizeof(*l));
	l->fd = fd;
	l->path = realpath(path, NULL);
	if (!l->path) {
		r = -errno;
		return disk_fail(err, r, "%s: %s", path,
				 r == -ENOENT ? "no such file" : strerror(-r));
	}
	/* A parent path comes from a header a VMM could have written: never open a device, a
	 * FIFO or a tty (an open alone can arm a watchdog or block for ever). */
	if (l->fd < 0 && stat(l->path, &st) == 0 && !S_ISREG(st.st_mode))
		return disk_fail(err, -EINVAL, "%s: not a regular file", l->path);
	if (l->fd < 0)
		l->fd = open(l->path,
			     (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (l->fd < 0) {
		r = -errno;
		return disk_fail(err, r, "%s: %s", l->path, strerror(-r));
	}
	if (fstat(l->fd, &st) < 0 || !S_ISREG(st.st_mode))
		return disk_fail(err, -EINVAL, "%s: not a regular file", l->path);
	if (!(lflags & DISK_LAYER_NOLOCK) &&
	    flock(l->fd, (writable ? LOCK_EX : LOCK_SH) | LOCK_NB) < 0) {
		r = errno == EWOULDBLOCK ? -EBUSY : -errno;
		return disk_fail(err, r, "%s: %s", l->path,
				 r == -EBUSY ? (writable ? "in use by another process"
							 : "open for writing by another process")
					     : strerror(-r));
	}
	l->writable = writable;
	l->file_len = (uint64_t)st.st_size;
	l->mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec;
	if (!(lflags & DISK_LAYER_RAW))
		return layer_read_header(l, err);
	l->raw = true;
	l->virtual_len = l->file_len;
	if (l->virtual_len < DISK_SECTOR_LEN)
		return disk_fail(err, -EINVAL,
				 "%s: image of %llu bytes is smaller than a 512-byte sector",
				 l->path, (unsigned long long)l->virtual_len);
	return 0;
}

int disk_layer_open(struct disk_layer *l, const char *path, unsigned lflags, struct disk_error *err)
{
	return disk_layer_open_fd(l, -1, path, lflags, err);
}

int disk_layer_open_fd(struct disk_layer *l, int fd, const char *path, unsigned lflags,
		       struct disk_error *err)
{
	int r = layer_open(l, fd, path, lflags, err);

	if (r < 0)
		disk_layer_close(l);
	return r;
}

void disk_layer_close(struct disk_layer *l)
{
	if (l->fd >= 0)
		close(l->fd);
	free(l->path);
	free(l->bitmap);
	free(l->dirty);
	free(l->fetched);
	memset(l, 0, sizeof(*l));
	l->fd = -1;
}

bool disk_layer_has(const struct disk_layer *l, uint64_t idx)
{
	return l->raw || (l->bitmap[idx / 8] >> (idx % 8)) & 1;
}

void disk_layer_set(struct disk_layer *l, uint64_t idx)
{
	l->bitmap[idx / 8] |= (uint8_t)(1u << (idx % 8));
	l->dirty[idx / 8 / DISK_BITMAP_ALIGN] = 1;
}

int disk_layer_write_header(struct disk_layer *l)
{
	struct disk_header h = l->hdr;

	hdr_swap(&h);
	disk_header_seal(&h);
	return disk_pwrite_full(l->fd, &h, sizeof(h), 0);
}

int disk_layer_begin_write(struct disk_layer *l)
{
	int r;

	if (l->written)
		return 0;
	l->hdr.generation++;
	r = disk_layer_write_header(l);
	/* The new generation is on disk before any data changes: a crash in between leaves
	 * children refused although nothing changed, never accepted although something did. */
	if (!r && fdatasync(l->fd) < 0)
		r = -errno;
	if (r < 0) {
		l->hdr.generation--;
		return r;
	}
	l->written = true;
	return 0;
}

int disk_layer_pwrite(struct disk_layer *l, const void *buf, uint64_t len, uint64_t off)
{
	uint64_t pos = l->hdr.data_offset + off;
	int r = disk_pwrite_full(l->fd, buf, len, pos);

	if (r < 0)
		return r;
	l->unsynced = true;
	if (pos + len > l->file_len)
		l->file_len = pos + len;
	return 0;
}

/*
 * Crash consistency. A bit set on disk must never point at data that is not: the bit would
 * expose whatever the file held there (zeros, or a torn cluster) instead of the lower layers'
 * data. So the data goes first (fdatasync), then the bitmap pages (fdatasync). A crash before
 * the second sync loses only writes the guest was not yet told were durable: their bits are
 * clear on disk and the lower layers show through, as before the writes. Every cluster is
 * written whole when it is first allocated (copy-up), so stale bytes in a cluster whose bit
 * never reached the disk are overwritten before its bit is ever set. Bits are only ever set
 * here, so a torn bitmap page write is harmless: any subset of new bits is a valid state.
 */
int disk_layer_flush(struct disk_layer *l)
{
	uint64_t pages = l->hdr.bitmap_len / DISK_BITMAP_ALIGN, i, j;
	bool dirty = false;
	int r;

	for (i = 0; i < pages && !dirty; i++)
		dirty = l->dirty[i];
	if (!l->unsynced && !dirty)
		return 0;
	if (fdatasync(l->fd) < 0)
		return -errno;
	for (i = 0; i < pages; i = j) {
		if (!l->dirty[i]) {
			j = i + 1;
			continue;
		}
		for (j = i; j < pages && l->dirty[j]; j++)
			;
		r = disk_pwrite_full(l->fd, l->bitmap + i * DISK_BITMAP_ALIGN,
				     (j - i) * DISK_BITMAP_ALIGN,
				     l->hdr.bitmap_offset + i * DISK_BITMAP_ALIGN);
		if (r < 0)
			return r;
	}
	if (dirty && fdatasync(l->fd) < 0)
		return -errno;
	memset(l->dirty, 0, pages);
	l->unsynced = false;
	return 0;
}

/* The path of canonical `to` relative to the canonical directory `from_dir`. */
static int rel_path(const char *from_dir, const char *to, char *out, size_t out_len)
{
	size_t i, common = 0, ups = 0, pos = 0;
	char from[PATH_MAX + 1];
	int n;

	n = snprintf(from, sizeof(from), "%s%s", from_dir,
		     from_dir[strlen(from_dir) - 1] == '/' ? "" : "/");
	if (n < 0 || (size_t)n >= sizeof(from))
		return -ENAMETOOLONG;
	/* `common` ends just after the last '/' of the longest shared run of whole components. */
	for (i = 0; from[i] && from[i] == to[i]; i++)
		if (from[i] == '/')
			common = i + 1;
	for (i = common; from[i]; i++)
		ups += from[i] == '/';
	out[0] = 0;
	for (i = 0; i < ups; i++, pos += 3) {
		if (pos + 3 >= out_len)
			return -ENAMETOOLONG;
		memcpy(out + pos, "../", 4);
	}
	n = snprintf(out + pos, out_len - pos, "%s", to + common);
	if (n < 0 || (size_t)n >= out_len - pos)
		return -ENAMETOOLONG;
	return 0;
}

int disk_layer_parent_path(const char *child, const struct disk_header *h, char *out,
			   size_t out_len)
{
	const char *slash = strrchr(child, '/');
	int n;

	if (h->parent_path[0] == '/')
		n = snprintf(out, out_len, "%.*s", (int)h->parent_path_len,
			     (const char *)h->parent_path);
	else
		n = snprintf(out, out_len, "%.*s/%.*s", (int)(slash ? slash - child : 0), child,
			     (int)h->parent_path_len, (const char *)h->parent_path);
	return n < 0 || (size_t)n >= out_len ? -ENAMETOOLONG : 0;
}

/* Fill the new layer's header `h` (host order): geometry, a fresh id, and `parent`. */
static int hdr_build(struct disk_header *h, const char *path, uint64_t virtual_len,
		     uint32_t cluster_len, struct disk_layer *parent, struct disk_error *err)
{
	uint64_t n;
	char *dir, *copy;
	int r;

	memset(h, 0, sizeof(*h));
	memcpy(h->magic, DISK_MAGIC, DISK_MAGIC_LEN);
	h->version = DISK_VERSION;
	h->header_len = DISK_HEADER_LEN;
	h->cluster_len = cluster_len;
	h->virtual_len = virtual_len;
	h->bitmap_offset = DISK_HEADER_LEN;
	if (!layout_compute(virtual_len, cluster_len, &n, &h->bitmap_len, &h->data_offset))
		return disk_fail(err, -EINVAL,
				 "%s: a disk of %llu bytes with %u-byte clusters is not possible "
				 "(at least 512 bytes; clusters a power of 2 from 4 KiB to 2 MiB; "
				 "at most 2^28 of them)",
				 path, (unsigned long long)virtual_len, cluster_len);
	if (getrandom(h->layer_id, DISK_ID_LEN, 0) != DISK_ID_LEN)
		return disk_fail(err, -EIO, "%s: getrandom failed", path);
	if (!parent)
		return 0;
	h->parent_kind = parent->raw ? DISK_PARENT_RAW : DISK_PARENT_LAYER;
	h->parent_len = parent->virtual_len;
	if (parent->raw) {
		h->parent_mtime_ns = parent->mtime_ns;
	} else {
		h->parent_generation = parent->hdr.generation;
		memcpy(h->parent_layer_id, parent->hdr.layer_id, DISK_ID_LEN);
	}
	r = disk_layer_identity(parent, h->parent_identity);
	if (r < 0)
		return disk_fail(err, r, "%s: reading it: %s", parent->path, strerror(-r));
	/* The parent is recorded relative to the new layer's directory, so a tree of layers
	 * can move as a whole. */
	copy = strdup(path);
	if (!copy)
		return disk_fail(err, -ENOMEM, "out of memory");
	dir = realpath(dirname(copy), NULL);
	free(copy);
	if (!dir)
		return disk_fail(err, -errno, "%s: its directory: %s", path, strerror(errno));
	r = rel_path(dir, parent->path, (char *)h->parent_path, DISK_PARENT_PATH_MAX);
	free(dir);
	if (r < 0 || strlen((char *)h->parent_path) >= DISK_PARENT_PATH_MAX)
		return disk_fail(err, -ENAMETOOLONG, "%s: the path to %s is too long", path,
				 parent->path);
	h->parent_path_len = (uint32_t)strlen((char *)h->parent_path);
	return 0;
}

int disk_layer_create(const char *path, uint64_t virtual_len, uint32_t cluster_len,
		      struct disk_layer *parent, struct disk_error *err)
{
	return disk_layer_create_fd(path, virtual_len, cluster_len, parent, NULL, err);
}

int disk_layer_create_fd(const char *path, uint64_t virtual_len, uint32_t cluster_len,
			 struct disk_layer *parent, int *fd_out, struct disk_error *err)
{
	struct disk_header h;
	char tmp[PATH_MAX], *copy = NULL;
	int fd = -1, dir_fd = -1, r;

	r = hdr_build(&h, path, virtual_len, cluster_len, parent, err);
	if (r < 0)
		return r;
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmpXXXXXX", path) >= sizeof(tmp))
		return disk_fail(err, -ENAMETOOLONG, "%s: path too long", path);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return disk_fail(err, -errno, "%s: %s", tmp, strerror(errno));
	hdr_swap(&h);
	disk_header_seal(&h);
	/* Header, then a hole for the zeroed bitmap: nothing proportional to the disk's size. */
	r = disk_pwrite_full(fd, &h, sizeof(h), 0);
	if (!r && ftruncate(fd, (off_t)le64toh(h.data_offset)) < 0)
		r = -errno;
	if (!r && fsync(fd) < 0)
		r = -errno;
	if (r < 0) {
		disk_fail(err, r, "%s: writing it: %s", tmp, strerror(-r));
		goto out;
	}
	/* Atomic: the layer appears complete or not at all, and never replaces a file. */
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) < 0) {
		r = -errno;
		disk_fail(err, r, "%s: %s", path, r == -EEXIST ? "already exists" : strerror(-r));
		goto out;
	}
	tmp[0] = 0;
	copy = strdup(path);
	if (copy)
		dir_fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir_fd < 0 || fsync(dir_fd) < 0) {
		r = -errno;
		disk_fail(err, r, "%s: syncing its directory: %s", path, strerror(-r));
	}
out:
	if (tmp[0])
		unlink(tmp);
	if (dir_fd >= 0)
		close(dir_fd);
	free(copy);
	if (r == 0 && fd_out)
		*fd_out = fd; /* the caller's: it opened O_RDWR, and a jail opens no file twice */
	else
		close(fd);
	return r;
}

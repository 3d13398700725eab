/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A raw image's identity by content (docs/disk-format.md, "Identity"). The identity a layer
 * records of its raw parent (v2: size, mtime, the first and last 64 KiB) differs between two
 * copies of one image whose mtimes differ: the same image installed on two machines (a fleet's
 * hosts, a laptop), so a snapshot made on one would not restore on the other. An image's
 * installer therefore writes PATH.identity beside it: a hash of its bytes (hash_blocks), with
 * the size and mtime it had then. While the image still has that size and mtime, its identity is
 * v3, over its size and that hash: the same on every machine holding the same bytes. Any
 * write moves the mtime, the file no longer vouches, and the identity falls back to v2, which
 * a layer recorded as v3 then does not match (refused, as before).
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/sha.h>

#include "disk.h"

#define ID_FILE_MAX 256
#define HASH_BLOCK  (64u << 10)
#define HASH_READ   (16 * HASH_BLOCK)

static uint64_t mtime_ns(const struct stat *st)
{
	return (uint64_t)st->st_mtim.tv_sec * 1000000000ull + (uint64_t)st->st_mtim.tv_nsec;
}

static bool unhex(const char *s, uint8_t out[DISK_HASH_LEN])
{
	for (unsigned i = 0; i < DISK_HASH_LEN; i++) {
		unsigned v;

		if (sscanf(s + 2 * i, "%2x", &v) != 1 || !strchr("0123456789abcdef", s[2 * i]) ||
		    !strchr("0123456789abcdef", s[2 * i + 1]))
			return false;
		out[i] = (uint8_t)v;
	}
	return true;
}

int disk_layer_raw_identity_v3(struct disk_layer *l, uint8_t out[DISK_HASH_LEN])
{
	static const char tag[] = "sandbox-disk raw v3";
	char path[PATH_MAX + 16], text[ID_FILE_MAX + 1], hex[2 * DISK_HASH_LEN + 1];
	uint8_t material[sizeof(tag) + 8 + DISK_HASH_LEN], sum[DISK_HASH_LEN];
	unsigned long long size, mtime;
	ssize_t n;
	int fd;

	if (!l->raw)
		return -EINVAL;
	if ((size_t)snprintf(path, sizeof(path), "%s.identity", l->path) >= sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -ENOENT;
	n = read(fd, text, ID_FILE_MAX);
	close(fd);
	if (n <= 0)
		return -ENOENT;
	text[n] = 0;
	if (sscanf(text, "blocks-sha256 %64s size %llu mtime_ns %llu", hex, &size, &mtime) != 3 ||
	    strlen(hex) != 2 * DISK_HASH_LEN || !unhex(hex, sum))
		return -EBADMSG;
	if (size != l->virtual_len || mtime != l->mtime_ns)
		return -ESTALE; /* written since it was hashed: it vouches for nothing */
	memcpy(material, tag, sizeof(tag));
	uint64_t le = htole64(size);

	memcpy(material + sizeof(tag), &le, 8);
	memcpy(material + sizeof(tag) + 8, sum, DISK_HASH_LEN);
	SHA256(material, sizeof(material), out);
	return 0;
}

/*
 * The hash of an image's bytes: SHA-256 over each 64 KiB block that is not all zeros, as its
 * index (le64) then its bytes. Blocks of zeros count for nothing, whether the file holds them
 * as holes or as written zeros, so two copies of one image hash the same however sparse each
 * is, and the holes are skipped (SEEK_DATA): the cost is the image's data, not its size.
 */
static int hash_blocks(int fd, uint64_t size, EVP_MD_CTX *ctx, uint8_t *buf)
{
	uint64_t off = 0;

	while (off < size) {
		off_t data = lseek(fd, (off_t)off, SEEK_DATA);

		if (data < 0)
			return errno == ENXIO ? 0 : -errno; /* ENXIO: only a hole is left */
		off = (uint64_t)data / HASH_BLOCK * HASH_BLOCK;
		uint64_t want = size - off < HASH_READ ? size - off : HASH_READ;
		int r = disk_pread_full(fd, buf, want, off);

		if (r < 0)
			return r;
		for (uint64_t b = 0; b < want; b += HASH_BLOCK) {
			uint64_t n = want - b < HASH_BLOCK ? want - b : HASH_BLOCK;
			uint64_t idx = htole64((off + b) / HASH_BLOCK);

			if (!disk_all_zero(buf + b, n) &&
			    (!EVP_DigestUpdate(ctx, &idx, sizeof(idx)) ||
			     !EVP_DigestUpdate(ctx, buf + b, n)))
				return -EIO;
		}
		off += want;
	}
	return 0;
}

int disk_raw_identity_write(const char *path, struct disk_error *err)
{
	char idpath[PATH_MAX + 16], tmp[PATH_MAX + 32], text[ID_FILE_MAX];
	uint8_t *buf = NULL, md[DISK_HASH_LEN];
	unsigned mdlen = 0;
	struct stat st, st2;
	EVP_MD_CTX *ctx = NULL;
	int fd, out = -1, r = 0, len;

	if ((size_t)snprintf(idpath, sizeof(idpath), "%s.identity", path) >= sizeof(idpath) ||
	    (size_t)snprintf(tmp, sizeof(tmp), "%s.identity.tmpXXXXXX", path) >= sizeof(tmp))
		return disk_fail(err, -ENAMETOOLONG, "%s: path too long", path);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		r = fd < 0 ? -errno : -EINVAL;
		if (fd >= 0)
			close(fd);
		return disk_fail(err, r, "%s: %s", path,
				 r == -EINVAL ? "not a regular file" : strerror(-r));
	}
	buf = malloc(HASH_READ);
	ctx = EVP_MD_CTX_new();
	if (!buf || !ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
		r = disk_fail(err, -ENOMEM, "out of memory");
		goto out;
	}
	if ((r = hash_blocks(fd, (uint64_t)st.st_size, ctx, buf)) < 0) {
		disk_fail(err, r, "%s: reading it: %s", path, strerror(-r));
		goto out;
	}
	if (!EVP_DigestFinal_ex(ctx, md, &mdlen) || mdlen != DISK_HASH_LEN) {
		r = disk_fail(err, -EIO, "%s: hashing it", path);
		goto out;
	}
	/* what was hashed is what the file still is */
	if (fstat(fd, &st2) < 0 || st2.st_size != st.st_size || mtime_ns(&st2) != mtime_ns(&st)) {
		r = disk_fail(err, -EAGAIN, "%s: written while it was hashed", path);
		goto out;
	}
	len = snprintf(text, sizeof(text), "blocks-sha256 ");
	for (unsigned i = 0; i < DISK_HASH_LEN; i++)
		len += snprintf(text + len, sizeof(text) - (size_t)len, "%02x", md[i]);
	len += snprintf(text + len, sizeof(text) - (size_t)len,
			" size %" PRIu64 " mtime_ns %" PRIu64 "\n", (uint64_t)st.st_size,
			mtime_ns(&st));
	out = mkostemp(tmp, O_CLOEXEC);
	if (out < 0 || disk_pwrite_full(out, text, (uint64_t)len, 0) < 0 || fchmod(out, 0444) < 0 ||
	    fsync(out) < 0 || rename(tmp, idpath) < 0) {
		r = disk_fail(err, -EIO, "%s: writing it: %s", idpath, strerror(errno));
		if (out >= 0)
			unlink(tmp);
	}
out:
	if (out >= 0)
		close(out);
	EVP_MD_CTX_free(ctx);
	free(buf);
	close(fd);
	return r;
}

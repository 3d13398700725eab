/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A snapshot's memory file and state as a restore uses them (docs/snapshots.md,
 * "Authentication"): the memory file's page digest (wire/api_proto.h, api_snapshot_result),
 * the file made root's and read-only with the proof that no process holds it open for
 * writing (a read lease), at the seal and again at each restore before it is checked, the
 * `memory.checked` record that lets a restore skip hashing a file that has not changed since
 * it was checked, and the state's checked bytes in a sealed memfd for the VMM. The MAC itself
 * and meta.yaml are snapstore.c's.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "client.h"

#define PAGE	    4096u
#define HASH_CHUNK  (1u << 20) /* read at once while hashing */
#define RECORD_MAX  512	       /* memory.checked's length, at most */
#define RECORD_FILE "memory.checked"

static void hex(const uint8_t *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

void snap_memory_hex(const uint8_t sha256[32], char out[SNAP_HEX_LEN + 1])
{
	hex(sha256, 32, out);
}

static bool page_is_zero(const uint8_t *p)
{
	static const uint8_t zero[PAGE];

	return memcmp(p, zero, PAGE) == 0;
}

/*
 * The page digest of the `size` bytes of `fd`: for each 4 KiB page that is not all zeros, in
 * order, its offset (8 bytes, little-endian) then its bytes. Only the data extents are read
 * (holes are zeros); a page two extents share is hashed once.
 */
int snap_memory_digest(int fd, uint64_t size, char out[SNAP_HEX_LEN + 1])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	uint8_t *buf = malloc(HASH_CHUNK), md[32];
	uint64_t next = 0; /* the first page not hashed yet */
	unsigned mdlen = 0;
	int err = 0;

	if (!ctx || !buf || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
		err = -ENOMEM;
		goto out;
	}
	while (next < size) {
		off_t data = lseek(fd, (off_t)next, SEEK_DATA), hole;
		uint64_t from, to;

		if (data < 0) {
			if (errno != ENXIO)
				err = -errno;
			break;
		}
		hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0) {
			err = -errno;
			break;
		}
		from = (uint64_t)data & ~(uint64_t)(PAGE - 1);
		to = ((uint64_t)hole + PAGE - 1) & ~(uint64_t)(PAGE - 1);
		if (from < next)
			from = next;
		if (to > size)
			to = size;
		while (from < to) {
			size_t want = to - from < HASH_CHUNK ? (size_t)(to - from) : HASH_CHUNK;
			ssize_t n = pread(fd, buf, want, (off_t)from);

			if (n <= 0 || n % PAGE) {
				err = n < 0 ? -errno : -EIO; /* the file shrank under us */
				goto out;
			}
			for (ssize_t p = 0; p < n; p += PAGE) {
				uint64_t le = htole64(from + (uint64_t)p);

				if (page_is_zero(buf + p))
					continue;
				if (!EVP_DigestUpdate(ctx, &le, sizeof(le)) ||
				    !EVP_DigestUpdate(ctx, buf + p, PAGE)) {
					err = -EIO;
					goto out;
				}
			}
			from += (uint64_t)n;
		}
		next = to;
	}
	if (!err && EVP_DigestFinal_ex(ctx, md, &mdlen) && mdlen == 32)
		hex(md, 32, out);
	else if (!err)
		err = -EIO;
out:
	free(buf);
	EVP_MD_CTX_free(ctx);
	return err;
}

/* ---- memory.checked ---- */

/* The record's text for the file `st` whose digest is `sha`: what the record's MAC covers. */
static int record_text(const struct stat *st, const char *sha, char *out, size_t len)
{
	int n = snprintf(out, len,
			 "sandbox memory.checked 1 %s %llu %llu %llu %lld.%09ld %lld.%09ld", sha,
			 (unsigned long long)st->st_dev, (unsigned long long)st->st_ino,
			 (unsigned long long)st->st_size, (long long)st->st_mtim.tv_sec,
			 st->st_mtim.tv_nsec, (long long)st->st_ctim.tv_sec, st->st_ctim.tv_nsec);

	return n < 0 || (size_t)n >= len ? -E2BIG : n;
}

static int record_mac(const char *text, size_t len, char out[SNAP_HEX_LEN + 1])
{
	uint8_t key[SNAP_KEY_LEN], md[32];
	size_t mdlen = 0;
	int err;

	if ((err = snap_key(key)) < 0)
		return err;
	err = EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, key, sizeof(key), (const void *)text,
			len, md, sizeof(md), &mdlen) != NULL &&
			      mdlen == 32
		      ? 0
		      : -EIO;
	OPENSSL_cleanse(key, sizeof(key));
	if (!err)
		hex(md, 32, out);
	return err;
}

/* Write dir/memory.checked for the memory file `st` whose page digest `sha` was just checked
 * in full, the file root's, read-only and with no writer left (memory_claim). */
static int record_write(const char *dir, const struct stat *st, const char *sha)
{
	char text[RECORD_MAX], mac[SNAP_HEX_LEN + 1], path[4200];
	int n, err;

	if ((n = record_text(st, sha, text, sizeof(text) - SNAP_HEX_LEN - 3)) < 0 ||
	    (err = record_mac(text, (size_t)n, mac)) < 0)
		return n < 0 ? n : err;
	n += snprintf(text + n, sizeof(text) - (size_t)n, " %s\n", mac);
	if ((err = path_fmt(path, sizeof(path), "%s/%s", dir, RECORD_FILE)) < 0)
		return err;
	return write_file_atomic(path, text, (size_t)n, 0600);
}

/* Whether dir/memory.checked says the file `st` has the page digest `sha`: its MAC good,
 * and the file the same inode, size, mtime and ctime as when it was checked. */
static bool record_matches(const char *dir, const struct stat *st, const char *sha)
{
	char want[RECORD_MAX], mac[SNAP_HEX_LEN + 1], path[4200], *buf = NULL;
	size_t len = 0;
	int n;
	bool ok;

	if ((n = record_text(st, sha, want, sizeof(want))) < 0 ||
	    path_fmt(path, sizeof(path), "%s/%s", dir, RECORD_FILE) < 0 ||
	    read_file(path, RECORD_MAX, &buf, &len) < 0)
		return false;
	ok = len == (size_t)n + 1 + SNAP_HEX_LEN + 1 && memcmp(buf, want, (size_t)n) == 0 &&
	     buf[n] == ' ' && buf[len - 1] == '\n' && record_mac(want, (size_t)n, mac) == 0 &&
	     CRYPTO_memcmp(buf + n + 1, mac, SNAP_HEX_LEN) == 0;
	free(buf);
	return ok;
}

/* ---- claiming the file ---- */

/*
 * Make the memory file `fd` (at `path`) one only root can change, and prove nobody else can
 * any more: root's and read-only first (no new open for writing by anyone else), then a read
 * lease, which is granted only while no process has the file open for writing (an fd or a
 * shared writable mapping, ours included: the VMM that wrote it, or whoever made or copied
 * the file, must have let go, or it could change the RAM of every later restore after the
 * check). *st: the file as claimed. Owner and mode are set only where they differ, so a
 * claimed file's ctime (in memory.checked) stays.
 */
static int memory_claim(int fd, const char *path, struct stat *st, char *err, size_t err_len)
{
	struct sigaction ign = {.sa_handler = SIG_IGN}, old;
	int r = 0;

	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
		r = errno ? -errno : -EPERM;
		snprintf(err, err_len, "%s: not a regular file", path);
		return r;
	}
	if ((st->st_uid != 0 || st->st_gid != 0) && fchown(fd, 0, 0) < 0)
		r = -errno;
	else if ((st->st_mode & 07777) != 0400 && fchmod(fd, 0400) < 0)
		r = -errno;
	if (r) {
		snprintf(err, err_len, "%s: cannot make it root's and read-only: %s", path,
			 strerror(-r));
		return r;
	}
	/* An open for writing meanwhile (root's) breaks the lease with a SIGIO, whose default
	 * ends us: ignored (the opener waits until the lease is let go, microseconds from now). */
	sigaction(SIGIO, &ign, &old);
	if (fcntl(fd, F_SETLEASE, F_RDLCK) < 0) {
		r = -errno;
		snprintf(err, err_len,
			 r == -EAGAIN || r == -EBUSY
				 ? "%s: a process still holds it open for writing"
				 : "%s: cannot prove no process writes it (read lease: %s)",
			 path, strerror(-r));
		sigaction(SIGIO, &old, NULL);
		return r == -EBUSY ? -EAGAIN : r;
	}
	if (fstat(fd, st) < 0) {
		r = -errno;
		snprintf(err, err_len, "%s: %s", path, strerror(-r));
	}
	(void)fcntl(fd, F_SETLEASE, F_UNLCK);
	sigaction(SIGIO, &old, NULL);
	return r;
}

/* ---- at the seal ---- */

int snap_memory_seal(const char *dir, const char *sha, char *err, size_t err_len)
{
	char path[4200];
	struct stat st;
	int fd, r;

	(void)sha; /* the VMM's word: memory.checked is written only by a hash of our own */
	if ((r = path_fmt(path, sizeof(path), "%s/memory", dir)) < 0)
		return r;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		r = -errno;
		snprintf(err, err_len, "%s: %s", path, strerror(errno));
		return r;
	}
	r = memory_claim(fd, path, &st, err, err_len);
	if (r && strlen(err) + 12 < err_len)
		strcat(err, ": not sealed");
	close(fd);
	return r;
}

/* ---- at a restore ---- */

int snap_memory_open(const char *dir, const struct snap_meta *m, int *fd_out, char *err,
		     size_t err_len)
{
	char path[4200], got[SNAP_HEX_LEN + 1];
	struct stat st;
	int fd, r;

	*fd_out = -1;
	if ((r = path_fmt(path, sizeof(path), "%s/memory", dir)) < 0)
		return r;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		r = -errno;
		snprintf(err, err_len, "%s: %s", path, strerror(errno));
		return r;
	}
	/* Whoever wrote or copied it cannot change it after the check: the VMM maps it
	 * privately, its pages read from the file as the guest first touches them. */
	if ((r = memory_claim(fd, path, &st, err, err_len)) < 0) {
		close(fd);
		return r;
	}
	if ((uint64_t)st.st_size != m->memory_bytes) {
		snprintf(err, err_len, "%s: not a memory file of %llu bytes", path,
			 (unsigned long long)m->memory_bytes);
		close(fd);
		return -EBADMSG;
	}
	if (record_matches(dir, &st, m->memory_sha256)) {
		*fd_out = fd;
		return 0;
	}
	/* Changed, copied, or never checked here: all of it, once (~0.3 s for 512 MiB). */
	if ((r = snap_memory_digest(fd, (uint64_t)st.st_size, got)) < 0) {
		snprintf(err, err_len, "%s: %s", path, strerror(-r));
		close(fd);
		return r;
	}
	if (strcmp(got, m->memory_sha256) != 0) {
		snprintf(err, err_len, "%s: the memory file changed since the MAC", dir);
		close(fd);
		return -EBADMSG;
	}
	/* Not recorded: the next restore hashes it again, slower, not less safe. */
	(void)record_write(dir, &st, m->memory_sha256);
	*fd_out = fd;
	return 0;
}

int snap_state_memfd(const void *state, size_t len)
{
	int fd = memfd_create("snapshot-state", MFD_CLOEXEC | MFD_ALLOW_SEALING), r;

	if (fd < 0)
		return -errno;
	if ((r = write_all(fd, state, len)) < 0 ||
	    (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0 &&
	     (r = -errno))) {
		close(fd);
		return r;
	}
	return fd;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An image installed under $SANDBOX_HOME/images (docs/images.md): its directory built beside
 * its place (.NAME.PID.N), its hash, then renamed in, so a reader never sees half an image.
 * What `sandboxctl images import`, `images pull` and sandboxd's snapshots from Docker images
 * share; safe to call from several threads at once (no static buffer, a directory of its own
 * per call).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/evp.h>

#include "client.h"
#include "disk.h"
#include "oci.h"

#define SAMPLE_LEN (1u << 20)

/* Hash `len` bytes of `fd` from `off` into `ctx`. */
static int hash_range(EVP_MD_CTX *ctx, int fd, off_t off, uint64_t len)
{
	uint8_t buf[1 << 16];

	while (len) {
		ssize_t n = pread(fd, buf, len < sizeof(buf) ? len : sizeof(buf), off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		EVP_DigestUpdate(ctx, buf, (size_t)n);
		off += n;
		len -= (uint64_t)n;
	}
	return 0;
}

/* The image's hash, as 64 hex digits. */
int oci_image_hash(const char *kernel, const char *initrd, const char *rootfs, char out[65])
{
	const char *files[] = {kernel, initrd, rootfs};
	uint8_t md[32];
	unsigned mdlen = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int err = 0;

	if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
		EVP_MD_CTX_free(ctx);
		return -ENOMEM;
	}
	for (int i = 0; i < 3 && !err; i++) {
		struct stat st;
		uint64_t size;
		int fd = open(files[i], O_RDONLY | O_CLOEXEC);

		if (fd < 0 || fstat(fd, &st) < 0) {
			err = -errno;
			if (fd >= 0)
				close(fd);
			break;
		}
		size = (uint64_t)st.st_size;
		EVP_DigestUpdate(ctx, &size, sizeof(size));
		if (i < 2 || size <= 2 * SAMPLE_LEN) {
			err = hash_range(ctx, fd, 0, size);
		} else {
			err = hash_range(ctx, fd, 0, SAMPLE_LEN);
			if (!err)
				err = hash_range(ctx, fd, (off_t)(size - SAMPLE_LEN), SAMPLE_LEN);
		}
		close(fd);
	}
	if (!err && !EVP_DigestFinal_ex(ctx, md, &mdlen))
		err = -EIO;
	EVP_MD_CTX_free(ctx);
	for (unsigned i = 0; !err && i < 32; i++)
		sprintf(out + 2 * i, "%02x", md[i]);
	return err;
}

/* pread/pwrite up to `len` bytes, for file systems copy_file_range cannot cross. */
static ssize_t copy_plain(int in, off_t *off_in, int out, off_t *off_out, off_t len)
{
	uint8_t buf[1 << 16];
	ssize_t n = pread(in, buf, len < (off_t)sizeof(buf) ? (size_t)len : sizeof(buf), *off_in);

	if (n <= 0)
		return n;
	if (pwrite(out, buf, (size_t)n, *off_out) != n)
		return -1;
	*off_in += n;
	*off_out += n;
	return n;
}

/* Copy `src` to the new file `dst`, keeping holes. */
int oci_copy_sparse(const char *src, const char *dst, mode_t mode)
{
	struct stat st;
	int in, out = -1, err = 0;
	off_t data = 0, hole;

	in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return -errno;
	if (fstat(in, &st) < 0 || !S_ISREG(st.st_mode)) {
		err = -EINVAL;
		goto out;
	}
	out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	if (out < 0 || ftruncate(out, st.st_size) < 0) {
		err = -errno;
		goto out;
	}
	while (data < st.st_size) {
		data = lseek(in, data, SEEK_DATA);
		if (data < 0) {
			if (errno == ENXIO)
				break; /* only a hole is left */
			err = -errno;
			goto out;
		}
		hole = lseek(in, data, SEEK_HOLE);
		if (hole < 0) {
			err = -errno;
			goto out;
		}
		for (off_t off_in = data, off_out = data; off_in < hole;) {
			ssize_t n = copy_file_range(in, &off_in, out, &off_out,
						    (size_t)(hole - off_in), 0);

			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS ||
				      errno == EOPNOTSUPP))
				n = copy_plain(in, &off_in, out, &off_out, hole - off_in);
			if (n <= 0) {
				err = n < 0 ? -errno : -EIO;
				goto out;
			}
		}
		data = hole;
	}
	if (fsync(out) < 0)
		err = -errno;
out:
	if (out >= 0)
		close(out);
	close(in);
	return err;
}

/* Remove what imports of `name` killed before they could clean up left: .NAME.PID whose
 * process is gone. */
void oci_remove_stale_tmp(const char *name)
{
	char dir[4096], prefix[NAME_MAX_LEN + 3];
	struct dirent *e;
	DIR *d;

	if (path_fmt(dir, sizeof(dir), "%s/images", state_home()) < 0 || !(d = opendir(dir)))
		return;
	snprintf(prefix, sizeof(prefix), ".%s.", name);
	while ((e = readdir(d))) {
		uint64_t pid;

		if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 ||
		    !parse_u64(e->d_name + strlen(prefix), 1, 0x7fffffff, &pid))
			continue;
		if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
			oci_rmtree(dirfd(d), e->d_name);
	}
	closedir(d);
}

/* Copy the kernel and initrd into `tmp` and link or copy `rootfs` there (have_rootfs: tmp has
 * its rootfs already, and its hash is computed here), write the hash, swap tmp in as `dst`. */
int oci_image_install(const char *tmp, const char *dst, const char *kernel, const char *initrd,
		      bool have_rootfs, const char *rootfs, char hash[65])
{
	char p[4200];
	int err;

	if ((err = path_fmt(p, sizeof(p), "%s/kernel", tmp)) < 0 ||
	    (err = oci_copy_sparse(kernel, p, 0444)) < 0)
		return err;
	if ((err = path_fmt(p, sizeof(p), "%s/initrd", tmp)) < 0 ||
	    (err = oci_copy_sparse(initrd, p, 0444)) < 0)
		return err;
	if ((err = path_fmt(p, sizeof(p), "%s/rootfs", tmp)) < 0)
		return err;
	if (!have_rootfs && link(rootfs, p) < 0 && (err = oci_copy_sparse(rootfs, p, 0444)) < 0)
		return err;
	if (have_rootfs) {
		char k[4200], i[4200];

		if ((err = path_fmt(k, sizeof(k), "%s/kernel", tmp)) < 0 ||
		    (err = path_fmt(i, sizeof(i), "%s/initrd", tmp)) < 0 ||
		    (err = oci_image_hash(k, i, p, hash)) < 0)
			return err;
	}
	/* rootfs.identity: its bytes' hash, so that layers over it match a copy of the same
	 * image installed on another machine (disk_raw_id.c) */
	struct disk_error derr;

	if ((err = path_fmt(p, sizeof(p), "%s/rootfs", tmp)) < 0 ||
	    (err = disk_raw_identity_write(p, &derr)) < 0)
		return err;
	if ((err = path_fmt(p, sizeof(p), "%s/hash", tmp)) < 0)
		return err;
	hash[64] = '\n';
	err = write_file_atomic(p, hash, 65, 0444);
	hash[64] = '\0';
	if (err < 0)
		return err;
	/* Swap the new directory in; the old one (if any) ends up at tmp and is removed. */
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, dst, RENAME_EXCHANGE) < 0) {
		if (errno != ENOENT || rename(tmp, dst) < 0)
			return -errno;
	}
	return 0;
}

int oci_import(const char *name, const char *archive, const char *kernel, const char *initrd,
	       int (*prepare)(void *arg, int dirfd, const char *tmp, const char **archive),
	       void *arg, char hash[65], struct oci_msg *m)
{
	static atomic_uint seq;
	char tmp[4096], dst[4096];
	struct stat st;
	int dirfd = -1, err;

	if (stat(kernel, &st) < 0 || !S_ISREG(st.st_mode) || stat(initrd, &st) < 0 ||
	    !S_ISREG(st.st_mode))
		return oci_fail(m, -ENOENT, "cannot read the kernel %s or the initrd %s", kernel,
				initrd);
	if ((err = state_init()) < 0)
		return oci_fail(m, err, "cannot create %s", state_home());
	if ((err = path_fmt(dst, sizeof(dst), "%s/images/%s", state_home(), name)) < 0 ||
	    (err = path_fmt(tmp, sizeof(tmp), "%s/images/.%s.%d.%u", state_home(), name,
			    (int)getpid(), atomic_fetch_add(&seq, 1))) < 0)
		return oci_fail(m, err, "image %s: path too long", name);
	oci_remove_stale_tmp(name);
	oci_rmtree(AT_FDCWD, tmp);
	/* 0700 while the staging tree is in it: the image's setuid-root files must not be
	 * reachable by this host's users (to run, or to hard-link away) even for a moment */
	if (mkdir(tmp, 0700) < 0 ||
	    (dirfd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		err = oci_fail(m, -errno, "%s", tmp);
		goto out;
	}
	if (prepare && (err = prepare(arg, dirfd, tmp, &archive)) < 0)
		goto out;
	if ((err = oci_build(archive, name, dirfd, tmp, m)) < 0)
		goto out;
	if (prepare && (err = oci_rmtree(dirfd, "layout")) < 0) {
		err = oci_fail(m, err, "%s/layout", tmp);
		goto out;
	}
	if (fchmod(dirfd, 0755) < 0) {
		err = oci_fail(m, -errno, "%s", tmp);
		goto out;
	}
	if ((err = oci_image_install(tmp, dst, kernel, initrd, true, NULL, hash)) < 0)
		oci_fail(m, err, "image %s: cannot install it", name);
out:
	if (dirfd >= 0)
		close(dirfd);
	oci_rmtree(AT_FDCWD, tmp); /* the old image after a swap, else what we made */
	return err;
}

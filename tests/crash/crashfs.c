/* SPDX-License-Identifier: Apache-2.0 */
/*
 * crashfs: a FUSE file system that passes everything through to a backing directory and logs
 * every change, in order, with the fsyncs between them (crashlog.h). From the log crash-check
 * rebuilds what a disk could hold after a power cut at any moment: everything before the last
 * completed fsync, and any part of what came after it. That is the harness issue 13 asks for
 * ("keeps only what was fsynced"), without a device mapper, natively, on the file the VMM
 * really writes with io_uring.
 *
 *   crashfs BACKING LOG MOUNTPOINT
 *
 * Writing a number to MOUNTPOINT/.mark logs a mark: the test does it each time the guest says
 * a FLUSH completed, so the checker knows which writes every later image must hold. It runs
 * single-threaded and in the foreground: records are logged in the order the kernel sent the
 * requests, and an fsync's record is in the log before the fsync returns. Unmounting (umount
 * MOUNTPOINT) ends it and flushes the log.
 */
#define FUSE_USE_VERSION 31
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crashlog.h"

#define MARK_NAME "/.mark"

static int backing = -1;
static FILE *log_file;
static int log_error;

/* The backing directory's name for `path` ("/a/b" -> "a/b", "/" -> "."). */
static const char *rel(const char *path)
{
	return path[1] ? path + 1 : ".";
}

static void log_rec(uint32_t type, uint32_t mode, const char *path, uint64_t off, uint64_t len,
		    const void *data, uint32_t data_len)
{
	struct crashlog_rec r = {type, mode, off, len, 0, data_len};
	const char *name = path ? rel(path) : "";

	r.name_len = (uint32_t)strlen(name);
	if (fwrite(&r, sizeof(r), 1, log_file) != 1 ||
	    fwrite(name, 1, r.name_len, log_file) != r.name_len ||
	    (data_len && fwrite(data, 1, data_len, log_file) != data_len))
		log_error = errno ? errno : EIO;
	if (type == CRASHLOG_FSYNC || type == CRASHLOG_MARK)
		fflush(log_file); /* cheap insurance: what a caller was told is in the kernel's
				     hands */
}

static int cfs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	if (!strcmp(path, MARK_NAME)) {
		memset(st, 0, sizeof(*st));
		st->st_mode = S_IFREG | 0200;
		st->st_nlink = 1;
		return 0;
	}
	if (fi && fi->fh != (uint64_t)-1)
		return fstat((int)fi->fh, st) < 0 ? -errno : 0;
	return fstatat(backing, rel(path), st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

static int cfs_open(const char *path, struct fuse_file_info *fi)
{
	int fd;

	if (!strcmp(path, MARK_NAME)) {
		fi->fh = (uint64_t)-1;
		fi->direct_io = 1;
		return 0;
	}
	if (fi->flags & O_TRUNC)
		return -EOPNOTSUPP; /* not logged: nothing under test truncates on open */
	fd = openat(backing, rel(path), (fi->flags & ~O_CREAT) | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	fi->fh = (uint64_t)fd;
	return 0;
}

static int cfs_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	int fd = openat(backing, rel(path), fi->flags | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
			mode);

	if (fd < 0)
		return -errno;
	fi->fh = (uint64_t)fd;
	log_rec(CRASHLOG_CREATE, 0, path, 0, 0, NULL, 0);
	return 0;
}

static int cfs_read(const char *path, char *buf, size_t len, off_t off, struct fuse_file_info *fi)
{
	ssize_t n;

	(void)path;
	if (fi->fh == (uint64_t)-1)
		return 0;
	n = pread((int)fi->fh, buf, len, off);
	return n < 0 ? -errno : (int)n;
}

static int cfs_write(const char *path, const char *buf, size_t len, off_t off,
		     struct fuse_file_info *fi)
{
	ssize_t n;

	if (fi->fh == (uint64_t)-1) {
		char num[32];
		size_t k = len < sizeof(num) - 1 ? len : sizeof(num) - 1;

		memcpy(num, buf, k);
		num[k] = 0;
		log_rec(CRASHLOG_MARK, 0, NULL, strtoull(num, NULL, 10), 0, NULL, 0);
		return (int)len;
	}
	if (len > CRASHLOG_DATA_MAX)
		return -EFBIG;
	n = pwrite((int)fi->fh, buf, len, off);
	if (n < 0)
		return -errno;
	log_rec(CRASHLOG_WRITE, 0, path, (uint64_t)off, (uint64_t)n, buf, (uint32_t)n);
	return (int)n;
}

static int cfs_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	int fd = fi && fi->fh != (uint64_t)-1
			 ? (int)fi->fh
			 : openat(backing, rel(path), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	int r = fd < 0 ? -1 : ftruncate(fd, size);

	if (r < 0)
		r = -errno;
	if (fd >= 0 && !(fi && fi->fh != (uint64_t)-1))
		close(fd);
	if (r < 0)
		return r;
	log_rec(CRASHLOG_TRUNCATE, 0, path, (uint64_t)size, 0, NULL, 0);
	return 0;
}

static int cfs_fallocate(const char *path, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	if (fallocate((int)fi->fh, mode, off, len) < 0)
		return -errno;
	log_rec(CRASHLOG_FALLOCATE, (uint32_t)mode, path, (uint64_t)off, (uint64_t)len, NULL, 0);
	return 0;
}

static int cfs_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	if (fi->fh == (uint64_t)-1)
		return 0;
	if ((datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh)) < 0)
		return -errno;
	log_rec(CRASHLOG_FSYNC, datasync ? 1 : 0, path, 0, 0, NULL, 0);
	return log_error ? -log_error : 0;
}

static int cfs_release(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	if (fi->fh != (uint64_t)-1)
		close((int)fi->fh);
	return 0;
}

static int cfs_unlink(const char *path)
{
	return unlinkat(backing, rel(path), 0) < 0 ? -errno : 0;
}

static int cfs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
		       struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	int fd = openat(backing, rel(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *e;
	DIR *d;

	(void)off, (void)fi, (void)flags;
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	while ((e = readdir(d)))
		fill(buf, e->d_name, NULL, 0, 0);
	closedir(d);
	return 0;
}

static void cfs_destroy(void *data)
{
	(void)data;
	if (fclose(log_file) != 0 || log_error)
		fprintf(stderr, "crashfs: the log is incomplete: %s\n",
			strerror(log_error ? log_error : errno));
}

static const struct fuse_operations cfs_ops = {
	.getattr = cfs_getattr,
	.open = cfs_open,
	.create = cfs_create,
	.read = cfs_read,
	.write = cfs_write,
	.truncate = cfs_truncate,
	.fallocate = cfs_fallocate,
	.fsync = cfs_fsync,
	.release = cfs_release,
	.unlink = cfs_unlink,
	.readdir = cfs_readdir,
	.destroy = cfs_destroy,
};

int main(int argc, char **argv)
{
	char *fargs[] = {argv[0], "-f", "-s", "-o", "fsname=crashfs,subtype=crashfs", NULL, NULL};

	if (argc != 4) {
		fprintf(stderr, "usage: crashfs BACKING LOG MOUNTPOINT\n");
		return 2;
	}
	backing = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (backing < 0) {
		fprintf(stderr, "crashfs: %s: %s\n", argv[1], strerror(errno));
		return 2;
	}
	log_file = fopen(argv[2], "wxe");
	if (!log_file) {
		fprintf(stderr, "crashfs: %s: %s\n", argv[2], strerror(errno));
		return 2;
	}
	setvbuf(log_file, NULL, _IOFBF, 1 << 20);
	fargs[5] = argv[3];
	return fuse_main(6, fargs, &cfs_ops, NULL);
}

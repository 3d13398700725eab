/* SPDX-License-Identifier: Apache-2.0 */
/* The clock, whole writes, atomic files and bounded reads of every host program (hostutil.h). */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hostutil.h"

uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int write_file_atomic(const char *path, const void *buf, size_t len, mode_t mode)
{
	char tmp[PATH_MAX + 16], dir[PATH_MAX + 16];
	int n, fd, dfd, err = 0;

	n = snprintf(tmp, sizeof(tmp), "%s.tmpXXXXXX", path);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return -ENAMETOOLONG;
	snprintf(dir, sizeof(dir), "%s", path);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fchmod(fd, mode) < 0) {
		err = -errno;
		close(fd);
		goto out;
	}
	if ((err = write_all(fd, buf, len)) < 0 || (fsync(fd) < 0 && (err = -errno))) {
		close(fd);
		goto out;
	}
	if (close(fd) < 0 && (err = -errno))
		goto out;
	if (rename(tmp, path) < 0) {
		err = -errno;
		goto out;
	}
	dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
out:
	unlink(tmp);
	return err;
}

/* The first allocation for a file that reports no size (/proc): grown by doubling. */
#define READ_UNSIZED_FIRST 4096

static int read_file_flags(const char *path, size_t max, int flags, char **out, size_t *len)
{
	struct stat st;
	char *buf = NULL, *grown;
	size_t have = 0, cap;
	int fd, err = 0;

	/* O_NONBLOCK: a FIFO in its place must not hold the open; it is refused below */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | flags);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		err = -EINVAL;
		goto out;
	}
	if ((uint64_t)st.st_size > max) {
		err = -EFBIG;
		goto out;
	}
	/* room for the whole file and one byte more, which tells a file that grew past max */
	cap = (st.st_size > 0 ? (size_t)st.st_size
			      : (max < READ_UNSIZED_FIRST ? max : READ_UNSIZED_FIRST)) +
	      1;
	if (!(buf = malloc(cap + 1))) {
		err = -ENOMEM;
		goto out;
	}
	for (;;) {
		ssize_t n;

		if (have == cap) {
			size_t next = cap > max / 2 ? max + 1 : cap * 2;

			if (next <= cap) { /* already max + 1: the file is longer than max */
				err = -EFBIG;
				goto out;
			}
			if (!(grown = realloc(buf, next + 1))) {
				err = -ENOMEM;
				goto out;
			}
			buf = grown;
			cap = next;
		}
		n = read(fd, buf + have, cap - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = -errno;
			goto out;
		}
		if (n == 0)
			break;
		have += (size_t)n;
		if (have > max) {
			err = -EFBIG;
			goto out;
		}
	}
	buf[have] = '\0';
	*out = buf;
	if (len)
		*len = have;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return err;
}

int read_file(const char *path, size_t max, char **out, size_t *len)
{
	return read_file_flags(path, max, O_NOFOLLOW, out, len);
}

int read_file_follow(const char *path, size_t max, char **out, size_t *len)
{
	return read_file_flags(path, max, 0, out, len);
}

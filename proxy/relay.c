/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Moving bytes: a connect with a deadline, and the relay of a connection both ways with
 * half-closes passed on, an idle bound and the sandbox's egress budget.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy.h"

#define RELAY_BUF (128u << 10)

static int relay_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

int conn_connect(const struct sockaddr *sa, socklen_t len, unsigned ms, int *out_fd)
{
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), err = 0;
	struct pollfd pfd;
	socklen_t el = sizeof(err);

	if (fd < 0)
		return -errno;
	if (connect(fd, sa, len) < 0) {
		if (errno != EINPROGRESS) {
			err = -errno;
			goto fail;
		}
		pfd.fd = fd;
		pfd.events = POLLOUT;
		for (;;) {
			int r = poll(&pfd, 1, (int)ms);

			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				err = r == 0 ? -ETIMEDOUT : -errno;
				goto fail;
			}
			break;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err) {
			err = err ? -err : -errno;
			goto fail;
		}
	}
	err = relay_nonblock(fd, false);
	if (err < 0)
		goto fail;
	*out_fd = fd;
	return 0;
fail:
	close(fd);
	return err;
}

/* One direction: bytes read from `from`, waiting in `buf` to go to `to`. */
struct relay_dir {
	int from, to;
	uint8_t *buf;
	size_t len, off;
	bool eof;
	uint64_t *count;
	_Atomic int64_t *budget; /* upstream only */
};

/* Read into an empty buffer: 1 moved bytes, 0 nothing now, -errno. */
static int relay_read(struct relay_dir *d)
{
	ssize_t n = recv(d->from, d->buf, RELAY_BUF, MSG_DONTWAIT);

	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	if (n == 0) {
		d->eof = true;
		shutdown(d->to, SHUT_WR);
		return 1;
	}
	if (d->budget && atomic_fetch_sub(d->budget, n) - n < 0)
		return -EDQUOT;
	d->len = (size_t)n;
	d->off = 0;
	return 1;
}

static int relay_write(struct relay_dir *d)
{
	ssize_t n = send(d->to, d->buf + d->off, d->len - d->off, MSG_DONTWAIT | MSG_NOSIGNAL);

	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	*d->count += (uint64_t)n;
	d->off += (size_t)n;
	if (d->off == d->len)
		d->len = d->off = 0;
	return 1;
}

int conn_relay(int a_fd, int b_fd, const void *pre, size_t npre, unsigned idle_ms,
	       _Atomic int64_t *budget, uint64_t *up, uint64_t *down)
{
	struct relay_dir d[2] = {
		{.from = a_fd, .to = b_fd, .count = up, .budget = budget},
		{.from = b_fd, .to = a_fd, .count = down},
	};
	unsigned idle_passes = 0;
	int err = 0;

	*up = *down = 0;
	d[0].buf = malloc(RELAY_BUF);
	d[1].buf = malloc(RELAY_BUF);
	if (!d[0].buf || !d[1].buf || npre > RELAY_BUF) {
		err = -ENOMEM;
		goto out;
	}
	if ((err = relay_nonblock(a_fd, true)) < 0 || (err = relay_nonblock(b_fd, true)) < 0)
		goto out;
	if (npre) {
		if (budget && atomic_fetch_sub(budget, (int64_t)npre) - (int64_t)npre < 0) {
			err = -EDQUOT;
			goto out;
		}
		memcpy(d[0].buf, pre, npre);
		d[0].len = npre;
	}
	for (;;) {
		struct pollfd pfd[2] = {{.fd = a_fd}, {.fd = b_fd}};
		int r;

		if (d[0].eof && d[1].eof && !d[0].len && !d[1].len)
			break;
		for (int i = 0; i < 2; i++) {
			if (!d[i].eof && !d[i].len)
				pfd[i].events |= POLLIN;
			if (d[i].len)
				pfd[1 - i].events |= POLLOUT;
		}
		r = poll(pfd, 2, (int)idle_ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err = -errno;
			break;
		}
		if (r == 0) {
			err = -ETIMEDOUT;
			break;
		}
		/* A side whose reading ended and that now reports a hang-up or an error (a FIN,
		 * then an RST) can be neither read nor written again: without this, poll would
		 * report it at once forever, asked for nothing, and the loop would spin. */
		if ((d[0].eof && (pfd[0].revents & (POLLHUP | POLLERR))) ||
		    (d[1].eof && (pfd[1].revents & (POLLHUP | POLLERR))))
			break;
		bool moved = false;
		for (int i = 0; i < 2 && err >= 0; i++) {
			short ev = pfd[i].revents, oev = pfd[1 - i].revents;

			if (d[i].len && (oev & (POLLOUT | POLLERR | POLLHUP)))
				moved |= (err = relay_write(&d[i])) > 0;
			if (err >= 0 && !d[i].eof && !d[i].len &&
			    (ev & (POLLIN | POLLERR | POLLHUP)))
				moved |= (err = relay_read(&d[i])) > 0;
			/* Send at once what was just read: one poll less per chunk. */
			if (err >= 0 && d[i].len)
				moved |= (err = relay_write(&d[i])) > 0;
		}
		if (err < 0)
			break;
		err = 0;
		/* Woken three times in a row and nothing moved: whatever poll reports, it will
		 * report again. */
		if (moved)
			idle_passes = 0;
		else if (++idle_passes >= 3)
			break;
	}
out:
	free(d[0].buf);
	free(d[1].buf);
	return err == -ECONNRESET || err == -EPIPE ? 0 : err;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A lazy restore's pager (pager.h). One thread a VM: poll the userfaultfd (faults first) and
 * the VMM's socket (its wants of disk layers; its end: the VM is gone), put each fault's
 * chunk in with UFFDIO_COPY (or UFFDIO_ZEROPAGE for a chunk of zeros), and, once asked, the
 * chunks no fault has asked for yet, in order, while no fault waits; then the disk layers'.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "pager.h"
#include "pager_proto.h"

_Static_assert(sizeof(struct pager_want) == 40, "a want is 40 bytes");

#define PAGER_PAGE	4096u
#define PAGER_RAM_MAX	(1ull << 40)
#define PAGER_MSGS	16  /* fault messages read at once */
#define PAGER_IDLE_MS	100 /* a poll's wait while nothing is to prefetch */
#define PAGER_CHUNK_MAX (4u << 20)
#define PAGER_READ_MS	1000
#define PAGER_SIGNAL	(SIGRTMIN + 3) /* the read timer's (glibc keeps the first two) */

static int pager_fail(struct pager *p, int ret, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void pager_arm(struct pager *p, unsigned ms);
static int pager_fail(struct pager *p, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->err, sizeof(p->err), fmt, ap);
	va_end(ap);
	return ret;
}

/* Whether fd is a userfaultfd (a VMM that sent a file, whose reads never block nor end,
 * would have the pager spin or wait on it for ever). */
static bool pager_is_uffd(int fd)
{
	char path[64], target[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target) - 1);
	if (n <= 0)
		return false;
	target[n] = 0;
	return strcmp(target, "anon_inode:[userfaultfd]") == 0;
}

int pager_accept(struct pager *p, int sock, uint64_t ram_len, const struct pager_src *src,
		 unsigned timeout_ms)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = {0};
	struct pager_hello h = {0};
	struct iovec iov = {.iov_base = &h, .iov_len = sizeof(h)};
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = cbuf,
		.msg_controllen = sizeof(cbuf),
	};
	struct pollfd pf = {.fd = sock, .events = POLLIN};
	struct cmsghdr *c;
	ssize_t n;
	int uffd = -1, r;

	/* (the caller zeroed p: a pager_prefetch made meanwhile is kept) */
	p->sock = p->uffd = -1;
	p->src = *src;
	if (!src->chunk_size || src->chunk_size % PAGER_PAGE || src->chunk_size > PAGER_CHUNK_MAX) {
		close(sock);
		return pager_fail(p, -EINVAL, "a chunk size of %u bytes", src->chunk_size);
	}
	do
		r = poll(&pf, 1, (int)timeout_ms);
	while (r < 0 && errno == EINTR);
	if (r <= 0) {
		close(sock);
		return pager_fail(p, r ? -errno : -ETIMEDOUT,
				  "the VMM sent no userfaultfd within %u ms", timeout_ms);
	}
	do
		n = recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	/* every fd that came is taken (one that is not the one expected is closed: a VMM that
	 * sends more must not leave them here) */
	for (c = n > 0 ? CMSG_FIRSTHDR(&msg) : NULL; c; c = CMSG_NXTHDR(&msg, c)) {
		size_t k, nfd;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
		    c->cmsg_len < CMSG_LEN(0))
			continue;
		nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (k = 0; k < nfd; k++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + k * sizeof(int), sizeof(int));
			if (uffd < 0 && nfd == 1)
				uffd = fd;
			else
				close(fd);
		}
	}
	if (uffd >= 0 && !pager_is_uffd(uffd)) {
		close(uffd);
		uffd = -1;
	}
	if (n == 0 && uffd < 0) {
		close(sock);
		return pager_fail(p, -ESRCH, "the VMM went away before its hello");
	}
	if (n != (ssize_t)sizeof(h) || uffd < 0 || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    h.magic != PAGER_MAGIC || h.version != PAGER_VERSION || h.ram_len != ram_len ||
	    !ram_len || ram_len > PAGER_RAM_MAX || ram_len % PAGER_PAGE || h.base % PAGER_PAGE ||
	    h.base > UINT64_MAX - ram_len) {
		if (uffd >= 0)
			close(uffd);
		close(sock);
		return pager_fail(p, -EPROTO,
				  "the VMM's hello is not one for %llu bytes of RAM (%zd bytes, "
				  "RAM %llu)",
				  (unsigned long long)ram_len, n, (unsigned long long)h.ram_len);
	}
	(void)fcntl(uffd, F_SETFL, fcntl(uffd, F_GETFL) | O_NONBLOCK);
	p->sock = sock;
	p->uffd = uffd;
	p->base = h.base;
	p->ram_len = ram_len;
	p->nchunks = (ram_len + src->chunk_size - 1) / src->chunk_size;
	p->done = calloc(p->nchunks, 1);
	p->buf = malloc(src->chunk_size);
	if (!p->done || !p->buf) {
		pager_close(p);
		return pager_fail(p, -ENOMEM, "out of memory");
	}
	return 0;
}

/* Put [off, off + len) in from buf (NULL: zeros), each page that is missing: a page the VM
 * already has (a fault's chunk put in twice over a race) is left as it is. */
static int pager_put(struct pager *p, uint64_t off, uint64_t len, const uint8_t *buf)
{
	uint64_t at = 0;

	while (at < len) {
		struct uffdio_copy cp = {
			.dst = p->base + off + at,
			.src = (uintptr_t)(buf ? buf + at : NULL),
			.len = len - at,
		};
		struct uffdio_zeropage zp = {
			.range = {.start = p->base + off + at, .len = len - at}};
		int64_t done;
		int r;

		if (buf) {
			r = ioctl(p->uffd, UFFDIO_COPY, &cp);
			done = cp.copy;
		} else {
			r = ioctl(p->uffd, UFFDIO_ZEROPAGE, &zp);
			done = zp.zeropage;
		}
		if (r == 0) {
			at = len;
			break;
		}
		if (done > 0) /* a part went in */
			at += (uint64_t)done;
		if (errno == EAGAIN || errno == EINTR)
			continue;
		if (errno == EEXIST) { /* that page is there: the next one */
			at = (at + PAGER_PAGE) & ~(uint64_t)(PAGER_PAGE - 1);
			continue;
		}
		if (errno == ESRCH || errno == ENOENT)
			return pager_fail(p, -ESRCH, "the VM went away");
		return pager_fail(p, -errno, "cannot put guest pages in at %llu: %s",
				  (unsigned long long)(off + at), strerror(errno));
	}
	return 0;
}

/* Chunk i in, from the source; for a fault, at page fault_off. A chunk of zeros is not put
 * in (on the memfd a zero page is a page of memory): only a fault's page, and once the
 * userfaultfd is let go the rest are holes, which read as zeros. */
static int pager_fill(struct pager *p, uint64_t i, bool fault, uint64_t fault_off)
{
	uint64_t off = i * p->src.chunk_size;
	uint64_t len = p->ram_len - off < p->src.chunk_size ? p->ram_len - off : p->src.chunk_size;
	int zero = p->src.get(p->src.arg, i, p->buf, p->err, sizeof(p->err)), r = 0;

	if (zero < 0)
		return zero;
	if (zero == 1 && fault)
		r = pager_put(p, fault_off, PAGER_PAGE, NULL);
	else if (zero != 1)
		r = pager_put(p, off, len, p->buf);
	if (r < 0)
		return r;
	if (zero == 1)
		p->zero_chunks++;
	else
		__atomic_add_fetch(&p->bytes, len, __ATOMIC_RELAXED);
	p->done[i] = 1;
	p->filled++;
	if (fault)
		p->fault_chunks++;
	else
		p->prefetch_chunks++;
	return 0;
}

/* The faults waiting: each one's chunk in (a page of a chunk already in that faults again
 * was dropped since, by the VMM: zeros, as for any dropped anonymous page). */
static int pager_faults(struct pager *p)
{
	struct uffd_msg m[PAGER_MSGS];
	ssize_t n;

	/* Not to wait for ever: the VMM shares the userfaultfd's file (its copy), so it could
	 * take the message polled for, or make reads block; a timer of this thread's ends the
	 * read (EINTR) within PAGER_READ_MS. */
	pager_arm(p, PAGER_READ_MS);
	n = read(p->uffd, m, sizeof(m));
	pager_arm(p, 0);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR
			       ? 0
			       : pager_fail(p, -errno, "userfaultfd: %s", strerror(errno));
	if (n == 0 || n % sizeof(m[0]))
		return pager_fail(p, -EPROTO, "userfaultfd: a read of %zd bytes", n);
	for (size_t k = 0; k < (size_t)n / sizeof(m[0]); k++) {
		uint64_t a = m[k].arg.pagefault.address, i;
		int r;

		if (m[k].event != UFFD_EVENT_PAGEFAULT || a < p->base || a - p->base >= p->ram_len)
			continue;
		p->faults++;
		i = (a - p->base) / p->src.chunk_size;
		a = (a - p->base) & ~(uint64_t)(PAGER_PAGE - 1);
		/* a page of a chunk already in (a chunk of zeros, or a page dropped since):
		 * zeros, as any missing page of memory is */
		r = p->done[i] ? pager_put(p, a, PAGER_PAGE, NULL) : pager_fill(p, i, true, a);
		if (r < 0)
			return r;
	}
	return 0;
}

/* No-op: the timer's signal is there to end a read (no SA_RESTART). */
static void pager_on_signal(int sig)
{
	(void)sig;
}

/* This thread's timer for reads (pager_faults). */
static int pager_timer(struct pager *p)
{
	struct sigaction sa = {.sa_handler = pager_on_signal};
	struct sigevent ev = {.sigev_notify = SIGEV_THREAD_ID, .sigev_signo = PAGER_SIGNAL};
	sigset_t set;

	sigemptyset(&sa.sa_mask);
	ev._sigev_un._tid = gettid();
	if (sigaction(PAGER_SIGNAL, &sa, NULL) < 0 ||
	    timer_create(CLOCK_MONOTONIC, &ev, &p->timer) < 0)
		return pager_fail(p, -errno, "a timer for the pager: %s", strerror(errno));
	p->has_timer = true;
	sigemptyset(&set);
	sigaddset(&set, PAGER_SIGNAL);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	return 0;
}

static void pager_arm(struct pager *p, unsigned ms)
{
	struct itimerspec its = {
		.it_value = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000}};

	timer_settime(p->timer, 0, &its, NULL);
}

/* The VMM's socket is readable: a want of a disk layer's range (served, then PAGER_HAVE), a
 * part of one, or its end (the VM is gone). */
static int pager_sock(struct pager *p)
{
	struct pager_want w;
	const char have = PAGER_HAVE;
	ssize_t n;
	int r;

	n = recv(p->sock, p->want + p->want_got, sizeof(p->want) - p->want_got, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0)
		return pager_fail(p, -ESRCH, "the VM went away");
	if ((p->want_got += (size_t)n) < sizeof(p->want))
		return 0;
	p->want_got = 0;
	memcpy(&w, p->want, sizeof(w));
	if (w.magic != PAGER_WANT || w.len > PAGER_WANT_MAX || w.offset > UINT64_MAX - w.len)
		return pager_fail(p, -EPROTO, "the VMM sent no want of a disk layer");
	p->disk_wants++;
	if (p->src.disk_get && (r = p->src.disk_get(p->src.arg, w.layer_id, w.offset, w.len, p->err,
						    sizeof(p->err))) < 0)
		return r;
	/* never waits: a VMM has one want out, so room for its answer (one that sends more and
	 * reads none is not a VMM to wait for) */
	do
		n = send(p->sock, &have, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return pager_fail(p, -EPROTO, "the VMM reads no answers to its wants");
	return n == 1 ? 0 : pager_fail(p, -ESRCH, "the VM went away");
}

int pager_run(struct pager *p)
{
	uint64_t next = 0;
	bool prefetching = false;
	const char done = PAGER_DONE;
	ssize_t w;
	int r0;

	if ((r0 = pager_timer(p)) < 0)
		return r0;

	p->disks_whole = !p->src.disk_next;
	while (p->filled < p->nchunks || !p->disks_whole) {
		struct pollfd pf[2] = {{.fd = p->uffd, .events = POLLIN},
				       {.fd = p->sock, .events = POLLIN}};
		int r;

		if (!prefetching && __atomic_load_n(&p->prefetch, __ATOMIC_ACQUIRE)) {
			prefetching = true;
			p->bytes_at_prefetch = p->bytes;
			p->disk_wants_at_prefetch = p->disk_wants;
		}
		r = poll(pf, 2, prefetching ? 0 : PAGER_IDLE_MS);
		if (r < 0 && errno != EINTR)
			return pager_fail(p, -errno, "poll: %s", strerror(errno));
		if (r > 0 && (pf[1].revents & (POLLIN | POLLHUP | POLLERR))) {
			int s = pager_sock(p);

			if (s < 0)
				return s;
		}
		if (r > 0 && (pf[0].revents & POLLIN)) {
			if ((r = pager_faults(p)) < 0)
				return r;
			continue; /* faults before any prefetch */
		}
		if (!prefetching)
			continue;
		while (next < p->nchunks && p->done[next])
			next++;
		if (next < p->nchunks) {
			if ((r = pager_fill(p, next, false, 0)) < 0)
				return r;
			continue;
		}
		/* the memory whole: the disk layers, a chunk between two looks at the VMM */
		if (!p->disks_whole) {
			if ((r = p->src.disk_next(p->src.arg, p->err, sizeof(p->err))) < 0)
				return r;
			p->disks_whole = r == 0;
			p->disk_fills += r == 1;
		}
	}
	do
		w = send(p->sock, &done, 1, MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	if (w != 1)
		return pager_fail(p, -ESRCH, "the VM went away");
	return 0;
}

void pager_prefetch(struct pager *p)
{
	__atomic_store_n(&p->prefetch, 1, __ATOMIC_RELEASE);
}

void pager_close(struct pager *p)
{
	if (p->has_timer)
		timer_delete(p->timer);
	p->has_timer = false;
	if (p->uffd >= 0)
		close(p->uffd);
	if (p->sock >= 0)
		close(p->sock);
	p->uffd = p->sock = -1;
	free(p->done);
	free(p->buf);
	p->done = p->buf = NULL;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A lazy restore's guest RAM (wire/pager_proto.h; docs/fleet.md, "Lazy restore"): a fresh,
 * empty RAM (mem_create) registered with a userfaultfd for its missing pages, which goes to
 * the pager over --restore-memory-pager-fd. Every first touch of a page then waits for the
 * pager to put it in. The VMM keeps its own copy of the userfaultfd until the pager says every
 * page is in: were the pager to die first, a missing page must still wait (the VM is stopped
 * on the socket's EOF) rather than be filled with zeros. While pages are missing the VM takes
 * no snapshot (vm_snapshot: -EAGAIN): a snapshot reads RAM through the memfd too, where a
 * missing page is a hole.
 *
 * The same pager fills the snapshot's disk layers (mem_pager_fetch, the disks' fetch
 * function): a read of clusters not in yet sends a want and waits for the pager's word that
 * they are (the pager's own bounds apply to its store; this wait is bounded too: past it the
 * VM stops, as when the pager goes away). The pager's PAGER_DONE says the disks are whole too.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <linux/userfaultfd.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pager_proto.h"
#include "vmm.h"

#define WANT_WAIT_S 600 /* a disk read waits this long for its clusters, at most */

static int mem_pager_start(struct guest_mem *mem);

/* One want outstanding (the VMM has one pager): its sender waits for the watcher's word. */
static pthread_mutex_t want_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t want_cond = PTHREAD_COND_INITIALIZER;
static bool want_have;

int mem_pager_attach(struct guest_mem *mem, int sock)
{
	struct uffdio_api api = {.api = UFFD_API};
	struct uffdio_register reg = {
		.range = {.start = (uintptr_t)mem->base, .len = mem->ram_len},
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};
	struct pager_hello h = {
		.magic = PAGER_MAGIC,
		.version = PAGER_VERSION,
		.ram_len = mem->ram_len,
		.base = (uintptr_t)mem->base,
	};
	char cbuf[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {.iov_base = &h, .iov_len = sizeof(h)};
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = cbuf,
		.msg_controllen = sizeof(cbuf),
	};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	ssize_t n;
	int uffd, err;

	/* 4 KiB pages: the pager's copies are of pages, and a huge page would be one fault
	 * for 512 of them */
	madvise(mem->base, mem->ram_len, MADV_NOHUGEPAGE);
	uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (uffd < 0) {
		err = -errno;
		log_error("--restore-memory-pager-fd: no userfaultfd: %s", strerror(errno));
		return err;
	}
	if (ioctl(uffd, UFFDIO_API, &api) < 0 || ioctl(uffd, UFFDIO_REGISTER, &reg) < 0) {
		err = -errno;
		log_error("--restore-memory-pager-fd: cannot register guest RAM with a "
			  "userfaultfd: %s",
			  strerror(errno));
		close(uffd);
		return err;
	}
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &uffd, sizeof(int));
	do
		n = sendmsg(sock, &msg, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(h)) {
		err = n < 0 ? -errno : -EIO;
		log_error("--restore-memory-pager-fd %d: cannot reach the pager: %s", sock,
			  n < 0 ? strerror(errno) : "a short send");
		close(uffd);
		return err;
	}
	mem->uffd = uffd;
	mem->pager_fd = sock;
	__atomic_store_n(&mem->filling, true, __ATOMIC_RELEASE);
	/* (before the jail: its filters reach this thread too, put on every thread at once) */
	if ((err = mem_pager_start(mem)) < 0) {
		log_error("--restore-memory-pager-fd: no thread to watch the pager: %s",
			  strerror(-err));
		return err; /* (mem_destroy closes both) */
	}
	return 0;
}

/* The pager's socket, read by a thread of its own that touches no guest RAM (the I/O thread
 * or a vCPU may be waiting for a page): its word that every page is in lets the userfaultfd
 * go; its end before that ends the VMM at once (exit_group: no thread waits for a page that
 * will never come, nor reads zeros where it was missing). */
static void *mem_pager_watch(void *arg)
{
	struct guest_mem *mem = arg;
	char b;
	ssize_t n;
	int uffd;

	for (;;) {
		do
			n = read(mem->pager_fd, &b, 1);
		while (n < 0 && errno == EINTR);
		if (n == 1 && b == PAGER_HAVE) {
			pthread_mutex_lock(&want_lock);
			want_have = true;
			pthread_cond_broadcast(&want_cond);
			pthread_mutex_unlock(&want_lock);
			continue;
		}
		if (n != 1 || b != PAGER_DONE)
			break;
		uffd = __atomic_exchange_n(&mem->uffd, -1, __ATOMIC_ACQ_REL);
		if (uffd >= 0)
			close(uffd);
		/* the next snapshot's touched-pages: what the guest touches from here (every page
		 * is in the memfd now; dropping the mappings loses none) */
		(void)mem_touched_drop(mem);
		__atomic_store_n(&mem->filling, false, __ATOMIC_RELEASE);
		pthread_mutex_lock(&want_lock); /* a want under way: the disks are whole */
		pthread_cond_broadcast(&want_cond);
		pthread_mutex_unlock(&want_lock);
		log_debug("the pager put in every page of guest RAM and every disk layer");
		return NULL;
	}
	log_error("the memory pager went away with pages of guest RAM or disk layers still "
		  "missing: stopped");
	_exit(VM_EXIT_VMM_ERROR);
}

int mem_pager_fetch(void *arg, const uint8_t layer_id[16], uint64_t offset, uint64_t len)
{
	struct guest_mem *mem = arg;

	pthread_mutex_lock(&want_lock);
	while (len && __atomic_load_n(&mem->filling, __ATOMIC_ACQUIRE)) {
		struct pager_want w = {.magic = PAGER_WANT,
				       .offset = offset,
				       .len = len < PAGER_WANT_MAX ? len : PAGER_WANT_MAX};
		struct timespec until;
		ssize_t n;

		memcpy(w.layer_id, layer_id, sizeof(w.layer_id));
		want_have = false;
		do
			n = send(mem->pager_fd, &w, sizeof(w), MSG_NOSIGNAL);
		while (n < 0 && errno == EINTR);
		/* A send that fails: the pager is gone, having said every layer is whole (its
		 * PAGER_DONE on the way to the watcher) or not (the watcher ends the VMM): waited
		 * for as the answer is. */
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += WANT_WAIT_S;
		while ((n != (ssize_t)sizeof(w) || !want_have) &&
		       __atomic_load_n(&mem->filling, __ATOMIC_ACQUIRE))
			if (pthread_cond_timedwait(&want_cond, &want_lock, &until) == ETIMEDOUT) {
				/* an answer that came later would answer the next want: the
				 * VM stops, as when the pager goes away */
				log_error("a disk layer's clusters did not come from the pager "
					  "within %d s: stopped",
					  WANT_WAIT_S);
				_exit(VM_EXIT_VMM_ERROR);
			}
		offset += w.len;
		len -= w.len;
	}
	pthread_mutex_unlock(&want_lock);
	return 0;
}

static int mem_pager_start(struct guest_mem *mem)
{
	pthread_attr_t at;
	pthread_t t;
	int err;

	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, 64 << 10);
	err = pthread_create(&t, &at, mem_pager_watch, mem);
	pthread_attr_destroy(&at);
	return -err;
}

void mem_pager_close(struct guest_mem *mem)
{
	int uffd = __atomic_exchange_n(&mem->uffd, -1, __ATOMIC_ACQ_REL);

	if (uffd >= 0)
		close(uffd);
	/* (the watcher may still read it: the VMM is ending, and its end is the pager's EOF) */
	if (mem->pager_fd >= 0)
		close(mem->pager_fd);
	mem->pager_fd = -1;
}

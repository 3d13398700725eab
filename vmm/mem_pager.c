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
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <linux/userfaultfd.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pager_proto.h"
#include "vmm.h"

static int mem_pager_start(struct guest_mem *mem);

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

	do
		n = read(mem->pager_fd, &b, 1);
	while (n < 0 && errno == EINTR);
	if (n == 1 && b == PAGER_DONE) {
		__atomic_store_n(&mem->filling, false, __ATOMIC_RELEASE);
		uffd = __atomic_exchange_n(&mem->uffd, -1, __ATOMIC_ACQ_REL);
		if (uffd >= 0)
			close(uffd);
		log_debug("the pager put in every page of guest RAM");
		return NULL;
	}
	log_error("the memory pager went away with pages of guest RAM still missing: stopped");
	_exit(VM_EXIT_VMM_ERROR);
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

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pager (store/pager.c) over a snapshot's memory file, for snapshot_payload.py's lazy
 * restores: the same pager sandboxd runs over the fleet's store, with a file for its source.
 *
 *   pager-file SOCKFD MEMORY CHUNK_KIB [--fail-at N]
 *
 * SOCKFD: the inherited end of the socket whose other end is the VMM's
 * --restore-memory-pager-fd. Faults are served at once; the rest of the memory only after
 * SIGUSR1 (as sandboxd prefetches once the box answers). --fail-at N: chunk N is "corrupt"
 * (the source fails there, as a chunk that does not open), and the prefetch starts at once.
 * Prints one line of figures and
 * exits 0 when every page is in, 3 when the source failed, 4 when the VM went away first.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pager.h"

struct file_src {
	int fd;
	uint32_t chunk;
	uint64_t size;
	long fail_at;
};

static struct pager pg;

static void on_usr1(int sig)
{
	(void)sig;
	pager_prefetch(&pg);
}

static int file_get(void *arg, uint64_t i, uint8_t *buf, char *err, size_t err_len)
{
	struct file_src *f = arg;
	uint64_t off = i * f->chunk;
	size_t len = f->size - off < f->chunk ? (size_t)(f->size - off) : f->chunk, got = 0;

	if (f->fail_at >= 0 && i == (uint64_t)f->fail_at) {
		snprintf(err, err_len, "chunk %llu is corrupt (--fail-at)", (unsigned long long)i);
		return -EBADMSG;
	}
	while (got < len) {
		ssize_t n = pread(f->fd, buf + got, len - got, (off_t)(off + got));

		if (n <= 0) {
			snprintf(err, err_len, "chunk %llu: cannot read the memory file",
				 (unsigned long long)i);
			return -EIO;
		}
		got += (size_t)n;
	}
	for (size_t k = 0; k < len; k++)
		if (buf[k])
			return 0;
	return 1;
}

int main(int argc, char **argv)
{
	struct file_src f = {.fail_at = -1};
	struct pager_src src = {.get = file_get, .arg = &f};
	struct sigaction sa = {.sa_handler = on_usr1};
	struct stat st;
	int r;

	if (argc != 4 && !(argc == 6 && strcmp(argv[4], "--fail-at") == 0)) {
		fprintf(stderr, "usage: pager-file SOCKFD MEMORY CHUNK_KIB [--fail-at N]\n");
		return 2;
	}
	if (argc == 6)
		f.fail_at = atol(argv[5]);
	f.fd = open(argv[2], O_RDONLY | O_CLOEXEC);
	if (f.fd < 0 || fstat(f.fd, &st) < 0) {
		fprintf(stderr, "pager-file: %s: %s\n", argv[2], strerror(errno));
		return 2;
	}
	f.size = (uint64_t)st.st_size;
	f.chunk = (uint32_t)atoi(argv[3]) << 10;
	src.chunk_size = f.chunk;
	sigaction(SIGUSR1, &sa, NULL);
	if ((r = pager_accept(&pg, atoi(argv[1]), f.size, &src, 30000)) < 0) {
		fprintf(stderr, "pager-file: %s\n", pg.err);
		return 2;
	}
	if (f.fail_at >= 0)
		pager_prefetch(&pg); /* (the bad chunk reached without a signal) */
	r = pager_run(&pg);
	printf("pager: rc=%d faults=%llu fault_chunks=%llu prefetch_chunks=%llu zero_chunks=%llu "
	       "bytes=%llu bytes_at_prefetch=%llu chunks=%llu err=%s\n",
	       r, (unsigned long long)pg.faults, (unsigned long long)pg.fault_chunks,
	       (unsigned long long)pg.prefetch_chunks, (unsigned long long)pg.zero_chunks,
	       (unsigned long long)pg.bytes, (unsigned long long)pg.bytes_at_prefetch,
	       (unsigned long long)pg.nchunks, r < 0 ? pg.err : "-");
	fflush(stdout);
	pager_close(&pg);
	return r == 0 ? 0 : r == -ESRCH ? 4 : 3;
}

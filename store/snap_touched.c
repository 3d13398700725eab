/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pages a snapshot's last run touched, as the memory's chunks that hold any of them: a
 * lazy restore reads those ahead first (chunk_ahead.c), before the guest faults on them. The
 * VMM puts them in the snapshot's state (vmm/snapshot.c: the root's "touched-pages", a bit a
 * 4 KiB page of the memory file, the lowest bit of byte 0 first). The state came with a
 * snapshot whose MAC was checked, but it is parsed as hostile all the same: the file's size
 * bounded, the whole tree checked (fdt_check_full), the bitmap exactly the memory's pages.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libfdt.h>

#include "snap_remote.h"

#define TOUCHED_PAGE	  4096u
#define TOUCHED_STATE_MAX (64u << 20) /* vmm.h's SNAP_STATE_MAX: the largest state written */

/* The whole file, at most TOUCHED_STATE_MAX bytes: 0, or -errno. */
static int read_state(const char *path, uint8_t **buf, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), err = 0;
	struct stat st;
	size_t got = 0;

	*buf = NULL;
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < 64 ||
	    (uint64_t)st.st_size > TOUCHED_STATE_MAX) {
		close(fd);
		return -EBADMSG;
	}
	if (!(*buf = malloc((size_t)st.st_size))) {
		close(fd);
		return -ENOMEM;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, *buf + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? -errno : -EBADMSG; /* it shrank under us */
			break;
		}
		got += (size_t)n;
	}
	close(fd);
	if (err) {
		free(*buf);
		*buf = NULL;
		return err;
	}
	*len = got;
	return 0;
}

int snap_touched_chunks(const char *state_path, uint64_t mem_bytes, uint32_t chunk_size,
			uint8_t **hot, uint64_t *nhot, char *err, size_t err_len)
{
	uint64_t npages, nchunks, per;
	const uint8_t *bits;
	uint8_t *buf;
	size_t len = 0;
	int r, plen;

	*hot = NULL;
	*nhot = 0;
	if (chunk_size == 0 || chunk_size % TOUCHED_PAGE || mem_bytes % TOUCHED_PAGE) {
		snprintf(err, err_len, "a memory of %llu bytes in chunks of %u: not in pages",
			 (unsigned long long)mem_bytes, chunk_size);
		return -EINVAL;
	}
	if ((r = read_state(state_path, &buf, &len)) < 0) {
		snprintf(err, err_len, "%s: %s", state_path,
			 r == -EBADMSG ? "not a state file" : strerror(-r));
		return r;
	}
	if ((r = fdt_check_header(buf)) != 0 || fdt_totalsize(buf) != len ||
	    fdt_version(buf) < 16 || (r = fdt_check_full(buf, len)) != 0) {
		snprintf(err, err_len, "%s: not a device tree: %s", state_path,
			 fdt_strerror(r ? r : -FDT_ERR_BADSTRUCTURE));
		free(buf);
		return -EBADMSG;
	}
	bits = fdt_getprop(buf, 0, "touched-pages", &plen);
	if (!bits) { /* an older VMM's, or a VM that could not tell */
		snprintf(err, err_len, "%s: no touched-pages", state_path);
		free(buf);
		return -ENOENT;
	}
	npages = mem_bytes / TOUCHED_PAGE;
	if ((uint64_t)plen != (npages + 7) / 8) {
		snprintf(err, err_len, "%s: touched-pages has %d bytes for %llu pages", state_path,
			 plen, (unsigned long long)npages);
		free(buf);
		return -EBADMSG;
	}
	per = chunk_size / TOUCHED_PAGE;
	nchunks = (npages + per - 1) / per;
	if (!(*hot = calloc(nchunks ? nchunks : 1, 1))) {
		free(buf);
		return -ENOMEM;
	}
	for (uint64_t p = 0; p < npages; p++)
		if (bits[p / 8] & (1u << (p % 8)) && !(*hot)[p / per]) {
			(*hot)[p / per] = 1;
			(*nhot)++;
		}
	free(buf);
	return 0;
}

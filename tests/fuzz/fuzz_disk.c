/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the disk layer's open of a hostile layer file (disk/disk_layer.c,
 * disk/disk.c, docs/disk-format.md): its header, bitmap and parent link. The input's first
 * byte is options, the rest is the file "top.layer", written into a private directory that
 * also holds "base.raw" (256 KiB of a fixed pattern, a fixed mtime) for a parent path to name.
 *   bit 0  seal: compute the header's checksum over the input's header first, so the checks
 *          behind the checksum are reached (the fuzzer cannot forge a SHA-256)
 *   bit 1  open read-only (DISK_OPEN_RDONLY); else the top is writable and gets a write
 *   bit 2  disk_inspect the file too (sandbox-disk info)
 * An open either fails with an errno and a message naming the file, or gives a disk whose
 * size is the header's, every read of which inside the disk succeeds or fails cleanly (a
 * bitmap that claims clusters past the file's end is -EIO, never a read out of bounds), and
 * whose maps lie inside the files. Seeds: tests/fuzz/corpus/disk/ (made by sandbox-disk).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk.h"

#define FUZZ_BASE_LEN	     (256u << 10)
#define FUZZ_IO_LEN	     (8u << 10)
#define FUZZ_EXT_MAX	     16u
/* base.raw's mtime: a raw parent's link records it, and the seeds were made over one with it. */
#define FUZZ_BASE_MTIME_SEC  1796147241
#define FUZZ_BASE_MTIME_NSEC 615753159

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define fuzz_check(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_disk: %s:%d: %s\n", __FILE__, __LINE__, #cond);      \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static char fuzz_dir[64], fuzz_top[96];

/* The directory and base.raw, once per process (removed at exit). */
static void fuzz_cleanup(void)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/base.raw", fuzz_dir);
	unlink(path);
	unlink(fuzz_top);
	rmdir(fuzz_dir);
}

static void fuzz_setup(void)
{
	char path[128];
	uint8_t *base;
	int fd;

	snprintf(fuzz_dir, sizeof(fuzz_dir), "%s/fuzz_disk.XXXXXX",
		 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	fuzz_check(mkdtemp(fuzz_dir) != NULL);
	snprintf(fuzz_top, sizeof(fuzz_top), "%s/top.layer", fuzz_dir);
	snprintf(path, sizeof(path), "%s/base.raw", fuzz_dir);
	base = malloc(FUZZ_BASE_LEN);
	fuzz_check(base != NULL);
	for (uint32_t i = 0; i < FUZZ_BASE_LEN; i++)
		base[i] = (uint8_t)(i * 7 + (i >> 9));
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	fuzz_check(fd >= 0 && write(fd, base, FUZZ_BASE_LEN) == FUZZ_BASE_LEN);
	fuzz_check(futimens(fd, (struct timespec[2]){{0, UTIME_OMIT},
						     {FUZZ_BASE_MTIME_SEC,
						      FUZZ_BASE_MTIME_NSEC}}) == 0 &&
		   close(fd) == 0);
	free(base);
	atexit(fuzz_cleanup);
}

/* Reads, maps and (writable) a write and a flush of an open disk. */
static void fuzz_use(struct disk *d, const struct disk_header *h, bool writable, uint64_t seed)
{
	static uint8_t buf[FUZZ_IO_LEN];
	struct disk_extent ext[FUZZ_EXT_MAX];
	uint64_t size = disk_size(d), off, len;
	unsigned n = 0;
	int r;

	fuzz_check(size == le64toh(h->virtual_len) && size >= DISK_SECTOR_LEN);
	fuzz_check(disk_layer_count(d) >= 1 && disk_layer_count(d) <= DISK_MAX_LAYERS);
	fuzz_check(disk_read_only(d) == !writable);
	/* a range at the start, one at a seed-chosen place, and the last sector */
	for (int i = 0; i < 3; i++) {
		off = i == 0 ? 0 : i == 1 ? seed % size : size - DISK_SECTOR_LEN;
		len = size - off < FUZZ_IO_LEN ? size - off : FUZZ_IO_LEN;
		r = disk_read(d, off, buf, len);
		fuzz_check(r == 0 || r == -EIO || r == -ENODATA);
		r = disk_map(d, off, len, ext, FUZZ_EXT_MAX, &n);
		fuzz_check(r < 0 || n <= FUZZ_EXT_MAX);
		for (unsigned k = 0; r == 0 && k < n; k++)
			fuzz_check(ext[k].len > 0 && ext[k].len <= len);
	}
	fuzz_check(disk_read(d, size, buf, 1) == -EINVAL);
	if (!writable)
		return;
	off = (seed >> 8) % (size < (1u << 20) ? size : (1u << 20));
	len = size - off < 1000 ? size - off : 1000;
	memset(buf, 0xa5, len);
	r = disk_write(d, off, buf, len);
	if (r == 0)
		r = disk_flush(d);
	fuzz_check(r == 0 || r == -EIO || r == -ENOSPC || r == -EFBIG);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct disk_header h;
	struct disk_error err = {""};
	struct disk *d = NULL;
	uint8_t *file;
	uint64_t seed = 0;
	bool writable;
	int fd, r;

	if (size < 1 + sizeof(h) || size > 1 + (4u << 20))
		return 0;
	if (!fuzz_dir[0])
		fuzz_setup();
	writable = !(data[0] & 2);
	file = malloc(size - 1);
	fuzz_check(file != NULL);
	memcpy(file, data + 1, size - 1);
	if (data[0] & 1)
		disk_header_seal((struct disk_header *)file);
	memcpy(&h, file, sizeof(h));
	for (size_t i = sizeof(h); i < size - 1 && i < sizeof(h) + 8; i++)
		seed = seed << 8 | file[i];
	fd = open(fuzz_top, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	fuzz_check(fd >= 0);
	fuzz_check(write(fd, file, size - 1) == (ssize_t)(size - 1) && close(fd) == 0);
	free(file);

	r = disk_open(fuzz_top, writable ? 0 : DISK_OPEN_RDONLY, &d, &err);
	if (r == 0) {
		fuzz_use(d, &h, writable, seed);
		disk_close(d);
	} else {
		fuzz_check(r < 0 && err.msg[0] != '\0' &&
			   strnlen(err.msg, sizeof(err.msg)) < sizeof(err.msg));
	}
	if (data[0] & 4) {
		struct disk_layer_info *info = malloc(sizeof(*info));

		fuzz_check(info != NULL);
		err.msg[0] = '\0';
		r = disk_inspect(fuzz_top, info, &err);
		fuzz_check(r <= 0);
		if (r == 0)
			fuzz_check(strnlen(info->parent_path, sizeof(info->parent_path)) <
				   sizeof(info->parent_path));
		free(info);
	}
	return 0;
}

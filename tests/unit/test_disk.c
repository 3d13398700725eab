/* SPDX-License-Identifier: Apache-2.0 */
/*
 * disk/disk.c and disk/disk_layer.c: a chain of overlays driven by random reads and writes
 * against an in-memory model of the disk, then hostile and stale layer files. Files live in a
 * mkdtemp directory under /tmp, removed after each test.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "disk.h"

#define KIB (1024ull)
#define MIB (1024ull * KIB)
#define GIB (1024ull * MIB)
#define TIB (1024ull * GIB)

static char tmp_dir[PATH_MAX];

static void tmp_setup(void)
{
	snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/test_disk.XXXXXX");
	cr_assert(mkdtemp(tmp_dir) != NULL, "mkdtemp: %s", strerror(errno));
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void tmp_teardown(void)
{
	nftw(tmp_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A path in the test's directory; eight live at once. */
static const char *P(const char *name)
{
	static char bufs[8][PATH_MAX];
	static unsigned next;
	char *b = bufs[next++ % 8];
	int n = snprintf(b, PATH_MAX, "%s/%s", tmp_dir, name);

	cr_assert(n > 0 && n < PATH_MAX);
	return b;
}

/* xorshift64*: reproducible from the seed each test prints. */
static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

static uint64_t rng_below(uint64_t *s, uint64_t n)
{
	return rng_next(s) % n;
}

static void rng_fill(uint64_t *s, uint8_t *buf, uint64_t len)
{
	for (uint64_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(rng_next(s) >> 56);
}

static void file_write(const char *path, const void *buf, uint64_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	cr_assert(fd >= 0, "%s: %s", path, strerror(errno));
	cr_assert(eq(int, disk_pwrite_full(fd, buf, len, 0), 0));
	close(fd);
}

static void file_pwrite(const char *path, const void *buf, uint64_t len, uint64_t off)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	cr_assert(fd >= 0, "%s: %s", path, strerror(errno));
	cr_assert(eq(int, disk_pwrite_full(fd, buf, len, off), 0));
	close(fd);
}

static void file_pread(const char *path, void *buf, uint64_t len, uint64_t off)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	cr_assert(fd >= 0, "%s: %s", path, strerror(errno));
	cr_assert(eq(int, disk_pread_full(fd, buf, len, off), 0));
	close(fd);
}

static void file_truncate(const char *path, uint64_t len)
{
	cr_assert(eq(int, truncate(path, (off_t)len), 0), "%s", strerror(errno));
}

static void hdr_read(const char *path, struct disk_header *h)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	cr_assert(fd >= 0);
	cr_assert(eq(int, disk_pread_full(fd, h, sizeof(*h), 0), 0));
	close(fd);
}

/* Write `h` (on-disk order) back, resealed so that only the field under test is wrong. */
static void hdr_write_sealed(const char *path, struct disk_header *h)
{
	disk_header_seal(h);
	file_pwrite(path, h, sizeof(*h), 0);
}

static void open_ok(const char *path, unsigned flags, struct disk **d)
{
	struct disk_error err = {{0}};
	int r = disk_open(path, flags, d, &err);

	cr_assert(eq(int, r, 0), "disk_open %s: %d %s", path, r, err.msg);
}

static void overlay_ok(const char *path, const char *parent)
{
	struct disk_error err = {{0}};
	int r = disk_create_overlay(path, parent, 0, &err);

	cr_assert(eq(int, r, 0), "create_overlay %s: %d %s", path, r, err.msg);
}

/* disk_open must fail with `want`; the message must name the problem. */
static void open_fails(const char *path, int want, const char *msg_part)
{
	struct disk_error err = {{0}};
	struct disk *d = (struct disk *)1;
	int r = disk_open(path, 0, &d, &err);

	cr_assert(eq(int, r, want), "disk_open %s: got %d (%s), want %d", path, r, err.msg, want);
	cr_assert(eq(ptr, d, NULL));
	cr_assert(strstr(err.msg, msg_part) != NULL, "message \"%s\" lacks \"%s\"", err.msg,
		  msg_part);
}

/* ---- the model test ---- */

struct model {
	struct disk *d;
	uint8_t *bytes; /* what the disk must read as */
	uint64_t len;
	uint32_t cluster_len;
	uint8_t *buf, *got;
};

/* An interesting range: sub-cluster, sector-aligned, straddling a cluster boundary, several
 * clusters, whole clusters, or the last bytes of the disk. */
static void pick_range(uint64_t *s, const struct model *m, uint64_t *off, uint64_t *len)
{
	uint64_t cl = m->cluster_len, size = m->len, b;

	switch (rng_below(s, 6)) {
	case 0:
		*len = 1 + rng_below(s, 512);
		*off = rng_below(s, size);
		break;
	case 1:
		*len = 512 * (1 + rng_below(s, 16));
		*off = 512 * rng_below(s, size / 512);
		break;
	case 2:
		b = cl * (1 + rng_below(s, size / cl - 1));
		*off = b - 1 - rng_below(s, cl / 2);
		*len = 2 + rng_below(s, cl);
		break;
	case 3:
		*len = 1 + rng_below(s, 3 * cl + 1000);
		*off = rng_below(s, size);
		break;
	case 4:
		*len = cl * (1 + rng_below(s, 2));
		*off = cl * rng_below(s, size / cl);
		break;
	default:
		*len = 1 + rng_below(s, 2 * cl);
		if (*len > size)
			*len = size;
		*off = size - *len;
		break;
	}
	if (*off >= size)
		*off = size - 1;
	if (*len > size - *off)
		*len = size - *off;
}

static void model_check_range(struct model *m, uint64_t off, uint64_t len)
{
	cr_assert(eq(int, disk_read(m->d, off, m->got, len), 0), "read %llu+%llu",
		  (unsigned long long)off, (unsigned long long)len);
	if (!memcmp(m->got, m->bytes + off, len))
		return;
	for (uint64_t i = 0; i < len; i++)
		if (m->got[i] != m->bytes[off + i])
			cr_fatal("byte %llu of read %llu+%llu: got %#x, want %#x",
				 (unsigned long long)(off + i), (unsigned long long)off,
				 (unsigned long long)len, m->got[i], m->bytes[off + i]);
}

/* Read the whole disk in 1 MiB pieces and compare. */
static void model_check_all(struct model *m)
{
	for (uint64_t off = 0; off < m->len; off += MIB)
		model_check_range(m, off, m->len - off < MIB ? m->len - off : MIB);
}

/* The map of a range, read through plain pread, must be the model too. */
static void model_check_map(struct model *m, uint64_t off, uint64_t len, unsigned max)
{
	struct disk_extent ext[4];
	uint64_t pos = off;
	unsigned n;

	while (pos < off + len) {
		cr_assert(eq(int, disk_map(m->d, pos, off + len - pos, ext, max, &n), 0));
		cr_assert(n >= 1 && n <= max);
		for (unsigned i = 0; i < n; i++) {
			cr_assert(ext[i].len > 0);
			/* In pieces of at most 1 MiB, the size of m->got. */
			for (uint64_t done = 0, piece; done < ext[i].len; done += piece) {
				piece = ext[i].len - done < MIB ? ext[i].len - done : MIB;
				if (ext[i].fd < 0)
					memset(m->got, 0, piece);
				else
					cr_assert(eq(int,
						     disk_pread_full(ext[i].fd, m->got, piece,
								     ext[i].file_offset + done),
						     0));
				cr_assert(eq(int, memcmp(m->got, m->bytes + pos, piece), 0),
					  "extent %u of the map at %llu", i,
					  (unsigned long long)pos);
				pos += piece;
			}
		}
	}
	cr_assert(eq(u64, pos, off + len));
}

/* Read [0, len) in odd-sized pieces and compare with `want`. */
static void model_check_reads(struct disk *d, const uint8_t *want, uint64_t len, uint8_t *got)
{
	for (uint64_t off = 0, piece; off < len; off += piece) {
		piece = len - off < 123457 ? len - off : 123457;
		cr_assert(eq(int, disk_read(d, off, got, piece), 0));
		cr_assert(eq(int, memcmp(got, want + off, piece), 0), "at %llu",
			  (unsigned long long)off);
	}
}

/* disk_write_begin, the caller's own pwrite where it says, disk_write_end. */
static void async_write(struct disk *d, uint64_t off, const uint8_t *buf, uint64_t len)
{
	uint64_t file_off;
	int fd;

	cr_assert(eq(int, disk_write_begin(d, off, len, &fd, &file_off), 0));
	/* Nothing may be flushed while the write is in flight. */
	cr_assert(eq(int, disk_flush(d), -EBUSY));
	cr_assert(eq(int, disk_pwrite_full(fd, buf, len, file_off), 0));
	disk_write_end(d, 0);
}

static void model_reopen(struct model *m, const char *top)
{
	cr_assert(eq(int, disk_flush(m->d), 0));
	disk_close(m->d);
	open_ok(top, 0, &m->d);
}

/*
 * A raw base of `base_len` random bytes, an overlay above it, then 4 more frozen on top at
 * random points (by disk_snapshot, or by closing, disk_create_overlay and reopening), with
 * random writes, zeroings, reads, flushes, reopens and maps throughout.
 */
static void model_run(uint64_t seed, uint64_t base_len, uint32_t cluster_len, unsigned ops)
{
	static const char *const names[] = {"o1", "o2", "sub/o3", "o4", "sub/o5"};
	struct disk_error err = {{0}};
	struct model m = {.len = base_len, .cluster_len = cluster_len};
	unsigned freeze_at[4], frozen = 0;
	uint64_t s = seed, off, len;
	struct disk *ro;
	int r;

	cr_log_info("model seed %#llx, %llu bytes, %u-byte clusters", (unsigned long long)seed,
		    (unsigned long long)base_len, cluster_len);
	m.bytes = malloc(base_len);
	m.buf = malloc(4 * cluster_len + 2000);
	m.got = malloc(MIB > 4 * cluster_len + 2000 ? MIB : 4 * cluster_len + 2000);
	cr_assert(m.bytes && m.buf && m.got);
	rng_fill(&s, m.bytes, base_len);
	file_write(P("base.img"), m.bytes, base_len);
	cr_assert(eq(int, mkdir(P("sub"), 0755), 0));
	r = disk_create_overlay(P(names[0]), P("base.img"), cluster_len, &err);
	cr_assert(eq(int, r, 0), "%s", err.msg);
	open_ok(P(names[0]), 0, &m.d);
	cr_assert(eq(u64, disk_size(m.d), base_len));
	model_check_all(&m);
	for (unsigned i = 0; i < 4; i++)
		freeze_at[i] = (unsigned)rng_below(&s, ops);
	for (unsigned op = 0; op < ops; op++) {
		for (unsigned i = 0; i < 4; i++) {
			const char *top, *next;

			if (freeze_at[i] != op)
				continue;
			top = P(names[frozen]);
			next = P(names[frozen + 1]);
			if (rng_below(&s, 2)) {
				r = disk_snapshot(m.d, next, &err);
				cr_assert(eq(int, r, 0), "snapshot: %s", err.msg);
			} else {
				cr_assert(eq(int, disk_flush(m.d), 0));
				disk_close(m.d);
				overlay_ok(next, top);
				open_ok(next, 0, &m.d);
			}
			frozen++;
			cr_assert(eq(u32, disk_layer_count(m.d), frozen + 2));
		}
		pick_range(&s, &m, &off, &len);
		/* Mostly writes and reads; flushes and reopens (each a few fdatasyncs) rarer. */
		switch (rng_below(&s, 40)) {
		case 0 ... 11:
			rng_fill(&s, m.buf, len);
			cr_assert(eq(int, disk_write(m.d, off, m.buf, len), 0));
			memcpy(m.bytes + off, m.buf, len);
			break;
		case 12 ... 17:
			/* The asynchronous path, as virtio-blk uses it with io_uring. */
			rng_fill(&s, m.buf, len);
			async_write(m.d, off, m.buf, len);
			memcpy(m.bytes + off, m.buf, len);
			break;
		case 18 ... 19:
			cr_assert(eq(int, disk_write_zeroes(m.d, off, len), 0));
			memset(m.bytes + off, 0, len);
			break;
		case 20 ... 33:
			model_check_range(&m, off, len);
			break;
		case 34 ... 36:
			model_check_map(&m, off, len, 1 + (unsigned)rng_below(&s, 4));
			break;
		case 37 ... 38:
			cr_assert(eq(int, disk_flush(m.d), 0));
			break;
		default:
			model_reopen(&m, P(names[frozen]));
			break;
		}
	}
	cr_assert(eq(u32, frozen, 4));
	cr_assert(eq(u32, disk_layer_count(m.d), 6));
	model_check_all(&m);
	model_check_map(&m, 0, m.len, 4);
	model_reopen(&m, P(names[4]));
	model_check_all(&m);
	disk_close(m.d);

	/* Read-only, the chain reads the same and refuses writes. */
	open_ok(P(names[4]), DISK_OPEN_RDONLY, &ro);
	m.d = ro;
	cr_assert(disk_read_only(ro));
	model_check_all(&m);
	cr_assert(eq(int, disk_write(ro, 0, m.buf, 1), -EROFS));
	cr_assert(eq(int, disk_write_zeroes(ro, 0, 1), -EROFS));
	disk_close(ro);
	free(m.bytes);
	free(m.buf);
	free(m.got);
}

TestSuite(disk, .init = tmp_setup, .fini = tmp_teardown, .timeout = 50);

Test(disk, model_8mib_64k_clusters)
{
	model_run(0x5eed0001, 8 * MIB, 64 * KIB, 3000);
}

/* A size that is not a multiple of the cluster: the last cluster is partial. */
Test(disk, model_odd_size_4k_clusters)
{
	model_run(0x5eed0002, 8 * MIB + 3 * 512, 4 * KIB, 3000);
}

Test(disk, model_2m_clusters)
{
	model_run(0x5eed0003, 8 * MIB - 512, 2 * MIB, 600);
}

/* Seeded from the clock, so repeated runs explore more; the seed is in the log, and
 * DISK_TEST_SEED=<seed> replays it. */
Test(disk, model_random_seed)
{
	struct timespec ts;

	const char *env = getenv("DISK_TEST_SEED");
	uint64_t seed;

	clock_gettime(CLOCK_REALTIME, &ts);
	seed = env ? strtoull(env, NULL, 0) : (uint64_t)ts.tv_nsec * 2654435761u | 1;
	model_run(seed, 8 * MIB, 64 * KIB, 2000);
}

/* ---- files that must be refused ---- */

/* base.img (1 MiB of random bytes) and o1 above it. */
static void make_base_and_overlay(void)
{
	static uint8_t bytes[MIB];
	uint64_t s = 42;

	rng_fill(&s, bytes, sizeof(bytes));
	file_write(P("base.img"), bytes, sizeof(bytes));
	overlay_ok(P("o1"), P("base.img"));
}

Test(disk, failed_async_write_fails_later_writes_and_flushes)
{
	uint8_t buf[4096] = {1}, got[4096];
	uint64_t file_off;
	struct disk *d;
	int fd;

	make_base_and_overlay();
	open_ok(P("o1"), 0, &d);
	cr_assert(eq(int, disk_write_begin(d, 0, 0, &fd, &file_off), -EINVAL));
	cr_assert(eq(int, disk_write_begin(d, 100, sizeof(buf), &fd, &file_off), 0));
	disk_write_end(d, -ENOSPC);
	cr_assert(eq(int, disk_flush(d), -EIO));
	cr_assert(eq(int, disk_write(d, 0, buf, sizeof(buf)), -EIO));
	cr_assert(eq(int, disk_write_begin(d, 0, 1, &fd, &file_off), -EIO));
	cr_assert(eq(int, disk_read(d, 8192, got, sizeof(got)), 0), "reads go on");
	disk_close(d);
}

Test(disk, missing_files)
{
	struct disk_error err = {{0}};

	open_fails(P("nope"), -ENOENT, "no such file");
	cr_assert(eq(int, disk_create_overlay(P("o"), P("nope"), 0, &err), -ENOENT));
	cr_assert(strstr(err.msg, "no such file") != NULL);
	make_base_and_overlay();
	cr_assert(eq(int, unlink(P("base.img")), 0));
	open_fails(P("o1"), -ENOENT, "no such file");
}

Test(disk, not_a_layer)
{
	make_base_and_overlay();
	open_fails(P("base.img"), -EMEDIUMTYPE, "not a layer");
	file_write(P("empty"), "", 0);
	open_fails(P("empty"), -EMEDIUMTYPE, "not a layer");
}

Test(disk, wrong_magic)
{
	struct disk_header h;

	make_base_and_overlay();
	hdr_read(P("o1"), &h);
	h.magic[3] ^= 0x20;
	hdr_write_sealed(P("o1"), &h);
	open_fails(P("o1"), -EMEDIUMTYPE, "not a layer");
}

Test(disk, corrupt_header)
{
	static const size_t flips[] = {
		offsetof(struct disk_header, virtual_len),
		offsetof(struct disk_header, generation),
		offsetof(struct disk_header, parent_identity) + 5,
		offsetof(struct disk_header, parent_path),
		offsetof(struct disk_header, reserved) + 100,
		offsetof(struct disk_header, checksum) + 31,
	};

	make_base_and_overlay();
	for (size_t i = 0; i < sizeof(flips) / sizeof(flips[0]); i++) {
		uint8_t byte;

		file_pread(P("o1"), &byte, 1, flips[i]);
		byte ^= 0x04;
		file_pwrite(P("o1"), &byte, 1, flips[i]);
		open_fails(P("o1"), -EBADMSG, "corrupt header");
		byte ^= 0x04;
		file_pwrite(P("o1"), &byte, 1, flips[i]);
	}
	file_truncate(P("o1"), 1000);
	open_fails(P("o1"), -EBADMSG, "corrupt header");
}

/* A power cut in the middle of the generation bump's header write keeps some of its 512-byte
 * sectors: the layer opens as the old header or the new one, never as corrupt. */
Test(disk, torn_generation_bump)
{
	struct disk_header before, after, torn;
	struct disk_layer_info info;
	struct disk_error err = {{0}};
	uint8_t one = 7, got = 0;
	struct disk *d;

	make_base_and_overlay();
	hdr_read(P("o1"), &before);
	open_ok(P("o1"), 0, &d);
	cr_assert(eq(int, disk_write(d, 0, &one, 1), 0));
	cr_assert(eq(int, disk_flush(d), 0));
	disk_close(d);
	hdr_read(P("o1"), &after);
	cr_assert(eq(u64, le64toh(after.generation), le64toh(before.generation) + 1));

	/* The new generation's sector under the old checksum's: the old header. */
	torn = before;
	memcpy(&torn, &after, 512);
	file_pwrite(P("o1"), &torn, sizeof(torn), 0);
	cr_assert(eq(int, disk_inspect(P("o1"), &info, &err), 0), "%s", err.msg);
	cr_assert(eq(u64, info.hdr.generation, le64toh(before.generation)));
	/* The old generation's sector under the new checksum: the new header. */
	torn = after;
	memcpy(&torn, &before, 512);
	file_pwrite(P("o1"), &torn, sizeof(torn), 0);
	cr_assert(eq(int, disk_inspect(P("o1"), &info, &err), 0), "%s", err.msg);
	cr_assert(eq(u64, info.hdr.generation, le64toh(after.generation)));
	open_ok(P("o1"), 0, &d);
	cr_assert(eq(int, disk_read(d, 0, &got, 1), 0));
	cr_assert(eq(u8, got, one));
	disk_close(d);
	/* Two generations apart is no tear of one bump. */
	torn = before;
	torn.generation = htole64(le64toh(after.generation) + 1);
	file_pwrite(P("o1"), &torn, sizeof(torn), 0);
	open_fails(P("o1"), -EBADMSG, "corrupt header");
}

Test(disk, future_version_and_flags)
{
	struct disk_header h, orig;

	make_base_and_overlay();
	hdr_read(P("o1"), &orig);
	h = orig;
	h.version = htole32(2); /* not resealed: the checksum of a v2 header may be elsewhere */
	file_pwrite(P("o1"), &h, sizeof(h), 0);
	open_fails(P("o1"), -EPROTONOSUPPORT, "version 2");
	h = orig;
	h.flags = htole32(0x80);
	hdr_write_sealed(P("o1"), &h);
	open_fails(P("o1"), -EPROTONOSUPPORT, "flags");
}

Test(disk, impossible_fields)
{
	struct disk_header h, orig;

	make_base_and_overlay();
	hdr_read(P("o1"), &orig);
	h = orig;
	h.cluster_len = htole32(64 * 1024 + 4096);
	hdr_write_sealed(P("o1"), &h);
	open_fails(P("o1"), -EINVAL, "not a power of 2");
	h.cluster_len = htole32(2048);
	hdr_write_sealed(P("o1"), &h);
	open_fails(P("o1"), -EINVAL, "not a power of 2");
	h.cluster_len = htole32(4 * 1024 * 1024);
	hdr_write_sealed(P("o1"), &h);
	open_fails(P("o1"), -EINVAL, "not a power of 2");

	/* Smaller than its parent (the layout fields stay consistent: same bitmap). A larger
	 * one is a grown disk: see grown_overlay_reads_zeros_beyond_its_parent. */
	h = orig;
	h.virtual_len = htole64(MIB - 64 * KIB);
	hdr_write_sealed(P("o1"), &h);
	open_fails(P("o1"), -EINVAL, "smaller than its parent's");

	h = orig;
	h.virtual_len = htole64(511);
	hdr_write_sealed(P("o1"), &h);
	open_fails(P("o1"), -EINVAL, "smaller than a 512-byte sector");

	h = orig;
	h.virtual_len = htole64(1ull << 62);
	hdr_write_sealed(P("o1"), &h);
	open_fails(P("o1"), -EINVAL, "limit");

	h = orig;
	h.bitmap_len = htole64(0);
	hdr_write_sealed(P("o1"), &h);
	open_fails(P("o1"), -EINVAL, "layout");

	h = orig;
	h.data_offset = htole64(4096);
	hdr_write_sealed(P("o1"), &h);
	open_fails(P("o1"), -EINVAL, "layout");

	h = orig;
	h.parent_path_len = htole32(DISK_PARENT_PATH_MAX + 1);
	hdr_write_sealed(P("o1"), &h);
	open_fails(P("o1"), -EINVAL, "parent path");

	h = orig;
	h.parent_kind = htole32(7);
	hdr_write_sealed(P("o1"), &h);
	open_fails(P("o1"), -EINVAL, "parent kind");
}

Test(disk, truncated_bitmap_and_data)
{
	struct disk_error err = {{0}};
	uint8_t data[100] = {1}, bit;
	struct disk_header h;
	struct disk *d;

	make_base_and_overlay();
	hdr_read(P("o1"), &h);
	file_truncate(P("o1"), DISK_HEADER_LEN + 100);
	open_fails(P("o1"), -ENODATA, "truncated bitmap");

	/* Cluster 10 held, its data cut off. */
	cr_assert(eq(int, unlink(P("o1")), 0));
	overlay_ok(P("o1"), P("base.img"));
	open_ok(P("o1"), 0, &d);
	cr_assert(eq(int, disk_write(d, 10 * 64 * KIB + 7, data, sizeof(data)), 0));
	cr_assert(eq(int, disk_flush(d), 0));
	disk_close(d);
	file_truncate(P("o1"), le64toh(h.data_offset) + 10 * 64 * KIB + 100);
	open_fails(P("o1"), -ENODATA, "truncated data");

	/* A bit past the last cluster (1 MiB / 64 KiB = 16 clusters: bits 0-15). */
	cr_assert(eq(int, unlink(P("o1")), 0));
	cr_assert(eq(int, disk_create_overlay(P("o1"), P("base.img"), 0, &err), 0));
	bit = 1;
	file_pwrite(P("o1"), &bit, 1, DISK_HEADER_LEN + 2);
	open_fails(P("o1"), -EINVAL, "corrupt bitmap");
}

Test(disk, raw_parent_changed)
{
	struct timespec times[2];
	struct stat st;
	uint8_t b = 0x55;
	int fd;

	/* The first MiB changed, the mtime put back: the content sample catches it. */
	make_base_and_overlay();
	cr_assert(eq(int, stat(P("base.img"), &st), 0));
	file_pwrite(P("base.img"), &b, 1, 4096);
	times[0] = st.st_atim;
	times[1] = st.st_mtim;
	cr_assert(eq(int, utimensat(AT_FDCWD, P("base.img"), times, 0), 0));
	open_fails(P("o1"), -ESTALE, "first or last 64 KiB differs");

	/* A later write anywhere moves the mtime. */
	cr_assert(eq(int, unlink(P("o1")), 0));
	overlay_ok(P("o1"), P("base.img"));
	times[1].tv_sec += 1;
	fd = open(P("base.img"), O_RDONLY);
	cr_assert(eq(int, futimens(fd, times), 0));
	close(fd);
	open_fails(P("o1"), -ESTALE, "modified: mtime");

	/* Grown. */
	cr_assert(eq(int, unlink(P("o1")), 0));
	overlay_ok(P("o1"), P("base.img"));
	file_truncate(P("base.img"), 2 * MIB);
	open_fails(P("o1"), -ESTALE, "its size is 2097152 bytes, was 1048576");
}

/* A layer made before 2026-12 recorded its raw parent's v1 identity (1 MiB samples): it still
 * opens, and a change to its parent is still refused. */
Test(disk, raw_parent_v1_identity_accepted)
{
	struct disk_error err = {{0}};
	struct disk_layer base = {0};
	struct disk_header h;
	struct disk *d;
	struct stat st;
	struct timespec times[2];
	uint8_t v1[DISK_HASH_LEN], b = 0x55;

	make_base_and_overlay();
	cr_assert(eq(int, disk_layer_open(&base, P("base.img"), DISK_LAYER_RAW, &err), 0), "%s",
		  err.msg);
	cr_assert(eq(int, disk_layer_raw_identity_v1(&base, v1), 0));
	disk_layer_close(&base);
	hdr_read(P("o1"), &h);
	cr_assert(memcmp(h.parent_identity, v1, DISK_HASH_LEN) != 0, "v2 is what is recorded now");
	memcpy(h.parent_identity, v1, DISK_HASH_LEN);
	hdr_write_sealed(P("o1"), &h);
	open_ok(P("o1"), 0, &d);
	disk_close(d);

	/* Beyond the 64 KiB v2 samples but inside v1's first MiB, the mtime put back: the v1
	 * identity recorded still catches it. */
	cr_assert(eq(int, stat(P("base.img"), &st), 0));
	file_pwrite(P("base.img"), &b, 1, 512 * KIB);
	times[0] = st.st_atim;
	times[1] = st.st_mtim;
	cr_assert(eq(int, utimensat(AT_FDCWD, P("base.img"), times, 0), 0));
	open_fails(P("o1"), -ESTALE, "changed since it was created");
}

Test(disk, layer_parent_changed)
{
	uint8_t b = 7;
	struct disk *d;

	make_base_and_overlay();
	overlay_ok(P("o2"), P("o1"));
	open_ok(P("o2"), 0, &d);
	disk_close(d);

	/* Written after o2 was made of it. */
	open_ok(P("o1"), 0, &d);
	cr_assert(eq(int, disk_write(d, 0, &b, 1), 0));
	disk_close(d);
	open_fails(P("o2"), -ESTALE, "written since: generation 1, was 0");

	/* Replaced by another layer at the same path. */
	cr_assert(eq(int, unlink(P("o1")), 0));
	overlay_ok(P("o1"), P("base.img"));
	open_fails(P("o2"), -ESTALE, "another layer");

	/* Opening a layer writable without writing changes nothing. */
	cr_assert(eq(int, unlink(P("o2")), 0));
	overlay_ok(P("o2"), P("o1"));
	open_ok(P("o1"), 0, &d);
	disk_close(d);
	open_ok(P("o2"), 0, &d);
	disk_close(d);
}

Test(disk, ranges_beyond_the_disk)
{
	struct disk_extent ext[2];
	uint8_t buf[16] = {0};
	struct disk *d;
	unsigned n;

	make_base_and_overlay();
	open_ok(P("o1"), 0, &d);
	cr_assert(eq(int, disk_read(d, MIB - 1, buf, 2), -EINVAL));
	cr_assert(eq(int, disk_read(d, MIB, buf, 1), -EINVAL));
	cr_assert(eq(int, disk_read(d, UINT64_MAX, buf, 2), -EINVAL));
	cr_assert(eq(int, disk_read(d, 2, buf, UINT64_MAX), -EINVAL));
	cr_assert(eq(int, disk_write(d, MIB - 1, buf, 2), -EINVAL));
	cr_assert(eq(int, disk_write(d, UINT64_MAX - 1, buf, 4), -EINVAL));
	cr_assert(eq(int, disk_write_zeroes(d, MIB - 8, 16), -EINVAL));
	cr_assert(eq(int, disk_map(d, MIB - 8, 16, ext, 2, &n), -EINVAL));
	cr_assert(eq(int, disk_read(d, MIB - 1, buf, 1), 0));
	cr_assert(eq(int, disk_write(d, MIB - 16, buf, 16), 0));
	cr_assert(eq(int, disk_read(d, MIB, buf, 0), 0));
	disk_close(d);
}

Test(disk, tiny_images)
{
	struct disk_error err = {{0}};
	uint8_t bytes[512] = {9};
	struct disk *d;

	file_write(P("tiny.img"), bytes, 100);
	cr_assert(eq(int, disk_create_overlay(P("o1"), P("tiny.img"), 0, &err), -EINVAL));
	cr_assert(strstr(err.msg, "smaller than a 512-byte sector") != NULL, "%s", err.msg);
	cr_assert(eq(int, disk_open(P("tiny.img"), DISK_OPEN_RAW, &d, &err), -EINVAL));
	cr_assert(eq(int, disk_create(P("blank"), 511, 0, &err), -EINVAL));

	/* One sector is enough. */
	file_write(P("sector.img"), bytes, 512);
	overlay_ok(P("o1"), P("sector.img"));
	open_ok(P("o1"), 0, &d);
	cr_assert(eq(u64, disk_size(d), 512));
	cr_assert(eq(int, disk_write(d, 511, "x", 1), 0));
	cr_assert(eq(int, disk_read(d, 0, bytes, 512), 0));
	cr_assert(eq(u8, bytes[0], 9));
	cr_assert(eq(u8, bytes[511], 'x'));
	disk_close(d);
}

Test(disk, raw_image_alone_is_read_only)
{
	static uint8_t want[MIB];
	uint8_t got[4096];
	uint64_t s = 42;
	struct disk *d;

	make_base_and_overlay();
	rng_fill(&s, want, sizeof(want));
	open_ok(P("base.img"), DISK_OPEN_RAW, &d);
	cr_assert(disk_read_only(d));
	cr_assert(eq(u32, disk_layer_count(d), 1));
	cr_assert(eq(int, disk_read(d, MIB - 4096, got, 4096), 0));
	cr_assert(eq(int, memcmp(got, want + MIB - 4096, 4096), 0));
	cr_assert(eq(int, disk_write(d, 0, got, 1), -EROFS));
	cr_assert(eq(int, disk_flush(d), 0));
	disk_close(d);
}

Test(disk, blank_disk_reads_zeros)
{
	struct disk_error err = {{0}};
	struct disk_extent ext[4];
	uint8_t buf[8192];
	struct disk *d;
	unsigned n;

	cr_assert(eq(int, disk_create(P("blank"), 4 * MIB, 0, &err), 0), "%s", err.msg);
	cr_assert(eq(int, disk_create(P("blank"), 4 * MIB, 0, &err), -EEXIST));
	open_ok(P("blank"), 0, &d);
	cr_assert(eq(u32, disk_layer_count(d), 1));
	cr_assert(eq(int, disk_map(d, 0, 4 * MIB, ext, 4, &n), 0));
	cr_assert(eq(u32, n, 1));
	cr_assert(eq(int, ext[0].fd, -1));
	cr_assert(eq(u64, ext[0].len, 4 * MIB));
	memset(buf, 0xaa, sizeof(buf));
	cr_assert(eq(int, disk_write(d, 100 * KIB, buf, 10), 0));
	cr_assert(eq(int, disk_read(d, 64 * KIB, buf, 8192), 0));
	for (unsigned i = 0; i < 8192; i++)
		cr_assert(eq(u8, buf[i], 0));
	cr_assert(eq(int, disk_map(d, 0, 4 * MIB, ext, 4, &n), 0));
	cr_assert(eq(u32, n, 3));
	cr_assert(eq(int, ext[1].fd >= 0, 1));
	cr_assert(eq(u64, ext[1].len, 64 * KIB));
	disk_close(d);
}

Test(disk, map_points_at_the_right_layer)
{
	struct disk_error err = {{0}};
	struct disk_extent ext[8];
	struct disk_header h;
	uint8_t buf[64 * KIB];
	struct disk *d;
	unsigned n;

	make_base_and_overlay();
	hdr_read(P("o1"), &h);
	open_ok(P("o1"), 0, &d);
	memset(buf, 1, sizeof(buf));
	cr_assert(eq(int, disk_write(d, 64 * KIB, buf, sizeof(buf)), 0));
	cr_assert(eq(int, disk_write(d, 128 * KIB, buf, sizeof(buf)), 0));
	cr_assert(eq(int, disk_snapshot(d, P("o2"), &err), 0), "%s", err.msg);
	cr_assert(eq(int, disk_write(d, 128 * KIB + 5, buf, 1), 0));
	cr_assert(eq(int, disk_map(d, 0, 256 * KIB, ext, 8, &n), 0));
	/* base [0, 64K), o1 [64K, 128K), o2 [128K, 192K), base [192K, 256K) */
	cr_assert(eq(u32, n, 4));
	cr_assert(eq(u64, ext[0].file_offset, 0));
	cr_assert(eq(u64, ext[1].file_offset, le64toh(h.data_offset) + 64 * KIB));
	cr_assert(eq(u64, ext[2].file_offset, le64toh(h.data_offset) + 128 * KIB));
	cr_assert(eq(u64, ext[3].file_offset, 192 * KIB));
	cr_assert(ext[0].fd == ext[3].fd && ext[0].fd != ext[1].fd && ext[1].fd != ext[2].fd);
	/* With room for two extents, the map stops after two: the caller maps again. */
	cr_assert(eq(int, disk_map(d, 0, 256 * KIB, ext, 2, &n), 0));
	cr_assert(eq(u32, n, 2));
	cr_assert(eq(u64, ext[0].len + ext[1].len, 128 * KIB));
	disk_close(d);
}

Test(disk, locks)
{
	struct disk_error err = {{0}};
	struct disk *a, *b;

	make_base_and_overlay();
	overlay_ok(P("o2"), P("o1"));
	open_ok(P("o2"), 0, &a);
	cr_assert(eq(int, disk_open(P("o2"), 0, &b, &err), -EBUSY));
	cr_assert(eq(int, disk_open(P("o2"), DISK_OPEN_RDONLY, &b, &err), -EBUSY));
	/* o1 is read by a's chain: it can be read by others, not written. */
	cr_assert(eq(int, disk_open(P("o1"), 0, &b, &err), -EBUSY));
	open_ok(P("o1"), DISK_OPEN_RDONLY, &b);
	disk_close(b);
	/* No child of a layer being written. */
	cr_assert(eq(int, disk_create_overlay(P("o3"), P("o2"), 0, &err), -EBUSY));
	cr_assert(strstr(err.msg, "open for writing") != NULL, "%s", err.msg);
	disk_close(a);
	overlay_ok(P("o3"), P("o2"));
}

Test(disk, commit_into_parent)
{
	struct disk_error err = {{0}};
	struct disk_layer_info info;
	static uint8_t want[MIB], got[MIB];
	uint8_t buf[5000];
	uint64_t s = 42;
	struct disk *d;

	make_base_and_overlay();
	rng_fill(&s, want, sizeof(want));
	open_ok(P("o1"), 0, &d);
	memset(buf, 0x11, sizeof(buf));
	cr_assert(eq(int, disk_write(d, 1000, buf, sizeof(buf)), 0));
	memcpy(want + 1000, buf, sizeof(buf));
	cr_assert(eq(int, disk_snapshot(d, P("o2"), &err), 0), "%s", err.msg);
	memset(buf, 0x22, sizeof(buf));
	cr_assert(eq(int, disk_write(d, 3000, buf, sizeof(buf)), 0));
	cr_assert(eq(int, disk_write(d, MIB - sizeof(buf), buf, sizeof(buf)), 0));
	memcpy(want + 3000, buf, sizeof(buf));
	memcpy(want + MIB - sizeof(buf), buf, sizeof(buf));
	cr_assert(eq(int, disk_flush(d), 0));
	disk_close(d);
	overlay_ok(P("sibling"), P("o1"));

	cr_assert(eq(int, disk_commit(P("o2"), &err), 0), "%s", err.msg);
	/* o1 now holds everything; o2 is empty and still opens to the same bytes. */
	open_ok(P("o1"), DISK_OPEN_RDONLY, &d);
	cr_assert(eq(int, disk_read(d, 0, got, MIB), 0));
	cr_assert(eq(int, memcmp(got, want, MIB), 0));
	disk_close(d);
	open_ok(P("o2"), 0, &d);
	cr_assert(eq(int, disk_read(d, 0, got, MIB), 0));
	cr_assert(eq(int, memcmp(got, want, MIB), 0));
	disk_close(d);
	cr_assert(eq(int, disk_inspect(P("o2"), &info, &err), 0), "%s", err.msg);
	cr_assert(eq(u64, info.allocated_clusters, 0));
	cr_assert(eq(int, info.chain_status, 0), "%s", info.chain_error.msg);
	/* o1 changed under its other child. */
	open_fails(P("sibling"), -ESTALE, "written since");
	/* A raw base is never a commit target. */
	cr_assert(eq(int, disk_commit(P("o1"), &err), -EINVAL));
	cr_assert(strstr(err.msg, "raw image") != NULL, "%s", err.msg);
}

/* A commit cut short after step 1 (docs/disk-format.md): refused until run again. */
Test(disk, interrupted_commit)
{
	struct disk_error err = {{0}};
	struct disk_header h;
	uint8_t buf[100], got[100], id[DISK_HASH_LEN];
	struct disk_layer parent;
	struct disk *d;

	make_base_and_overlay();
	overlay_ok(P("o2"), P("o1"));
	open_ok(P("o2"), 0, &d);
	memset(buf, 0x33, sizeof(buf));
	cr_assert(eq(int, disk_write(d, 500, buf, sizeof(buf)), 0));
	cr_assert(eq(int, disk_flush(d), 0));
	disk_close(d);
	hdr_read(P("o2"), &h);
	h.flags = htole32(DISK_FLAG_COMMITTING);
	hdr_write_sealed(P("o2"), &h);
	open_fails(P("o2"), -EUCLEAN, "interrupted");
	cr_assert(eq(int, disk_commit(P("o2"), &err), 0), "%s", err.msg);
	open_ok(P("o2"), 0, &d);
	cr_assert(eq(int, disk_read(d, 500, got, sizeof(got)), 0));
	cr_assert(eq(int, memcmp(got, buf, sizeof(buf)), 0));
	cr_assert(eq(int, disk_write(d, 700, buf, sizeof(buf)), 0));
	cr_assert(eq(int, disk_flush(d), 0));
	disk_close(d);

	/* Cut short after step 2: the parent's generation is bumped, o2 names the identity it
	 * now has as commit_identity. Refused, then finished by a new commit. */
	cr_assert(eq(int, disk_layer_open(&parent, P("o1"), DISK_LAYER_WRITABLE, &err), 0));
	cr_assert(eq(int, disk_layer_begin_write(&parent), 0));
	cr_assert(eq(int, disk_layer_identity(&parent, id), 0));
	disk_layer_close(&parent);
	hdr_read(P("o2"), &h);
	h.flags = htole32(DISK_FLAG_COMMITTING);
	memcpy(h.commit_identity, id, sizeof(id));
	hdr_write_sealed(P("o2"), &h);
	open_fails(P("o2"), -EUCLEAN, "interrupted");
	cr_assert(eq(int, disk_commit(P("o2"), &err), 0), "%s", err.msg);
	open_ok(P("o1"), DISK_OPEN_RDONLY, &d);
	cr_assert(eq(int, disk_read(d, 700, got, sizeof(got)), 0));
	cr_assert(eq(int, memcmp(got, buf, sizeof(buf)), 0));
	disk_close(d);
	open_ok(P("o2"), 0, &d);
	cr_assert(eq(int, disk_read(d, 500, got, sizeof(got)), 0));
	cr_assert(eq(int, memcmp(got, buf, sizeof(buf)), 0));
	disk_close(d);
}

Test(disk, inspect_reports_a_changed_parent)
{
	struct disk_error err = {{0}};
	struct disk_layer_info info;
	struct timespec times[2] = {{0, UTIME_OMIT}, {12345, 0}};
	uint8_t buf[3 * 64 * KIB] = {1};
	struct disk *d;

	make_base_and_overlay();
	open_ok(P("o1"), 0, &d);
	cr_assert(eq(int, disk_write(d, 10, buf, sizeof(buf)), 0));
	cr_assert(eq(int, disk_flush(d), 0));
	disk_close(d);
	cr_assert(eq(int, disk_inspect(P("o1"), &info, &err), 0), "%s", err.msg);
	cr_assert(eq(u64, info.allocated_clusters, 4));
	cr_assert(eq(u64, info.hdr.generation, 1));
	cr_assert(eq(u32, info.hdr.parent_kind, DISK_PARENT_RAW));
	cr_assert(eq(str, (char *)info.hdr.parent_path, "base.img"));
	cr_assert(eq(str, info.parent_path, (char *)P("base.img")));
	cr_assert(eq(int, info.chain_status, 0));
	cr_assert(eq(int, utimensat(AT_FDCWD, P("base.img"), times, 0), 0));
	cr_assert(eq(int, disk_inspect(P("o1"), &info, &err), 0), "%s", err.msg);
	cr_assert(eq(int, info.chain_status, -ESTALE));
}

/* The cost of an overlay does not depend on the disk's size. */
Test(disk, overlay_of_1tib_sparse_base_is_instant)
{
	struct disk_error err = {{0}};
	struct timespec t0, t1;
	uint8_t b = 0xee, got;
	struct stat st;
	struct disk *d;
	double ms;
	int fd;

	fd = open(P("huge.img"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	cr_assert(fd >= 0);
	cr_assert(eq(int, ftruncate(fd, (off_t)TIB), 0));
	close(fd);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cr_assert(eq(int, disk_create_overlay(P("o1"), P("huge.img"), 0, &err), 0), "%s", err.msg);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	cr_log_info("overlay of a 1 TiB base created in %.2f ms", ms);
	fprintf(stderr, "disk: overlay of a 1 TiB sparse base created in %.2f ms\n", ms);
	cr_assert(ms < 250, "%.1f ms", ms);
	cr_assert(eq(int, stat(P("o1"), &st), 0));
	cr_assert(le(u64, (uint64_t)st.st_blocks * 512, 64 * KIB), "%llu bytes allocated",
		  (unsigned long long)st.st_blocks * 512);
	open_ok(P("o1"), 0, &d);
	cr_assert(eq(u64, disk_size(d), TIB));
	cr_assert(eq(int, disk_write(d, TIB - 1, &b, 1), 0));
	cr_assert(eq(int, disk_read(d, TIB - 1, &got, 1), 0));
	cr_assert(eq(u8, got, 0xee));
	cr_assert(eq(int, disk_read(d, TIB / 2, &got, 1), 0));
	cr_assert(eq(u8, got, 0));
	cr_assert(eq(int, disk_flush(d), 0));
	disk_close(d);
}

Test(disk, grown_overlay_reads_zeros_beyond_its_parent)
{
	/* A raw base ending inside a cluster, an overlay 3 MiB larger. */
	const uint64_t base_len = MIB + 1000, len = base_len + 3 * MIB;
	struct disk_error err = {{0}};
	uint8_t *base = malloc(base_len), *want = calloc(1, len), *got = malloc(len);
	uint64_t s = 7;
	struct disk *d;

	cr_assert(base && want && got);
	rng_fill(&s, base, base_len);
	memcpy(want, base, base_len);
	file_write(P("base.img"), base, base_len);
	cr_assert(eq(int, disk_create_overlay_len(P("small"), P("base.img"), 4096, 1000, &err),
		     -EINVAL));
	cr_assert(eq(int, disk_create_overlay_len(P("o1"), P("base.img"), 4096, len, &err), 0),
		  "%s", err.msg);
	open_ok(P("o1"), 0, &d);
	cr_assert(eq(u64, disk_size(d), len));
	cr_assert(eq(int, disk_read(d, 0, got, len), 0));
	cr_assert(eq(int, memcmp(got, want, len), 0), "the base, then zeros");
	/* A write straddling the base's end (its cluster is copied up) and one far beyond. */
	memset(want + base_len - 10, 0xab, 20);
	cr_assert(eq(int, disk_write(d, base_len - 10, want + base_len - 10, 20), 0));
	memset(want + len - 5000, 0xcd, 5000);
	async_write(d, len - 5000, want + len - 5000, 5000);
	model_check_reads(d, want, len, got);
	cr_assert(eq(int, disk_flush(d), 0));
	disk_close(d);
	open_ok(P("o1"), 0, &d);
	model_check_reads(d, want, len, got);
	cr_assert(eq(int, disk_snapshot(d, P("o2"), &err), 0), "%s", err.msg);
	model_check_reads(d, want, len, got);
	disk_close(d);
	/* o2 is as large as o1: it commits; a grown o3 above a smaller layer does not. */
	cr_assert(eq(int, disk_commit(P("o2"), &err), 0), "%s", err.msg);
	cr_assert(eq(int, disk_create_overlay_len(P("o3"), P("o2"), 0, len + MIB, &err), 0), "%s",
		  err.msg);
	cr_assert(eq(int, disk_commit(P("o3"), &err), -EINVAL));
	cr_assert(strstr(err.msg, "larger than its parent") != NULL, "%s", err.msg);
	free(base);
	free(want);
	free(got);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * crash-check: makes the crash test's base image, and judges the layer payload-crash wrote
 * through crashfs at every power cut its log allows (tests/integration/crash.sh, issue 13).
 *
 *   crash-check mkbase BASE SECTORS CLUSTER_SECTORS SEED
 *   crash-check verify BASE INIT LOG NAME CUTDIR [TRIALS]
 *
 * verify replays LOG (crashlog.h) over INIT, the layer file NAME as it was before the VMM
 * started. Between two fsyncs of the file lies a window of changes a power cut may have kept
 * any part of. For every window, so at every flush point, it builds TRIALS images (default
 * 8): everything before the window and nothing of it; all of it; a prefix of it; and the rest
 * random subsets, where each change survives or not and a write may be torn into any subset
 * of its 512-byte sectors (a disk promises no more). Each image is written to CUTDIR/NAME,
 * whose parent path leads to BASE as the layer's does, opened as the VMM would open it
 * (writable: disk_open checks the header, the bitmap and the parent), and read whole through
 * the disk code. Every sector must hold a version the plan (tests/guests/crash_plan.h) allows:
 * the one the last round the guest saw flushed left there, or one a later round wrote. The
 * guest saw round R flushed when the log holds mark R before the window's closing fsync (the
 * test marks the log when the guest says so, and the guest only says so once the FLUSH's
 * fsyncs have returned). Exit status 0 when every image passes, 1 at the first that fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crash_plan.h"
#include "crashlog.h"
#include "disk.h"

struct op {
	const struct crashlog_rec *rec;
	const uint8_t *data;
};

/* A file's bytes as an image holds them. */
struct image {
	uint8_t *buf;
	uint64_t len, cap;
};

static struct crash_seed sd;
static uint8_t *written; /* [round][sector]: 0, CRASH_WRITE or CRASH_ZEROES */
static uint8_t base0[CRASH_SECTOR_LEN];
static uint64_t rng = 0x243f6a8885a308d3ull;

static __attribute__((noreturn, format(printf, 1, 2))) void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("crash-check: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static uint64_t rand64(void)
{
	return rng = crash_mix(rng);
}

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n);
	if (!p)
		die("out of memory");
	return p;
}

static void img_reserve(struct image *im, uint64_t len)
{
	if (len > (1ull << 32))
		die("the log grows the file past 4 GiB");
	if (len > im->cap) {
		im->cap = len + (len >> 2);
		im->buf = xrealloc(im->buf, im->cap);
	}
}

/* Set the file's length; bytes it gains read as zeros. */
static void img_resize(struct image *im, uint64_t len)
{
	img_reserve(im, len);
	if (len > im->len)
		memset(im->buf + im->len, 0, len - im->len);
	im->len = len;
}

/* Apply one change; `torn` (writes only): keep only a random subset of its sectors. */
static void img_apply(struct image *im, const struct op *o, bool torn)
{
	const struct crashlog_rec *r = o->rec;
	uint64_t end = r->off + r->len;

	switch (r->type) {
	case CRASHLOG_WRITE:
		if (!torn) {
			if (end > im->len)
				img_resize(im, end);
			memcpy(im->buf + r->off, o->data, r->len);
			break;
		}
		for (uint64_t p = r->off; p < end;) {
			uint64_t q = (p / CRASH_SECTOR_LEN + 1) * CRASH_SECTOR_LEN;

			if (q > end)
				q = end;
			if (rand64() & 1) {
				if (q > im->len)
					img_resize(im, q);
				memcpy(im->buf + p, o->data + (p - r->off), q - p);
			}
			p = q;
		}
		break;
	case CRASHLOG_TRUNCATE:
		img_resize(im, r->off);
		break;
	case CRASHLOG_FALLOCATE:
		if (r->mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) {
			uint64_t stop = end < im->len ? end : im->len;

			if (r->off < stop)
				memset(im->buf + r->off, 0, stop - r->off);
			if (!(r->mode & FALLOC_FL_KEEP_SIZE) && end > im->len)
				img_resize(im, end);
		} else if (r->mode & ~(uint32_t)FALLOC_FL_KEEP_SIZE) {
			die("fallocate mode %#x is not modelled", r->mode);
		} else if (!(r->mode & FALLOC_FL_KEEP_SIZE) && end > im->len) {
			img_resize(im, end);
		}
		break;
	default:
		break;
	}
}

static uint8_t *read_file(const char *path, uint64_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	uint8_t *buf;

	if (fd < 0 || fstat(fd, &st) < 0)
		die("%s: %s", path, strerror(errno));
	buf = xrealloc(NULL, (size_t)st.st_size + 1);
	if (disk_pread_full(fd, buf, (uint64_t)st.st_size, 0) < 0)
		die("%s: cannot read it", path);
	close(fd);
	*len = (uint64_t)st.st_size;
	return buf;
}

static void write_image(const char *path, const struct image *im)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0 || disk_pwrite_full(fd, im->buf, im->len, 0) < 0 || close(fd) < 0)
		die("%s: cannot write the image: %s", path, strerror(errno));
}

/* Is `got` one version of sector s, whole, that the plan allows once the guest saw round g
 * flushed? */
static const char *judge_whole(uint32_t s, const uint8_t *got, uint32_t g, uint32_t *round)
{
	uint32_t want[CRASH_WORDS], w[CRASH_WORDS], r0 = 0, t;
	bool zero = true;

	if (s == 0)
		return memcmp(got, base0, sizeof(base0)) ? "sector 0 (the seed) changed" : NULL;
	for (uint32_t r = 1; r <= g && r <= CRASH_ROUNDS; r++)
		if (written[r * sd.sectors + s])
			r0 = r;
	for (unsigned i = 0; i < CRASH_SECTOR_LEN && zero; i++)
		zero = !got[i];
	*round = r0;
	if (zero) {
		if (r0 && written[r0 * sd.sectors + s] == CRASH_ZEROES)
			return NULL;
		for (uint32_t r = g + 1; r <= CRASH_ROUNDS; r++)
			if (written[r * sd.sectors + s] == CRASH_ZEROES)
				return NULL;
		return "zeros, which no allowed version is";
	}
	memcpy(w, got, sizeof(w));
	t = w[1];
	if ((w[0] != CRASH_MAGIC && w[0] != CRASH_BASE_MAGIC) || t > CRASH_ROUNDS)
		return "bytes no round wrote";
	crash_fill(sd.seed, t, s, want);
	if (memcmp(w, want, sizeof(want)))
		return "a torn or misplaced sector";
	if (t == r0 && (t == 0 || written[t * sd.sectors + s] == CRASH_WRITE))
		return NULL;
	if (t > g && written[t * sd.sectors + s] == CRASH_WRITE)
		return NULL;
	return t < r0 ? "an older version than the flushed one"
		      : "a version from a round that never wrote it";
}

static size_t mixed_sectors;

/*
 * A sector that is no version whole may still be several versions in part: the kernel can
 * split one write of the VMM's into two requests at any byte (FUSE does, where copying from
 * guest memory stops short), and a page written back between the two halves leaves a sector
 * half old, half new. The guest was not told either version was durable, so that is allowed,
 * as long as every byte comes from some version still allowed: the flushed one (r0) or a
 * later round's. Checked only when the whole-sector test failed.
 */
static bool mixed_ok(uint32_t s, const uint8_t *got, uint32_t g, uint32_t r0)
{
	static uint32_t versions[CRASH_ROUNDS + 1][CRASH_WORDS];
	unsigned n = 0;

	if (s == 0)
		return false;
	for (uint32_t r = g + 1; r <= CRASH_ROUNDS; r++) {
		if (written[r * sd.sectors + s] == CRASH_WRITE)
			crash_fill(sd.seed, r, s, versions[n++]);
		else if (written[r * sd.sectors + s] == CRASH_ZEROES)
			memset(versions[n++], 0, sizeof(versions[0]));
	}
	if (!n)
		return false; /* nothing after the flush: only r0 whole will do */
	if (r0 && written[r0 * sd.sectors + s] == CRASH_ZEROES)
		memset(versions[n++], 0, sizeof(versions[0]));
	else
		crash_fill(sd.seed, r0, s, versions[n++]);
	for (unsigned i = 0; i < CRASH_SECTOR_LEN; i++) {
		bool found = false;

		for (unsigned v = 0; v < n && !found; v++)
			found = got[i] == ((const uint8_t *)versions[v])[i];
		if (!found)
			return false;
	}
	mixed_sectors++;
	return true;
}

/* Is `got` a version of sector s the plan allows, once the guest saw round g flushed? */
static const char *judge_sector(uint32_t s, const uint8_t *got, uint32_t g, uint32_t *round)
{
	const char *bad = judge_whole(s, got, g, round);

	return bad && !mixed_ok(s, got, g, *round) ? bad : NULL;
}

/* Open the image as the VMM would and read every sector. NULL, or what is wrong. */
static const char *judge_image(const char *path, uint32_t g, char *why, size_t why_len)
{
	static uint8_t chunk[1 << 20];
	struct disk_error err = {{0}};
	struct disk *d;
	int r = disk_open(path, 0, &d, &err);

	if (r < 0) {
		snprintf(why, why_len, "the layer does not open: %s", err.msg);
		return why;
	}
	if (disk_size(d) != (uint64_t)sd.sectors * CRASH_SECTOR_LEN) {
		disk_close(d);
		snprintf(why, why_len, "the disk has %llu bytes", (unsigned long long)disk_size(d));
		return why;
	}
	for (uint64_t off = 0; off < disk_size(d); off += sizeof(chunk)) {
		uint64_t n =
			disk_size(d) - off < sizeof(chunk) ? disk_size(d) - off : sizeof(chunk);

		if ((r = disk_read(d, off, chunk, n)) < 0) {
			disk_close(d);
			snprintf(why, why_len, "reading at %llu: %s", (unsigned long long)off,
				 strerror(-r));
			return why;
		}
		for (uint64_t k = 0; k < n; k += CRASH_SECTOR_LEN) {
			uint32_t s = (uint32_t)((off + k) / CRASH_SECTOR_LEN), r0 = 0;
			const char *bad = judge_sector(s, chunk + k, g, &r0);

			if (bad) {
				disk_close(d);
				const uint32_t *w = (const uint32_t *)(chunk + k);

				snprintf(why, why_len,
					 "sector %u holds %s (round %u was flushed; it last "
					 "wrote this sector in round %u; its first words %08x %08x "
					 "%08x %08x)",
					 s, bad, g, r0, w[0], w[1], w[2], w[3]);
				return why;
			}
		}
	}
	disk_close(d);
	return NULL;
}

static int cmd_mkbase(int argc, char **argv)
{
	uint32_t sector[CRASH_WORDS];
	int fd;

	if (argc != 6)
		die("usage: crash-check mkbase BASE SECTORS CLUSTER_SECTORS SEED");
	sd = (struct crash_seed){CRASH_SEED_MAGIC, (uint32_t)strtoul(argv[3], NULL, 0),
				 (uint32_t)strtoul(argv[4], NULL, 0), 0,
				 strtoull(argv[5], NULL, 0)};
	if (sd.sectors < 4 || sd.sectors > 65536 || !sd.cluster_sectors)
		die("give 4 to 65536 sectors and a cluster of at least one");
	fd = open(argv[2], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		die("%s: %s", argv[2], strerror(errno));
	memset(sector, 0, sizeof(sector));
	memcpy(sector, &sd, sizeof(sd));
	if (disk_pwrite_full(fd, sector, sizeof(sector), 0) < 0)
		die("%s: cannot write", argv[2]);
	for (uint32_t s = 1; s < sd.sectors; s++) {
		crash_fill(sd.seed, 0, s, sector);
		if (disk_pwrite_full(fd, sector, sizeof(sector), (uint64_t)s * CRASH_SECTOR_LEN) <
		    0)
			die("%s: cannot write", argv[2]);
	}
	if (close(fd) < 0)
		die("%s: %s", argv[2], strerror(errno));
	return 0;
}

/* The log's records for file `name`, and its marks, in order. */
static struct op *load_log(const char *path, const char *name, size_t *nops)
{
	uint64_t len, pos = 0;
	uint8_t *log = read_file(path, &len);
	size_t n = 0, cap = 0, name_len = strlen(name);
	struct op *ops = NULL;

	while (pos < len) {
		const struct crashlog_rec *r = (const void *)(log + pos);

		if (len - pos < sizeof(*r) || r->name_len > CRASHLOG_NAME_MAX ||
		    r->data_len > CRASHLOG_DATA_MAX ||
		    len - pos - sizeof(*r) < (uint64_t)r->name_len + r->data_len ||
		    (r->type == CRASHLOG_WRITE && r->data_len != r->len) ||
		    r->off > UINT64_MAX - r->len) /* off + len may not wrap */
			die("%s: a malformed record at byte %llu", path, (unsigned long long)pos);
		if (r->type == CRASHLOG_MARK ||
		    (r->name_len == name_len && !memcmp(log + pos + sizeof(*r), name, name_len))) {
			if (n == cap)
				ops = xrealloc(ops, (cap = cap ? 2 * cap : 1024) * sizeof(*ops));
			ops[n++] = (struct op){r, log + pos + sizeof(*r) + r->name_len};
		}
		if (r->type == CRASHLOG_CREATE && r->name_len == name_len &&
		    !memcmp(log + pos + sizeof(*r), name, name_len))
			die("%s: %s was created anew while logged", path, name);
		pos += sizeof(*r) + r->name_len + r->data_len;
	}
	*nops = n;
	return ops;
}

static void plan_all(void)
{
	struct crash_op ops[CRASH_OPS_MAX];

	written = calloc((size_t)(CRASH_ROUNDS + 1) * sd.sectors, 1);
	if (!written)
		die("out of memory");
	for (uint32_t r = 1; r <= CRASH_ROUNDS; r++) {
		unsigned n = crash_plan(sd.seed, r, sd.sectors, sd.cluster_sectors, ops);

		for (unsigned i = 0; i < n; i++)
			for (uint32_t s = 0; s < ops[i].count; s++)
				written[r * sd.sectors + ops[i].sector + s] = (uint8_t)ops[i].kind;
	}
}

static int cmd_verify(int argc, char **argv)
{
	char cut[4096], why[1024];
	struct image durable = {0}, im = {0};
	size_t nops, first, next, fsyncs = 0, images = 0, widest = 0, torn = 0;
	unsigned trials = argc > 7 ? (unsigned)strtoul(argv[7], NULL, 0) : 8;
	uint64_t len;
	uint8_t *buf;
	uint32_t guaranteed = 0, marks = 0;
	struct op *ops;

	if (argc != 7 && argc != 8)
		die("usage: crash-check verify BASE INIT LOG NAME CUTDIR [TRIALS]");
	if (trials < 2)
		trials = 2;
	buf = read_file(argv[2], &len);
	if (len < CRASH_SECTOR_LEN)
		die("%s: too short for a seed", argv[2]);
	memcpy(base0, buf, sizeof(base0));
	memcpy(&sd, buf, sizeof(sd));
	free(buf);
	if (sd.magic != CRASH_SEED_MAGIC || (uint64_t)sd.sectors * CRASH_SECTOR_LEN != len)
		die("%s: not a crash-check base image", argv[2]);
	plan_all();
	durable.buf = read_file(argv[3], &durable.len);
	durable.cap = durable.len;
	ops = load_log(argv[4], argv[5], &nops);
	snprintf(cut, sizeof(cut), "%s/%s", argv[6], argv[5]);

	/* One window per fsync, and the one before the first: [first, next) holds no fsync,
	 * ops[next] (if any) is the fsync that ends it. */
	for (first = 0; first <= nops; first = next + 1) {
		uint32_t g = guaranteed;

		for (next = first; next < nops && ops[next].rec->type != CRASHLOG_FSYNC; next++)
			if (ops[next].rec->type == CRASHLOG_MARK && ops[next].rec->off > g)
				g = (uint32_t)ops[next].rec->off;
		if (next - first > widest)
			widest = next - first;
		for (unsigned t = 0; t < trials; t++) {
			size_t prefix = next - first;
			const char *bad;

			img_reserve(&im, durable.len);
			memcpy(im.buf, durable.buf, durable.len);
			im.len = durable.len;
			if (t == 0)
				prefix = 0;
			else if (t == 2 && next > first)
				prefix = rand64() % (next - first);
			for (size_t i = first; i < first + prefix; i++) {
				bool keep = t <= 2 || (rand64() & 1),
				     tear = t > 2 && !(rand64() & 3);

				torn += keep && tear && ops[i].rec->type == CRASHLOG_WRITE;
				if (keep)
					img_apply(&im, &ops[i], tear);
			}
			write_image(cut, &im);
			images++;
			if ((bad = judge_image(cut, g, why, sizeof(why))))
				die("power cut after fsync %zu (log record %zu), image %u of %u: "
				    "%s",
				    fsyncs, first, t, trials, bad);
		}
		for (size_t i = first; i < next; i++)
			img_apply(&durable, &ops[i], false);
		/* A mark in this window was logged before the fsync that ends it, so its round's
		 * fsyncs were logged before that: every image from here on must hold it. */
		for (size_t i = first; i < next; i++)
			marks += ops[i].rec->type == CRASHLOG_MARK;
		guaranteed = g;
		if (next < nops)
			fsyncs++;
	}
	if (guaranteed != CRASH_ROUNDS)
		die("the log marks round %u flushed, not all %u", guaranteed, CRASH_ROUNDS);
	printf("crash-check: ok rounds=%u marks=%u fsyncs=%zu images=%zu torn_writes=%zu "
	       "widest_window=%zu mixed_sectors=%zu sectors=%u\n",
	       CRASH_ROUNDS, marks, fsyncs, images, torn, widest, mixed_sectors, sd.sectors);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "mkbase"))
		return cmd_mkbase(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "verify"))
		return cmd_verify(argc, argv);
	die("usage: crash-check mkbase BASE SECTORS CLUSTER_SECTORS SEED | "
	    "verify BASE INIT LOG NAME CUTDIR [TRIALS]");
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandbox-disk: create, inspect, commit, read and write disk layers (disk/disk.c,
 * docs/disk-format.md) from the command line. Exit status: 0 done, 1 failed (one line on
 * stderr says why), 2 bad usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "disk.h"

static const char usage_text[] =
	"usage: sandbox-disk COMMAND ...\n"
	"  create-overlay [--cluster-size N] OVERLAY PARENT [SIZE]\n"
	"                  a new empty layer OVERLAY above PARENT (a layer or a raw image),\n"
	"                  of PARENT's size or a larger SIZE (what lies beyond reads as zeros)\n"
	"  create [--cluster-size N] PATH SIZE\n"
	"                  a new empty layer with no parent (zeros), SIZE bytes (K/M/G/T "
	"suffixes)\n"
	"  info PATH       the layer's header, allocation and identity, and whether its parents\n"
	"                  still match (exit status 1 when they do not)\n"
	"  commit OVERLAY  merge OVERLAY into its parent layer and empty it\n"
	"  flatten TOP OUT make OUT one layer with TOP's contents over its chain's base\n"
	"  identity IMAGE  write IMAGE.identity: the raw image's hash, so that layers over it\n"
	"                  match a copy of the same bytes elsewhere whatever its mtime\n"
	"  read [--raw] PATH OFFSET LEN\n"
	"                  write LEN bytes of the disk from OFFSET to stdout\n"
	"  write PATH OFFSET\n"
	"                  write stdin to the disk at OFFSET, then flush\n";

static int usage(void)
{
	fputs(usage_text, stderr);
	return 2;
}

/* Messages quote paths from the layer files themselves: printed made printable. */
static int fail(const char *msg)
{
	char buf[sizeof(((struct disk_error *)0)->msg) + 64];

	fprintf(stderr, "sandbox-disk: %s\n", printable_copy(msg, buf, sizeof(buf)));
	return 1;
}

/* A byte count with an optional K, M, G or T suffix (powers of 1024). */
static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned shift = 0;
	uint64_t v;

	errno = 0;
	if (*s == '-')
		return -EINVAL;
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'K':
	case 'k':
		shift = 10;
		break;
	case 'M':
	case 'm':
		shift = 20;
		break;
	case 'G':
	case 'g':
		shift = 30;
		break;
	case 'T':
	case 't':
		shift = 40;
		break;
	case 0:
		break;
	default:
		return -EINVAL;
	}
	if (shift && (end[1] || v > (UINT64_MAX >> shift)))
		return -EINVAL;
	*out = v << shift;
	return 0;
}

/* "--cluster-size N" at argv[0], if there; advances *argc and *argv past it. */
static int parse_cluster_opt(int *argc, char ***argv, uint32_t *cluster_len)
{
	uint64_t v;

	*cluster_len = 0;
	if (*argc < 1 || strcmp((*argv)[0], "--cluster-size"))
		return 0;
	if (*argc < 2 || parse_size((*argv)[1], &v) < 0 || v > UINT32_MAX) {
		fprintf(stderr, "sandbox-disk: --cluster-size needs a number of bytes\n");
		return -1;
	}
	*cluster_len = (uint32_t)v;
	*argc -= 2;
	*argv += 2;
	return 0;
}

static void print_hex(const char *label, const uint8_t *p, size_t len)
{
	printf("%-18s", label);
	for (size_t i = 0; i < len; i++)
		printf("%02x", p[i]);
	printf("\n");
}

static const char *parent_kind_name(uint32_t kind)
{
	switch (kind) {
	case DISK_PARENT_NONE:
		return "none (unallocated clusters read as zeros)";
	case DISK_PARENT_RAW:
		return "raw image";
	case DISK_PARENT_LAYER:
		return "layer";
	}
	return "unknown";
}

static int cmd_info(const char *path)
{
	static struct disk_layer_info info;
	struct disk_error err = {{0}};
	const struct disk_header *h = &info.hdr;
	static char text[4096 + DISK_PARENT_PATH_MAX];
	uint64_t clusters;

	if (disk_inspect(path, &info, &err) < 0)
		return fail(err.msg);
	clusters = h->virtual_len / h->cluster_len + (h->virtual_len % h->cluster_len != 0);
	printf("%-18s%s\n", "path:", printable_copy(path, text, sizeof(text)));
	printf("%-18s%u\n", "format version:", h->version);
	printf("%-18s%" PRIu64 " bytes\n", "virtual size:", h->virtual_len);
	printf("%-18s%u bytes\n", "cluster size:", h->cluster_len);
	printf("%-18s%s\n", "flags:", h->flags & DISK_FLAG_COMMITTING ? "committing" : "none");
	printf("%-18s%" PRIu64 "\n", "generation:", h->generation);
	print_hex("layer id:", h->layer_id, DISK_ID_LEN);
	print_hex("identity:", info.identity, DISK_HASH_LEN);
	printf("%-18s%" PRIu64 " bytes at %" PRIu64 "\n", "bitmap:", h->bitmap_len,
	       h->bitmap_offset);
	printf("%-18s%" PRIu64 "\n", "data offset:", h->data_offset);
	printf("%-18s%" PRIu64 " of %" PRIu64 " clusters\n", "allocated:", info.allocated_clusters,
	       clusters);
	printf("%-18s%" PRIu64 " bytes, %" PRIu64 " allocated on disk\n", "file:", info.file_len,
	       info.file_alloc_len);
	printf("%-18s%s\n", "parent:", parent_kind_name(h->parent_kind));
	if (h->parent_kind != DISK_PARENT_NONE) {
		/* The recorded path is the file's bytes, and where it led is a file name too. */
		size_t n = h->parent_path_len < DISK_PARENT_PATH_MAX ? h->parent_path_len
								     : DISK_PARENT_PATH_MAX;

		memcpy(text, h->parent_path, n);
		text[n] = '\0';
		printable(text, strlen(text), false);
		printf("%-18s%s", "parent path:", text);
		printf(" (%s)\n", printable_copy(info.parent_path, text, sizeof(text)));
		if (h->parent_kind == DISK_PARENT_RAW)
			printf("%-18s%" PRIu64 " bytes, mtime %" PRIu64 ".%09" PRIu64 "\n",
			       "parent recorded:", h->parent_len, h->parent_mtime_ns / 1000000000,
			       h->parent_mtime_ns % 1000000000);
		else
			printf("%-18s%" PRIu64 " bytes, generation %" PRIu64 "\n",
			       "parent recorded:", h->parent_len, h->parent_generation);
		print_hex("parent identity:", h->parent_identity, DISK_HASH_LEN);
	}
	if (info.chain_status == 0) {
		printf("%-18s%s\n", "chain:", "ok, every parent matches");
		return 0;
	}
	printf("%-18sBROKEN: %s\n",
	       "chain:", printable_copy(info.chain_error.msg, text, sizeof(text)));
	fflush(stdout);
	return fail(info.chain_error.msg);
}

static int cmd_read(const char *path, unsigned flags, const char *off_s, const char *len_s)
{
	struct disk_error err = {{0}};
	static uint8_t buf[1 << 20];
	uint64_t off, len;
	struct disk *d;
	int r = 0;

	if (parse_size(off_s, &off) < 0 || parse_size(len_s, &len) < 0)
		return usage();
	if (disk_open(path, flags, &d, &err) < 0)
		return fail(err.msg);
	while (len && !r) {
		uint64_t n = len < sizeof(buf) ? len : sizeof(buf);

		r = disk_read(d, off, buf, n);
		if (r < 0) {
			snprintf(err.msg, sizeof(err.msg),
				 "%s: reading %" PRIu64 "+%" PRIu64 ": %s", path, off, n,
				 r == -EINVAL ? "beyond the end of the disk" : strerror(-r));
			break;
		}
		if (fwrite(buf, 1, n, stdout) != n) {
			snprintf(err.msg, sizeof(err.msg), "writing to stdout: %s",
				 strerror(errno));
			r = -EIO;
		}
		off += n;
		len -= n;
	}
	disk_close(d);
	if (!r && fflush(stdout) != 0) {
		snprintf(err.msg, sizeof(err.msg), "writing to stdout: %s", strerror(errno));
		r = -EIO;
	}
	return r < 0 ? fail(err.msg) : 0;
}

static int cmd_write(const char *path, const char *off_s)
{
	struct disk_error err = {{0}};
	static uint8_t buf[1 << 20];
	struct disk *d;
	uint64_t off;
	size_t n;
	int r = 0;

	if (parse_size(off_s, &off) < 0)
		return usage();
	if (disk_open(path, 0, &d, &err) < 0)
		return fail(err.msg);
	while (!r && (n = fread(buf, 1, sizeof(buf), stdin)) > 0) {
		r = disk_write(d, off, buf, n);
		if (r < 0)
			snprintf(err.msg, sizeof(err.msg), "%s: writing %" PRIu64 "+%zu: %s", path,
				 off, n,
				 r == -EINVAL ? "beyond the end of the disk" : strerror(-r));
		off += n;
	}
	if (!r && ferror(stdin)) {
		snprintf(err.msg, sizeof(err.msg), "reading stdin: %s", strerror(errno));
		r = -EIO;
	}
	if (!r) {
		r = disk_flush(d);
		if (r < 0)
			snprintf(err.msg, sizeof(err.msg), "%s: flushing: %s", path, strerror(-r));
	}
	disk_close(d);
	return r < 0 ? fail(err.msg) : 0;
}

int main(int argc, char **argv)
{
	struct disk_error err = {{0}};
	uint32_t cluster_len;
	const char *cmd;
	uint64_t size;

	if (argc < 2)
		return usage();
	cmd = argv[1];
	argc -= 2;
	argv += 2;
	if (!strcmp(cmd, "create-overlay")) {
		size = 0;
		if (parse_cluster_opt(&argc, &argv, &cluster_len) < 0 || argc < 2 || argc > 3 ||
		    (argc == 3 && parse_size(argv[2], &size) < 0))
			return usage();
		if (disk_create_overlay_len(argv[0], argv[1], cluster_len, size, &err) < 0)
			return fail(err.msg);
		return 0;
	}
	if (!strcmp(cmd, "create")) {
		if (parse_cluster_opt(&argc, &argv, &cluster_len) < 0 || argc != 2)
			return usage();
		if (parse_size(argv[1], &size) < 0)
			return usage();
		if (disk_create(argv[0], size, cluster_len, &err) < 0)
			return fail(err.msg);
		return 0;
	}
	if (!strcmp(cmd, "info") && argc == 1)
		return cmd_info(argv[0]);
	if (!strcmp(cmd, "commit") && argc == 1)
		return disk_commit(argv[0], &err) < 0 ? fail(err.msg) : 0;
	if (!strcmp(cmd, "identity") && argc == 1)
		return disk_raw_identity_write(argv[0], &err) < 0 ? fail(err.msg) : 0;
	if (!strcmp(cmd, "flatten") && argc == 2)
		return disk_flatten(argv[0], argv[1], &err) < 0 ? fail(err.msg) : 0;
	if (!strcmp(cmd, "read") && argc == 4 && !strcmp(argv[0], "--raw"))
		return cmd_read(argv[1], DISK_OPEN_RAW, argv[2], argv[3]);
	if (!strcmp(cmd, "read") && argc == 3)
		return cmd_read(argv[0], DISK_OPEN_RDONLY, argv[1], argv[2]);
	if (!strcmp(cmd, "write") && argc == 2)
		return cmd_write(argv[0], argv[1]);
	return usage();
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench store-xfer: a snapshot file's push to the object store and its fetch back, with one
 * chunk transfer at a time against several at once (store/chunk_par.c; sandboxd
 * --store-transfers). tools/bench/fleet.sh runs it against Swift's S3 API on loopback.
 *
 *   bench-store-xfer ENDPOINT ACCESS SECRET REGION WORKDIR [--mib N] [--chunk-kib N]
 *                    [--rounds N] [--widths 1,4,8]
 *
 * Each round, each width in turn (interleaved): a file of N MiB of fresh random bytes (so the
 * store has none of its chunks) pushed as a push does (the prefix listed first, then every
 * chunk a PUT), then fetched back to a file by a fresh handle (every chunk a GET, checked) and
 * compared. Medians over the rounds. Last line:
 *   store mib= chunk_kib= push_W_ms=... pull_W_ms=... push_speedup= pull_speedup=
 * (speedups: the widest width's median against width 1's).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "store.h"

#define WIDTHS_MAX 8
#define ROUNDS_MAX 50

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void die(const char *what, const char *why)
{
	fprintf(stderr, "bench-store-xfer: %s: %s\n", what, why);
	exit(1);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void fill_random(uint8_t *p, size_t n)
{
	for (size_t off = 0; off < n;) {
		ssize_t r = getrandom(p + off, n - off, 0);

		if (r <= 0)
			die("getrandom", strerror(errno));
		off += (size_t)r;
	}
}

static void write_file(const char *path, const uint8_t *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	for (size_t off = 0; fd >= 0 && off < n;) {
		ssize_t w = write(fd, p + off, n - off);

		if (w <= 0)
			die(path, strerror(errno));
		off += (size_t)w;
	}
	if (fd < 0 || close(fd) < 0)
		die(path, strerror(errno));
}

static bool same_as(const char *path, const uint8_t *p, size_t n)
{
	uint8_t buf[1 << 16];
	size_t off = 0;
	ssize_t r;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	while (off <= n && (r = read(fd, buf, sizeof(buf))) > 0) {
		if (off + (size_t)r > n || memcmp(buf, p + off, (size_t)r) != 0)
			break;
		off += (size_t)r;
	}
	close(fd);
	return off == n;
}

int main(int argc, char **argv)
{
	struct s3_conf conf = {.timeout_ms = 60000};
	unsigned mib = 32, chunk_kib = 1024, rounds = 3, widths[WIDTHS_MAX] = {1, 4, 8}, nw = 3;
	double push[WIDTHS_MAX][ROUNDS_MAX], pull[WIDTHS_MAX][ROUNDS_MAX];
	char path[4200], out[4200], prefix[64], id[32];
	uint8_t secret[32], *img;
	struct s3 s3;

	if (argc < 6) {
		fprintf(stderr, "usage: bench-store-xfer ENDPOINT ACCESS SECRET REGION WORKDIR "
				"[--mib N] [--chunk-kib N] [--rounds N] [--widths 1,4,8]\n");
		return 2;
	}
	for (int i = 6; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--mib") == 0) {
			mib = (unsigned)atoi(argv[i + 1]);
		} else if (strcmp(argv[i], "--chunk-kib") == 0) {
			chunk_kib = (unsigned)atoi(argv[i + 1]);
		} else if (strcmp(argv[i], "--rounds") == 0) {
			rounds = (unsigned)atoi(argv[i + 1]);
		} else if (strcmp(argv[i], "--widths") == 0) {
			char *s = argv[i + 1], *end;

			for (nw = 0; nw < WIDTHS_MAX && *s; s = *end ? end + 1 : end) {
				widths[nw] = (unsigned)strtoul(s, &end, 10);
				if (end == s || widths[nw] < 1 || widths[nw] > CHUNK_PAR_MAX)
					die("--widths", "1 to 16, by commas");
				nw++;
			}
		} else {
			die(argv[i], "unknown option");
		}
	}
	if (mib < 1 || mib > 1024 || rounds < 1 || rounds > ROUNDS_MAX || nw < 1)
		die("options", "--mib 1 to 1024, --rounds 1 to 50, one width at least");
	snprintf(conf.endpoint, sizeof(conf.endpoint), "%s", argv[1]);
	snprintf(conf.access, sizeof(conf.access), "%s", argv[2]);
	snprintf(conf.secret, sizeof(conf.secret), "%s", argv[3]);
	snprintf(conf.region, sizeof(conf.region), "%s", argv[4]);
	snprintf(conf.bucket, sizeof(conf.bucket), "bench-store-xfer");
	if (s3_open(&s3, &conf) < 0 || s3_bucket_create(&s3) < 0)
		die("the store", s3.err);
	size_t len = (size_t)mib << 20;

	if (!(img = malloc(len)))
		die("memory", "out of it");
	snprintf(path, sizeof(path), "%s/file", argv[5]);
	snprintf(out, sizeof(out), "%s/back", argv[5]);
	fill_random(secret, sizeof(secret));
	for (unsigned r = 0; r < rounds; r++) {
		for (unsigned w = 0; w < nw; w++) {
			struct chunk_store cs, back;
			struct manifest m;
			double t0;

			fill_random(img, len);
			write_file(path, img, len);
			snprintf(prefix, sizeof(prefix), "b/r%u-w%u-%u", r, widths[w],
				 (unsigned)getpid());
			snprintf(id, sizeof(id), "m");
			if (chunk_store_open(&cs, &s3, prefix, secret) < 0 ||
			    manifest_init(&m, chunk_kib << 10) < 0)
				die("a store handle", cs.err);
			cs.transfers = widths[w];
			t0 = now_ms();
			if (chunk_store_learn(&cs, 16) < 0 ||
			    manifest_add_file(&m, &cs, "f", path) < 0 ||
			    manifest_put(&m, &cs, id) < 0)
				die("the push", cs.err);
			push[w][r] = now_ms() - t0;
			manifest_free(&m);
			chunk_store_close(&cs);
			if (chunk_store_open(&back, &s3, prefix, secret) < 0)
				die("a store handle", back.err);
			back.transfers = widths[w];
			unlink(out);
			t0 = now_ms();
			if (manifest_get(&m, &back, id, 0) < 0 ||
			    manifest_fetch_file(&m, &back, "f", out) < 0)
				die("the pull", back.err);
			pull[w][r] = now_ms() - t0;
			if (!same_as(out, img, len))
				die("the pull", "the file came back different");
			fprintf(stderr, "bench: round %u width %u: push %.0f ms, pull %.0f ms\n", r,
				widths[w], push[w][r], pull[w][r]);
			manifest_free(&m);
			chunk_store_close(&back);
			unlink(out);
		}
	}
	printf("store mib=%u chunk_kib=%u", mib, chunk_kib);
	double p1 = 0, q1 = 0, pn = 0, qn = 0;

	for (unsigned w = 0; w < nw; w++) {
		double p = median(push[w], (int)rounds), q = median(pull[w], (int)rounds);

		printf(" push_%u_ms=%.0f pull_%u_ms=%.0f", widths[w], p, widths[w], q);
		if (widths[w] == 1) {
			p1 = p;
			q1 = q;
		}
		pn = p;
		qn = q;
	}
	if (p1 > 0)
		printf(" push_speedup=%.2f pull_speedup=%.2f", p1 / pn, q1 / qn);
	printf("\n");
	unlink(path);
	s3_close(&s3);
	free(img);
	return 0;
}

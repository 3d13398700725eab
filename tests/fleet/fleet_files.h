/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the store checks share (store_check.c, patch_check.c, gc_check.c): their store's
 * address from the command line, random bytes, a file written whole and read back whole. Any
 * failure to write ends the program (exit 2: the check itself could not run).
 */
#ifndef SANDBOX_TESTS_FLEET_FILES_H
#define SANDBOX_TESTS_FLEET_FILES_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>

#include "store.h"

/* ENDPOINT ACCESS SECRET REGION (argv[1..4], as store.sh and gc.sh give them) into c, with
 * its bucket and a request timeout of 20 s. */
__attribute__((unused)) static void store_conf_from_args(struct s3_conf *c, char **argv,
							 const char *bucket)
{
	snprintf(c->endpoint, sizeof(c->endpoint), "%s", argv[1]);
	snprintf(c->access, sizeof(c->access), "%s", argv[2]);
	snprintf(c->secret, sizeof(c->secret), "%s", argv[3]);
	snprintf(c->region, sizeof(c->region), "%s", argv[4]);
	snprintf(c->bucket, sizeof(c->bucket), "%s", bucket);
	c->timeout_ms = 20000;
}

__attribute__((unused)) static void fill_random(uint8_t *p, size_t n)
{
	while (n) {
		ssize_t got = getrandom(p, n > 65536 ? 65536 : n, 0);

		if (got <= 0)
			exit(2);
		p += got;
		n -= (size_t)got;
	}
}

__attribute__((unused)) static void write_file(const char *path, const uint8_t *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0 || write(fd, p, n) != (ssize_t)n || close(fd) < 0) {
		perror(path);
		exit(2);
	}
}

__attribute__((unused)) static uint8_t *read_all(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	uint8_t *p;
	long len;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	p = malloc((size_t)len + 1);
	if (p && fread(p, 1, (size_t)len, f) != (size_t)len) {
		free(p);
		p = NULL;
	}
	fclose(f);
	*n = (size_t)len;
	return p;
}

#endif

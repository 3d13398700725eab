/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for tools/oci/oci_tar.c: the input is a tar stream as an imported
 * image's archive or layer gives it (ustar, pax extended headers, GNU long names), hostile,
 * delivered in reads of sizes the input's first byte picks. Every entry the reader returns
 * has a NUL-terminated path and link within their buffers, a type we handle, its data exactly
 * its size (never past the input), at most OCI_XATTRS_MAX xattrs within their bounds; every
 * path oci_path_norm accepts has no "." or ".." component, no leading or doubled '/', and
 * stays within the depth bound. Never a crash, a leak or a read past the input.
 *
 * Built and run by tests/fuzz/run.sh oci_tar; seeds in tests/fuzz/corpus/oci_tar/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oci.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define fuzz_check(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_oci_tar: %s:%d: %s\n", __FILE__, __LINE__, #cond);   \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

struct mem {
	const uint8_t *p;
	size_t len, off, chunk;
};

static int mem_read(void *arg, void *buf, size_t len, size_t *got)
{
	struct mem *m = arg;
	size_t n = m->len - m->off;

	if (n > len)
		n = len;
	if (n > m->chunk)
		n = m->chunk;
	memcpy(buf, m->p + m->off, n);
	m->off += n;
	*got = n;
	return 0;
}

static void check_norm(const char *path)
{
	char out[OCI_PATH_MAX + 1];
	unsigned depth = 0;

	if (oci_path_norm(path, out, sizeof(out)) < 0)
		return;
	fuzz_check(strnlen(out, sizeof(out)) < sizeof(out));
	fuzz_check(out[0] != '/');
	for (const char *s = out; *s;) {
		size_t n = strcspn(s, "/");

		fuzz_check(n > 0 && n <= OCI_NAME_MAX);
		fuzz_check(!(n == 1 && s[0] == '.') && !(n == 2 && s[0] == '.' && s[1] == '.'));
		depth++;
		s += n;
		if (*s == '/') {
			s++;
			fuzz_check(*s != '\0' && *s != '/');
		}
	}
	fuzz_check(depth <= OCI_DEPTH_MAX);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy;
	struct mem m;
	struct oci_msg msg = {{0}};
	struct oci_tar t;
	struct oci_tar_entry *e;
	static uint8_t buf[8192];
	int r;

	if (size < 1)
		return 0;
	copy = malloc(size);
	e = calloc(1, sizeof(*e));
	if (!copy || !e) {
		free(copy);
		free(e);
		return 0;
	}
	memcpy(copy, data, size);
	m = (struct mem){.p = copy + 1, .len = size - 1, .chunk = 1 + copy[0] * 37u};
	oci_tar_init(&t, mem_read, NULL, &m, &msg);
	while ((r = oci_tar_next(&t, e)) > 0) {
		uint64_t total = 0;
		size_t got;

		fuzz_check(strnlen(e->path, sizeof(e->path)) < sizeof(e->path) && e->path[0]);
		fuzz_check(strnlen(e->link, sizeof(e->link)) < sizeof(e->link));
		fuzz_check(strchr("0123456", e->type) && e->type);
		fuzz_check(e->nxattrs <= OCI_XATTRS_MAX && e->mode <= 07777);
		for (unsigned i = 0; i < e->nxattrs; i++)
			fuzz_check(e->xattrs[i].len <= OCI_XATTR_VAL_MAX && e->xattrs[i].name[0]);
		if (e->type == '1' || e->type == '2')
			fuzz_check(e->link[0] && e->size == 0);
		check_norm(e->path);
		check_norm(e->link);
		while ((r = oci_tar_data(&t, buf, sizeof(buf), &got)) == 0 && got)
			total += got;
		if (r < 0)
			break;
		fuzz_check(total == e->size);
		fuzz_check(m.off <= m.len);
	}
	fuzz_check(r <= 0);
	fuzz_check(r == 0 || msg.text[0]);
	oci_tar_entry_clear(e);
	free(e);
	free(copy);
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for an imported image's archive as a whole: tools/oci/oci_archive.c
 * (the tar's index), oci_image.c (index.json or manifest.json, the choice of the linux/amd64
 * image, manifests, the config, each layer's stream: gzip, digests) and oci_layer.c (each
 * layer applied under a staging root: whiteouts, links, owners, modes). The input is the
 * archive, a tar, hostile; it is written to a memfd and imported as a file. Layers are
 * applied before their digests are known to match (they stream), so mutated layers reach the
 * applier. Beyond "no crash, no leak": an image that opens has 1 to OCI_LAYERS_MAX layers,
 * each with a diff id; and nothing is ever made outside the staging root: a canary directory
 * beside it (which the seeds' symlinks aim at) stays empty.
 *
 * Runs as root (owners are set); the staging tree lives in a directory of its own under
 * $TMPDIR and is removed after each input. Built and run by tests/fuzz/run.sh oci_image;
 * seeds in tests/fuzz/corpus/oci_image/.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "oci.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define fuzz_check(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_oci_image: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* $TMPDIR/fuzz-oci.XXXXXX/{a/b/c/staging,tmp}: ../../../../tmp from the staging root is the
 * canary,
 * as the seeds' hostile links expect. */
static int top = -1, canary = -1;
static char top_path[4096];

/* At exit (libFuzzer's, after its runs): the scratch directory goes. */
static void cleanup(void)
{
	oci_rmtree(top, "a");
	oci_rmtree(top, "tmp");
	rmdir(top_path);
}

static void setup(void)
{
	char tmpl[4096];
	const char *t = getenv("TMPDIR");

	snprintf(tmpl, sizeof(tmpl), "%s/fuzz-oci.XXXXXX", t && *t ? t : "/tmp");
	fuzz_check(mkdtemp(tmpl));
	snprintf(top_path, sizeof(top_path), "%s", tmpl);
	atexit(cleanup);
	fuzz_check((top = open(tmpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0);
	fuzz_check(mkdirat(top, "a", 0700) == 0 && mkdirat(top, "a/b", 0700) == 0);
	fuzz_check(mkdirat(top, "a/b/c", 0700) == 0);
	fuzz_check(mkdirat(top, "tmp", 0700) == 0);
	fuzz_check((canary = openat(top, "tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0);
}

static bool canary_empty(void)
{
	int fd = dup(canary);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	bool empty = true;

	fuzz_check(d);
	rewinddir(d);
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			empty = false;
	closedir(d);
	return empty;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct oci_msg m = {{0}};
	struct oci_image img;
	struct oci_layer_stats st = {0};
	struct oci_tree tree;
	char path[64];
	int fd, bfd, root;

	if (top < 0)
		setup();
	fd = memfd_create("archive", MFD_CLOEXEC);
	fuzz_check(fd >= 0);
	fuzz_check(write(fd, data, size) == (ssize_t)size);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (oci_image_open(path, &img, &m) == 0) {
		fuzz_check(img.config && img.nlayers >= 1 && img.nlayers <= OCI_LAYERS_MAX);
		for (unsigned i = 0; i < img.nlayers; i++)
			fuzz_check(oci_valid_digest(img.layers[i].diff_id) &&
				   img.layers[i].name[0]);
		fuzz_check((bfd = openat(top, "a/b/c", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0);
		fuzz_check(mkdirat(bfd, "staging", 0755) == 0);
		root = openat(bfd, "staging", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		fuzz_check(root >= 0 && oci_tree_init(&tree, root) == 0);
		for (unsigned i = 0; i < img.nlayers; i++) {
			m.text[0] = '\0';
			if (oci_image_apply_layer(&img, i, &tree, &st, &m) < 0) {
				fuzz_check(m.text[0]);
				break;
			}
		}
		oci_tree_free(&tree);
		close(root);
		fuzz_check(canary_empty());
		fuzz_check(oci_rmtree(bfd, "staging") == 0);
		close(bfd);
	} else {
		fuzz_check(m.text[0]);
	}
	oci_image_close(&img);
	close(fd);
	return 0;
}

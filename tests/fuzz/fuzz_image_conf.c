/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for client/image_conf.c: the input is an image's exec.conf, read by exec
 * and run (the importer writes it, but the state directory's files are parsed as hostile
 * too). It parses into env entries that each hold '=' after a non-empty name, an absolute
 * workdir, ids below the agent's "keep", arguments without a newline, all inside the copy
 * it made; and what parses formats back (image_conf_format) to text that parses to the
 * same. Never a crash, a leak or a read past the input.
 *
 * Built and run by tests/fuzz/run.sh image_conf; seeds in tests/fuzz/corpus/image_conf/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define fuzz_check(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_image_conf: %s:%d: %s\n", __FILE__, __LINE__,        \
				#cond);                                                            \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static void check_list(char **v, unsigned n, char **w, unsigned wn)
{
	fuzz_check(n == wn);
	for (unsigned i = 0; i < n; i++) {
		fuzz_check(!strchr(v[i], '\n'));
		fuzz_check(strcmp(v[i], w[i]) == 0);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy = malloc(size ? size : 1), *text;
	struct image_conf c, d;
	size_t len;

	if (!copy)
		return 0;
	memcpy(copy, data, size);
	if (image_conf_parse(copy, size, &c) == 0) {
		for (unsigned i = 0; i < c.nenv; i++)
			fuzz_check(c.env[i][0] != '=' && strchr(c.env[i], '='));
		fuzz_check(!c.workdir || c.workdir[0] == '/');
		fuzz_check(!c.has_user || (c.uid != 0xffffffffu && c.gid != 0xffffffffu));
		fuzz_check(image_conf_format(&c, &text, &len) == 0);
		fuzz_check(image_conf_parse(text, len, &d) == 0);
		check_list(c.env, c.nenv, d.env, d.nenv);
		check_list(c.entrypoint, c.nentrypoint, d.entrypoint, d.nentrypoint);
		check_list(c.cmd, c.ncmd, d.cmd, d.ncmd);
		fuzz_check(!c.workdir == !d.workdir &&
			   (!c.workdir || !strcmp(c.workdir, d.workdir)));
		fuzz_check(c.has_user == d.has_user && c.uid == d.uid && c.gid == d.gid);
		free(text);
		image_conf_free(&d);
		image_conf_free(&c);
	}
	free(copy);
	return 0;
}

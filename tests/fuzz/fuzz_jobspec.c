/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for tools/jobspec/jobspec.c: the input is a job spec (YAML through
 * libyaml's loader), hostile. A spec either parses into something sandboxctl run can use (at
 * least one step, each with a script, sizes in their bounds, every env entry NAME=value, every
 * path normalised and inside its directory, the cache's step one of the steps) or is
 * refused with a message that names the spec; never a crash, a leak or a read past the text.
 *
 * Built and run by tests/fuzz/run.sh jobspec; seeds in tests/fuzz/corpus/jobspec/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobspec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Die loudly (libFuzzer keeps the input) when a promise of jobspec.h does not hold. */
#define fuzz_check(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_jobspec: %s:%d: %s\n", __FILE__, __LINE__, #cond);   \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* A ".." path component anywhere in s. */
static int has_dotdot(const char *s)
{
	for (const char *p = s; (p = strstr(p, "..")); p++)
		if ((p == s || p[-1] == '/') && (p[2] == '/' || p[2] == '\0'))
			return 1;
	return 0;
}

static void fuzz_check_spec(const struct jobspec *js)
{
	fuzz_check(js->nsteps >= 1 && js->nsteps <= 1000);
	fuzz_check(js->cpus >= 1 && js->cpus <= 32);
	fuzz_check(js->memory_mib >= 64 && js->memory_mib <= 65536);
	fuzz_check(strnlen(js->image, sizeof(js->image)) < sizeof(js->image) && js->image[0]);
	fuzz_check(js->nenv <= 256);
	for (unsigned i = 0; i < js->nenv; i++)
		fuzz_check(js->env[i] && strchr(js->env[i], '=') && js->env[i][0] != '=');
	for (unsigned i = 0; i < js->nsteps; i++) {
		const struct job_step *st = &js->steps[i];

		fuzz_check(st->name && st->run);
		fuzz_check(!st->workdir || st->workdir[0] == '/');
		fuzz_check(st->nenv <= 256);
		for (unsigned j = 0; j < st->nenv; j++)
			fuzz_check(st->env[j] && strchr(st->env[j], '=') && st->env[j][0] != '=');
	}
	fuzz_check(js->disk_gib <= 1024);
	fuzz_check(!js->no_network || js->nnet_opts == 0);
	for (unsigned i = 0; i < js->nnet_opts; i++)
		fuzz_check(js->net_opts[i]);
	fuzz_check(js->nnet_opts == 0 || strncmp(js->net_opts[0], "--", 2) == 0);
	/* paths never leave their directory: normalised, no ".." component */
	for (unsigned i = 0; i < js->nfiles; i++) {
		fuzz_check(js->files[i].src[0] && js->files[i].src[0] != '/' &&
			   !has_dotdot(js->files[i].src));
		fuzz_check(js->files[i].dst[0] == '/' && js->files[i].dst[1] &&
			   !has_dotdot(js->files[i].dst));
	}
	for (unsigned i = 0; i < js->nartifacts; i++)
		fuzz_check(js->artifacts[i][0] == '/' && js->artifacts[i][1] &&
			   !has_dotdot(js->artifacts[i]) && !strstr(js->artifacts[i], "//"));
	fuzz_check(js->cache_step <= js->nsteps);
	{
		FILE *f = fopen("/dev/null", "w");

		if (f) {
			jobspec_print(js, f); /* the golden files' printer, on anything parsed */
			fclose(f);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jobspec js;
	char err[512] = "";
	/* An exact-size copy, not NUL-terminated: a read one past the text is an ASan report. */
	char *text = malloc(size ? size : 1);

	if (!text)
		return 0;
	memcpy(text, data, size);
	if (jobspec_parse("fuzz.yaml", text, size, &js, err, sizeof(err)) == 0)
		fuzz_check_spec(&js);
	else
		fuzz_check(strncmp(err, "fuzz.yaml", 9) == 0 &&
			   strnlen(err, sizeof(err)) < sizeof(err));
	jobspec_free(&js);
	free(text);
	return 0;
}

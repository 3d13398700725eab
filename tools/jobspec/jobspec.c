/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Job specs (sandboxctl run; docs/jobspec.md is the reference), parsed with libyaml's document
 * loader once jobspec_shape.c has bounded its shape. A spec is hostile input: every node's type
 * and every value is checked, sizes are bounded, a key given twice is an error, and every
 * error names FILE:LINE:COLUMN.
 *
 *   image: debian            # optional, "default" is the default image
 *   cpus: 2                  # optional
 *   memory: 1024             # MiB, optional
 *   disk: 8                  # GiB, optional (the image's size)
 *   timeout: 600             # seconds for the whole job, optional
 *   env: {KEY: value, ...}   # optional
 *   network: none | {...}    # optional (jobspec_net.c)
 *   secrets: [...]           # optional (jobspec_net.c)
 *   files: [{src:, dst:}]    # optional (jobspec_files.c), as artifacts: and cache:
 *   steps:                   # at least one
 *     - name: build          # optional (default "step N")
 *       run: make -j2        # a sh -c script
 *       timeout: 60          # seconds, optional
 *       env: {KEY: value}    # optional, over the job's
 *       workdir: /src        # optional, absolute
 *       continue-on-error: true
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "jobspec_yaml.h"

#define SPEC_MAX_LEN   (1u << 20)
#define SPEC_MAX_STEPS 1000

/* env: NAME: value pairs into (*env, *nenv), at most SPEC_MAX_LIST. */
static int spec_env(struct spec_parse *p, const yaml_node_t *n, char ***env, unsigned *nenv)
{
	int err = spec_mapping(p, n, "env");

	if (err < 0)
		return err;
	if (!(*env = calloc(spec_mapping_len(n) + 1, sizeof(**env))))
		return -ENOMEM;
	for (size_t i = 0; i < spec_mapping_len(n); i++) {
		yaml_node_t *k, *v;
		const char *key = spec_key(p, n, i, &k, &v), *val;
		char *e;

		if (!(val = spec_scalar(p, v, key)))
			return -EINVAL;
		if (!*key || strchr(key, '=') || strlen(key) > 255)
			return spec_fail(p, k, "env: '%.40s' is not a variable name", key);
		if (spec_charge(p, v, strlen(key) + strlen(val) + 2) < 0)
			return -EINVAL;
		if (asprintf(&e, "%s=%s", key, val) < 0)
			return -ENOMEM;
		(*env)[(*nenv)++] = e;
	}
	return 0;
}

static int spec_step(struct spec_parse *p, const yaml_node_t *n, struct job_step *st)
{
	uint64_t v;
	int err;

	if (n->type != YAML_MAPPING_NODE)
		return spec_fail(p, n, "steps: each step is a mapping with 'run:'");
	if ((err = spec_mapping(p, n, "step")) < 0)
		return err;
	for (size_t i = 0; i < spec_mapping_len(n); i++) {
		yaml_node_t *k, *val;
		const char *key = spec_key(p, n, i, &k, &val);

		if (strcmp(key, "name") == 0) {
			err = spec_string(p, val, "name", &st->name);
		} else if (strcmp(key, "run") == 0) {
			err = spec_string(p, val, "run", &st->run);
		} else if (strcmp(key, "timeout") == 0) {
			err = spec_uint(p, val, "timeout", 1, 7 * 24 * 3600, &v);
			st->timeout_s = (unsigned)v;
		} else if (strcmp(key, "env") == 0) {
			err = spec_env(p, val, &st->env, &st->nenv);
		} else if (strcmp(key, "workdir") == 0) {
			if (!(err = spec_string(p, val, "workdir", &st->workdir)) &&
			    (st->workdir[0] != '/' || strlen(st->workdir) > 4095))
				err = spec_fail(p, val,
						"workdir: give an absolute path in the guest");
		} else if (strcmp(key, "continue-on-error") == 0) {
			err = spec_bool(p, val, "continue-on-error", &st->continue_on_error);
		} else {
			err = spec_fail(
				p, k,
				"unknown step key '%.40s' (name, run, timeout, env, workdir, "
				"continue-on-error)",
				key);
		}
		if (err < 0)
			return err;
	}
	if (!st->run)
		return spec_fail(p, n, "a step needs 'run:'");
	return 0;
}

static int spec_steps(struct spec_parse *p, const yaml_node_t *steps, struct jobspec *js)
{
	int n = spec_sequence(p, steps, "steps", SPEC_MAX_STEPS), err;

	if (n < 0)
		return n;
	if (n == 0)
		return spec_fail(p, steps, "steps: expected a non-empty list");
	if (!(js->steps = calloc((size_t)n, sizeof(*js->steps))))
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		struct job_step *st = &js->steps[js->nsteps++];

		if ((err = spec_step(p, spec_item(p, steps, (size_t)i), st)) < 0)
			return err;
		if (!st->name && asprintf(&st->name, "step %u", js->nsteps) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int spec_top(struct spec_parse *p, const yaml_node_t *root, struct jobspec *js)
{
	const yaml_node_t *steps = NULL, *secrets = NULL, *cache = NULL;
	uint64_t v;
	int err = 0;

	if (!root)
		return spec_fail(p, NULL, "empty job spec");
	if (root->type != YAML_MAPPING_NODE)
		return spec_fail(p, root, "a job spec is a mapping (image:, steps:, ...)");
	if ((err = spec_mapping(p, root, "job spec")) < 0)
		return err;
	for (size_t i = 0; i < spec_mapping_len(root) && !err; i++) {
		yaml_node_t *k, *val;
		const char *key = spec_key(p, root, i, &k, &val), *s;

		if (strcmp(key, "image") == 0) {
			if (!(s = spec_scalar(p, val, "image")))
				return -EINVAL;
			if (!valid_name(s))
				return spec_fail(p, val, "image: '%.40s' is not an image name", s);
			snprintf(js->image, sizeof(js->image), "%s",
				 strcmp(s, "default") == 0 ? CREATE_DEFAULT_IMAGE : s);
		} else if (strcmp(key, "cpus") == 0) {
			err = spec_uint(p, val, "cpus", 1, 32, &v);
			js->cpus = (unsigned)v;
		} else if (strcmp(key, "memory") == 0) {
			err = spec_uint(p, val, "memory", 64, 65536, &js->memory_mib);
		} else if (strcmp(key, "disk") == 0) {
			err = spec_uint(p, val, "disk", 1, 1024, &js->disk_gib);
		} else if (strcmp(key, "timeout") == 0) {
			err = spec_uint(p, val, "timeout", 1, 7 * 24 * 3600, &v);
			js->timeout_s = (unsigned)v;
		} else if (strcmp(key, "env") == 0) {
			err = spec_env(p, val, &js->env, &js->nenv);
		} else if (strcmp(key, "network") == 0) {
			err = spec_network(p, val, js);
		} else if (strcmp(key, "secrets") == 0) {
			err = spec_secrets(p, val, js);
			secrets = val;
		} else if (strcmp(key, "files") == 0) {
			err = spec_files(p, val, js);
		} else if (strcmp(key, "artifacts") == 0) {
			err = spec_artifacts(p, val, js);
		} else if (strcmp(key, "cache") == 0) {
			cache = val;
		} else if (strcmp(key, "steps") == 0) {
			steps = val;
		} else {
			err = spec_fail(p, k,
					"unknown key '%.40s' (image, cpus, memory, disk, timeout, "
					"env, network, secrets, files, steps, artifacts, cache)",
					key);
		}
	}
	if (err < 0)
		return err;
	if (js->no_network && secrets)
		return spec_fail(p, secrets, "secrets: network: none has no proxy to add them");
	if (!steps)
		return spec_fail(p, root, "no 'steps:'");
	if ((err = spec_steps(p, steps, js)) < 0)
		return err;
	return cache ? spec_cache(p, cache, js) : 0;
}

int jobspec_parse(const char *name, const char *text, size_t len, struct jobspec *js, char *err,
		  size_t err_len)
{
	struct spec_parse p = {.path = name, .err = err, .err_len = err_len};
	yaml_parser_t parser;
	yaml_document_t doc;
	int r;

	memset(js, 0, sizeof(*js));
	snprintf(js->image, sizeof(js->image), "%s", CREATE_DEFAULT_IMAGE);
	js->cpus = 1;
	js->memory_mib = 512;
	/* +2: jobspec_load's --ca-file */
	if (!(js->net_opts = calloc(SPEC_MAX_WORDS + 3, sizeof(*js->net_opts))))
		return -ENOMEM;
	if (len > SPEC_MAX_LEN) {
		snprintf(err, err_len, "%s: larger than 1 MiB", name);
		return -EFBIG;
	}
	/* Before libyaml's loader, which is quadratic in some shapes (jobspec_shape.c). */
	if ((r = spec_shape(&p, text, len)) < 0) {
		if (r == -ENOMEM)
			snprintf(err, err_len, "%s: out of memory", name);
		return r;
	}
	if (!yaml_parser_initialize(&parser))
		return -ENOMEM;
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		snprintf(err, err_len, "%s:%zu:%zu: %s", name, parser.problem_mark.line + 1,
			 parser.problem_mark.column + 1,
			 parser.problem ? parser.problem : "invalid YAML");
		yaml_parser_delete(&parser);
		return -EINVAL;
	}
	p.doc = &doc;
	r = spec_top(&p, yaml_document_get_root_node(&doc), js);
	if (r == -ENOMEM)
		snprintf(err, err_len, "%s: out of memory", name);
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	return r;
}

/* The absolute, symlink-free directory of the spec at `path`. */
static int spec_dir_of(const char *path, char *out, size_t len)
{
	char copy[4096], *real;
	const char *slash = strrchr(path, '/');
	int r;

	if (!slash)
		snprintf(copy, sizeof(copy), ".");
	else if (snprintf(copy, sizeof(copy), "%.*s", (int)(slash - path), path) >=
		 (int)sizeof(copy)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (!(real = realpath(copy[0] ? copy : "/", NULL)))
		return -1;
	r = snprintf(out, len, "%s", real) >= (int)len ? -1 : 0;
	free(real);
	if (r < 0)
		errno = ENAMETOOLONG;
	return r;
}

int jobspec_load(const char *path, struct jobspec *js, char *err, size_t err_len)
{
	const char *ca;
	char *text = NULL;
	size_t len;
	int r;

	memset(js, 0, sizeof(*js));
	if ((r = read_file_follow(path, SPEC_MAX_LEN, &text, &len)) < 0) { /* the user's file */
		snprintf(err, err_len, "%s: %s", path,
			 r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
		return r;
	}
	r = jobspec_parse(path, text, len, js, err, err_len);
	free(text);
	if (r == 0 && spec_dir_of(path, js->dir, sizeof(js->dir)) < 0) {
		snprintf(err, err_len, "%s: cannot resolve its directory: %s", path,
			 strerror(errno));
		return -errno;
	}
	/* What the proxy trusts upstream, the host's to say (a company's TLS CA, a test's fake
	 * internet), never the spec's: $SANDBOX_CA_FILE, else the host's trust store. */
	ca = getenv("SANDBOX_CA_FILE");
	if (r == 0 && !js->no_network && ca && *ca) {
		const char *words[] = {"--ca-file", ca};

		for (int i = 0; i < 2; i++)
			if (!(js->net_opts[js->nnet_opts++] = strdup(words[i]))) {
				js->nnet_opts--;
				snprintf(err, err_len, "%s: out of memory", path);
				return -ENOMEM;
			}
	}
	return r;
}

static void free_list(char **l, unsigned n)
{
	for (unsigned i = 0; l && i < n; i++)
		free(l[i]);
	free(l);
}

void jobspec_free(struct jobspec *js)
{
	free_list(js->env, js->nenv);
	free_list(js->net_opts, js->nnet_opts);
	for (unsigned i = 0; js->steps && i < js->nsteps; i++) {
		free(js->steps[i].name);
		free(js->steps[i].run);
		free(js->steps[i].workdir);
		free_list(js->steps[i].env, js->steps[i].nenv);
	}
	free(js->steps);
	for (unsigned i = 0; js->files && i < js->nfiles; i++) {
		free(js->files[i].src);
		free(js->files[i].dst);
	}
	free(js->files);
	free_list(js->artifacts, js->nartifacts);
	memset(js, 0, sizeof(*js));
}

/* One line of text made printable (a spec may come with the code it tests). */
static void print_text(FILE *f, const char *key, const char *s)
{
	char buf[512];

	fprintf(f, "%s%s\n", key, printable_copy(s, buf, sizeof(buf)));
}

void jobspec_print(const struct jobspec *js, FILE *f)
{
	fprintf(f, "image: %s\ncpus: %u\nmemory: %llu MiB\n", js->image, js->cpus,
		(unsigned long long)js->memory_mib);
	if (js->disk_gib)
		fprintf(f, "disk: %llu GiB\n", (unsigned long long)js->disk_gib);
	else
		fprintf(f, "disk: the image's\n");
	fprintf(f, "timeout: %u s\n", js->timeout_s);
	for (unsigned i = 0; i < js->nenv; i++)
		print_text(f, "env: ", js->env[i]);
	fprintf(f, "network: %s\n", js->no_network ? "none" : "proxy");
	for (unsigned i = 0; i < js->nnet_opts; i++) {
		char buf[512];

		if (strcmp(js->net_opts[i], "--deny-all") == 0 || i + 1 == js->nnet_opts) {
			fprintf(f, "  %s\n", js->net_opts[i]);
			continue;
		}
		fprintf(f, "  %s %s\n", js->net_opts[i],
			printable_copy(js->net_opts[i + 1], buf, sizeof(buf)));
		i++;
	}
	for (unsigned i = 0; i < js->nfiles; i++) {
		print_text(f, "file: ", js->files[i].src);
		print_text(f, "  to: ", js->files[i].dst);
	}
	for (unsigned i = 0; i < js->nsteps; i++) {
		const struct job_step *st = &js->steps[i];

		fprintf(f, "step %u:", i + 1);
		print_text(f, " ", st->name);
		if (st->timeout_s)
			fprintf(f, "  timeout: %u s\n", st->timeout_s);
		if (st->workdir)
			print_text(f, "  workdir: ", st->workdir);
		if (st->continue_on_error)
			fprintf(f, "  continue-on-error\n");
		for (unsigned j = 0; j < st->nenv; j++)
			print_text(f, "  env: ", st->env[j]);
		print_text(f, "  run: ", st->run);
		if (js->cache_step == i + 1)
			fprintf(f, "  cached after\n");
	}
	for (unsigned i = 0; i < js->nartifacts; i++)
		print_text(f, "artifact: ", js->artifacts[i]);
}

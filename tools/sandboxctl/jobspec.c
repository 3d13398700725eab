/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Job specs (sandboxctl run): the minimal part of DESIGN.md's "Job specs", parsed with
 * libyaml's document loader. A spec is hostile input: every node's type and every value is
 * checked, sizes are bounded, and every error names file:line:column.
 *
 *   image: debian            # optional, "default" is the default image
 *   cpus: 2                  # optional
 *   memory: 1024             # MiB, optional
 *   timeout: 600             # seconds for the whole job, optional
 *   env: {KEY: value, ...}   # optional
 *   steps:                   # at least one
 *     - name: build          # optional (default "step N")
 *       run: make -j2        # a sh -c script
 *       timeout: 60          # seconds, optional
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "sandboxctl.h"

#define SPEC_MAX_LEN   (1u << 20)
#define SPEC_MAX_STEPS 1000
#define SPEC_MAX_ENV   256
/* What the spec's strings may add up to once copied out. Aliases are read by reference, so a
 * 1 MiB spec of `steps: [*big, *big, ...]` would otherwise copy its 1 MiB script per step
 * (~1 GiB for 1000 steps). */
#define SPEC_MAX_COPY  (4u << 20)

struct spec_parse {
	const char *path;
	yaml_document_t *doc;
	char *err;
	size_t err_len;
	size_t copied; /* bytes of strings copied out of the document */
};

/* Charge `len` bytes of copied text to the spec: -E2BIG (after the error) past SPEC_MAX_COPY. */
static int spec_charge(struct spec_parse *p, const yaml_node_t *n, size_t len);

static int spec_fail(struct spec_parse *p, const yaml_node_t *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int spec_fail(struct spec_parse *p, const yaml_node_t *n, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(p->err, p->err_len, "%s:%zu:%zu: %s", p->path, n ? n->start_mark.line + 1 : 1,
		 n ? n->start_mark.column + 1 : 1, msg);
	return -EINVAL;
}

static int spec_charge(struct spec_parse *p, const yaml_node_t *n, size_t len)
{
	if (len > SPEC_MAX_COPY - p->copied) {
		spec_fail(p, n,
			  "the spec's strings add up to more than %u MiB (aliases repeat them)",
			  SPEC_MAX_COPY >> 20);
		return -E2BIG;
	}
	p->copied += len;
	return 0;
}

/* The scalar's text, or NULL (after the error) when `n` is not a scalar. */
static const char *spec_scalar(struct spec_parse *p, const yaml_node_t *n, const char *what)
{
	if (!n || n->type != YAML_SCALAR_NODE) {
		spec_fail(p, n, "%s: expected a single value", what);
		return NULL;
	}
	if (strlen((const char *)n->data.scalar.value) != n->data.scalar.length) {
		spec_fail(p, n, "%s: contains a NUL byte", what);
		return NULL;
	}
	return (const char *)n->data.scalar.value;
}

static int spec_uint(struct spec_parse *p, const yaml_node_t *n, const char *what, uint64_t min,
		     uint64_t max, uint64_t *out)
{
	const char *s = spec_scalar(p, n, what);

	if (!s)
		return -EINVAL;
	if (!parse_u64(s, min, max, out))
		return spec_fail(p, n, "%s: expected a number from %llu to %llu, got '%.40s'", what,
				 (unsigned long long)min, (unsigned long long)max, s);
	return 0;
}

static int spec_string(struct spec_parse *p, const yaml_node_t *n, const char *what, char **out)
{
	const char *s = spec_scalar(p, n, what);

	if (!s)
		return -EINVAL;
	if (spec_charge(p, n, strlen(s) + 1) < 0)
		return -EINVAL;
	free(*out);
	*out = strdup(s);
	return *out ? 0 : -ENOMEM;
}

static int spec_env(struct spec_parse *p, const yaml_node_t *n, struct jobspec *js)
{
	if (n->type != YAML_MAPPING_NODE)
		return spec_fail(p, n, "env: expected a mapping of NAME: value");
	for (yaml_node_pair_t *kv = n->data.mapping.pairs.start; kv < n->data.mapping.pairs.top;
	     kv++) {
		yaml_node_t *k = yaml_document_get_node(p->doc, kv->key);
		yaml_node_t *v = yaml_document_get_node(p->doc, kv->value);
		const char *key = spec_scalar(p, k, "env name"), *val;
		char *e;

		if (!key || !(val = spec_scalar(p, v, key)))
			return -EINVAL;
		if (!*key || strchr(key, '=') || strlen(key) > 255)
			return spec_fail(p, k, "env: '%.40s' is not a variable name", key);
		if (js->nenv == SPEC_MAX_ENV)
			return spec_fail(p, k, "env: at most %d variables", SPEC_MAX_ENV);
		if (spec_charge(p, v, strlen(key) + strlen(val) + 2) < 0)
			return -EINVAL;
		if (asprintf(&e, "%s=%s", key, val) < 0)
			return -ENOMEM;
		js->env[js->nenv++] = e;
	}
	return 0;
}

static int spec_step(struct spec_parse *p, const yaml_node_t *n, struct job_step *st)
{
	uint64_t v;
	int err;

	if (n->type != YAML_MAPPING_NODE)
		return spec_fail(p, n, "steps: each step is a mapping with 'run:'");
	for (yaml_node_pair_t *kv = n->data.mapping.pairs.start; kv < n->data.mapping.pairs.top;
	     kv++) {
		yaml_node_t *k = yaml_document_get_node(p->doc, kv->key);
		yaml_node_t *val = yaml_document_get_node(p->doc, kv->value);
		const char *key = spec_scalar(p, k, "step key");

		if (!key)
			return -EINVAL;
		if (strcmp(key, "name") == 0)
			err = spec_string(p, val, "name", &st->name);
		else if (strcmp(key, "run") == 0)
			err = spec_string(p, val, "run", &st->run);
		else if (strcmp(key, "timeout") == 0) {
			err = spec_uint(p, val, "timeout", 1, 7 * 24 * 3600, &v);
			st->timeout_s = (unsigned)v;
		} else
			err = spec_fail(p, k, "unknown step key '%.40s' (name, run, timeout)", key);
		if (err < 0)
			return err;
	}
	if (!st->run)
		return spec_fail(p, n, "a step needs 'run:'");
	return 0;
}

static int spec_top(struct spec_parse *p, const yaml_node_t *root, struct jobspec *js)
{
	const yaml_node_t *steps = NULL;
	uint64_t v;
	int err = 0;

	if (!root)
		return spec_fail(p, NULL, "empty job spec");
	if (root->type != YAML_MAPPING_NODE)
		return spec_fail(p, root, "a job spec is a mapping (image:, steps:, ...)");
	for (yaml_node_pair_t *kv = root->data.mapping.pairs.start;
	     kv < root->data.mapping.pairs.top && !err; kv++) {
		yaml_node_t *k = yaml_document_get_node(p->doc, kv->key);
		yaml_node_t *val = yaml_document_get_node(p->doc, kv->value);
		const char *key = spec_scalar(p, k, "key"), *s;

		if (!key)
			return -EINVAL;
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
		} else if (strcmp(key, "timeout") == 0) {
			err = spec_uint(p, val, "timeout", 1, 7 * 24 * 3600, &v);
			js->timeout_s = (unsigned)v;
		} else if (strcmp(key, "env") == 0) {
			err = spec_env(p, val, js);
		} else if (strcmp(key, "steps") == 0) {
			steps = val;
		} else {
			err = spec_fail(p, k,
					"unknown key '%.40s' (image, cpus, memory, timeout, env, "
					"steps)",
					key);
		}
	}
	if (err < 0)
		return err;
	if (!steps)
		return spec_fail(p, root, "no 'steps:'");
	if (steps->type != YAML_SEQUENCE_NODE ||
	    steps->data.sequence.items.top == steps->data.sequence.items.start)
		return spec_fail(p, steps, "steps: expected a non-empty list");
	if (steps->data.sequence.items.top - steps->data.sequence.items.start > SPEC_MAX_STEPS)
		return spec_fail(p, steps, "steps: at most %d", SPEC_MAX_STEPS);
	js->steps =
		calloc((size_t)(steps->data.sequence.items.top - steps->data.sequence.items.start),
		       sizeof(*js->steps));
	if (!js->steps)
		return -ENOMEM;
	for (yaml_node_item_t *it = steps->data.sequence.items.start;
	     it < steps->data.sequence.items.top; it++) {
		struct job_step *st = &js->steps[js->nsteps++];

		if ((err = spec_step(p, yaml_document_get_node(p->doc, *it), st)) < 0)
			return err;
		if (!st->name && asprintf(&st->name, "step %u", js->nsteps) < 0)
			return -ENOMEM;
	}
	return 0;
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
	js->env = calloc(SPEC_MAX_ENV, sizeof(*js->env));
	if (!js->env)
		return -ENOMEM;
	if (len > SPEC_MAX_LEN) {
		snprintf(err, err_len, "%s: larger than 1 MiB", name);
		return -EFBIG;
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

int jobspec_load(const char *path, struct jobspec *js, char *err, size_t err_len)
{
	char *text = NULL;
	size_t len;
	int r;

	memset(js, 0, sizeof(*js));
	if ((r = read_file(path, SPEC_MAX_LEN, &text, &len)) < 0) {
		snprintf(err, err_len, "%s: %s", path,
			 r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
		return r;
	}
	r = jobspec_parse(path, text, len, js, err, err_len);
	free(text);
	return r;
}

void jobspec_free(struct jobspec *js)
{
	for (unsigned i = 0; i < js->nenv; i++)
		free(js->env[i]);
	free(js->env);
	for (unsigned i = 0; i < js->nsteps; i++) {
		free(js->steps[i].name);
		free(js->steps[i].run);
	}
	free(js->steps);
	memset(js, 0, sizeof(*js));
}

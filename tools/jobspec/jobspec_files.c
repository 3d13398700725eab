/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The job spec's paths (docs/jobspec.md): files: (host paths copied in), artifacts: (guest
 * paths or globs copied out) and cache: (the step whose state is kept). Every path is
 * normalised here ("//" and "." dropped) and one with a ".." component is refused: a path in
 * a spec never leaves its directory (the spec's for a host path, "/" for a guest path), so
 * what run copies can be told from the spec alone.
 *
 *   files:
 *     - src: app          # relative to the spec's directory; a directory is copied whole
 *       dst: /src         # absolute, in the guest
 *   artifacts: [/src/out, /src/test-?.xml]   # a component may be a glob
 *   cache: setup          # a step's name
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "jobspec_yaml.h"

/*
 * Normalise `s` into *out: `guest` paths must be absolute, host paths relative (an empty one
 * after normalising is "."). Refuses "..", NUL bytes and paths over PATH_MAX_LEN.
 */
static int spec_path(struct spec_parse *p, const yaml_node_t *n, const char *what, bool guest,
		     char **out)
{
	const char *s = spec_scalar(p, n, what), *c;
	char *o;
	size_t len = 0;

	if (!s)
		return -EINVAL;
	if (!*s)
		return spec_fail(p, n, "%s: an empty path", what);
	if (strlen(s) >= JOB_PATH_MAX)
		return spec_fail(p, n, "%s: a path longer than %u bytes", what, JOB_PATH_MAX - 1);
	if (guest && s[0] != '/')
		return spec_fail(p, n, "%s: '%.60s': give an absolute path in the guest", what, s);
	if (!guest && s[0] == '/')
		return spec_fail(p, n, "%s: '%.60s': give a path relative to the spec's directory",
				 what, s);
	if (spec_charge(p, n, strlen(s) + 2) < 0)
		return -EINVAL;
	if (!(o = malloc(strlen(s) + 2)))
		return -ENOMEM;
	for (c = s; *c;) {
		size_t l = strcspn(c, "/");

		if (l == 2 && c[0] == '.' && c[1] == '.') {
			free(o);
			return spec_fail(p, n, "%s: '%.60s' leaves its directory (..)", what, s);
		}
		if (l && !(l == 1 && c[0] == '.')) {
			if (guest || len)
				o[len++] = '/';
			memcpy(o + len, c, l);
			len += l;
		}
		c += l;
		c += *c == '/';
	}
	if (!len)
		o[len++] = guest ? '/' : '.';
	o[len] = '\0';
	free(*out);
	*out = o;
	return 0;
}

static int spec_file(struct spec_parse *p, const yaml_node_t *n, struct job_file *f)
{
	int err;

	if (n->type != YAML_MAPPING_NODE)
		return spec_fail(p, n, "files: each entry is a mapping with 'src:' and 'dst:'");
	if ((err = spec_mapping(p, n, "files")) < 0)
		return err;
	for (size_t i = 0; i < spec_mapping_len(n); i++) {
		yaml_node_t *k, *v;
		const char *key = spec_key(p, n, i, &k, &v);

		if (strcmp(key, "src") == 0)
			err = spec_path(p, v, "files: src", false, &f->src);
		else if (strcmp(key, "dst") == 0)
			err = spec_path(p, v, "files: dst", true, &f->dst);
		else
			err = spec_fail(p, k, "files: unknown key '%.40s' (src, dst)", key);
		if (err < 0)
			return err;
	}
	if (!f->src || !f->dst)
		return spec_fail(p, n, "files: an entry needs 'src:' and 'dst:'");
	if (strcmp(f->dst, "/") == 0)
		return spec_fail(p, n, "files: dst: not the guest's root itself");
	return 0;
}

int spec_files(struct spec_parse *p, const yaml_node_t *n, struct jobspec *js)
{
	int count = spec_sequence(p, n, "files", SPEC_MAX_LIST), err;

	if (count < 0)
		return count;
	free(js->files);
	js->nfiles = 0;
	if (!(js->files = calloc((size_t)count + 1, sizeof(*js->files))))
		return -ENOMEM;
	for (int i = 0; i < count; i++)
		if ((err = spec_file(p, spec_item(p, n, (size_t)i), &js->files[js->nfiles++])) < 0)
			return err;
	return 0;
}

int spec_artifacts(struct spec_parse *p, const yaml_node_t *n, struct jobspec *js)
{
	int count = spec_sequence(p, n, "artifacts", SPEC_MAX_LIST), err;

	if (count < 0)
		return count;
	free(js->artifacts);
	js->nartifacts = 0;
	if (!(js->artifacts = calloc((size_t)count + 1, sizeof(*js->artifacts))))
		return -ENOMEM;
	for (int i = 0; i < count; i++) {
		char **a = &js->artifacts[js->nartifacts++];

		if ((err = spec_path(p, spec_item(p, n, (size_t)i), "artifacts", true, a)) < 0)
			return err;
		if (strcmp(*a, "/") == 0)
			return spec_fail(p, spec_item(p, n, (size_t)i),
					 "artifacts: not the guest's whole file system");
	}
	return 0;
}

int spec_cache(struct spec_parse *p, const yaml_node_t *n, struct jobspec *js)
{
	const char *name = spec_scalar(p, n, "cache");
	int found = -1;

	if (!name)
		return -EINVAL;
	for (unsigned i = 0; i < js->nsteps; i++) {
		if (strcmp(js->steps[i].name, name) != 0)
			continue;
		if (found >= 0)
			return spec_fail(p, n, "cache: two steps are named '%.60s'", name);
		found = (int)i;
	}
	if (found < 0)
		return spec_fail(p, n, "cache: no step is named '%.60s'", name);
	js->cache_step = found + 1;
	return 0;
}

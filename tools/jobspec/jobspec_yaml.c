/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The checked readers of a job spec's libyaml nodes (jobspec_yaml.h), shared by the spec's parts
 * (jobspec.c, jobspec_net.c, jobspec_files.c): each checks a node's type and value, charges what
 * it copies out against SPEC_MAX_COPY and names FILE:LINE:COLUMN when it refuses.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "jobspec_yaml.h"

int spec_fail(struct spec_parse *p, const yaml_node_t *n, const char *fmt, ...)
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

int spec_charge(struct spec_parse *p, const yaml_node_t *n, size_t len)
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

const char *spec_scalar(struct spec_parse *p, const yaml_node_t *n, const char *what)
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

int spec_uint(struct spec_parse *p, const yaml_node_t *n, const char *what, uint64_t min,
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

int spec_bool(struct spec_parse *p, const yaml_node_t *n, const char *what, bool *out)
{
	static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "on", "On"};
	static const char *const no[] = {"false", "False", "FALSE", "no", "No", "off", "Off"};
	const char *s = spec_scalar(p, n, what);

	if (!s)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcmp(s, yes[i]) == 0)
			return *out = true, 0;
		if (strcmp(s, no[i]) == 0)
			return *out = false, 0;
	}
	return spec_fail(p, n, "%s: expected true or false, got '%.40s'", what, s);
}

int spec_string(struct spec_parse *p, const yaml_node_t *n, const char *what, char **out)
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

int spec_mapping(struct spec_parse *p, const yaml_node_t *n, const char *what)
{
	yaml_node_pair_t *start, *top;

	if (!n || n->type != YAML_MAPPING_NODE)
		return spec_fail(p, n, "%s: expected a mapping (key: value)", what);
	start = n->data.mapping.pairs.start;
	top = n->data.mapping.pairs.top;
	if (top - start > SPEC_MAX_LIST)
		return spec_fail(p, n, "%s: at most %d keys", what, SPEC_MAX_LIST);
	for (yaml_node_pair_t *a = start; a < top; a++) {
		yaml_node_t *ka = yaml_document_get_node(p->doc, a->key);
		const char *sa = spec_scalar(p, ka, "key");

		if (!sa)
			return -EINVAL;
		for (yaml_node_pair_t *b = start; b < a; b++) {
			const char *sb = (const char *)yaml_document_get_node(p->doc, b->key)
						 ->data.scalar.value;

			if (strcmp(sa, sb) == 0)
				return spec_fail(p, ka, "%s: '%.40s' is given twice", what, sa);
		}
	}
	return 0;
}

int spec_sequence(struct spec_parse *p, const yaml_node_t *n, const char *what, size_t max)
{
	ptrdiff_t len;

	if (!n || n->type != YAML_SEQUENCE_NODE)
		return spec_fail(p, n, "%s: expected a list", what);
	len = n->data.sequence.items.top - n->data.sequence.items.start;
	if ((size_t)len > max)
		return spec_fail(p, n, "%s: at most %zu items", what, max);
	return (int)len;
}

yaml_node_t *spec_item(struct spec_parse *p, const yaml_node_t *n, size_t i)
{
	return yaml_document_get_node(p->doc, n->data.sequence.items.start[i]);
}

const char *spec_key(struct spec_parse *p, const yaml_node_t *n, size_t i, yaml_node_t **key,
		     yaml_node_t **val)
{
	yaml_node_pair_t *kv = &n->data.mapping.pairs.start[i];

	*key = yaml_document_get_node(p->doc, kv->key);
	*val = yaml_document_get_node(p->doc, kv->value);
	return (const char *)(*key)->data.scalar.value;
}

int spec_net_word(struct spec_parse *p, const yaml_node_t *n, struct jobspec *js, const char *word)
{
	if (js->nnet_opts == SPEC_MAX_WORDS)
		return spec_fail(p, n, "network: too many rules (at most %d words)",
				 SPEC_MAX_WORDS);
	if (spec_charge(p, n, strlen(word) + 1) < 0)
		return -EINVAL;
	if (!(js->net_opts[js->nnet_opts] = strdup(word)))
		return -ENOMEM;
	js->nnet_opts++;
	return 0;
}

size_t spec_mapping_len(const yaml_node_t *n)
{
	return (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the job spec's parts share (jobspec.c, jobspec_net.c, jobspec_files.c, jobspec_shape.c):
 * the parse's state and the checked readers of libyaml's nodes (jobspec_yaml.c), the floor
 * below the parts. Every reader names the node's FILE:LINE:COLUMN on failure.
 */
#ifndef SANDBOXCTL_JOBSPEC_YAML_H
#define SANDBOXCTL_JOBSPEC_YAML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#include "jobspec.h"

/* A list in a spec (env, allow, secrets, ...) holds at most this many entries. */
#define SPEC_MAX_LIST  256
/* What the spec's strings may add up to once copied out. Aliases are read by reference, so a
 * 1 MiB spec of `steps: [*big, *big, ...]` would otherwise copy its 1 MiB script per step
 * (~1 GiB for 1000 steps). */
#define SPEC_MAX_COPY  (4u << 20)
#define SPEC_MAX_WORDS (4 * SPEC_MAX_LIST + 8) /* prepare words: network lists and secrets */

struct spec_parse {
	const char *path;
	yaml_document_t *doc;
	char *err;
	size_t err_len;
	size_t copied; /* bytes of strings copied out of the document */
};

/* Say what is wrong at `n` (NULL: the file's start) and return -EINVAL. */
int spec_fail(struct spec_parse *p, const yaml_node_t *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Charge `len` bytes of copied text to the spec: -E2BIG (after the error) past its budget. */
int spec_charge(struct spec_parse *p, const yaml_node_t *n, size_t len);
/* The scalar's text, or NULL (after the error) when `n` is not a scalar or holds a NUL. */
const char *spec_scalar(struct spec_parse *p, const yaml_node_t *n, const char *what);
int spec_uint(struct spec_parse *p, const yaml_node_t *n, const char *what, uint64_t min,
	      uint64_t max, uint64_t *out);
/* true or false (YAML 1.1's yes/no/on/off too, as GitHub Actions takes them). */
int spec_bool(struct spec_parse *p, const yaml_node_t *n, const char *what, bool *out);
/* A copy of the scalar in *out (the old one freed). */
int spec_string(struct spec_parse *p, const yaml_node_t *n, const char *what, char **out);
/* A mapping whose keys are scalars, none twice: 0, or -EINVAL after the error (the second
 * occurrence of a key is named). */
int spec_mapping(struct spec_parse *p, const yaml_node_t *n, const char *what);
/* A sequence of at most `max` items: their number, or -EINVAL after the error. */
int spec_sequence(struct spec_parse *p, const yaml_node_t *n, const char *what, size_t max);
/* The node of item `i` of a sequence checked by spec_sequence. */
yaml_node_t *spec_item(struct spec_parse *p, const yaml_node_t *n, size_t i);
/* The number of pairs of a mapping checked by spec_mapping. */
size_t spec_mapping_len(const yaml_node_t *n);
/* Key and value of pair `i` of a mapping checked by spec_mapping. */
const char *spec_key(struct spec_parse *p, const yaml_node_t *n, size_t i, yaml_node_t **key,
		     yaml_node_t **val);
/* Append a prepare word (copied) to js->net_opts. */
int spec_net_word(struct spec_parse *p, const yaml_node_t *n, struct jobspec *js, const char *word);

/* jobspec_shape.c: 0 when the spec's first document nests at most 64 deep and has at most
 * 256 anchors, 4096 aliases and 16 directives (what keeps libyaml's loader linear), or when
 * libyaml finds a syntax error first (its loader reports it); -EINVAL after the error,
 * -ENOMEM. */
int spec_shape(struct spec_parse *p, const char *text, size_t len);

/* jobspec_net.c: network: (none, or a policy) and secrets: (credential rules). */
int spec_network(struct spec_parse *p, const yaml_node_t *n, struct jobspec *js);
int spec_secrets(struct spec_parse *p, const yaml_node_t *n, struct jobspec *js);

/* jobspec_files.c: files: and artifacts:, and cache: (after steps: is read). */
int spec_files(struct spec_parse *p, const yaml_node_t *n, struct jobspec *js);
int spec_artifacts(struct spec_parse *p, const yaml_node_t *n, struct jobspec *js);
int spec_cache(struct spec_parse *p, const yaml_node_t *n, struct jobspec *js);

#endif

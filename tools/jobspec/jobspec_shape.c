/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The bounds on a job spec's shape (docs/jobspec.md, "Errors"), checked on libyaml's tokens
 * before its loader builds the document: how deep collections nest, and how many anchors,
 * aliases and directives there are. Not what the spec means (jobspec.c), only what would make
 * libyaml itself slow on a hostile spec of at most 1 MiB:
 *
 *  - its scanner keeps a possible simple key per flow level and checks every level at every
 *    token, so N nested `[` or `{` cost N^2: 200 KB of `[[[[` took 40 s of CPU to be refused
 *    and 500 KB of `{a: {a: ...` 75 s (issue 27; perf: yaml_parser_stale_simple_keys and
 *    yaml_parser_fetch_more_tokens, 96% of the time);
 *  - its loader checks each anchor against every earlier one and looks each alias up among
 *    them all, by strcmp: 1 MiB of `&aN x,` (110k anchors) took 22.5 s;
 *  - its parser checks each %TAG directive against every earlier one: 1 MiB of them, 3 s.
 *
 * Reading stops at the first token past a bound, so the scanner gets at most about 1024
 * characters (the longest simple key) further, and the loader never runs on such a spec.
 * A syntax error stops the reading too, without a message: the loader meets it (or an
 * earlier error of the parser's) again and reports it at its position, as it always did.
 * Only the first document is read, as the loader reads only that one.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <yaml.h>

#include "jobspec_yaml.h"

/* A spec's deepest meaningful node is at level 4 (the job, steps:, a step, its env:); 64
 * leaves room for any layout and costs the scanner nothing measurable. */
#define SPEC_MAX_DEPTH	    64
/* Anchors a spec may define: at most 256^2 / 2 string compares in libyaml's loader. */
#define SPEC_MAX_ANCHORS    256
/* Aliases a spec may use: 1000 steps (SPEC_MAX_STEPS) each naming a shared env and a few
 * more; each is looked up among at most 256 anchors, ~1M compares in all. */
#define SPEC_MAX_ALIASES    4096
/* %YAML and %TAG directives: a spec needs none; each is compared with every earlier one. */
#define SPEC_MAX_DIRECTIVES 16

/* What a level of nesting is, as far as its end is concerned. */
enum spec_level {
	SPEC_LEVEL_BLOCK_MAP,
	SPEC_LEVEL_BLOCK_SEQ,
	SPEC_LEVEL_FLOW,
	/* "key:\n- item": a sequence at its mapping's indentation, which has no start token
	 * of its own and ends at the mapping's next key (or the mapping's end). */
	SPEC_LEVEL_INDENTLESS,
};

struct spec_shape {
	unsigned char level[SPEC_MAX_DEPTH];
	unsigned depth, anchors, aliases, directives;
	bool begun; /* the first document has begun (its `---` or its first node) */
};

/* Say which bound the spec passes at token `t`: -EINVAL. */
static int spec_shape_fail(struct spec_parse *p, const yaml_token_t *t, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int spec_shape_fail(struct spec_parse *p, const yaml_token_t *t, const char *fmt, ...)
{
	char msg[128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(p->err, p->err_len, "%s:%zu:%zu: %s", p->path, t->start_mark.line + 1,
		 t->start_mark.column + 1, msg);
	return -EINVAL;
}

static int spec_shape_push(struct spec_parse *p, struct spec_shape *s, const yaml_token_t *t,
			   enum spec_level level)
{
	if (s->depth == SPEC_MAX_DEPTH)
		return spec_shape_fail(p, t, "nesting deeper than %d levels", SPEC_MAX_DEPTH);
	s->level[s->depth++] = (unsigned char)level;
	return 0;
}

/* Leave an indentless sequence, if that is the innermost level. */
static void spec_shape_end_indentless(struct spec_shape *s)
{
	if (s->depth && s->level[s->depth - 1] == SPEC_LEVEL_INDENTLESS)
		s->depth--;
}

/* Account for one token: 0, 1 when the first document has ended, or -EINVAL after the error. */
static int spec_shape_token(struct spec_parse *p, struct spec_shape *s, const yaml_token_t *t)
{
	switch (t->type) {
	case YAML_STREAM_START_TOKEN:
		return 0;
	case YAML_STREAM_END_TOKEN:
	case YAML_DOCUMENT_END_TOKEN:
		return 1;
	case YAML_DOCUMENT_START_TOKEN:
		if (s->begun)
			return 1;
		s->begun = true;
		return 0;
	case YAML_VERSION_DIRECTIVE_TOKEN:
	case YAML_TAG_DIRECTIVE_TOKEN:
		if (++s->directives > SPEC_MAX_DIRECTIVES)
			return spec_shape_fail(p, t, "more than %d directives (%%YAML, %%TAG)",
					       SPEC_MAX_DIRECTIVES);
		return 0;
	case YAML_ANCHOR_TOKEN:
		if (++s->anchors > SPEC_MAX_ANCHORS)
			return spec_shape_fail(p, t, "more than %d anchors", SPEC_MAX_ANCHORS);
		break;
	case YAML_ALIAS_TOKEN:
		if (++s->aliases > SPEC_MAX_ALIASES)
			return spec_shape_fail(p, t, "more than %d aliases", SPEC_MAX_ALIASES);
		break;
	case YAML_BLOCK_MAPPING_START_TOKEN:
		s->begun = true;
		return spec_shape_push(p, s, t, SPEC_LEVEL_BLOCK_MAP);
	case YAML_BLOCK_SEQUENCE_START_TOKEN:
		s->begun = true;
		return spec_shape_push(p, s, t, SPEC_LEVEL_BLOCK_SEQ);
	case YAML_FLOW_SEQUENCE_START_TOKEN:
	case YAML_FLOW_MAPPING_START_TOKEN:
		s->begun = true;
		return spec_shape_push(p, s, t, SPEC_LEVEL_FLOW);
	case YAML_BLOCK_ENTRY_TOKEN:
		/* An entry straight in a block mapping starts an indentless sequence (libyaml's
		 * parser: yaml_parser_parse_indentless_sequence_entry). */
		if (s->depth && s->level[s->depth - 1] == SPEC_LEVEL_BLOCK_MAP)
			return spec_shape_push(p, s, t, SPEC_LEVEL_INDENTLESS);
		break;
	case YAML_KEY_TOKEN:
	case YAML_VALUE_TOKEN:
		spec_shape_end_indentless(s);
		break;
	case YAML_BLOCK_END_TOKEN:
		spec_shape_end_indentless(s);
		s->depth -= s->depth ? 1 : 0;
		break;
	case YAML_FLOW_SEQUENCE_END_TOKEN:
	case YAML_FLOW_MAPPING_END_TOKEN:
		/* Unbalanced closers are the parser's error to report. */
		s->depth -= s->depth ? 1 : 0;
		break;
	default:
		break;
	}
	s->begun = true;
	return 0;
}

int spec_shape(struct spec_parse *p, const char *text, size_t len)
{
	struct spec_shape s = {0};
	yaml_parser_t parser;
	yaml_token_t t;
	int r = 0;

	if (!yaml_parser_initialize(&parser))
		return -ENOMEM;
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	while (r == 0) {
		if (!yaml_parser_scan(&parser, &t))
			break; /* a syntax error: the loader reports it */
		r = spec_shape_token(p, &s, &t);
		yaml_token_delete(&t);
	}
	yaml_parser_delete(&parser);
	return r < 0 ? r : 0;
}

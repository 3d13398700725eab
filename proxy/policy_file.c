/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The policy as text: the YAML file (libyaml's document loader; hostile input: every node's
 * type is checked, lists are bounded, every error names FILE:LINE), the normalised policy.yaml
 * that prepare writes (no secrets: credentials by name and source only), and the credentials
 * file ("HOST\tHEADER\tVALUE" lines) that run reads back.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "proxy.h"

#define POL_MAX_FILE (1u << 20)

/* ---- the normalised text ---- */

/* `s` as a YAML double-quoted string. */
static void policy_put_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			fprintf(f, "\\x%02x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void policy_put_list(FILE *f, const char *key, char *const *v, unsigned n)
{
	fprintf(f, "%s: [", key);
	for (unsigned i = 0; i < n; i++) {
		if (i)
			fputs(", ", f);
		policy_put_str(f, v[i]);
	}
	fputs("]\n", f);
}

/* What the secret comes from, shown instead of it: "<from $VAR>", "<from file PATH>". */
static void policy_put_source(FILE *f, const struct pol_header *h)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	const char *s;
	bool any = false;

	if (!m)
		return;
	switch (h->kind) {
	case CRED_ENV:
		fprintf(m, "<from $%s>", h->source);
		break;
	case CRED_FILE:
		fprintf(m, "<from file %s>", h->source);
		break;
	case CRED_LOADED:
		fprintf(m, "%s", h->source);
		break;
	case CRED_TEMPLATE:
		fputs("<from", m);
		for (s = h->source; (s = strstr(s, "${"));) {
			const char *e = strchr(s, '}');

			if (!e)
				break;
			fprintf(m, "%s $%.*s", any ? "," : "", (int)(e - s - 2), s + 2);
			any = true;
			s = e + 1;
		}
		fputs(any ? ">" : " the policy>", m);
		break;
	}
	fclose(m);
	policy_put_str(f, buf ? buf : "");
	free(buf);
}

char *policy_format(const struct policy *p)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	fputs("# The policy in force (sandbox-proxy prepare); credentials are shown by name "
	      "only.\n",
	      f);
	fprintf(f, "default: %s\n", p->default_deny ? "deny" : "allow-public");
	policy_put_list(f, "allow", p->allow, p->nallow);
	policy_put_list(f, "deny", p->deny, p->ndeny);
	fputs("allow-cidr: [", f);
	for (unsigned i = 0; i < p->ncidrs; i++) {
		fputs(i ? ", " : "", f);
		policy_put_str(f, p->cidrs[i].text);
	}
	fputs("]\nports: [", f);
	if (p->nports == 0)
		fputs("80, 443", f);
	for (unsigned i = 0; i < p->nports; i++)
		fprintf(f, "%s%u", i ? ", " : "", p->ports[i]);
	fprintf(f, "]\negress-bytes: %llu\n", (unsigned long long)p->egress_bytes);
	if (p->resolver) {
		fputs("resolver: ", f);
		policy_put_str(f, p->resolver);
		fputc('\n', f);
	}
	if (p->ca_file) {
		fputs("ca-file: ", f);
		policy_put_str(f, p->ca_file);
		fputc('\n', f);
	} else {
		fputs("# ca-file: none, the host's trust store\n", f);
	}
	fputs(p->ncreds ? "credentials:\n" : "credentials: []\n", f);
	for (unsigned i = 0; i < p->ncreds; i++) {
		fputs("  - host: ", f);
		policy_put_str(f, p->creds[i].host);
		fputs("\n    headers:\n", f);
		for (unsigned j = 0; j < p->creds[i].nheaders; j++) {
			fputs("      ", f);
			policy_put_str(f, p->creds[i].headers[j].name);
			fputs(": ", f);
			policy_put_source(f, &p->creds[i].headers[j]);
			fputc('\n', f);
		}
	}
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

char *policy_format_creds(const struct policy *p)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	for (unsigned i = 0; i < p->ncreds; i++) {
		for (unsigned j = 0; j < p->creds[i].nheaders; j++) {
			const struct pol_header *h = &p->creds[i].headers[j];

			fprintf(f, "%s\t%s\t%s\n", p->creds[i].host, h->name,
				h->value ? h->value : "");
		}
	}
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

int policy_load_creds(struct policy *p, const char *text, char *err, size_t errlen)
{
	for (unsigned i = 0; i < p->ncreds; i++) {
		for (unsigned j = 0; j < p->creds[i].nheaders; j++) {
			struct pol_header *h = &p->creds[i].headers[j];
			size_t hl = strlen(p->creds[i].host), nl = strlen(h->name);
			const char *line = text;
			bool found = false;

			while (line && *line) {
				const char *end = strchr(line, '\n');
				size_t ll = end ? (size_t)(end - line) : strlen(line);

				if (ll > hl + nl + 2 - 1 &&
				    strncmp(line, p->creds[i].host, hl) == 0 && line[hl] == '\t' &&
				    strncasecmp(line + hl + 1, h->name, nl) == 0 &&
				    line[hl + 1 + nl] == '\t') {
					free(h->value);
					h->value = strndup(line + hl + nl + 2, ll - hl - nl - 2);
					if (!h->value)
						return -ENOMEM;
					found = true;
					break;
				}
				line = end ? end + 1 : NULL;
			}
			if (!found)
				return policy_errf(err, errlen,
						   "credentials: no value for %s header %s",
						   p->creds[i].host, h->name);
		}
	}
	return 0;
}

/* ---- the YAML file ---- */

struct pol_parse {
	struct policy *p;
	const char *path;
	yaml_document_t *doc;
	char *err;
	size_t errlen;
};

static int pol_fail(struct pol_parse *pp, const yaml_node_t *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int pol_fail(struct pol_parse *pp, const yaml_node_t *n, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(pp->err, pp->errlen, "%s:%zu: %s", pp->path, n ? n->start_mark.line + 1 : 1, msg);
	return -EINVAL;
}

static const char *pol_scalar(struct pol_parse *pp, const yaml_node_t *n, const char *what)
{
	if (!n || n->type != YAML_SCALAR_NODE) {
		pol_fail(pp, n, "%s: expected a single value", what);
		return NULL;
	}
	if (strlen((const char *)n->data.scalar.value) != n->data.scalar.length) {
		pol_fail(pp, n, "%s: contains a NUL byte", what);
		return NULL;
	}
	return (const char *)n->data.scalar.value;
}

/* Call `each` on every scalar of the sequence `n`. */
static int pol_each(struct pol_parse *pp, const yaml_node_t *n, const char *what,
		    int (*each)(struct pol_parse *, const yaml_node_t *, const char *))
{
	int e;

	if (n->type != YAML_SEQUENCE_NODE)
		return pol_fail(pp, n, "%s: expected a list", what);
	for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
	     it++) {
		yaml_node_t *v = yaml_document_get_node(pp->doc, *it);
		const char *s = pol_scalar(pp, v, what);

		if (!s)
			return -EINVAL;
		e = each(pp, v, s);
		if (e < 0)
			return e;
	}
	return 0;
}

static int pol_one_domain(struct pol_parse *pp, const yaml_node_t *n, const char *s, bool deny)
{
	char *norm;
	int e = policy_norm_pattern(s, &norm);

	if (e == -EINVAL)
		return pol_fail(pp, n, "%s: bad domain pattern '%.80s'", deny ? "deny" : "allow",
				s);
	if (e == 0)
		e = deny ? policy_push_str(&pp->p->deny, &pp->p->ndeny, norm)
			 : policy_push_str(&pp->p->allow, &pp->p->nallow, norm);
	if (e == -E2BIG)
		return pol_fail(pp, n, "at most %d entries", POL_MAX_LIST);
	return e;
}

static int pol_allow(struct pol_parse *pp, const yaml_node_t *n, const char *s)
{
	return pol_one_domain(pp, n, s, false);
}

static int pol_deny(struct pol_parse *pp, const yaml_node_t *n, const char *s)
{
	return pol_one_domain(pp, n, s, true);
}

static int pol_cidr(struct pol_parse *pp, const yaml_node_t *n, const char *s)
{
	struct netpol_cidr c;
	int e;

	if (netpol_cidr_parse(s, &c) < 0)
		return pol_fail(pp, n, "allow-cidr: bad CIDR '%.80s'", s);
	e = policy_push_cidr(pp->p, &c);
	if (e == -E2BIG)
		return pol_fail(pp, n, "at most %d entries", POL_MAX_LIST);
	return e;
}

static int pol_port(struct pol_parse *pp, const yaml_node_t *n, const char *s)
{
	uint16_t v;
	int e;

	if (!netpol_port_parse(s, &v))
		return pol_fail(pp, n, "ports: bad port '%.40s' (1 to 65535)", s);
	e = policy_push_port(pp->p, v);
	if (e == -E2BIG)
		return pol_fail(pp, n, "at most %d entries", POL_MAX_LIST);
	return e;
}

static int pol_cred_headers(struct pol_parse *pp, const yaml_node_t *n, struct pol_cred *c)
{
	if (n->type != YAML_MAPPING_NODE)
		return pol_fail(pp, n, "headers: expected a mapping of NAME: value");
	for (yaml_node_pair_t *kv = n->data.mapping.pairs.start; kv < n->data.mapping.pairs.top;
	     kv++) {
		yaml_node_t *k = yaml_document_get_node(pp->doc, kv->key);
		yaml_node_t *v = yaml_document_get_node(pp->doc, kv->value);
		const char *name = pol_scalar(pp, k, "header name"), *s;
		enum cred_source kind = CRED_TEMPLATE;
		char *src;
		int e;

		if (!name)
			return -EINVAL;
		if (!netpol_header_name_ok(name))
			return pol_fail(pp, k, "bad header name '%.80s'", name);
		if (v && v->type == YAML_MAPPING_NODE) {
			yaml_node_pair_t *fkv = v->data.mapping.pairs.start;
			const char *fk;

			if (v->data.mapping.pairs.top - fkv != 1)
				return pol_fail(pp, v, "%s: expected {file: PATH}", name);
			fk = pol_scalar(pp, yaml_document_get_node(pp->doc, fkv->key), name);
			if (!fk)
				return -EINVAL;
			if (strcmp(fk, "file") != 0)
				return pol_fail(pp, v, "%s: unknown key '%.40s' (expected file)",
						name, fk);
			s = pol_scalar(pp, yaml_document_get_node(pp->doc, fkv->value), "file");
			if (!s)
				return -EINVAL;
			if (!*s)
				return pol_fail(pp, v, "%s: empty file name", name);
			kind = CRED_FILE;
		} else {
			s = pol_scalar(pp, v, name);
			if (!s)
				return -EINVAL;
		}
		/* A value as policy_format shows it: the secret comes from the credentials file. */
		if (kind == CRED_TEMPLATE && strncmp(s, "<from ", 6) == 0 &&
		    s[strlen(s) - 1] == '>')
			kind = CRED_LOADED;
		src = strdup(s);
		if (!src)
			return -ENOMEM;
		e = policy_cred_header(c, name, kind, src, (unsigned)k->start_mark.line + 1);
		if (e == -E2BIG)
			return pol_fail(pp, k, "at most 64 headers a host");
		if (e < 0)
			return e;
	}
	return 0;
}

static int pol_creds(struct pol_parse *pp, const yaml_node_t *n)
{
	if (n->type != YAML_SEQUENCE_NODE)
		return pol_fail(pp, n, "credentials: expected a list of {host, headers}");
	for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
	     it++) {
		yaml_node_t *r = yaml_document_get_node(pp->doc, *it);
		const yaml_node_t *headers = NULL;
		char host[NAME_MAX_TEXT] = "";
		struct pol_cred *c;

		if (r->type != YAML_MAPPING_NODE)
			return pol_fail(pp, r, "credentials: expected {host, headers}");
		for (yaml_node_pair_t *kv = r->data.mapping.pairs.start;
		     kv < r->data.mapping.pairs.top; kv++) {
			yaml_node_t *k = yaml_document_get_node(pp->doc, kv->key);
			yaml_node_t *v = yaml_document_get_node(pp->doc, kv->value);
			const char *key = pol_scalar(pp, k, "key"), *s;

			if (!key)
				return -EINVAL;
			if (strcmp(key, "host") == 0) {
				if (!(s = pol_scalar(pp, v, "host")))
					return -EINVAL;
				if (!netpol_name_norm(s, host, sizeof(host)))
					return pol_fail(pp, v, "host: bad name '%.80s'", s);
			} else if (strcmp(key, "headers") == 0) {
				headers = v;
			} else {
				return pol_fail(pp, k, "credentials: unknown key '%.40s'", key);
			}
		}
		if (!host[0])
			return pol_fail(pp, r, "credentials: a rule needs a host");
		if (!headers)
			return pol_fail(pp, r, "credentials: a rule needs headers");
		c = policy_cred_for(pp->p, host);
		if (!c)
			return pol_fail(pp, r, "credentials: too many rules");
		if (pol_cred_headers(pp, headers, c) < 0)
			return -EINVAL;
	}
	return 0;
}

static int pol_top(struct pol_parse *pp, const yaml_node_t *root)
{
	struct policy *p = pp->p;

	if (root->type != YAML_MAPPING_NODE)
		return pol_fail(pp, root, "expected a mapping of policy keys");
	for (yaml_node_pair_t *kv = root->data.mapping.pairs.start;
	     kv < root->data.mapping.pairs.top; kv++) {
		yaml_node_t *k = yaml_document_get_node(pp->doc, kv->key);
		yaml_node_t *v = yaml_document_get_node(pp->doc, kv->value);
		const char *key = pol_scalar(pp, k, "key"), *s;
		char e2[256];
		int e = 0;

		if (!key)
			return -EINVAL;
		if (strcmp(key, "default") == 0) {
			if (!(s = pol_scalar(pp, v, key)))
				return -EINVAL;
			if (strcmp(s, "deny") == 0)
				p->default_deny = true;
			else if (strcmp(s, "allow-public") == 0)
				p->default_deny = false;
			else
				return pol_fail(pp, v, "default: expected allow-public or deny");
		} else if (strcmp(key, "allow") == 0) {
			e = pol_each(pp, v, key, pol_allow);
		} else if (strcmp(key, "deny") == 0) {
			e = pol_each(pp, v, key, pol_deny);
		} else if (strcmp(key, "allow-cidr") == 0) {
			e = pol_each(pp, v, key, pol_cidr);
		} else if (strcmp(key, "ports") == 0) {
			e = pol_each(pp, v, key, pol_port);
		} else if (strcmp(key, "egress-bytes") == 0) {
			if (!(s = pol_scalar(pp, v, key)))
				return -EINVAL;
			if (!netpol_bytes_parse(s, &p->egress_bytes))
				return pol_fail(pp, v,
						"egress-bytes: expected a number, got '%.40s'", s);
		} else if (strcmp(key, "resolver") == 0) {
			if (!(s = pol_scalar(pp, v, key)))
				return -EINVAL;
			if (policy_set_resolver(p, s, e2, sizeof(e2)) < 0)
				return pol_fail(pp, v, "%s", e2);
		} else if (strcmp(key, "ca-file") == 0) {
			if (!(s = pol_scalar(pp, v, key)))
				return -EINVAL;
			if (!*s)
				return pol_fail(pp, v, "ca-file: empty");
			free(p->ca_file);
			p->ca_file = strdup(s);
			e = p->ca_file ? 0 : -ENOMEM;
		} else if (strcmp(key, "credentials") == 0) {
			e = pol_creds(pp, v);
		} else {
			return pol_fail(pp, k, "unknown key '%.40s'", key);
		}
		if (e < 0)
			return e;
	}
	return 0;
}

int policy_parse(struct policy *p, const char *path, const char *text, size_t len, char *err,
		 size_t errlen)
{
	struct pol_parse pp = {.p = p, .path = path, .err = err, .errlen = errlen};
	yaml_parser_t parser;
	yaml_document_t doc;
	yaml_node_t *root;
	int e;

	if (len > POL_MAX_FILE)
		return policy_errf(err, errlen, "%s:1: larger than %u bytes", path, POL_MAX_FILE);
	if (!yaml_parser_initialize(&parser))
		return -ENOMEM;
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		e = policy_errf(err, errlen, "%s:%zu: %s", path, parser.problem_mark.line + 1,
				parser.problem ? parser.problem : "malformed YAML");
		yaml_parser_delete(&parser);
		return e;
	}
	pp.doc = &doc;
	root = yaml_document_get_root_node(&doc);
	e = root ? pol_top(&pp, root) : 0; /* an empty file is the default policy */
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	return e;
}

int policy_load(struct policy *p, const char *path, char *err, size_t errlen)
{
	char *text;
	size_t len;
	int e = read_file_follow(path, POL_MAX_FILE, &text, &len);

	if (e < 0)
		return policy_errf(err, errlen, "%s: %s", path, strerror(-e));
	e = policy_parse(p, path, text, len, err, errlen);
	free(text);
	return e;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Building a policy: a request's options (netpolicy.h: checked by its table, then normalised
 * and deduplicated here), the resolver, and the credential values read at prepare
 * (environment, files).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "proxy.h"

/* ---- building ---- */

int policy_errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* Add the pattern `s` (normalised) to a list; `flag` names the option in a failure's message. */
static int policy_add_pattern(char ***list, unsigned *n, const char *flag, const char *s, char *err,
			      size_t errlen)
{
	char *copy = strdup(s);
	int e = copy ? policy_push_str(list, n, copy) : -ENOMEM;

	if (e < 0)
		policy_errf(err, errlen, "%s: %s", flag, strerror(-e));
	return e;
}

int policy_add_allow(struct policy *p, const char *pattern, char *err, size_t errlen)
{
	union netpol_value v;
	int e = netpol_value_parse(NETPOL_ALLOW, pattern, &v, err, errlen);

	return e < 0 ? e
		     : policy_add_pattern(&p->allow, &p->nallow, "--allow", v.pattern, err, errlen);
}

int policy_add_deny(struct policy *p, const char *pattern, char *err, size_t errlen)
{
	union netpol_value v;
	int e = netpol_value_parse(NETPOL_DENY, pattern, &v, err, errlen);

	return e < 0 ? e
		     : policy_add_pattern(&p->deny, &p->ndeny, "--deny", v.pattern, err, errlen);
}

int policy_push_cidr(struct policy *p, const struct netpol_cidr *c)
{
	struct netpol_cidr *n;

	for (unsigned i = 0; i < p->ncidrs; i++) {
		if (strcmp(p->cidrs[i].text, c->text) == 0)
			return 0;
	}
	if (p->ncidrs >= POL_MAX_LIST)
		return -E2BIG;
	n = realloc(p->cidrs, (p->ncidrs + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	n[p->ncidrs++] = *c;
	p->cidrs = n;
	return 0;
}

int policy_add_cidr(struct policy *p, const char *cidr, char *err, size_t errlen)
{
	union netpol_value v;
	int e = netpol_value_parse(NETPOL_ALLOW_CIDR, cidr, &v, err, errlen);

	if (e < 0)
		return e;
	e = policy_push_cidr(p, &v.cidr);
	if (e < 0)
		policy_errf(err, errlen, "--allow-cidr: %s", strerror(-e));
	return e;
}

int policy_push_port(struct policy *p, uint16_t port)
{
	uint16_t *n;

	for (unsigned i = 0; i < p->nports; i++) {
		if (p->ports[i] == port)
			return 0;
	}
	if (p->nports >= POL_MAX_LIST)
		return -E2BIG;
	n = realloc(p->ports, (p->nports + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	n[p->nports++] = port;
	p->ports = n;
	return 0;
}

int policy_add_port(struct policy *p, const char *port, char *err, size_t errlen)
{
	union netpol_value v;
	int e = netpol_value_parse(NETPOL_ALLOW_PORT, port, &v, err, errlen);

	if (e < 0)
		return e;
	/* The first --allow-port on top of the default list keeps 80 and 443. */
	if (p->nports == 0 &&
	    ((e = policy_push_port(p, 80)) < 0 || (e = policy_push_port(p, 443)) < 0))
		return e;
	e = policy_push_port(p, v.port);
	if (e < 0)
		policy_errf(err, errlen, "--allow-port: %s", strerror(-e));
	return e;
}

int policy_set_resolver(struct policy *p, const char *s, char *err, size_t errlen)
{
	union netpol_value v;
	char a[64];
	int e = netpol_value_parse(NETPOL_RESOLVER, s, &v, err, errlen);

	if (e < 0)
		return e;
	free(p->resolver);
	proxy_addr_text((struct sockaddr *)&v.resolver.sa, a, sizeof(a));
	if (asprintf(&p->resolver, v.resolver.sa.ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u", a,
		     ntohs(((struct sockaddr_in *)&v.resolver.sa)->sin_port)) < 0) {
		p->resolver = NULL;
		return -ENOMEM;
	}
	p->resolver_sa = v.resolver.sa;
	p->resolver_salen = v.resolver.len;
	return 0;
}

int policy_default_resolver(struct policy *p, const char *resolv_conf, char *err, size_t errlen)
{
	char *text, *line, *save = NULL;
	int e;

	if (p->resolver)
		return 0;
	resolv_conf = resolv_conf ? resolv_conf : "/etc/resolv.conf";
	/* A host without DNS (no resolv.conf, or no nameserver in it) still gets sandboxes:
	 * their names just do not resolve. prepare says so. */
	e = read_file_follow(resolv_conf, 1 << 16, &text, NULL);
	if (e < 0) {
		policy_errf(err, errlen, "%s: %s: no resolver (give --resolver)", resolv_conf,
			    strerror(-e));
		return 1;
	}
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char addr[128];

		if (sscanf(line, " nameserver %127s", addr) == 1) {
			e = policy_set_resolver(p, addr, err, errlen);
			free(text);
			return e;
		}
	}
	free(text);
	policy_errf(err, errlen, "%s: no nameserver: no resolver (give --resolver)", resolv_conf);
	return 1;
}

struct pol_cred *policy_cred_for(struct policy *p, const char *host)
{
	struct pol_cred *n;

	for (unsigned i = 0; i < p->ncreds; i++) {
		if (strcmp(p->creds[i].host, host) == 0)
			return &p->creds[i];
	}
	if (p->ncreds >= 256)
		return NULL;
	n = realloc(p->creds, (p->ncreds + 1) * sizeof(*n));
	if (!n)
		return NULL;
	p->creds = n;
	n = &p->creds[p->ncreds];
	memset(n, 0, sizeof(*n));
	n->host = strdup(host);
	if (!n->host)
		return NULL;
	p->ncreds++;
	return n;
}

int policy_cred_header(struct pol_cred *c, const char *name, enum cred_source kind, char *source,
		       unsigned line)
{
	struct pol_header *h = NULL, *n;

	for (unsigned i = 0; i < c->nheaders; i++) {
		if (strcasecmp(c->headers[i].name, name) == 0)
			h = &c->headers[i];
	}
	if (!h) {
		if (c->nheaders >= 64) {
			free(source);
			return -E2BIG;
		}
		n = realloc(c->headers, (c->nheaders + 1) * sizeof(*n));
		if (!n) {
			free(source);
			return -ENOMEM;
		}
		c->headers = n;
		h = &n[c->nheaders++];
		memset(h, 0, sizeof(*h));
		h->name = strdup(name);
		if (!h->name) {
			free(source);
			return -ENOMEM;
		}
	}
	free(h->source);
	free(h->value);
	h->value = NULL;
	h->kind = kind;
	h->source = source;
	h->line = line;
	return 0;
}

int policy_add_cred_env(struct policy *p, const char *spec, char *err, size_t errlen)
{
	union netpol_value v;
	struct pol_cred *c;
	char *var;
	int e = netpol_value_parse(NETPOL_CREDENTIAL, spec, &v, err, errlen);

	if (e < 0)
		return e;
	c = policy_cred_for(p, v.cred.host);
	var = strdup(v.cred.var);
	if (!c || !var) {
		free(var);
		return -ENOMEM;
	}
	return policy_cred_header(c, v.cred.header, CRED_ENV, var, 0);
}

int policy_apply(struct policy *p, const struct netpol_item *it, char *err, size_t errlen)
{
	union netpol_value v;
	int e;

	switch (it->opt) {
	case NETPOL_POLICY: /* loaded before the rest (prepare) */
		return 0;
	case NETPOL_DENY_ALL:
		p->default_deny = true;
		return 0;
	case NETPOL_ALLOW:
		return policy_add_allow(p, it->value, err, errlen);
	case NETPOL_DENY:
		return policy_add_deny(p, it->value, err, errlen);
	case NETPOL_ALLOW_CIDR:
		return policy_add_cidr(p, it->value, err, errlen);
	case NETPOL_ALLOW_PORT:
		return policy_add_port(p, it->value, err, errlen);
	case NETPOL_CREDENTIAL:
		return policy_add_cred_env(p, it->value, err, errlen);
	case NETPOL_RESOLVER:
		return policy_set_resolver(p, it->value, err, errlen);
	case NETPOL_CA_FILE:
		free(p->ca_file);
		p->ca_file = strdup(it->value);
		return p->ca_file ? 0 : -ENOMEM;
	case NETPOL_EGRESS_BYTES:
		if ((e = netpol_value_parse(NETPOL_EGRESS_BYTES, it->value, &v, err, errlen)) < 0)
			return e;
		p->egress_bytes = v.bytes;
		return 0;
	case NETPOL_NOPTS:
		break;
	}
	return policy_errf(err, errlen, "prepare: unknown option");
}

/* ---- credential values ---- */

static bool policy_value_ok(const char *v)
{
	for (; *v; v++) {
		if (*v == '\r' || *v == '\n')
			return false;
	}
	return true;
}

/* Expand ${VAR} in `tmpl` from the environment. */
static int policy_expand(const char *tmpl, char **out, char *err, size_t errlen)
{
	size_t cap = strlen(tmpl) + 1, len = 0;
	char *buf = malloc(cap);

	if (!buf)
		return -ENOMEM;
	while (*tmpl) {
		const char *add = tmpl, *end;
		size_t addlen = 1;
		char var[256];

		if (tmpl[0] == '$' && tmpl[1] == '{' && (end = strchr(tmpl, '}'))) {
			size_t vl = (size_t)(end - tmpl - 2);

			if (vl == 0 || vl >= sizeof(var)) {
				free(buf);
				return policy_errf(err, errlen, "bad variable reference in '%.60s'",
						   tmpl);
			}
			memcpy(var, tmpl + 2, vl);
			var[vl] = 0;
			add = getenv(var);
			if (!add) {
				free(buf);
				return policy_errf(err, errlen,
						   "environment variable %s is not set", var);
			}
			addlen = strlen(add);
			tmpl = end + 1;
		} else {
			tmpl++;
		}
		if (len + addlen + 1 > cap) {
			char *nb;

			cap = (len + addlen + 1) * 2;
			nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
		}
		memcpy(buf + len, add, addlen);
		len += addlen;
	}
	buf[len] = 0;
	*out = buf;
	return 0;
}

int policy_resolve_creds(struct policy *p, char *err, size_t errlen)
{
	for (unsigned i = 0; i < p->ncreds; i++) {
		for (unsigned j = 0; j < p->creds[i].nheaders; j++) {
			struct pol_header *h = &p->creds[i].headers[j];
			char *v = NULL, e2[256];
			const char *env;
			size_t len;
			int e = 0;

			switch (h->kind) {
			case CRED_ENV:
				env = getenv(h->source);
				if (!env)
					return policy_errf(err, errlen,
							   "--credential %s:%s: environment "
							   "variable %s is not set",
							   p->creds[i].host, h->name, h->source);
				v = strdup(env);
				e = v ? 0 : -ENOMEM;
				break;
			case CRED_TEMPLATE:
				e = policy_expand(h->source, &v, e2, sizeof(e2));
				if (e == -EINVAL)
					return policy_errf(err, errlen, "credential %s %s: %s",
							   p->creds[i].host, h->name, e2);
				break;
			case CRED_FILE:
				e = read_file_follow(h->source, 1 << 16, &v, &len);
				if (e < 0)
					return policy_errf(err, errlen, "credential %s %s: %s: %s",
							   p->creds[i].host, h->name, h->source,
							   strerror(-e));
				if (len > 0 && v[len - 1] == '\n')
					v[--len] = 0;
				if (len > 0 && v[len - 1] == '\r')
					v[--len] = 0;
				if (strlen(v) != len) {
					free(v);
					return policy_errf(err, errlen,
							   "credential %s %s: %s holds a NUL byte",
							   p->creds[i].host, h->name, h->source);
				}
				break;
			case CRED_LOADED:
				if (h->value)
					continue;
				return policy_errf(
					err, errlen,
					"credential %s %s: '%s' names no value (a policy "
					"printed by sandbox-proxy has no secrets)",
					p->creds[i].host, h->name, h->source);
			}
			if (e < 0)
				return e;
			if (!policy_value_ok(v)) {
				free(v);
				return policy_errf(err, errlen,
						   "credential %s %s: the value holds a line break",
						   p->creds[i].host, h->name);
			}
			free(h->value);
			h->value = v;
		}
	}
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A job spec's network and secrets (docs/jobspec.md), turned into the policy options of
 * netpolicy.h's table, as words, as `sandboxctl create` passes them. Each value is checked
 * here by the proxy's own check (netpol_value_parse), so a bad one is the spec's
 * FILE:LINE:COLUMN error before any sandbox exists.
 *
 *   network: none                    # no NIC at all
 *   network:                         # or the proxy's policy (the default: allow-public)
 *     default: deny                  # allow-public | deny
 *     allow: [example.test, "*.example.test"]
 *     deny: ["*.evil.test"]
 *     allow-cidr: [203.0.113.0/24]
 *     ports: [80, 443]
 *     egress-bytes: 1000000000
 *     resolver: 203.0.113.53         # IP[:PORT], the proxy's upstream DNS
 *   secrets:                         # credential rules: the value reaches the proxy only
 *     - host: api.example.test
 *       header: Authorization
 *       env: API_TOKEN               # read from sandboxctl's environment at create
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobspec_yaml.h"
#include "netpolicy.h"

/* Option `opt` of the request's table (netpolicy.h) and its value, as two words (one for
 * deny-all): the spelling sandboxctl create passes. */
static int spec_net_opt(struct spec_parse *p, const yaml_node_t *n, struct jobspec *js,
			enum netpol_opt opt, const char *value)
{
	int err = spec_net_word(p, n, js, netpol_options[opt].flag);

	if (err == 0 && value)
		err = spec_net_word(p, n, js, value);
	return err;
}

/* A list of values of `opt`, each checked by the proxy's own check (netpol_value_parse): what
 * passes here passes prepare. */
static int spec_rule_list(struct spec_parse *p, const yaml_node_t *n, struct jobspec *js,
			  const char *what, enum netpol_opt opt, const char *expected)
{
	int len = spec_sequence(p, n, what, SPEC_MAX_LIST), err;
	union netpol_value v;

	if (len < 0)
		return len;
	for (int i = 0; i < len; i++) {
		yaml_node_t *it = spec_item(p, n, (size_t)i);
		const char *s = spec_scalar(p, it, what);

		if (!s)
			return -EINVAL;
		if (netpol_value_parse(opt, s, &v, NULL, 0) < 0)
			return spec_fail(p, it, "%s: '%.60s' is not %s", what, s, expected);
		if ((err = spec_net_opt(p, it, js, opt, s)) < 0)
			return err;
	}
	return 0;
}

int spec_network(struct spec_parse *p, const yaml_node_t *n, struct jobspec *js)
{
	int err;

	if (n && n->type == YAML_SCALAR_NODE) {
		const char *s = spec_scalar(p, n, "network");

		if (!s)
			return -EINVAL;
		if (strcmp(s, "none") == 0)
			js->no_network = true;
		else if (strcmp(s, "proxy") != 0)
			return spec_fail(p, n, "network: give none, proxy or a policy mapping");
		return 0;
	}
	if ((err = spec_mapping(p, n, "network")) < 0)
		return err;
	for (size_t i = 0; i < spec_mapping_len(n); i++) {
		yaml_node_t *k, *val;
		const char *key = spec_key(p, n, i, &k, &val), *s;
		union netpol_value v;
		char num[24];

		if (strcmp(key, "default") == 0) {
			if (!(s = spec_scalar(p, val, "default")))
				return -EINVAL;
			if (strcmp(s, "deny") == 0)
				err = spec_net_opt(p, val, js, NETPOL_DENY_ALL, NULL);
			else if (strcmp(s, "allow-public") != 0)
				err = spec_fail(p, val, "default: give allow-public or deny");
		} else if (strcmp(key, "allow") == 0) {
			err = spec_rule_list(p, val, js, "allow", NETPOL_ALLOW,
					     "a domain or *.domain");
		} else if (strcmp(key, "deny") == 0) {
			err = spec_rule_list(p, val, js, "deny", NETPOL_DENY,
					     "a domain or *.domain");
		} else if (strcmp(key, "allow-cidr") == 0) {
			err = spec_rule_list(p, val, js, "allow-cidr", NETPOL_ALLOW_CIDR,
					     "ADDRESS[/BITS]");
		} else if (strcmp(key, "ports") == 0) {
			err = spec_rule_list(p, val, js, "ports", NETPOL_ALLOW_PORT,
					     "a port from 1 to 65535");
		} else if (strcmp(key, "egress-bytes") == 0) {
			if (!(s = spec_scalar(p, val, "egress-bytes")))
				return -EINVAL;
			if (netpol_value_parse(NETPOL_EGRESS_BYTES, s, &v, NULL, 0) < 0) {
				err = spec_fail(p, val,
						"egress-bytes: expected a number from 0 to %lld, "
						"got '%.40s'",
						(long long)INT64_MAX, s);
			} else {
				/* normalised: "007" is 7 */
				snprintf(num, sizeof(num), "%llu", (unsigned long long)v.bytes);
				err = spec_net_opt(p, val, js, NETPOL_EGRESS_BYTES, num);
			}
		} else if (strcmp(key, "resolver") == 0) {
			if (!(s = spec_scalar(p, val, "resolver")))
				return -EINVAL;
			if (netpol_value_parse(NETPOL_RESOLVER, s, &v, NULL, 0) < 0)
				err = spec_fail(p, val, "resolver: '%.60s' is not IP or IP:PORT",
						s);
			else
				err = spec_net_opt(p, val, js, NETPOL_RESOLVER, s);
		} else {
			err = spec_fail(p, k,
					"unknown network key '%.40s' (default, allow, deny, "
					"allow-cidr, ports, egress-bytes, resolver)",
					key);
		}
		if (err < 0)
			return err;
	}
	return 0;
}

/* An HTTP header name (netpolicy.h's grammar), of at most 64 bytes in a spec. */
static bool valid_header(const char *s)
{
	return strlen(s) <= 64 && netpol_header_name_ok(s);
}

/* The spec's env: a portable variable name (a credential reference takes any name getenv
 * takes; the spec asks for one a shell can set). */
static bool valid_env_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 255 || (s[0] >= '0' && s[0] <= '9'))
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == n;
}

static int spec_secret(struct spec_parse *p, const yaml_node_t *n, struct jobspec *js)
{
	const char *host = NULL, *header = NULL, *env = NULL;
	char rule[600], norm[NETPOL_NAME_TEXT];
	union netpol_value v;
	int err;

	if ((err = spec_mapping(p, n, "secrets")) < 0)
		return err;
	for (size_t i = 0; i < spec_mapping_len(n); i++) {
		yaml_node_t *k, *val;
		const char *key = spec_key(p, n, i, &k, &val), *s = NULL;

		if (strcmp(key, "host") && strcmp(key, "header") && strcmp(key, "env"))
			return spec_fail(p, k, "unknown secret key '%.40s' (host, header, env)",
					 key);
		if (!(s = spec_scalar(p, val, key)))
			return -EINVAL;
		if (strcmp(key, "host") == 0) {
			if (!netpol_name_norm(s, norm, sizeof(norm)))
				return spec_fail(p, val, "host: '%.60s' is not a domain", s);
			host = s;
		} else if (strcmp(key, "header") == 0) {
			if (!valid_header(s))
				return spec_fail(p, val, "header: '%.60s' is not a header name", s);
			header = s;
		} else {
			if (!valid_env_name(s))
				return spec_fail(p, val,
						 "env: '%.60s' is not an environment variable's "
						 "name",
						 s);
			env = s;
		}
	}
	if (!host || !header || !env)
		return spec_fail(p, n, "a secret needs host, header and env");
	snprintf(rule, sizeof(rule), "%s:%s=%s", host, header, env);
	/* The reference prepare reads, checked as prepare checks it (the fields passed: so does
	 * it, unless cut short). */
	if (netpol_value_parse(NETPOL_CREDENTIAL, rule, &v, NULL, 0) < 0)
		return spec_fail(p, n, "a secret: '%.60s' is not a credential rule", rule);
	return spec_net_opt(p, n, js, NETPOL_CREDENTIAL, rule);
}

int spec_secrets(struct spec_parse *p, const yaml_node_t *n, struct jobspec *js)
{
	int len = spec_sequence(p, n, "secrets", SPEC_MAX_LIST), err;

	if (len < 0)
		return len;
	for (int i = 0; i < len; i++)
		if ((err = spec_secret(p, spec_item(p, n, (size_t)i), js)) < 0)
			return err;
	return 0;
}

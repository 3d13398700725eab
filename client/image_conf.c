/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An image's exec.conf: what an imported OCI or Docker image says its commands run with
 * (docs/images.md, "Importing an OCI or Docker image"). Lines of "KEY VALUE", the value being
 * the rest of the line after the first space:
 *
 *   env KEY=VALUE     one per variable, in the image's order
 *   workdir /abs/path
 *   user UID:GID      numeric
 *   entrypoint ARG    one per argument, in order
 *   cmd ARG           one per argument, in order
 *
 * A value is valid UTF-8 without C0 controls (tab too), DEL, C1 controls, U+2028 or U+2029
 * (image_conf_value_ok): the writer refuses one, the reader too, so that no reader (a Python
 * splitlines() breaks lines at more than '\n') sees one value as two lines.
 * At most IMAGE_CONF_MAX bytes; a line absent means "not set"; a key we do not know is
 * skipped (a newer importer may add one). The format is shared with the Python SDK
 * (sdk/python), which reads the same file: it must not change. sandboxctl's import writes it
 * (image_conf_format), exec and run read it (image_conf_load); the file lives in the state
 * directory, which only root writes, but it is parsed as strictly as anything else.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

void image_conf_free(struct image_conf *c)
{
	free(c->env);
	free(c->entrypoint);
	free(c->cmd);
	free(c->text);
	memset(c, 0, sizeof(*c));
}

bool image_conf_id(const char *s, uint32_t *out)
{
	uint64_t v;

	/* 0xffffffff is the agent's "keep" (PROTO_ID_KEEP), and -1 to chown */
	if (!parse_u64(s, 0, 0xfffffffeu, &v))
		return false;
	*out = (uint32_t)v;
	return true;
}

bool image_conf_value_ok(const char *s, size_t *at)
{
	const unsigned char *u = (const unsigned char *)s;

	for (size_t i = 0; u[i];) {
		uint32_t cp;
		unsigned n;

		*at = i;
		if (u[i] < 0x20 || u[i] == 0x7f)
			return false; /* C0 (tab too: one rule for every reader) and DEL */
		if (u[i] < 0x80) {
			i++;
			continue;
		}
		if (u[i] >= 0xc2 && u[i] <= 0xdf)
			n = 1, cp = u[i] & 0x1f;
		else if (u[i] >= 0xe0 && u[i] <= 0xef)
			n = 2, cp = u[i] & 0x0f;
		else if (u[i] >= 0xf0 && u[i] <= 0xf4)
			n = 3, cp = u[i] & 0x07;
		else
			return false;
		for (unsigned k = 1; k <= n; k++) {
			if ((u[i + k] & 0xc0) != 0x80)
				return false; /* also the NUL at the end */
			cp = (cp << 6) | (u[i + k] & 0x3f);
		}
		if (n == 1 && cp < 0xa0)
			return false; /* C1 controls */
		if (n == 2 &&
		    (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff) || cp == 0x2028 || cp == 0x2029))
			return false; /* overlong, a surrogate, the line and paragraph separators */
		if (n == 3 && (cp < 0x10000 || cp > 0x10ffff))
			return false;
		i += n + 1;
	}
	return true;
}

int image_conf_parse(const char *text, size_t len, struct image_conf *c)
{
	size_t lines = 1, at;
	char *p, *end;

	memset(c, 0, sizeof(*c));
	if (len > IMAGE_CONF_MAX || memchr(text, '\0', len))
		return -EBADMSG;
	for (size_t i = 0; i < len; i++)
		lines += text[i] == '\n';
	if (!(c->text = malloc(len + 1)) || !(c->env = calloc(lines, sizeof(char *))) ||
	    !(c->entrypoint = calloc(lines, sizeof(char *))) ||
	    !(c->cmd = calloc(lines, sizeof(char *)))) {
		image_conf_free(c);
		return -ENOMEM;
	}
	memcpy(c->text, text, len);
	c->text[len] = '\0';
	for (p = c->text, end = c->text + len; p < end;) {
		char *nl = memchr(p, '\n', (size_t)(end - p)), *sp, *val;
		size_t klen;

		if (nl)
			*nl = '\0';
		sp = strchr(p, ' ');
		if (!sp)
			goto bad;
		klen = (size_t)(sp - p);
		val = sp + 1;
#define KEY_IS(k) (klen == sizeof(k) - 1 && memcmp(p, k, klen) == 0)
		if ((KEY_IS("env") || KEY_IS("workdir") || KEY_IS("entrypoint") || KEY_IS("cmd")) &&
		    !image_conf_value_ok(val, &at))
			goto bad; /* as image_conf_format would refuse it */
		if (KEY_IS("env")) {
			if (val[0] == '=' || !strchr(val, '='))
				goto bad;
			c->env[c->nenv++] = val;
		} else if (KEY_IS("workdir")) {
			if (c->workdir || val[0] != '/')
				goto bad;
			c->workdir = val;
		} else if (KEY_IS("user")) {
			char *colon = strchr(val, ':');
			bool ok;

			if (c->has_user || !colon)
				goto bad;
			*colon = '\0';
			ok = image_conf_id(val, &c->uid) && image_conf_id(colon + 1, &c->gid);
			*colon = ':';
			if (!ok)
				goto bad;
			c->has_user = true;
		} else if (KEY_IS("entrypoint")) {
			c->entrypoint[c->nentrypoint++] = val;
		} else if (KEY_IS("cmd")) {
			c->cmd[c->ncmd++] = val;
		}
#undef KEY_IS
		if (!nl)
			break;
		p = nl + 1;
	}
	return 0;
bad:
	image_conf_free(c);
	return -EBADMSG;
}

int image_conf_load(const char *image, struct image_conf *c)
{
	char path[4200], *text;
	size_t len;
	int err;

	memset(c, 0, sizeof(*c));
	if (!valid_name(image))
		return -EINVAL;
	if ((err = path_fmt(path, sizeof(path), "%s/images/%s/exec.conf", state_home(), image)) < 0)
		return err;
	err = read_file(path, IMAGE_CONF_MAX, &text, &len);
	if (err == -ENOENT)
		return 0; /* an image without one (busybox, debian): nothing set */
	if (err < 0)
		return err;
	err = image_conf_parse(text, len, c);
	free(text);
	return err;
}

/* Append "key value\n"; -EINVAL for a value image_conf_value_ok refuses. */
static int put_line(char **buf, size_t *len, const char *key, const char *val)
{
	size_t n = strlen(key) + 1 + strlen(val) + 1, at;
	char *b;

	if (!image_conf_value_ok(val, &at))
		return -EINVAL;
	if (*len + n > IMAGE_CONF_MAX)
		return -E2BIG;
	if (!(b = realloc(*buf, *len + n + 1)))
		return -ENOMEM;
	*buf = b;
	snprintf(b + *len, n + 1, "%s %s\n", key, val);
	*len += n;
	return 0;
}

int image_conf_format(const struct image_conf *c, char **out, size_t *out_len)
{
	char *buf = NULL, user[32];
	size_t len = 0;
	int err = 0;

	for (unsigned i = 0; !err && i < c->nenv; i++)
		err = c->env[i][0] == '=' || !strchr(c->env[i], '=')
			      ? -EINVAL
			      : put_line(&buf, &len, "env", c->env[i]);
	if (!err && c->workdir)
		err = c->workdir[0] != '/' ? -EINVAL : put_line(&buf, &len, "workdir", c->workdir);
	if (!err && c->has_user) {
		snprintf(user, sizeof(user), "%u:%u", c->uid, c->gid);
		err = c->uid == 0xffffffffu || c->gid == 0xffffffffu
			      ? -EINVAL
			      : put_line(&buf, &len, "user", user);
	}
	for (unsigned i = 0; !err && i < c->nentrypoint; i++)
		err = put_line(&buf, &len, "entrypoint", c->entrypoint[i]);
	for (unsigned i = 0; !err && i < c->ncmd; i++)
		err = put_line(&buf, &len, "cmd", c->cmd[i]);
	if (err < 0) {
		free(buf);
		return err;
	}
	if (!buf && !(buf = strdup("")))
		return -ENOMEM;
	*out = buf;
	*out_len = len;
	return 0;
}

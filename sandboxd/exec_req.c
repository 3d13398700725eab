/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An execute request (the WebSocket's execute frame, or POST /execute's body) as a command
 * session for the guest agent: the shell and command, the environment layered as the API
 * says (ours, the box's run_config env_vars, the request's env or run_config), the working
 * directory, the user, and the session's timers. Every field is checked: a wrong type or a
 * value out of range is refused with a message naming the field.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "proto.h"
#include "sandboxd.h"

#define EXEC_ENV_MAX	 256	      /* variables of one command */
#define EXEC_COMMAND_MAX (256u << 10) /* a command's text */
#define EXEC_TIMEOUT_MAX (7 * 86400)  /* seconds: a week, as a sandbox's TTL */
/* The default shell falls back to /bin/sh where there is no bash (the busybox image, Alpine):
 * the API's clients all send /bin/bash. The agent does it (PROTO_SESSION_SHELL_FALLBACK),
 * after its exec of bash fails, so it costs no second shell. */
#define DEFAULT_SHELL	 "/bin/bash"

static const char *const base_env[] = {
	"PATH=" SD_EXEC_PATH,
	"HOME=/root",
	"LANG=C.UTF-8",
};

/* Set key[0, kl) to val, in place of an earlier value of it. */
static int env_addn(struct exec_req *x, const char *key, size_t kl, const char *val)
{
	if (kl == 0 || memchr(key, '=', kl) || memchr(key, 0, kl) || strlen(val) > (64u << 10))
		return -EINVAL;
	for (unsigned i = 0; i < x->envc; i++)
		if (strncmp(x->env[i], key, kl) == 0 && x->env[i][kl] == '=') {
			char *n = malloc(kl + strlen(val) + 2);

			if (!n)
				return -ENOMEM;
			sprintf(n, "%.*s=%s", (int)kl, key, val);
			free(x->env[i]);
			x->env[i] = n;
			return 0;
		}
	if (x->envc >= EXEC_ENV_MAX)
		return -E2BIG;
	char *n = malloc(kl + strlen(val) + 2);

	if (!n)
		return -ENOMEM;
	sprintf(n, "%.*s=%s", (int)kl, key, val);
	x->env[x->envc++] = n;
	return 0;
}

static int env_add(struct exec_req *x, const char *key, const char *val)
{
	return env_addn(x, key, strlen(key), val);
}

static int env_merge(struct exec_req *x, json_t *obj, const char *field, char *why, size_t len)
{
	const char *k;
	json_t *v;

	if (!obj)
		return 0;
	if (!json_is_object(obj)) {
		snprintf(why, len, "%s must be an object of strings", field);
		return -EINVAL;
	}
	json_object_foreach(obj, k, v)
	{
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
			snprintf(why, len, "%s.%.64s must be a string without NUL", field, k);
			return -EINVAL;
		}
		int err = env_add(x, k, json_string_value(v));

		if (err < 0) {
			snprintf(why, len, "%s: %.64s: %s", field, k,
				 err == -E2BIG ? "too many variables" : "not a valid variable");
			return err;
		}
	}
	return 0;
}

/* An integer field within [min, max], else `def` when absent. */
static int int_field(json_t *o, const char *name, int64_t min, int64_t max, int64_t def,
		     int64_t *out, char *why, size_t len)
{
	json_t *v = json_object_get(o, name);

	if (!v || json_is_null(v)) {
		*out = def;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
		snprintf(why, len, "%s must be an integer from %lld to %lld", name, (long long)min,
			 (long long)max);
		return -EINVAL;
	}
	*out = json_integer_value(v);
	return 0;
}

static int user_parse(const char *u, uint32_t *uid, uint32_t *gid)
{
	if (strcmp(u, "root") == 0) {
		*uid = *gid = 0;
		return 0;
	}
	char *end;
	unsigned long a = strtoul(u, &end, 10), b;

	if (end == u || a > 0xfffffffeul)
		return -EINVAL;
	b = a;
	if (*end == ':') {
		const char *g = end + 1;

		b = strtoul(g, &end, 10);
		if (end == g || b > 0xfffffffeul)
			return -EINVAL;
	}
	if (*end)
		return -EINVAL;
	*uid = (uint32_t)a;
	*gid = (uint32_t)b;
	return 0;
}

int exec_req_from_json(json_t *o, struct box *b, const char *cmd_id, bool http, struct exec_req *x,
		       char *why, size_t len)
{
	const char *command = json_string_value(json_object_get(o, "command"));
	json_t *shell_j = json_object_get(o, "shell"), *cwd_j = json_object_get(o, "cwd");
	json_t *rc = json_object_get(o, "run_config"), *env = json_object_get(o, "env");
	int64_t timeout, idle, ttl;
	int err;

	memset(x, 0, sizeof(*x));
	snprintf(why, len, "bad request");
	if (!command || strlen(command) != json_string_length(json_object_get(o, "command")) ||
	    strlen(command) > EXEC_COMMAND_MAX) {
		snprintf(why, len, "command must be a string (without NUL) of at most %u bytes",
			 EXEC_COMMAND_MAX);
		return -EINVAL;
	}
	if ((shell_j && !json_is_string(shell_j)) ||
	    (cwd_j && !json_is_string(cwd_j) && !json_is_null(cwd_j))) {
		snprintf(why, len, "shell and cwd must be strings");
		return -EINVAL;
	}
	if (rc && !json_is_null(rc) && (env || (cwd_j && !json_is_null(cwd_j)))) {
		snprintf(why, len, "run_config cannot be given with env or cwd");
		return -EINVAL;
	}
	if ((err = int_field(o, http ? "timeout" : "timeout_seconds", 0, EXEC_TIMEOUT_MAX, 60,
			     &timeout, why, len)) < 0 ||
	    (err = int_field(o, "idle_timeout_seconds", -1, EXEC_TIMEOUT_MAX, 300, &idle, why,
			     len)) < 0 ||
	    (err = int_field(o, "ttl_seconds", -1, EXEC_TIMEOUT_MAX, 600, &ttl, why, len)) < 0)
		return err;
	x->env = calloc(EXEC_ENV_MAX, sizeof(char *));
	if (!x->env)
		return -ENOMEM;
	for (size_t i = 0; i < sizeof(base_env) / sizeof(base_env[0]); i++)
		x->env[x->envc++] = strdup(base_env[i]);
	bool pty = json_is_true(json_object_get(o, "pty")) && !http;

	if (pty && (err = env_add(x, "TERM", "xterm-256color")) < 0)
		goto fail;
	json_t *brc = b->run_config;
	const char *work_dir = NULL, *user = NULL;
	const struct image_conf *ic = box_image_conf(b);
	char uidgid[32];

	/* The image's own defaults (exec.conf: its Env, WorkingDir, User) under everything else. */
	if (ic) {
		for (unsigned i = 0; i < ic->nenv; i++) {
			const char *eq = strchr(ic->env[i], '=');

			if (eq &&
			    (err = env_addn(x, ic->env[i], (size_t)(eq - ic->env[i]), eq + 1)) < 0)
				break;
		}
		if (ic->workdir)
			snprintf(x->image_workdir, sizeof(x->image_workdir), "%s", ic->workdir);
		if (ic->has_user) {
			snprintf(uidgid, sizeof(uidgid), "%u:%u", ic->uid, ic->gid);
			user = uidgid;
		}
		if (x->image_workdir[0])
			work_dir = x->image_workdir;
	}

	if (brc) {
		if ((err = env_merge(x, json_object_get(brc, "env_vars"), "run_config.env_vars",
				     why, len)) < 0)
			goto fail;
		work_dir = json_string_value(json_object_get(brc, "work_dir"));
		user = json_string_value(json_object_get(brc, "user"));
	}
	if (rc && json_is_object(rc)) {
		if ((err = env_merge(x, json_object_get(rc, "env_vars"), "run_config.env_vars", why,
				     len)) < 0)
			goto fail;
		if (json_string_value(json_object_get(rc, "work_dir")))
			work_dir = json_string_value(json_object_get(rc, "work_dir"));
		if (json_string_value(json_object_get(rc, "user")))
			user = json_string_value(json_object_get(rc, "user"));
	}
	if ((err = env_merge(x, env, "env", why, len)) < 0)
		goto fail;
	const char *cwd = cwd_j && json_is_string(cwd_j) ? json_string_value(cwd_j) : work_dir;

	if (cwd && (cwd[0] != '/' || strlen(cwd) > 4096)) {
		snprintf(why, len, "the working directory must be an absolute path");
		err = -EINVAL;
		goto fail;
	}
	x->req.uid = x->req.gid = 0xffffffffu;
	if (user && user_parse(user, &x->req.uid, &x->req.gid) < 0) {
		snprintf(why, len, "run_config.user must be root, UID or UID:GID");
		err = -EINVAL;
		goto fail;
	}
	const char *shell = shell_j ? json_string_value(shell_j) : DEFAULT_SHELL;

	if (!shell[0] || strlen(shell) > 4096) {
		snprintf(why, len, "shell must be a path");
		err = -EINVAL;
		goto fail;
	}
	x->command = strdup(command);
	x->shell = strdup(shell);
	if (!x->command || !x->shell) {
		err = -ENOMEM;
		goto fail;
	}
	x->argv[0] = x->shell;
	x->argv[1] = (char *)"-c";
	x->argv[2] = x->command;
	x->req.argc = 3;
	x->req.shell_fallback = strcmp(shell, DEFAULT_SHELL) == 0;
	x->req.id = cmd_id;
	x->req.argv = (const char *const *)x->argv;
	x->req.env = (const char *const *)x->env;
	x->req.envc = (int)x->envc;
	x->req.cwd = cwd ? cwd : "";
	x->req.timeout_ms = (uint32_t)(timeout * 1000);
	x->req.idle_timeout_s = http ? -1 : idle;
	x->req.ttl_s = http ? 60 : ttl;
	x->req.pty = pty;
	x->req.stdin = !http && (pty || !json_is_true(json_object_get(o, "close_stdin")));
	x->req.kill_on_disconnect = http || json_is_true(json_object_get(o, "kill_on_disconnect"));
	x->req.rows = pty ? 24 : 0;
	x->req.cols = pty ? 80 : 0;
	if (cwd) {
		x->cwd = strdup(cwd);
		x->req.cwd = x->cwd ? x->cwd : "";
	}
	return 0;
fail:
	exec_req_free(x);
	return err;
}

void exec_req_free(struct exec_req *x)
{
	for (unsigned i = 0; i < x->envc; i++)
		free(x->env[i]);
	free(x->env);
	free(x->command);
	free(x->shell);
	free(x->cwd);
	memset(x, 0, sizeof(*x));
}

int exec_req_start(struct box *b, const struct exec_req *x, link_frame_fn on_frame, void *owner,
		   uint64_t *id)
{
	uint8_t small[8192], *buf = small; /* most commands: no 1 MiB allocation each */
	int n = session_exec_payload(&x->req, small, sizeof(small)), err;

	if (n == -EMSGSIZE) {
		buf = malloc(PROTO_MAX_PAYLOAD);
		n = buf ? session_exec_payload(&x->req, buf, PROTO_MAX_PAYLOAD) : -ENOMEM;
	}
	err = n < 0 ? n
		    : link_call_start(b, PROTO_MSG_SESSION_EXEC, buf, (uint32_t)n, on_frame, owner,
				      id);
	if (buf != small)
		free(buf);
	return err;
}

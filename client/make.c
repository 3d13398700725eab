/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The making of a sandbox, whatever it is made from (an image: create.c; a snapshot:
 * restore.c): its id and directory under one lock, its proxy's files (from a policy request,
 * netpolicy.h), and the undoing of a make that failed. The floor below create, restore and
 * the warm create (ready.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client.h"
#include "netpolicy.h" /* the policy request */

static int new_id(char id[ID_LEN + 1])
{
	uint8_t b[ID_LEN / 2];

	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		return -EIO;
	for (unsigned i = 0; i < sizeof(b); i++)
		sprintf(id + 2 * i, "%02x", b[i]);
	return 0;
}

static int name_taken(const struct sandbox *sb, void *opaque)
{
	return strcmp(sb->name, opaque) == 0 ? -EEXIST : 0;
}

/* Every sandbox has a uid of its own (sandbox_uid: from its id's first 4 digits). */
static int uid_taken(const struct sandbox *sb, void *opaque)
{
	return sandbox_uid(sb->id) == sandbox_uid(opaque) ? -EEXIST : 0;
}

void sandbox_discard(struct sandbox *sb, const struct lc_report *r)
{
	if (sb->pid)
		if (sandbox_stop_vmm(sb, true, r) < 0)
			lc_note(r, "%s: cannot stop the VMM (pid %d)", sb->id, (int)sb->pid);
	cgroup_remove(sb, r);
	remove_flat_dir(sb->dir);
}

int sandbox_make_dir(struct sandbox *sb, const char *name, struct lc_report *r)
{
	char lock[4200];
	int err, lock_fd;

	/* The name check and the directory are made under one lock: two creates of one name
	 * cannot both succeed. */
	if ((err = path_fmt(lock, sizeof(lock), "%s/sandboxes/.lock", state_home())) < 0)
		return err;
	lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lock_fd < 0 || flock(lock_fd, LOCK_EX) < 0) {
		err = -errno;
		if (lock_fd >= 0)
			close(lock_fd);
		return lc_fail(r, err, "cannot lock %s: %s", lock, strerror(-err));
	}
	if (name && sandbox_foreach(name_taken, (void *)name, r) == -EEXIST) {
		close(lock_fd);
		return lc_fail(r, -EEXIST, "a sandbox named '%s' exists already", name);
	}
	for (int tries = 0;; tries++) {
		if ((err = new_id(sb->id)) < 0 ||
		    (err = path_fmt(sb->dir, sizeof(sb->dir), "%s/sandboxes/%s", state_home(),
				    sb->id)) < 0)
			break;
		if (sandbox_foreach(uid_taken, sb->id, r) == -EEXIST) {
			err = -EEXIST;
			if (tries == 100)
				break;
			continue;
		}
		if (mkdir(sb->dir, 0700) == 0)
			break;
		err = -errno;
		if (err != -EEXIST || tries == 100)
			break;
	}
	snprintf(sb->name, sizeof(sb->name), "%s", name ? name : sb->id);
	if (err == 0)
		err = sandbox_save(sb);
	close(lock_fd);
	if (err < 0) {
		if (sb->dir[0] && sb->id[0])
			remove_flat_dir(sb->dir);
		return lc_fail(r, err, "cannot create the sandbox's directory: %s", strerror(-err));
	}
	return 0;
}

int sandbox_net_prepare(const struct sandbox *sb, const struct create_opts *o, struct lc_report *r)
{
	struct netpol_request req = {0};
	char path[4200], msg[128] = "", *text = NULL;
	size_t len;
	int err;

	/* The words are create's options or a job spec's, in the table's spelling: a word the
	 * table lacks here is a bug of theirs. Their values are prepare's to check. */
	if ((err = netpol_request_words(&req, o->net_opts, o->nnet_opts, msg, sizeof(msg))) < 0 ||
	    (err = netpol_request_format(&req, &text, &len)) < 0 ||
	    (err = sandbox_path(sb, "policy.request", path, sizeof(path))) < 0 ||
	    (err = write_file_atomic(path, text, len, 0600)) < 0) {
		netpol_request_free(&req);
		free(text);
		return lc_fail(r, err, "%s: cannot write its policy request: %s", sb->id,
			       msg[0] ? msg : strerror(-err));
	}
	netpol_request_free(&req);
	free(text);
	err = proxy_prepare(sb, path);
	/* What prepare wrote is the policy; the request is not kept. */
	(void)unlink(path);
	if (err == -EINVAL) /* the proxy said on stderr what is wrong with the policy */
		return lc_bad_option(r, "%s", "");
	if (err < 0)
		return lc_fail(r, err, "%s: cannot prepare its proxy: %s", sb->id, strerror(-err));
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The whole of an OCI or Docker import (oci.h): the archive's one image opened and checked
 * (oci_image.c), its layers applied in order under a staging tree inside the new image's
 * directory (oci_layer.c), the mount points sandbox-init needs and the image's working
 * directory made, its config's Env, WorkingDir, User (a name resolved from the image's own
 * /etc/passwd and /etc/group), Entrypoint and Cmd written to exec.conf (client/image_conf.c),
 * then the root file system made from the tree as guest/image/lib.sh makes its images:
 * `mke2fs -t ext4 -d TREE`, no loop mount, sized from the tree's used space with headroom.
 * The staging tree is removed whatever happens; the caller removes the rest on failure.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/sha.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "oci.h"

#define ETC_FILE_MAX (1u << 20) /* /etc/passwd, /etc/group */
#define STAGING	     "staging"

/* What sandbox-init mounts on (guest/init.c) and a program expects: made when missing. */
static const struct {
	const char *name;
	mode_t mode;
} mount_points[] = {
	{"proc", 0555}, {"sys", 0555}, {"dev", 0755}, {"run", 0755}, {"tmp", 01777}, {"etc", 0755},
};

/* The tree's blocks and inodes, for the file system's size. Bounded in depth by what
 * oci_layer_apply let in. */
static int tree_usage(int dirfd, unsigned depth, uint64_t *bytes, uint64_t *inodes)
{
	DIR *d;
	struct dirent *e;
	int fd, err = 0;

	if (depth > OCI_REAL_DEPTH + 8)
		return -ELOOP;
	if ((fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	if (!(d = fdopendir(fd))) {
		close(fd);
		return -errno;
	}
	while (!err && (e = readdir(d))) {
		struct stat st;

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			err = -errno;
			break;
		}
		(*inodes)++;
		*bytes += (uint64_t)st.st_blocks * 512 + (S_ISREG(st.st_mode) ? 0 : 4096);
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(fd, e->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (sub < 0) {
				err = -errno;
				break;
			}
			err = tree_usage(sub, depth + 1, bytes, inodes);
			close(sub);
		}
	}
	closedir(d);
	return err;
}

/* A file of the image's /etc, read beneath its root. */
static int read_etc(int rootfd, const char *path, char **out)
{
	struct stat st;
	char *buf;
	ssize_t n;
	int fd = oci_openat_in_root(rootfd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);

	*out = NULL;
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > ETC_FILE_MAX) {
		close(fd);
		return -EINVAL;
	}
	if (!(buf = malloc((size_t)st.st_size + 1))) {
		close(fd);
		return -ENOMEM;
	}
	n = pread(fd, buf, (size_t)st.st_size, 0);
	close(fd);
	if (n < 0) {
		free(buf);
		return -EIO;
	}
	buf[n] = '\0';
	*out = buf;
	return 0;
}

/* In the passwd or group text `db`, the line whose field 0 is `name` (or, with name NULL,
 * whose field 2 is `id`): its fields 2 and, when f3 is not NULL, 3 (passwd's gid). */
static bool etc_find(const char *db, const char *name, uint32_t id, uint32_t *f2, uint32_t *f3)
{
	for (const char *line = db; line && *line;) {
		const char *nl = strchr(line, '\n');
		size_t llen = nl ? (size_t)(nl - line) : strlen(line);
		char buf[1024], *f[8];
		unsigned nf = 0;
		uint32_t v2, v3 = 0;

		const char *start = line;

		line = nl ? nl + 1 : NULL;
		if (llen >= sizeof(buf))
			continue; /* no passwd line is that long */
		memcpy(buf, start, llen);
		buf[llen] = '\0';
		for (char *p = buf, *c; nf < 8; p = c + 1) {
			f[nf++] = p;
			if (!(c = strchr(p, ':')))
				break;
			*c = '\0';
		}
		if (nf < 3 || !image_conf_id(f[2], &v2))
			continue;
		if (f3 && (nf < 4 || !image_conf_id(f[3], &v3)))
			continue;
		if (name ? strcmp(f[0], name) == 0 : v2 == id) {
			*f2 = v2;
			if (f3)
				*f3 = v3;
			return true;
		}
	}
	return false;
}

/* The config's User ("uid", "uid:gid", "name", "name:group", ...) as numbers, names looked up
 * in the image's /etc/passwd and /etc/group. */
static int resolve_user(int rootfd, const char *user, uint32_t *uid, uint32_t *gid,
			struct oci_msg *m)
{
	char u[256], *g;
	char *passwd = NULL, *group = NULL;
	uint32_t pgid = 0;
	bool have_pgid = false;
	int err = 0;

	if (strlen(user) >= sizeof(u))
		return oci_fail(m, -EINVAL, "the config's User is too long");
	snprintf(u, sizeof(u), "%s", user);
	g = strchr(u, ':');
	if (g)
		*g++ = '\0';
	(void)read_etc(rootfd, "etc/passwd", &passwd);
	(void)read_etc(rootfd, "etc/group", &group);
	if (image_conf_id(u, uid)) {
		uint32_t x;

		have_pgid = passwd && etc_find(passwd, NULL, *uid, &x, &pgid);
	} else if (!passwd || !etc_find(passwd, u, 0, uid, &pgid)) {
		err = oci_fail(m, -ENOENT, "the config's User %s is not in the image's /etc/passwd",
			       u);
		goto out;
	} else {
		have_pgid = true;
	}
	if (g && image_conf_id(g, gid)) {
		/* numeric */
	} else if (g) {
		if (!group || !etc_find(group, g, 0, gid, NULL)) {
			err = oci_fail(
				m, -ENOENT,
				"the config's User's group %s is not in the image's /etc/group", g);
			goto out;
		}
	} else {
		*gid = have_pgid ? pgid : 0; /* as Docker: the user's group, else root's */
	}
out:
	free(passwd);
	free(group);
	return err;
}

/* A config's value exec.conf cannot hold (image_conf_value_ok): one line per value, read by
 * C and Python alike, and printed. `i` is its index in an array, or -1. */
static int value_fail(struct oci_msg *m, const char *what, ssize_t i, size_t at)
{
	char idx[32] = "";

	if (i >= 0)
		snprintf(idx, sizeof(idx), "[%zd]", i);
	return oci_fail(m, -EBADMSG,
			"the config's %s%s holds, at byte %zu, a control character (tab and CR "
			"too), DEL, a C1 control, U+2028, U+2029 or invalid UTF-8",
			what, idx, at);
}

/* A config's array of strings (or null, or missing): pointers into the JSON. */
static int string_list(const struct oci_json *v, const char *what, char ***out, unsigned *n,
		       struct oci_msg *m)
{
	*out = NULL;
	*n = 0;
	if (!v || v->type == OJ_NULL)
		return 0;
	if (v->type != OJ_ARRAY || v->n > 4096)
		return oci_fail(m, -EBADMSG, "the config's %s is not an array of strings", what);
	if (!(*out = calloc(v->n + 1, sizeof(char *))))
		return -ENOMEM;
	for (size_t i = 0; i < v->n; i++) {
		const char *s = oci_json_cstr(&v->items[i]);

		size_t at;

		if (!s)
			return oci_fail(m, -EBADMSG,
					"the config's %s[%zu]: not a string, or holds a NUL", what,
					i);
		if (!image_conf_value_ok(s, &at))
			return value_fail(m, what, i, at);
		(*out)[(*n)++] = (char *)s;
	}
	return 0;
}

/* exec.conf from the config, written into dirfd. The workdir is made in the tree. */
static int write_exec_conf(const struct oci_image *img, struct oci_tree *tree, int dirfd,
			   struct oci_msg *m)
{
	int rootfd = tree->rootfd;
	const struct oci_json *cfg = oci_json_get(img->config, "config");
	const char *wd = oci_json_cstr(oci_json_get(cfg, "WorkingDir"));
	const char *user = oci_json_cstr(oci_json_get(cfg, "User"));
	struct image_conf c = {0};
	char *text = NULL, norm[OCI_PATH_MAX + 1];
	size_t len;
	int fd, err;

	if (cfg && cfg->type != OJ_OBJECT && cfg->type != OJ_NULL)
		return oci_fail(m, -EBADMSG, "the config's config is not an object");
	if ((err = string_list(oci_json_get(cfg, "Env"), "Env", &c.env, &c.nenv, m)) < 0 ||
	    (err = string_list(oci_json_get(cfg, "Entrypoint"), "Entrypoint", &c.entrypoint,
			       &c.nentrypoint, m)) < 0 ||
	    (err = string_list(oci_json_get(cfg, "Cmd"), "Cmd", &c.cmd, &c.ncmd, m)) < 0)
		goto out;
	for (unsigned i = 0; i < c.nenv; i++)
		if (c.env[i][0] == '=' || !strchr(c.env[i], '=')) {
			err = oci_fail(m, -EBADMSG, "the config's Env[%u] is not NAME=VALUE", i);
			goto out;
		}
	if (oci_json_get(cfg, "WorkingDir") && !wd &&
	    oci_json_get(cfg, "WorkingDir")->type != OJ_NULL) {
		err = oci_fail(m, -EBADMSG, "the config's WorkingDir is not a string");
		goto out;
	}
	if (wd && wd[0]) {
		int wfd;

		size_t at;

		if (!image_conf_value_ok(wd, &at)) {
			err = value_fail(m, "WorkingDir", -1, at);
			goto out;
		}
		if (wd[0] != '/' || oci_path_norm(wd, norm, sizeof(norm)) < 0) {
			err = oci_fail(m, -EBADMSG,
				       "the config's WorkingDir %s is not an absolute path", wd);
			goto out;
		}
		/* as docker run does: the working directory exists */
		if ((wfd = oci_open_dir(tree, norm, true)) < 0) {
			err = oci_fail(m, wfd, "the config's WorkingDir %s: %s", wd,
				       wfd == -ELOOP ? "too deep in the tree (symlinks followed)"
						     : strerror(-wfd));
			goto out;
		}
		close(wfd);
		c.workdir = wd;
	}
	if (user && user[0]) {
		size_t at;

		if (!image_conf_value_ok(user, &at)) {
			err = value_fail(m, "User", -1, at);
			goto out;
		}
		if ((err = resolve_user(rootfd, user, &c.uid, &c.gid, m)) < 0)
			goto out;
		c.has_user = true;
	}
	if ((err = image_conf_format(&c, &text, &len)) < 0) {
		err = oci_fail(m, err, "the config does not fit exec.conf (%s)", strerror(-err));
		goto out;
	}
	fd = openat(dirfd, "exec.conf", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
	if (fd < 0 || write_all(fd, text, len) < 0 || fsync(fd) < 0)
		err = oci_fail(m, -errno, "exec.conf: %s", strerror(errno));
	if (fd >= 0)
		close(fd);
out:
	free(c.env);
	free(c.entrypoint);
	free(c.cmd);
	free(text);
	return err;
}

/* mke2fs -t ext4 -d TREE, as guest/image/lib.sh runs it. */
static int run_mke2fs(const char *tree, const char *out, const char *label, const char *uuid,
		      uint64_t inodes, uint64_t size_kib, struct oci_msg *m)
{
	char seed[64], n[32], size[32];
	char *argv[] = {"mke2fs",      "-q", "-t",	   "ext4", "-d", (char *)tree, "-L",
			(char *)label, "-U", (char *)uuid, "-E",   seed, "-N",	       n,
			(char *)out,   size, NULL};
	int status;
	pid_t pid;

	snprintf(seed, sizeof(seed), "hash_seed=%s", uuid);
	snprintf(n, sizeof(n), "%llu", (unsigned long long)inodes);
	snprintf(size, sizeof(size), "%lluk", (unsigned long long)size_kib);
	pid = fork();
	if (pid < 0)
		return oci_fail(m, -errno, "fork: %s", strerror(errno));
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
		}
		execvpe("mke2fs", argv, child_env());
		fprintf(stderr, "sandboxctl: mke2fs: %m (e2fsprogs)\n");
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return oci_fail(m, -errno, "waitpid: %s", strerror(errno));
		if (oci_interrupted)
			kill(pid, SIGKILL);
	}
	if (oci_interrupted)
		return oci_fail(m, -EINTR, "interrupted");
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return oci_fail(m, -EIO, "mke2fs failed (status %d)",
				WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	return 0;
}

static int build(struct oci_image *img, const char *name, int dirfd, const char *dir,
		 struct oci_tree *tree, struct oci_msg *m)
{
	int rootfd = tree->rootfd;
	struct oci_layer_stats st = {0};
	uint64_t t0 = now_ms(), bytes = 0, inodes = 1, size_kib;
	char treepath[4200], out[4200], label[17], uuid[40], hex[65];
	uint8_t md[32];
	int err;

	for (unsigned i = 0; i < img->nlayers; i++) {
		if ((err = oci_image_apply_layer(img, i, tree, &st, m)) < 0)
			return err;
		if (st.entries > OCI_ENTRIES_MAX)
			return oci_fail(m, -EFBIG, "more than %u entries in all the layers",
					OCI_ENTRIES_MAX);
	}
	fprintf(stderr,
		"images import %s: %u layers applied (%llu entries, %llu files, %llu MiB) "
		"in %.1f s\n",
		name, img->nlayers, (unsigned long long)st.entries, (unsigned long long)st.files,
		(unsigned long long)(st.bytes >> 20), (double)(now_ms() - t0) / 1e3);
	for (size_t i = 0; i < sizeof(mount_points) / sizeof(mount_points[0]); i++) {
		struct stat s;

		if (fstatat(rootfd, mount_points[i].name, &s, AT_SYMLINK_NOFOLLOW) == 0) {
			if (S_ISDIR(s.st_mode))
				continue;
			/* sandbox-init mounts there before the switch: a symlink would lead its
			 * mount into the initramfs */
			errmsg("warning: /%s is not a directory in the image: made one",
			       mount_points[i].name);
			if ((err = oci_rmtree(rootfd, mount_points[i].name)) < 0)
				return oci_fail(m, err, "cannot replace /%s: %s",
						mount_points[i].name, strerror(-err));
		}
		if ((err = oci_tree_mkdir(tree, rootfd, mount_points[i].name, 0700)) < 0)
			return oci_fail(m, err, "cannot make /%s: %s", mount_points[i].name,
					strerror(-err));
		if (fchmodat(rootfd, mount_points[i].name, mount_points[i].mode, 0) < 0)
			return oci_fail(m, -errno, "cannot make /%s: %s", mount_points[i].name,
					strerror(errno));
	}
	if ((err = write_exec_conf(img, tree, dirfd, m)) < 0)
		return err;
	if ((err = tree_usage(rootfd, 0, &bytes, &inodes)) < 0)
		return oci_fail(m, err, "cannot measure the tree: %s", strerror(-err));
	/* headroom: a quarter more, plus the journal and metadata of a small file system;
	 * create --disk-size grows it further at boot */
	size_kib = ((bytes + inodes * 256) / 4 * 5 + (96ull << 20)) >> 10;
	size_kib = (size_kib + 4095) / 4096 * 4096;
	inodes = inodes + inodes / 4 + 4096;
	SHA256((const unsigned char *)img->config_digest, strlen(img->config_digest), md);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	snprintf(uuid, sizeof(uuid), "%.8s-%.4s-4%.3s-8%.3s-%.12s", hex, hex + 8, hex + 13,
		 hex + 17, hex + 20);
	snprintf(label, sizeof(label), "sandbox-%.8s", name);
	if ((err = path_fmt(treepath, sizeof(treepath), "%s/" STAGING, dir)) < 0 ||
	    (err = path_fmt(out, sizeof(out), "%s/rootfs", dir)) < 0)
		return oci_fail(m, err, "%s: path too long", dir);
	fprintf(stderr, "images import %s: mke2fs (%llu MiB, %llu inodes)\n", name,
		(unsigned long long)(size_kib >> 10), (unsigned long long)inodes);
	if ((err = run_mke2fs(treepath, out, label, uuid, inodes, size_kib, m)) < 0)
		return err;
	if (chmod(out, 0444) < 0)
		return oci_fail(m, -errno, "rootfs: %s", strerror(errno));
	return 0;
}

int oci_build(const char *archive, const char *name, int dirfd, const char *dir, struct oci_msg *m)
{
	struct oci_image img;
	struct oci_tree tree = {.rootfd = -1};
	int rootfd = -1, err;

	if ((err = oci_image_open(archive, &img, m)) < 0)
		goto out;
	/* img.what holds the archive's ref name or tag, made printable where it was read; once
	 * more here, as this is the one place it reaches the terminal without errmsg */
	fprintf(stderr, "images import %s: %s, %u layers\n", name,
		printable_copy(img.what, img.what, sizeof(img.what)), img.nlayers);
	if (mkdirat(dirfd, STAGING, 0755) < 0 ||
	    (rootfd = openat(dirfd, STAGING, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) <
		    0) {
		err = oci_fail(m, -errno, "%s/" STAGING ": %s", dir, strerror(errno));
		goto out;
	}
	if ((err = oci_tree_init(&tree, rootfd)) < 0) {
		err = oci_fail(m, err, "%s/" STAGING ": %s", dir, strerror(-err));
		goto out;
	}
	err = build(&img, name, dirfd, dir, &tree, m);
out:
	oci_tree_free(&tree);
	if (rootfd >= 0)
		close(rootfd);
	if (oci_rmtree(dirfd, STAGING) < 0 && err == 0)
		err = oci_fail(m, -EIO, "cannot remove the staging tree %s/" STAGING, dir);
	oci_image_close(&img);
	return err;
}

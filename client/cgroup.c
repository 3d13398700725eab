/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A sandbox's resource limits (docs/hardening.md, "Resource limits"): one cgroup per sandbox,
 * holding its VMM, its proxy and its port forwarders, with a memory, CPU, pids and I/O limit;
 * cgroup v2 where the host has it, the v1 controllers where that is all there is.
 *
 * v2: <the cgroup2 mount>/sandbox/<id>, `sandbox` made once with the controllers enabled in
 * its subtree_control. v1: <each controller's hierarchy>/<sandboxctl's own cgroup
 * there>/sandbox/<id>: beneath the caller's cgroup, so the sandboxes stay inside whatever
 * limits the caller has (v2 cannot do that: a cgroup with processes cannot give its
 * controllers to children, so there the group hangs off the root, as a service's would).
 *
 * What was made is recorded in the sandbox's directory as `cgroup` (version, directories, the
 * base memory limit), so every later command (stats, ls, fork, stop, rm) finds the same
 * directories whatever cgroup it runs in. That file is read as hostile input: every directory
 * must end in /sandbox/<id>, have no "..", and be on a cgroup file system when used.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "client.h"

#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif
#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

#define CG_FILE_MAX   16384 /* the largest cgroup file read (memory.stat, io.stat) */
#define CG_RECORD_MAX 4096

/* The v1 hierarchies used, in the record's order; v2 uses dirs[0] only. */
enum cg_ctl { CG_MEMORY, CG_CPU, CG_CPUACCT, CG_PIDS, CG_BLKIO, CG_NCTL };
static const char *const cg_ctl_names[CG_NCTL] = {"memory", "cpu", "cpuacct", "pids", "blkio"};

struct cg {
	int version; /* 0 none, 1, 2 */
	char dirs[CG_NCTL][CGROUP_DIR_MAX];
	uint64_t memory_base; /* the memory limit before any fork raised it */
};

/* ---- small file helpers: every value read is bounds-checked ---- */

/* Read a cgroup file into buf (NUL-terminated); -EFBIG when it does not fit. */
static int cg_read(const char *dir, const char *file, char *buf, size_t size)
{
	char path[CGROUP_DIR_MAX + 64];
	size_t len = 0;
	ssize_t n;
	int fd, err = 0;

	if (path_fmt(path, sizeof(path), "%s/%s", dir, file) < 0)
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	while ((n = read(fd, buf + len, size - 1 - len)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			break;
		}
		len += (size_t)n;
		if (len == size - 1) {
			err = -EFBIG;
			break;
		}
	}
	close(fd);
	buf[len] = '\0';
	return err;
}

/* Write one value to a cgroup file (the kernel takes one write per value). */
static int cg_write(const char *dir, const char *file, const char *val)
{
	char path[CGROUP_DIR_MAX + 64];
	size_t len = strlen(val);
	ssize_t n;
	int fd, err = 0;

	if (path_fmt(path, sizeof(path), "%s/%s", dir, file) < 0)
		return -ENAMETOOLONG;
	fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	n = write(fd, val, len);
	if (n < 0)
		err = -errno;
	else if ((size_t)n != len)
		err = -EIO;
	close(fd);
	return err;
}

static int cg_write_u64(const char *dir, const char *file, uint64_t v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	return cg_write(dir, file, buf);
}

/* A file holding one number (or "max", which reads as UINT64_MAX). */
static int cg_read_u64(const char *dir, const char *file, uint64_t *out)
{
	char buf[64];
	int err = cg_read(dir, file, buf, sizeof(buf));

	if (err < 0)
		return err;
	buf[strcspn(buf, "\n")] = '\0';
	if (strcmp(buf, "max") == 0) {
		*out = UINT64_MAX;
		return 0;
	}
	return parse_u64(buf, 0, UINT64_MAX, out) ? 0 : -EBADMSG;
}

/* The value of the line "key N" in a flat-keyed file's text (memory.stat, cpu.stat). */
static int cg_key_u64(const char *text, const char *key, uint64_t *out)
{
	size_t klen = strlen(key);

	for (const char *line = text; *line;
	     line = strchr(line, '\n') ? strchr(line, '\n') + 1 : "") {
		char num[32];
		size_t n;

		if (strncmp(line, key, klen) != 0 || line[klen] != ' ')
			continue;
		n = strcspn(line + klen + 1, "\n");
		if (n == 0 || n >= sizeof(num))
			return -EBADMSG;
		memcpy(num, line + klen + 1, n);
		num[n] = '\0';
		return parse_u64(num, 0, UINT64_MAX, out) ? 0 : -EBADMSG;
	}
	return -ENOENT;
}

static bool cg_is_cgroupfs(const char *dir)
{
	struct statfs fs;

	return statfs(dir, &fs) == 0 &&
	       (fs.f_type == CGROUP_SUPER_MAGIC || fs.f_type == CGROUP2_SUPER_MAGIC);
}

/* ---- finding the hierarchies ---- */

/* Is `name` one of the comma-separated words of `list`? */
static bool cg_word_in(const char *list, const char *name, char sep)
{
	size_t n = strlen(name);

	for (const char *p = list; p && *p; p = strchr(p, sep) ? strchr(p, sep) + 1 : NULL)
		if (strncmp(p, name, n) == 0 && (p[n] == sep || p[n] == '\0' || p[n] == '\n'))
			return true;
	return false;
}

/* Our own cgroup in the v1 hierarchy of `ctl` (from /proc/self/cgroup), "/" if unknown. */
static void cg_own_path(const char *self, const char *ctl, char *out, size_t len)
{
	snprintf(out, len, "/");
	for (const char *line = self; line && *line;
	     line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		const char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		size_t n;

		if (!c2 || c2 - c1 - 1 <= 0)
			continue;
		char ctls[256];

		n = (size_t)(c2 - c1 - 1);
		if (n >= sizeof(ctls))
			continue;
		memcpy(ctls, c1 + 1, n);
		ctls[n] = '\0';
		if (!cg_word_in(ctls, ctl, ','))
			continue;
		n = strcspn(c2 + 1, "\n");
		if (n == 0 || n >= len || c2[1] != '/')
			return;
		memcpy(out, c2 + 1, n);
		out[n] = '\0';
		if (strstr(out, "/..") || strchr(out, '\\'))
			snprintf(out, len, "/");
		return;
	}
}

/*
 * Fill `c` with the base directories (without /sandbox/<id>) of cgroup `version` (1 or 2):
 * -ENOTSUP when this host lacks what it needs. v2 needs a cgroup2 mount whose
 * cgroup.controllers has memory, cpu and pids (io where there); v1 needs the memory, cpu,
 * cpuacct and pids hierarchies (blkio where there).
 */
static int cg_find(int version, struct cg *c)
{
	char *mounts = NULL, *self = NULL, ctls[512];
	size_t len;
	int err;

	memset(c, 0, sizeof(*c));
	if ((err = read_file("/proc/self/mountinfo", 1 << 20, &mounts, &len)) < 0)
		return err;
	if (version == 1 && (err = read_file("/proc/self/cgroup", 1 << 16, &self, &len)) < 0)
		goto out;
	err = -ENOTSUP;
	for (char *save = NULL, *line = strtok_r(mounts, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		/* "id parent maj:min root mountpoint opts... - fstype source superopts" */
		char root[256], mnt[256], fstype[32], super[512];
		char *dash = strstr(line, " - ");

		if (!dash || sscanf(line, "%*s %*s %*s %255s %255s", root, mnt) != 2 ||
		    sscanf(dash + 3, "%31s %*s %511s", fstype, super) != 2 || strchr(mnt, '\\'))
			continue;
		if (version == 2 && strcmp(fstype, "cgroup2") == 0 && !c->dirs[0][0]) {
			if (cg_read(mnt, "cgroup.controllers", ctls, sizeof(ctls)) < 0 ||
			    !cg_word_in(ctls, "memory", ' ') || !cg_word_in(ctls, "cpu", ' ') ||
			    !cg_word_in(ctls, "pids", ' '))
				continue;
			snprintf(c->dirs[0], sizeof(c->dirs[0]), "%s", mnt);
		}
		if (version == 1 && strcmp(fstype, "cgroup") == 0) {
			for (int i = 0; i < CG_NCTL; i++) {
				char own[256];
				const char *rel;

				if (c->dirs[i][0] || !cg_word_in(super, cg_ctl_names[i], ','))
					continue;
				/* our cgroup is relative to the hierarchy's root; the mount shows
				 * `root` of it */
				cg_own_path(self, cg_ctl_names[i], own, sizeof(own));
				rel = own;
				if (strcmp(root, "/") != 0) {
					size_t rl = strlen(root);

					rel = strncmp(own, root, rl) == 0 &&
							      (own[rl] == '/' || own[rl] == '\0')
						      ? own + rl
						      : "";
				}
				if (strcmp(rel, "/") == 0)
					rel = "";
				if (path_fmt(c->dirs[i], sizeof(c->dirs[i]), "%s%s", mnt, rel) < 0)
					c->dirs[i][0] = '\0';
			}
		}
	}
	if (version == 2 && c->dirs[0][0])
		err = 0;
	if (version == 1 && c->dirs[CG_MEMORY][0] && c->dirs[CG_CPU][0] && c->dirs[CG_CPUACCT][0] &&
	    c->dirs[CG_PIDS][0])
		err = 0;
	if (err == 0)
		c->version = version;
out:
	free(mounts);
	free(self);
	return err;
}

/* SANDBOX_CGROUP: 0 off, 1, 2, or -1 auto (unset, empty, "auto"); -EINVAL for another. */
static int cg_wanted(void)
{
	const char *e = getenv("SANDBOX_CGROUP");

	if (!e || !*e || strcmp(e, "auto") == 0)
		return -1;
	if (strcmp(e, "off") == 0)
		return 0;
	if (strcmp(e, "v1") == 0)
		return 1;
	if (strcmp(e, "v2") == 0)
		return 2;
	return -EINVAL;
}

/* ---- the record: $SANDBOX_HOME/sandboxes/<id>/cgroup ---- */

/* A directory of the record: absolute, ".."-free, ending in /sandbox/<id>. */
static bool cg_valid_dir(const char *dir, const char *id)
{
	char tail[ID_LEN + 16];
	size_t n = strlen(dir), t;

	snprintf(tail, sizeof(tail), "/sandbox/%s", id);
	t = strlen(tail);
	return dir[0] == '/' && n > t && n < CGROUP_DIR_MAX && strcmp(dir + n - t, tail) == 0 &&
	       !strstr(dir, "/..") && !strstr(dir, "//") && !strchr(dir, '\\');
}

static int cg_record_save(const struct sandbox *sb, const struct cg *c)
{
	char buf[CG_RECORD_MAX], path[4200];
	int n, err;

	n = snprintf(buf, sizeof(buf), "version %d\nmemory_base %llu\n", c->version,
		     (unsigned long long)c->memory_base);
	for (int i = 0; i < CG_NCTL && n > 0 && (size_t)n < sizeof(buf); i++)
		if (c->dirs[i][0])
			n += snprintf(buf + n, sizeof(buf) - (size_t)n, "%s %s\n",
				      c->version == 2 ? "dir" : cg_ctl_names[i], c->dirs[i]);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return -E2BIG;
	if ((err = sandbox_path(sb, "cgroup", path, sizeof(path))) < 0)
		return err;
	return write_file_atomic(path, buf, (size_t)n, 0600);
}

/*
 * Load the record of `sb` into `c`: -ENOENT when the sandbox has no cgroup, -EBADMSG for a
 * record that does not parse. No malloc: cgroup_enter calls it between fork and exec.
 */
static int cg_record_load(const struct sandbox *sb, struct cg *c)
{
	char buf[CG_RECORD_MAX];
	int err;

	memset(c, 0, sizeof(*c));
	if ((err = cg_read(sb->dir, "cgroup", buf, sizeof(buf))) < 0)
		return err == -EFBIG ? -EBADMSG : err;
	for (char *line = buf, *next; *line; line = next) {
		char *sp = strchr(line, ' '), *val;
		uint64_t v;

		next = line + strcspn(line, "\n");
		if (*next)
			*next++ = '\0';
		if (!sp)
			return -EBADMSG;
		*sp = '\0';
		val = sp + 1;
		if (strcmp(line, "version") == 0) {
			if (!parse_u64(val, 1, 2, &v))
				return -EBADMSG;
			c->version = (int)v;
		} else if (strcmp(line, "memory_base") == 0) {
			if (!parse_u64(val, 1, UINT64_MAX / 4, &c->memory_base))
				return -EBADMSG;
		} else {
			int i = -1;

			if (strcmp(line, "dir") == 0)
				i = 0;
			for (int k = 0; k < CG_NCTL && i < 0; k++)
				if (strcmp(line, cg_ctl_names[k]) == 0)
					i = k;
			if (i < 0 || !cg_valid_dir(val, sb->id))
				return -EBADMSG;
			snprintf(c->dirs[i], sizeof(c->dirs[i]), "%s", val);
		}
	}
	if (!c->version || !c->memory_base || !c->dirs[0][0] ||
	    (c->version == 1 &&
	     (!c->dirs[CG_CPU][0] || !c->dirs[CG_CPUACCT][0] || !c->dirs[CG_PIDS][0])))
		return -EBADMSG;
	return 0;
}

/* ---- limits ---- */

uint64_t cgroup_memory_limit(uint64_t memory_mib, bool fork_child)
{
	uint64_t ram = memory_mib << 20;

	return (fork_child ? 2 * ram : ram) + CGROUP_OVERHEAD_BYTES + ram / CGROUP_OVERHEAD_DIV;
}

/* Set the memory limit (and, v1, memory+swap to the same: no swap beyond it). v1 wants
 * memsw >= limit at every step: raise memsw first, lower it last. */
static int cg_set_memory(const struct cg *c, uint64_t bytes)
{
	const char *d = c->dirs[CG_MEMORY];
	uint64_t old = 0;
	int err;

	if (c->version == 2) {
		if ((err = cg_write_u64(d, "memory.max", bytes)) < 0)
			return err;
		err = cg_write(d, "memory.swap.max", "0");
		return err == -ENOENT ? 0 : err; /* no swap accounting: no swap to limit */
	}
	if ((err = cg_read_u64(d, "memory.limit_in_bytes", &old)) < 0)
		return err;
	if (bytes > old) {
		err = cg_write_u64(d, "memory.memsw.limit_in_bytes", bytes);
		if (err < 0 && err != -ENOENT)
			return err;
		return cg_write_u64(d, "memory.limit_in_bytes", bytes);
	}
	if ((err = cg_write_u64(d, "memory.limit_in_bytes", bytes)) < 0)
		return err;
	err = cg_write_u64(d, "memory.memsw.limit_in_bytes", bytes);
	return err == -ENOENT ? 0 : err;
}

static int cg_get_memory(const struct cg *c, uint64_t *bytes)
{
	return cg_read_u64(c->dirs[CG_MEMORY],
			   c->version == 2 ? "memory.max" : "memory.limit_in_bytes", bytes);
}

/*
 * The whole disk under the sandbox's directory, "MAJ:MIN", for the I/O limit: -ENODEV when
 * its file system has no block device (tmpfs, overlayfs). A partition's limit goes on its
 * disk (blk-throttle takes whole disks only).
 */
static int cg_io_device(const struct sandbox *sb, char *out, size_t len)
{
	char path[128], buf[32], real[PATH_MAX], part[PATH_MAX + 16];
	unsigned ma, mi;
	struct stat st;

	if (stat(sb->dir, &st) < 0)
		return -errno;
	if (major(st.st_dev) == 0)
		return -ENODEV;
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u", major(st.st_dev), minor(st.st_dev));
	if (!realpath(path, real))
		return -ENODEV;
	snprintf(part, sizeof(part), "%s/partition", real);
	if (access(part, F_OK) == 0) {
		char *slash = strrchr(real, '/');

		if (!slash || slash == real)
			return -ENODEV;
		*slash = '\0'; /* the disk's directory holds its partitions' */
	}
	if (cg_read(real, "dev", buf, sizeof(buf)) < 0 || sscanf(buf, "%u:%u", &ma, &mi) != 2)
		return -ENODEV;
	snprintf(out, len, "%u:%u", ma, mi);
	return 0;
}

/* The I/O limit on the sandbox directory's disk, where there is one. */
static int cg_set_io(const struct sandbox *sb, const struct cg *c)
{
	static const struct {
		const char *v1_file, *v2_key;
		uint64_t v;
	} lim[] = {
		{"blkio.throttle.read_bps_device", "rbps", CGROUP_IO_BPS},
		{"blkio.throttle.write_bps_device", "wbps", CGROUP_IO_BPS},
		{"blkio.throttle.read_iops_device", "riops", CGROUP_IO_IOPS},
		{"blkio.throttle.write_iops_device", "wiops", CGROUP_IO_IOPS},
	};
	char dev[32], val[160];
	int err;

	if (cg_io_device(sb, dev, sizeof(dev)) < 0)
		return 0; /* no device to limit: documented */
	if (c->version == 2) {
		snprintf(val, sizeof(val), "%s rbps=%llu wbps=%llu riops=%llu wiops=%llu", dev,
			 (unsigned long long)CGROUP_IO_BPS, (unsigned long long)CGROUP_IO_BPS,
			 (unsigned long long)CGROUP_IO_IOPS, (unsigned long long)CGROUP_IO_IOPS);
		err = cg_write(c->dirs[0], "io.max", val);
		return err == -ENOENT ? 0 : err; /* no io controller */
	}
	if (!c->dirs[CG_BLKIO][0])
		return 0;
	for (size_t i = 0; i < sizeof(lim) / sizeof(lim[0]); i++) {
		snprintf(val, sizeof(val), "%s %llu", dev, (unsigned long long)lim[i].v);
		if ((err = cg_write(c->dirs[CG_BLKIO], lim[i].v1_file, val)) < 0)
			return err;
	}
	return 0;
}

static int cg_set_limits(const struct sandbox *sb, const struct cg *c)
{
	uint64_t quota = (uint64_t)sb->cpus * CGROUP_PERIOD_US;
	/* The VMM's share and the proxy's whole thread budget (sandbox-proxy's
	 * PROXY_THREADS_MAX, proxy/proxy.h, also its RLIMIT_NPROC: it can never take the VMM's
	 * share; tests/integration/proxy_flood.sh checks the two numbers agree). */
	uint64_t pids = CGROUP_PIDS_BASE + (uint64_t)sb->cpus + CGROUP_PIDS_PROXY;
	char val[64];
	int err;

	if ((err = cg_set_memory(c, c->memory_base)) < 0)
		return err;
	if (c->version == 2) {
		snprintf(val, sizeof(val), "%llu %u", (unsigned long long)quota, CGROUP_PERIOD_US);
		if ((err = cg_write(c->dirs[0], "cpu.max", val)) < 0 ||
		    (err = cg_write_u64(c->dirs[0], "pids.max", pids)) < 0)
			return err;
	} else if ((err = cg_write_u64(c->dirs[CG_CPU], "cpu.cfs_period_us", CGROUP_PERIOD_US)) <
			   0 ||
		   (err = cg_write_u64(c->dirs[CG_CPU], "cpu.cfs_quota_us", quota)) < 0 ||
		   (err = cg_write_u64(c->dirs[CG_PIDS], "pids.max", pids)) < 0) {
		return err;
	}
	return cg_set_io(sb, c);
}

/* mkdir that tolerates an existing directory. */
static int cg_mkdir(const char *path)
{
	return mkdir(path, 0755) == 0 || errno == EEXIST ? 0 : -errno;
}

/* v2: `dir`'s children get memory, cpu, pids and (where there) io. */
static int cg_v2_delegate(const char *dir)
{
	static const char *const ctls[] = {"+memory", "+cpu", "+pids", "+io"};
	char have[512];
	int err;

	if ((err = cg_read(dir, "cgroup.subtree_control", have, sizeof(have))) < 0)
		return err;
	for (size_t i = 0; i < sizeof(ctls) / sizeof(ctls[0]); i++) {
		if (cg_word_in(have, ctls[i] + 1, ' '))
			continue;
		err = cg_write(dir, "cgroup.subtree_control", ctls[i]);
		if (err < 0 && !(i == 3 && err == -EINVAL))
			return err; /* io is optional */
	}
	return 0;
}

static void cg_rmdirs(const struct cg *c)
{
	for (int i = 0; i < CG_NCTL; i++) {
		if (!c->dirs[i][0])
			continue;
		for (int tries = 0; rmdir(c->dirs[i]) < 0 && errno == EBUSY && tries < 100; tries++)
			usleep(20000); /* a process just killed leaves its cgroup shortly */
	}
}

int cgroup_create(const struct sandbox *sb, bool fork_child, uint64_t memory_extra, char *err_msg,
		  size_t err_len)
{
	static bool warned;
	struct cg c;
	char path[CGROUP_DIR_MAX];
	int want = cg_wanted(), err = 0;

	err_msg[0] = '\0';
	if (want == -EINVAL) {
		snprintf(err_msg, err_len, "SANDBOX_CGROUP=%s: give off, v1, v2 or auto",
			 getenv("SANDBOX_CGROUP"));
		return -EINVAL;
	}
	if (want == 0)
		return 0;
	if (want == 2 || want == -1)
		err = cg_find(2, &c);
	if (want == 1 || (want == -1 && err < 0))
		err = cg_find(1, &c);
	if (err < 0) {
		if (want > 0) {
			snprintf(err_msg, err_len,
				 "SANDBOX_CGROUP=v%d: this host has no usable cgroup v%d (%s)",
				 want, want, strerror(-err));
			return err;
		}
		if (!warned)
			snprintf(err_msg, err_len,
				 "warning: no usable cgroup v2 or v1 controllers (memory, cpu, "
				 "pids): sandboxes run without resource limits");
		else if (err_len)
			err_msg[0] = '\0';
		warned = true;
		return 1;
	}
	c.memory_base = cgroup_memory_limit(sb->memory_mib, fork_child);
	if (memory_extra > UINT64_MAX / 4 - c.memory_base)
		memory_extra = UINT64_MAX / 4 - c.memory_base;
	c.memory_base += memory_extra;
	for (int i = 0; i < CG_NCTL; i++) {
		if (!c.dirs[i][0])
			continue;
		if ((err = path_fmt(path, sizeof(path), "%s/sandbox", c.dirs[i])) < 0 ||
		    (err = cg_mkdir(path)) < 0 ||
		    (c.version == 2 && (err = cg_v2_delegate(c.dirs[i])) < 0) ||
		    (c.version == 2 && (err = cg_v2_delegate(path)) < 0) ||
		    (err = path_fmt(c.dirs[i], sizeof(c.dirs[i]), "%s/%s", path, sb->id)) < 0 ||
		    (err = cg_mkdir(c.dirs[i])) < 0) {
			snprintf(err_msg, err_len, "cannot make its cgroup under %s: %s", path,
				 strerror(-err));
			/* this one and the ones after are still the hierarchies' own: not ours
			 * to remove */
			for (int j = i; j < CG_NCTL; j++)
				c.dirs[j][0] = '\0';
			goto fail;
		}
	}
	if ((err = cg_set_limits(sb, &c)) < 0) {
		snprintf(err_msg, err_len, "cannot set the limits of its cgroup %s: %s", c.dirs[0],
			 strerror(-err));
		goto fail;
	}
	if ((err = cg_record_save(sb, &c)) < 0) {
		snprintf(err_msg, err_len, "cannot record its cgroup: %s", strerror(-err));
		goto fail;
	}
	return 0;
fail:
	cg_rmdirs(&c);
	return err;
}

int cgroup_enter(const struct sandbox *sb)
{
	struct cg c;
	int err = cg_record_load(sb, &c);

	if (err == -ENOENT)
		return 0;
	if (err < 0)
		return err;
	for (int i = 0; i < CG_NCTL; i++) {
		if (!c.dirs[i][0])
			continue;
		if (!cg_is_cgroupfs(c.dirs[i]))
			return -ENOTDIR;
		/* "0": the writer itself, whatever pid namespace it is in */
		if ((err = cg_write(c.dirs[i], "cgroup.procs", "0")) < 0)
			return err;
	}
	return 0;
}

void cgroup_remove(const struct sandbox *sb, const struct lc_report *r)
{
	char path[4200];
	struct cg c;

	if (cg_record_load(sb, &c) < 0)
		return;
	for (int i = 0; i < CG_NCTL; i++)
		if (c.dirs[i][0] && !cg_is_cgroupfs(c.dirs[i]))
			c.dirs[i][0] = '\0';
	cg_rmdirs(&c);
	for (int i = 0; i < CG_NCTL; i++)
		if (c.dirs[i][0] && access(c.dirs[i], F_OK) == 0)
			lc_note(r, "%s: cannot remove its cgroup %s: %s", sb->id, c.dirs[i],
				strerror(EBUSY));
	if (sandbox_path(sb, "cgroup", path, sizeof(path)) == 0)
		(void)unlink(path);
}

/* ---- forks and snapshots ---- */

int cgroup_snap_begin(const struct sandbox *sb, struct cgroup_snap *f)
{
	struct cg c;
	int err;

	f->lock_fd = -1;
	f->limit = 0;
	if ((err = cg_record_load(sb, &c)) == -ENOENT)
		return 0;
	if (err < 0)
		return err;
	/* One snapshot of a sandbox at a time changes its limit. */
	f->lock_fd = open(sb->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (f->lock_fd < 0 || flock(f->lock_fd, LOCK_EX) < 0)
		return -errno;
	if ((err = cg_get_memory(&c, &f->limit)) < 0 || f->limit == UINT64_MAX) {
		f->limit = 0;
		return err;
	}
	/* A freeze charges the parent at most one more copy of its RAM (a delta of the pages
	 * it wrote, or a compaction of its chain) while the pages copied still exist; a memory
	 * file written to tmpfs at most its RAM. */
	err = cg_set_memory(&c, f->limit + (sb->memory_mib << 20));
	if (err < 0)
		f->limit = 0;
	return err;
}

int cgroup_snap_end(const struct sandbox *sb, struct cgroup_snap *f, bool frozen, uint64_t extra)
{
	char stat[CG_FILE_MAX];
	uint64_t shmem = 0, limit = f->limit;
	struct cg c;
	int err = 0;

	if (f->limit && (err = cg_record_load(sb, &c)) == 0) {
		/* Frozen RAM is shmem (memfds) charged to the parent for as long as any child
		 * maps it; the parent's own new pages are anonymous, at most its RAM again: so
		 * the limit is the base one plus what is frozen now. */
		if (frozen &&
		    (err = cg_read(c.dirs[CG_MEMORY], "memory.stat", stat, sizeof(stat))) == 0 &&
		    (err = cg_key_u64(stat, "shmem", &shmem)) == 0 && c.memory_base + shmem > limit)
			limit = c.memory_base + shmem;
		/* what a snapshot left on tmpfs stays charged here */
		if (!frozen && extra < UINT64_MAX / 4 - limit)
			limit += extra;
		int e = cg_set_memory(&c, limit);

		if (err == 0)
			err = e;
	}
	if (f->lock_fd >= 0)
		close(f->lock_fd);
	f->lock_fd = -1;
	return err;
}

/* ---- stats ---- */

/* Sum "rbytes=N"/"wbytes=N" (v2 io.stat) over every device line. */
static int cg_io_v2(const char *text, uint64_t *rd, uint64_t *wr)
{
	for (const char *p = text; (p = strstr(p, "bytes=")) != NULL; p += 6) {
		uint64_t *sum = p > text && p[-1] == 'r'   ? rd
				: p > text && p[-1] == 'w' ? wr
							   : NULL;
		char num[24];
		size_t n = strspn(p + 6, "0123456789");

		if (!sum)
			continue;
		if (n == 0 || n >= sizeof(num))
			return -EBADMSG;
		memcpy(num, p + 6, n);
		num[n] = '\0';
		uint64_t v;

		if (!parse_u64(num, 0, UINT64_MAX, &v) || *sum + v < *sum)
			return -EBADMSG;
		*sum += v;
	}
	return 0;
}

/* Sum "MAJ:MIN Read N" / "MAJ:MIN Write N" (v1 blkio.throttle.io_service_bytes). */
static int cg_io_v1(const char *text, uint64_t *rd, uint64_t *wr)
{
	for (const char *line = text; *line;
	     line = strchr(line, '\n') ? strchr(line, '\n') + 1 : "") {
		char op[16];
		unsigned long long v;

		if (sscanf(line, "%*u:%*u %15s %llu", op, &v) != 2)
			continue;
		uint64_t *sum = strcmp(op, "Read") == 0 ? rd : strcmp(op, "Write") == 0 ? wr : NULL;

		if (sum) {
			if (*sum + v < *sum)
				return -EBADMSG;
			*sum += v;
		}
	}
	return 0;
}

int cgroup_stats(const struct sandbox *sb, struct cgroup_stats *st)
{
	char text[CG_FILE_MAX];
	struct cg c;
	uint64_t v;
	int err;

	memset(st, 0, sizeof(*st));
	if ((err = cg_record_load(sb, &c)) < 0)
		return err;
	for (int i = 0; i < CG_NCTL; i++)
		if (c.dirs[i][0] && !cg_is_cgroupfs(c.dirs[i]))
			return -ENOENT; /* gone (a reboot), or not a cgroup */
	st->version = c.version;
	snprintf(st->dir, sizeof(st->dir), "%s", c.dirs[0]);
	if (c.version == 2) {
		if ((err = cg_read(c.dirs[0], "cpu.stat", text, sizeof(text))) < 0 ||
		    (err = cg_key_u64(text, "usage_usec", &st->cpu_usec)) < 0 ||
		    (err = cg_read_u64(c.dirs[0], "memory.current", &st->memory_bytes)) < 0 ||
		    (err = cg_read_u64(c.dirs[0], "memory.max", &st->memory_max_bytes)) < 0 ||
		    (err = cg_read_u64(c.dirs[0], "pids.current", &st->pids)) < 0 ||
		    (err = cg_read_u64(c.dirs[0], "pids.max", &st->pids_max)) < 0)
			return err;
		if (cg_read_u64(c.dirs[0], "memory.peak", &v) == 0)
			st->memory_peak_bytes = v; /* 5.19 and later */
		if (cg_read(c.dirs[0], "io.stat", text, sizeof(text)) == 0 &&
		    (err = cg_io_v2(text, &st->io_read_bytes, &st->io_write_bytes)) < 0)
			return err;
	} else {
		if ((err = cg_read_u64(c.dirs[CG_CPUACCT], "cpuacct.usage", &v)) < 0 ||
		    (err = cg_read_u64(c.dirs[CG_MEMORY], "memory.usage_in_bytes",
				       &st->memory_bytes)) < 0 ||
		    (err = cg_read_u64(c.dirs[CG_MEMORY], "memory.max_usage_in_bytes",
				       &st->memory_peak_bytes)) < 0 ||
		    (err = cg_read_u64(c.dirs[CG_MEMORY], "memory.limit_in_bytes",
				       &st->memory_max_bytes)) < 0 ||
		    (err = cg_read_u64(c.dirs[CG_PIDS], "pids.current", &st->pids)) < 0 ||
		    (err = cg_read_u64(c.dirs[CG_PIDS], "pids.max", &st->pids_max)) < 0)
			return err;
		st->cpu_usec = v / 1000;
		if (c.dirs[CG_BLKIO][0] &&
		    cg_read(c.dirs[CG_BLKIO], "blkio.throttle.io_service_bytes", text,
			    sizeof(text)) == 0 &&
		    (err = cg_io_v1(text, &st->io_read_bytes, &st->io_write_bytes)) < 0)
			return err;
	}
	if (cg_read(c.dirs[CG_MEMORY], "memory.stat", text, sizeof(text)) == 0)
		(void)cg_key_u64(text, "shmem", &st->memory_shmem_bytes);
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Copying one file into a sandbox or out of it through its agent (copy_in, copy_out:
 * client.h), for every front end (sandboxctl cp, a job's files and artifacts in tools/jobs/):
 * streamed in DATA frames of at most CP_CHUNK bytes, so any size is copied in constant memory.
 * In: the agent writes a temporary file and renames it at END. Out: we do the same beside FILE
 * (or write stdout for "-"), so a failed copy never leaves half a file under the name asked
 * for.
 *
 * The guest is not trusted to end a copy. Out: it announces the file's size (STAT) and we
 * take no byte beyond it (a file that says 0 bytes, as /proc's do, or a symlink, whose STAT
 * is the link's own, gets CP_UNSIZED_MAX). Both ways: the time spent waiting for the guest
 * (not for our own disk or pipe) is bounded by CP_FLOOR_S plus the size at CP_MIN_RATE
 * (cp --timeout SEC instead), and no loop reads more than a few frames it sends unasked.
 *
 * Nothing is printed: a failure is a -errno with its message in the caller's lc_report
 * (-ESRCH: the connection to the agent is lost; -EINVAL with bad_option: a path that cannot
 * be made).
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client.h"
#include "proto.h"

#define CP_CHUNK	  (256u << 10)
#define CP_FLOOR_S	  60u		/* every copy may take this long, whatever its size */
#define CP_MIN_RATE	  (1u << 20)	/* bytes per second beyond that */
#define CP_UNSIZED_MAX	  (64ull << 20) /* the bound of a file whose STAT gives no size */
#define CP_STALL_MS	  60000		/* no frame, or no progress sending, for this long */
#define CP_UNASKED_FRAMES 16u		/* frames read between two chunks sent (cp in) */

/* The time one copy may spend waiting for the guest. */
struct cp_budget {
	unsigned timeout_s; /* cp --timeout, 0: CP_FLOOR_S plus `bytes` at CP_MIN_RATE */
	uint64_t bytes;	    /* the copy's size (so far, for a pipe) */
	uint64_t spent_ms;  /* waited for the guest so far */
	uint64_t since_ms;  /* the wait going on began then */
};

/* How long the next wait for the guest may be (at most CP_STALL_MS), 0 when the budget is
 * spent; starts the clock of that wait. */
static int cp_wait_begin(struct cp_budget *b)
{
	uint64_t allowed = b->timeout_s ? b->timeout_s * 1000ull
					: CP_FLOOR_S * 1000ull + b->bytes / (CP_MIN_RATE / 1000u);
	uint64_t left = allowed > b->spent_ms ? allowed - b->spent_ms : 0;

	b->since_ms = now_ms();
	return left < CP_STALL_MS ? (int)left : CP_STALL_MS;
}

/* The wait is over: count it. True when the budget is spent. */
static bool cp_wait_end(struct cp_budget *b)
{
	b->spent_ms += now_ms() - b->since_ms;
	return cp_wait_begin(b) == 0;
}

/* The budget was spent: say what to do. Returns -ETIMEDOUT. */
static int cp_late(const char *what, const struct cp_budget *b, struct lc_report *r)
{
	if (b->timeout_s)
		return lc_fail(r, -ETIMEDOUT, "cp: %s: not done within --timeout %u s: stopped",
			       what, b->timeout_s);
	return lc_fail(r, -ETIMEDOUT,
		       "cp: %s: the guest took %llu s, more than %u s plus 1 s per %u KiB (cp "
		       "--timeout SEC waits longer): stopped",
		       what, (unsigned long long)b->spent_ms / 1000, CP_FLOOR_S, CP_MIN_RATE >> 10);
}

/* An ERROR frame of the agent's, about `what`: -EIO with its message. */
static int cp_refused(const char *what, const struct proto_frame *f, struct lc_report *r)
{
	char msg[512];

	return lc_fail(r, -EIO, "%s: %s", what, agent_error_text(f, msg, sizeof(msg)));
}

/* Wait for the final frame of call `id` within the budget: 0 on OK/END, else the ERROR (or
 * what went wrong) as a failure. */
static int wait_final(struct agent_conn *c, uint64_t id, const char *what, struct cp_budget *b,
		      struct proto_frame *f, struct lc_report *r)
{
	for (;;) {
		int wait = cp_wait_begin(b), n;

		if (wait == 0)
			return cp_late(what, b, r);
		n = agent_recv(c, wait, f);
		(void)cp_wait_end(b);
		if (n == 0 && cp_wait_begin(b) == 0)
			continue; /* said above */
		if (n <= 0)
			return lc_fail(r, -EIO, "%s: lost the connection to the agent (%s)", what,
				       n == 0 ? "no answer in time" : strerror(-n));
		if (f->hdr.id != id)
			continue;
		if (f->hdr.type == PROTO_MSG_ERROR)
			return cp_refused(what, f, r);
		return 0;
	}
}

/* Is the guest's `path` a directory? (false when it does not exist) */
static bool remote_is_dir(struct agent_conn *c, const char *path)
{
	struct proto_frame f;

	if (agent_call(c, PROTO_MSG_STAT, path, (uint32_t)strlen(path) + 1, 60000, NULL, NULL, &f) <
	    0)
		return false;
	return f.hdr.type == PROTO_MSG_STAT_REPLY &&
	       S_ISDIR(proto_get_le32(f.payload + offsetof(struct proto_stat, mode)));
}

int copy_in(struct agent_conn *c, const char *src, const char *dst_in, unsigned timeout_s,
	    struct lc_report *r)
{
	static uint8_t buf[sizeof(struct proto_file_write) + 4096 + CP_CHUNK];
	char dst[4096], srccopy[4096];
	struct proto_frame f;
	struct stat st;
	struct cp_budget b = {.timeout_s = timeout_s};
	uint64_t id, sent = 0;
	size_t plen;
	int fd, err = -EIO;

	fd = strcmp(src, "-") == 0 ? dup(STDIN_FILENO) : open(src, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		err = lc_fail(r, -errno, "cp: %s: %s", src, strerror(errno));
		if (fd >= 0)
			close(fd);
		return err;
	}
	if (S_ISDIR(st.st_mode)) {
		close(fd);
		return lc_fail(r, -EISDIR, "cp: %s is a directory (only files are copied)", src);
	}
	/* A pipe's size is unknown: its budget grows with what it gave. */
	b.bytes = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
	snprintf(srccopy, sizeof(srccopy), "%s", strcmp(src, "-") ? src : "stdin");
	if ((dst_in[0] && dst_in[strlen(dst_in) - 1] == '/') || remote_is_dir(c, dst_in))
		err = path_fmt(dst, sizeof(dst), "%s%s%s", dst_in,
			       dst_in[strlen(dst_in) - 1] == '/' ? "" : "/", basename(srccopy));
	else
		err = path_fmt(dst, sizeof(dst), "%s", dst_in);
	if (err < 0 || !dst[0]) {
		close(fd);
		return lc_bad_option(r, "cp: bad destination path");
	}
	memset(buf, 0, sizeof(struct proto_file_write));
	proto_put_le32(buf + offsetof(struct proto_file_write, mode),
		       S_ISREG(st.st_mode) ? st.st_mode & 07777 : 0644);
	proto_put_le32(buf + offsetof(struct proto_file_write, uid), PROTO_ID_KEEP);
	proto_put_le32(buf + offsetof(struct proto_file_write, gid), PROTO_ID_KEEP);
	plen = strlen(dst) + 1;
	memcpy(buf + sizeof(struct proto_file_write), dst, plen);
	id = ++c->next_id;
	c->send_stall_ms = cp_wait_begin(&b);
	err = agent_send(c, PROTO_MSG_FILE_WRITE, id, buf,
			 (uint32_t)(sizeof(struct proto_file_write) + plen));
	(void)cp_wait_end(&b);
	if (err < 0)
		goto lost;
	for (;;) {
		ssize_t n = read(fd, buf, CP_CHUNK);
		unsigned unasked = 0;
		int got = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = lc_fail(r, -errno, "cp: reading %s: %s", src, strerror(errno));
			close(fd);
			return err; /* closing the connection abandons the file in the guest */
		}
		if (n == 0)
			break;
		sent += (uint64_t)n;
		if (sent > b.bytes)
			b.bytes = sent;
		if ((c->send_stall_ms = cp_wait_begin(&b)) == 0) {
			close(fd);
			return cp_late(dst, &b, r);
		}
		err = agent_send(c, PROTO_MSG_DATA, id, buf, (uint32_t)n);
		if (cp_wait_end(&b) && err == -ETIMEDOUT) {
			close(fd);
			return cp_late(dst, &b, r);
		}
		if (err < 0)
			goto lost;
		/* The agent answers ERROR at once on a failure (a full disk): stop sending. Only
		 * a few frames are read here: a guest sending unasked ones cannot keep us. */
		while (unasked++ < CP_UNASKED_FRAMES && (got = agent_recv(c, 0, &f)) == 1) {
			if (f.hdr.id == id && f.hdr.type == PROTO_MSG_ERROR) {
				close(fd);
				return cp_refused(dst, &f, r);
			}
		}
		if (unasked <= CP_UNASKED_FRAMES && got < 0) {
			err = got;
			goto lost;
		}
	}
	close(fd);
	if ((err = agent_send(c, PROTO_MSG_END, id, NULL, 0)) < 0)
		goto lost_closed;
	return wait_final(c, id, dst, &b, &f, r);
lost:
	close(fd);
lost_closed:
	return lc_fail(r, -ESRCH, "cp: lost the connection to the agent: %s", strerror(-err));
}

/* A host path that does not fit: the caller's to fix (-EINVAL, bad_option), with no message,
 * as sandboxctl cp has always refused it. */
static int cp_bad_path(struct lc_report *r)
{
	if (r)
		r->bad_option = true;
	return -EINVAL;
}

/* STAT the guest's `src`: the most bytes a read of it may give (see the top). 0, or a
 * failure saying why not. */
static int cp_out_bound(struct agent_conn *c, const char *src, uint64_t *bound, bool *sized,
			struct lc_report *r)
{
	struct proto_frame f;
	uint32_t mode;
	int err;

	err = agent_call(c, PROTO_MSG_STAT, src, (uint32_t)strlen(src) + 1, CP_STALL_MS, NULL, NULL,
			 &f);
	if (err < 0)
		return lc_fail(r, -ESRCH, "cp: lost the connection to the agent (%s)",
			       err == -ETIMEDOUT ? "no answer in 60 s" : strerror(-err));
	if (f.hdr.type == PROTO_MSG_ERROR)
		return cp_refused(src, &f, r);
	if (f.hdr.type != PROTO_MSG_STAT_REPLY)
		return lc_fail(r, -ESRCH, "cp: %s: the agent answered STAT with message type %u",
			       src, f.hdr.type);
	mode = proto_get_le32(f.payload + offsetof(struct proto_stat, mode));
	*bound = proto_get_le64(f.payload + offsetof(struct proto_stat, size));
	if (S_ISDIR(mode))
		return lc_fail(r, -EISDIR, "cp: %s is a directory (only files are copied)", src);
	if (!S_ISREG(mode) && !S_ISLNK(mode))
		return lc_fail(r, -EINVAL, "cp: %s is not a regular file", src);
	*sized = S_ISREG(mode) && *bound > 0;
	if (!*sized)
		*bound = CP_UNSIZED_MAX;
	return 0;
}

int copy_out(struct agent_conn *c, const char *src, const char *dst_in, unsigned timeout_s,
	     uint64_t *budget, struct lc_report *r)
{
	char dst[4096], tmp[4200], srccopy[4096];
	bool to_stdout = strcmp(dst_in, "-") == 0, sized;
	struct proto_frame f;
	struct stat st;
	struct cp_budget b = {.timeout_s = timeout_s};
	uint64_t id, bound = 0, got = 0;
	int fd, n, err;

	snprintf(srccopy, sizeof(srccopy), "%s", src);
	/* a path too long: refused without a word, as always */
	if (!to_stdout && stat(dst_in, &st) == 0 && S_ISDIR(st.st_mode)) {
		if (path_fmt(dst, sizeof(dst), "%s/%s", dst_in, basename(srccopy)) < 0)
			return cp_bad_path(r);
	} else if (path_fmt(dst, sizeof(dst), "%s", dst_in) < 0) {
		return cp_bad_path(r);
	}
	if ((err = cp_out_bound(c, src, &bound, &sized, r)) < 0)
		return err;
	if (budget && bound > *budget) {
		if (sized)
			return lc_fail(r, -EFBIG,
				       "cp: %s: %llu bytes, more than the %llu left to copy", src,
				       (unsigned long long)bound, (unsigned long long)*budget);
		bound = *budget;
	}
	b.bytes = bound;
	if (to_stdout) {
		fd = STDOUT_FILENO;
	} else {
		if (path_fmt(tmp, sizeof(tmp), "%s.sandboxctl-%d", dst, (int)getpid()) < 0)
			return cp_bad_path(r);
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0)
			return lc_fail(r, -errno, "cp: %s: %s", tmp, strerror(errno));
	}
	id = ++c->next_id;
	c->send_stall_ms = CP_STALL_MS;
	if (agent_send(c, PROTO_MSG_FILE_READ, id, src, (uint32_t)strlen(src) + 1) < 0) {
		err = lc_fail(r, -ESRCH, "cp: lost the connection to the agent");
		goto out;
	}
	for (;;) {
		int wait = cp_wait_begin(&b);

		if (wait == 0) {
			err = cp_late(src, &b, r);
			goto out;
		}
		n = agent_recv(c, wait, &f);
		if (cp_wait_end(&b) && n == 0)
			continue; /* said above */
		if (n <= 0) {
			err = lc_fail(r, -ESRCH, "cp: lost the connection to the agent (%s)",
				      n == 0 ? "no data in 60 s" : strerror(-n));
			goto out;
		}
		if (f.hdr.id != id)
			continue;
		if (f.hdr.type == PROTO_MSG_DATA) {
			if (f.hdr.len > bound - got) {
				err = lc_fail(r, -EFBIG,
					      "cp: %s: the guest sent more than the %llu bytes %s: "
					      "stopped",
					      src, (unsigned long long)bound,
					      sized ? "its size said"
						    : "taken of a file of unknown size");
				goto out;
			}
			got += f.hdr.len;
			if (write_all(fd, f.payload, f.hdr.len) < 0) {
				err = lc_fail(r, -errno, "cp: writing %s: %s",
					      to_stdout ? "stdout" : dst, strerror(errno));
				goto out;
			}
		} else if (f.hdr.type == PROTO_MSG_END) {
			break;
		} else if (f.hdr.type == PROTO_MSG_ERROR) {
			err = cp_refused(src, &f, r);
			goto out;
		}
	}
	if (!to_stdout) {
		if (fsync(fd) < 0 || close(fd) < 0) {
			err = lc_fail(r, -errno, "cp: writing %s: %s", dst, strerror(errno));
			fd = -1;
			goto out;
		}
		fd = -1;
		if (rename(tmp, dst) < 0) {
			err = lc_fail(r, -errno, "cp: %s: %s", dst, strerror(errno));
			goto out;
		}
	}
	err = 0;
	if (budget)
		*budget -= got;
out:
	if (!to_stdout) {
		if (fd >= 0)
			close(fd);
		if (err < 0)
			unlink(tmp);
	}
	return err;
}

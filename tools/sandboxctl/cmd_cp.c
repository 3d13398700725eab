/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandboxctl cp FILE ID:PATH / cp ID:PATH FILE: one file in or out, streamed in DATA frames
 * of at most CP_CHUNK bytes, so any size is copied in constant memory. In: the agent writes a
 * temporary file and renames it at END. Out: we do the same beside FILE (or write stdout for
 * "-"), so a failed copy never leaves half a file under the name asked for.
 *
 * The guest is not trusted to end a copy. Out: it announces the file's size (STAT) and we
 * take no byte beyond it (a file that says 0 bytes, as /proc's do, or a symlink, whose STAT
 * is the link's own, gets CP_UNSIZED_MAX). Both ways: the time spent waiting for the guest
 * (not for our own disk or pipe) is bounded by CP_FLOOR_S plus the size at CP_MIN_RATE
 * (cp --timeout SEC instead), and no loop reads more than a few frames it sends unasked.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto.h"
#include "sandboxctl.h"

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

/* The budget was spent: say what to do. */
static void cp_late(const char *what, const struct cp_budget *b)
{
	if (b->timeout_s)
		errmsg("cp: %s: not done within --timeout %u s: stopped", what, b->timeout_s);
	else
		errmsg("cp: %s: the guest took %llu s, more than %u s plus 1 s per %u KiB (cp "
		       "--timeout SEC waits longer): stopped",
		       what, (unsigned long long)b->spent_ms / 1000, CP_FLOOR_S, CP_MIN_RATE >> 10);
}

/* "ID:PATH" -> the sandbox and PATH; false when `arg` is a local path. */
static bool split_remote(char *arg, char **path)
{
	char *colon = strchr(arg, ':');

	if (!colon || arg[0] == '/' || arg[0] == '.' || colon == arg)
		return false;
	*colon = '\0';
	*path = colon + 1;
	return true;
}

/* Wait for the final frame of call `id` within the budget: 0 on OK/END, else print the
 * ERROR (or what went wrong) and fail. */
static int wait_final(struct agent_conn *c, uint64_t id, const char *what, struct cp_budget *b,
		      struct proto_frame *f)
{
	for (;;) {
		int wait = cp_wait_begin(b), r;

		if (wait == 0) {
			cp_late(what, b);
			return -ETIMEDOUT;
		}
		r = agent_recv(c, wait, f);
		(void)cp_wait_end(b);
		if (r == 0 && cp_wait_begin(b) == 0)
			continue; /* said above */
		if (r <= 0) {
			errmsg("%s: lost the connection to the agent (%s)", what,
			       r == 0 ? "no answer in time" : strerror(-r));
			return -EIO;
		}
		if (f->hdr.id != id)
			continue;
		if (f->hdr.type == PROTO_MSG_ERROR) {
			agent_print_error(what, f);
			return -EIO;
		}
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

int copy_in(struct agent_conn *c, const char *src, const char *dst_in, unsigned timeout_s)
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
		errmsg("cp: %s: %s", src, strerror(errno));
		if (fd >= 0)
			close(fd);
		return EXIT_ERR;
	}
	if (S_ISDIR(st.st_mode)) {
		errmsg("cp: %s is a directory (only files are copied)", src);
		close(fd);
		return EXIT_ERR;
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
		errmsg("cp: bad destination path");
		close(fd);
		return EXIT_USAGE;
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
		int r = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			errmsg("cp: reading %s: %m", src);
			close(fd);
			return EXIT_ERR; /* closing the connection abandons the file in the guest */
		}
		if (n == 0)
			break;
		sent += (uint64_t)n;
		if (sent > b.bytes)
			b.bytes = sent;
		if ((c->send_stall_ms = cp_wait_begin(&b)) == 0) {
			close(fd);
			cp_late(dst, &b);
			return EXIT_ERR;
		}
		err = agent_send(c, PROTO_MSG_DATA, id, buf, (uint32_t)n);
		if (cp_wait_end(&b) && err == -ETIMEDOUT) {
			close(fd);
			cp_late(dst, &b);
			return EXIT_ERR;
		}
		if (err < 0)
			goto lost;
		/* The agent answers ERROR at once on a failure (a full disk): stop sending. Only
		 * a few frames are read here: a guest sending unasked ones cannot keep us. */
		while (unasked++ < CP_UNASKED_FRAMES && (r = agent_recv(c, 0, &f)) == 1) {
			if (f.hdr.id == id && f.hdr.type == PROTO_MSG_ERROR) {
				agent_print_error(dst, &f);
				close(fd);
				return EXIT_ERR;
			}
		}
		if (unasked <= CP_UNASKED_FRAMES && r < 0) {
			err = r;
			goto lost;
		}
	}
	close(fd);
	if ((err = agent_send(c, PROTO_MSG_END, id, NULL, 0)) < 0)
		goto lost_closed;
	return wait_final(c, id, dst, &b, &f) < 0 ? EXIT_ERR : EXIT_OK;
lost:
	close(fd);
lost_closed:
	errmsg("cp: lost the connection to the agent: %s", strerror(-err));
	return EXIT_SANDBOX;
}

/* STAT the guest's `src`: the most bytes a read of it may give (see the top). Prints why not
 * and returns an exit status. */
static int cp_out_bound(struct agent_conn *c, const char *src, uint64_t *bound, bool *sized)
{
	struct proto_frame f;
	uint32_t mode;
	int err;

	err = agent_call(c, PROTO_MSG_STAT, src, (uint32_t)strlen(src) + 1, CP_STALL_MS, NULL, NULL,
			 &f);
	if (err < 0) {
		errmsg("cp: lost the connection to the agent (%s)",
		       err == -ETIMEDOUT ? "no answer in 60 s" : strerror(-err));
		return EXIT_SANDBOX;
	}
	if (f.hdr.type == PROTO_MSG_ERROR) {
		agent_print_error(src, &f);
		return EXIT_ERR;
	}
	if (f.hdr.type != PROTO_MSG_STAT_REPLY) {
		errmsg("cp: %s: the agent answered STAT with message type %u", src, f.hdr.type);
		return EXIT_SANDBOX;
	}
	mode = proto_get_le32(f.payload + offsetof(struct proto_stat, mode));
	*bound = proto_get_le64(f.payload + offsetof(struct proto_stat, size));
	if (S_ISDIR(mode)) {
		errmsg("cp: %s is a directory (only files are copied)", src);
		return EXIT_ERR;
	}
	if (!S_ISREG(mode) && !S_ISLNK(mode)) {
		errmsg("cp: %s is not a regular file", src);
		return EXIT_ERR;
	}
	*sized = S_ISREG(mode) && *bound > 0;
	if (!*sized)
		*bound = CP_UNSIZED_MAX;
	return EXIT_OK;
}

int copy_out(struct agent_conn *c, const char *src, const char *dst_in, unsigned timeout_s,
	     uint64_t *budget)
{
	char dst[4096], tmp[4200], srccopy[4096];
	bool to_stdout = strcmp(dst_in, "-") == 0, sized;
	struct proto_frame f;
	struct stat st;
	struct cp_budget b = {.timeout_s = timeout_s};
	uint64_t id, bound, got = 0;
	int fd, r, status = EXIT_ERR;

	snprintf(srccopy, sizeof(srccopy), "%s", src);
	if (!to_stdout && stat(dst_in, &st) == 0 && S_ISDIR(st.st_mode)) {
		if (path_fmt(dst, sizeof(dst), "%s/%s", dst_in, basename(srccopy)) < 0)
			return EXIT_USAGE;
	} else if (path_fmt(dst, sizeof(dst), "%s", dst_in) < 0) {
		return EXIT_USAGE;
	}
	if ((status = cp_out_bound(c, src, &bound, &sized)) != EXIT_OK)
		return status;
	if (budget && bound > *budget) {
		if (sized) {
			errmsg("cp: %s: %llu bytes, more than the %llu left to copy", src,
			       (unsigned long long)bound, (unsigned long long)*budget);
			return EXIT_ERR;
		}
		bound = *budget;
	}
	status = EXIT_ERR;
	b.bytes = bound;
	if (to_stdout) {
		fd = STDOUT_FILENO;
	} else {
		if (path_fmt(tmp, sizeof(tmp), "%s.sandboxctl-%d", dst, (int)getpid()) < 0)
			return EXIT_USAGE;
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0) {
			errmsg("cp: %s: %m", tmp);
			return EXIT_ERR;
		}
	}
	id = ++c->next_id;
	c->send_stall_ms = CP_STALL_MS;
	if (agent_send(c, PROTO_MSG_FILE_READ, id, src, (uint32_t)strlen(src) + 1) < 0) {
		errmsg("cp: lost the connection to the agent");
		status = EXIT_SANDBOX;
		goto out;
	}
	for (;;) {
		int wait = cp_wait_begin(&b);

		if (wait == 0) {
			cp_late(src, &b);
			goto out;
		}
		r = agent_recv(c, wait, &f);
		if (cp_wait_end(&b) && r == 0)
			continue; /* said above */
		if (r <= 0) {
			errmsg("cp: lost the connection to the agent (%s)",
			       r == 0 ? "no data in 60 s" : strerror(-r));
			status = EXIT_SANDBOX;
			goto out;
		}
		if (f.hdr.id != id)
			continue;
		if (f.hdr.type == PROTO_MSG_DATA) {
			if (f.hdr.len > bound - got) {
				errmsg("cp: %s: the guest sent more than the %llu bytes %s: "
				       "stopped",
				       src, (unsigned long long)bound,
				       sized ? "its size said" : "taken of a file of unknown size");
				goto out;
			}
			got += f.hdr.len;
			if (write_all(fd, f.payload, f.hdr.len) < 0) {
				errmsg("cp: writing %s: %m", to_stdout ? "stdout" : dst);
				goto out;
			}
		} else if (f.hdr.type == PROTO_MSG_END) {
			break;
		} else if (f.hdr.type == PROTO_MSG_ERROR) {
			agent_print_error(src, &f);
			goto out;
		}
	}
	if (!to_stdout) {
		if (fsync(fd) < 0 || close(fd) < 0) {
			errmsg("cp: writing %s: %m", dst);
			fd = -1;
			goto out;
		}
		fd = -1;
		if (rename(tmp, dst) < 0) {
			errmsg("cp: %s: %m", dst);
			goto out;
		}
	}
	status = EXIT_OK;
	if (budget)
		*budget -= got;
out:
	if (!to_stdout) {
		if (fd >= 0)
			close(fd);
		if (status != EXIT_OK)
			unlink(tmp);
	}
	return status;
}

int cmd_cp(int argc, char **argv)
{
	char *rpath, *ref;
	bool in;
	struct agent_conn c;
	struct sandbox sb;
	unsigned timeout_s = 0;
	uint64_t v;
	int status, err;

	if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		return ctl_help("cp");
	}
	if (argc >= 3 && strcmp(argv[1], "--timeout") == 0) {
		if (!parse_u64(argv[2], 1, 7 * 24 * 3600, &v)) {
			errmsg("cp: --timeout %s: give seconds, at least 1", argv[2]);
			return EXIT_USAGE;
		}
		timeout_s = (unsigned)v;
		argc -= 2;
		argv += 2;
	}
	if (argc != 3) {
		return ctl_usage("cp");
	}
	if (split_remote(argv[2], &rpath)) {
		in = true;
		ref = argv[2];
		if (split_remote(argv[1], &(char *){NULL})) {
			errmsg("cp: copy between the host and a sandbox, not two sandboxes");
			return EXIT_USAGE;
		}
	} else if (split_remote(argv[1], &rpath)) {
		in = false;
		ref = argv[1];
	} else {
		errmsg("cp: one side must be ID:PATH");
		return EXIT_USAGE;
	}
	if (!rpath[0]) {
		errmsg("cp: empty path in the sandbox");
		return EXIT_USAGE;
	}
	if ((status = sandbox_resolve_running(ref, &sb)))
		return status;
	if ((err = agent_connect(&sb, 10000, &c)) < 0) {
		errmsg("%s: cannot reach the guest agent: %s", sb.id, strerror(-err));
		return EXIT_SANDBOX;
	}
	status = in ? copy_in(&c, argv[1], rpath, timeout_s)
		    : copy_out(&c, rpath, argv[2], timeout_s, NULL);
	agent_close(&c);
	return status;
}

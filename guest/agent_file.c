/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's file calls (see agent.h, proto.h): streamed writes into a temporary file that is
 * renamed into place at the end, streamed reads paced by the connection's output buffer, stat,
 * list, mkdir (-p), remove (-r), sync, and reseeding the guest's entropy pool.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/random.h>

#include "agent.h"

#define AGENT_TMP_SUFFIX ".sandbox-XXXXXX"

/* A file write in progress: DATA goes to fd (the temporary file tmp), END renames it. */
struct agent_fwrite {
	uint64_t id;
	int fd;
	char *path;
	char *tmp;
	struct agent_fwrite *next;
};

/* A file read or a listing in progress, sent by agent_file_pump. */
struct agent_fread {
	uint64_t id;
	int fd;	  /* a file read: the file */
	DIR *dir; /* a listing (LIST): the directory, fd unused */
	struct agent_fread *next;
};

/* Whether c has a file call with this id; see agent.h. */
bool agent_file_id_live(const struct agent_conn *c, uint64_t id)
{
	const struct agent_fwrite *w;
	const struct agent_fread *r;

	for (w = c->fwrites; w != NULL; w = w->next) {
		if (w->id == id)
			return true;
	}
	for (r = c->freads; r != NULL; r = r->next) {
		if (r->id == id)
			return true;
	}
	return false;
}

/* The path in a payload; see agent.h. */
int agent_file_path(const struct proto_frame *f, size_t off, const char **path)
{
	int rc = proto_next_string(f->payload, f->hdr.len, &off, path);

	if (rc < 0)
		return rc;
	return (*path)[0] == '\0' ? -EPROTO : 0;
}

/* Fill a proto_stat at out from st. */
static void agent_file_encode_stat(const struct stat *st, uint8_t *out)
{
	proto_put_le64(out + offsetof(struct proto_stat, size), (uint64_t)st->st_size);
	proto_put_le64(out + offsetof(struct proto_stat, mtime_sec), (uint64_t)st->st_mtim.tv_sec);
	proto_put_le32(out + offsetof(struct proto_stat, mtime_nsec),
		       (uint32_t)st->st_mtim.tv_nsec);
	proto_put_le32(out + offsetof(struct proto_stat, mode), st->st_mode);
	proto_put_le32(out + offsetof(struct proto_stat, uid), st->st_uid);
	proto_put_le32(out + offsetof(struct proto_stat, gid), st->st_gid);
}

/* Unlink w from c and free it, removing its temporary file unless it was renamed. */
static void agent_fwrite_free(struct agent_conn *c, struct agent_fwrite *w)
{
	struct agent_fwrite **pp;

	for (pp = &c->fwrites; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	}
	if (w->fd >= 0) {
		close(w->fd);
		unlink(w->tmp);
	}
	free(w->path);
	free(w->tmp);
	free(w);
}

/* FILE_WRITE; see agent.h. */
int agent_file_write(struct agent_conn *c, const struct proto_frame *f)
{
	const uint8_t *p = f->payload;
	uint32_t mode = proto_get_le32(p + offsetof(struct proto_file_write, mode));
	uint32_t uid = proto_get_le32(p + offsetof(struct proto_file_write, uid));
	uint32_t gid = proto_get_le32(p + offsetof(struct proto_file_write, gid));
	struct agent_fwrite *w;
	const char *path;
	int rc, err;

	rc = agent_file_path(f, sizeof(struct proto_file_write), &path);
	if (rc < 0)
		return rc;
	w = calloc(1, sizeof(*w));
	if (w == NULL)
		return -ENOMEM;
	w->id = f->hdr.id;
	w->fd = -1;
	w->path = strdup(path);
	w->tmp = malloc(strlen(path) + sizeof(AGENT_TMP_SUFFIX));
	w->next = c->fwrites;
	c->fwrites = w;
	if (w->path == NULL || w->tmp == NULL) {
		agent_fwrite_free(c, w);
		return -ENOMEM;
	}
	strcpy(w->tmp, path);
	strcat(w->tmp, AGENT_TMP_SUFFIX);
	w->fd = mkostemp(w->tmp, O_CLOEXEC);
	if (w->fd < 0) {
		err = errno;
		rc = agent_send_error(c, w->id, err, "create %s: %s", path, strerror(err));
		agent_fwrite_free(c, w);
		return rc;
	}
	/* chown before chmod: a chown clears the set-user-ID and set-group-ID bits */
	if (((uid != PROTO_ID_KEEP || gid != PROTO_ID_KEEP) &&
	     fchown(w->fd, uid == PROTO_ID_KEEP ? (uid_t)-1 : uid,
		    gid == PROTO_ID_KEEP ? (gid_t)-1 : gid) < 0) ||
	    fchmod(w->fd, mode & 07777) < 0) {
		err = errno;
		rc = agent_send_error(c, w->id, err, "chmod/chown %s: %s", path, strerror(err));
		agent_fwrite_free(c, w);
		return rc;
	}
	return 0;
}

/* The file write of c with this id, or NULL. */
static struct agent_fwrite *agent_fwrite_find(struct agent_conn *c, uint64_t id)
{
	struct agent_fwrite *w;

	for (w = c->fwrites; w != NULL; w = w->next) {
		if (w->id == id)
			return w;
	}
	return NULL;
}

/* DATA; see agent.h. */
int agent_file_data(struct agent_conn *c, const struct proto_frame *f)
{
	struct agent_fwrite *w = agent_fwrite_find(c, f->hdr.id);
	uint32_t done = 0;
	int rc, err;

	if (w == NULL)
		return 0; /* the write failed already and was answered */
	while (done < f->hdr.len) {
		ssize_t n = write(w->fd, f->payload + done, f->hdr.len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? errno : EIO;
			rc = agent_send_error(c, w->id, err, "write %s: %s", w->path,
					      strerror(err));
			agent_fwrite_free(c, w);
			return rc;
		}
		done += (uint32_t)n;
	}
	return 0;
}

/* END; see agent.h. */
int agent_file_end(struct agent_conn *c, const struct proto_frame *f)
{
	struct agent_fwrite *w = agent_fwrite_find(c, f->hdr.id);
	int fd, rc, err;

	if (w == NULL)
		return 0;
	fd = w->fd;
	w->fd = -1;
	if (close(fd) < 0 || rename(w->tmp, w->path) < 0) {
		err = errno;
		unlink(w->tmp);
		rc = agent_send_error(c, w->id, err, "write %s: %s", w->path, strerror(err));
	} else {
		rc = agent_send_ok(c, w->id);
	}
	agent_fwrite_free(c, w);
	return rc;
}

/* FILE_READ; see agent.h. */
int agent_file_read(struct agent_conn *c, const struct proto_frame *f)
{
	struct agent_fread *r;
	const char *path;
	struct stat st;
	int fd, rc, err;

	rc = agent_file_path(f, 0, &path);
	if (rc < 0)
		return rc;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		err = errno;
		return agent_send_error(c, f->hdr.id, err, "open %s: %s", path, strerror(err));
	}
	if (fstat(fd, &st) < 0) {
		err = errno;
		close(fd);
		return agent_send_error(c, f->hdr.id, err, "read %s: %s", path, strerror(err));
	}
	if (!S_ISREG(st.st_mode)) {
		err = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
		close(fd);
		return agent_send_error(c, f->hdr.id, err, "read %s: not a regular file", path);
	}
	r = calloc(1, sizeof(*r));
	if (r == NULL) {
		close(fd);
		return -ENOMEM;
	}
	r->id = f->hdr.id;
	r->fd = fd;
	r->next = c->freads;
	c->freads = r;
	return 0;
}

/* Close r's file or directory and free it. */
static void agent_fread_free(struct agent_fread *r)
{
	if (r->dir != NULL)
		closedir(r->dir);
	else
		close(r->fd);
	free(r);
}

/*
 * Send the next DIRENTs of the listing r on c, about one data chunk's worth. Returns 1 if r
 * goes on, 0 if it ended (END sent, or the connection is closing): the caller frees it.
 */
static int agent_flist_step(struct agent_conn *c, struct agent_fread *r)
{
	uint8_t head[sizeof(struct proto_stat)];
	size_t sent = 0;
	struct dirent *de;

	while (sent < PROTO_DATA_CHUNK) {
		struct stat st;
		uint32_t name_len;

		de = readdir(r->dir);
		if (de == NULL) {
			(void)!agent_send(c, PROTO_MSG_END, r->id, NULL, 0, NULL, 0);
			return 0;
		}
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(r->dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			memset(&st, 0, sizeof(st)); /* it went away meanwhile */
		agent_file_encode_stat(&st, head);
		name_len = (uint32_t)strlen(de->d_name);
		if (agent_send(c, PROTO_MSG_DIRENT, r->id, head, sizeof(head), de->d_name,
			       name_len) < 0)
			return 0;
		sent += PROTO_HDR_LEN + sizeof(head) + name_len;
	}
	return 1;
}

/*
 * Send the next chunk of r on c. Returns 1 if r goes on, 0 if it ended (END or ERROR sent):
 * the caller frees it.
 */
static int agent_fread_step(struct agent_conn *c, struct agent_fread *r)
{
	struct proto_hdr hdr = {.type = PROTO_MSG_DATA, .flags = 0, .id = r->id};
	ssize_t n;

	if (r->dir != NULL)
		return agent_flist_step(c, r);
	if (agent_buf_reserve(&c->out, PROTO_HDR_LEN + PROTO_DATA_CHUNK) < 0) {
		/* as agent_send does: without memory the connection goes. Returning 1 here
		 * would spin agent_file_pump for ever, the buffer never filling. */
		c->closing = true;
		return 0;
	}
	do {
		n = read(r->fd, c->out.data + c->out.len + PROTO_HDR_LEN, PROTO_DATA_CHUNK);
	} while (n < 0 && errno == EINTR);
	if (n < 0) {
		(void)!agent_send_error(c, r->id, errno, "read: %s", strerror(errno));
		return 0;
	}
	if (n == 0) {
		(void)!agent_send(c, PROTO_MSG_END, r->id, NULL, 0, NULL, 0);
		return 0;
	}
	hdr.len = (uint32_t)n;
	proto_hdr_encode(&hdr, c->out.data + c->out.len);
	c->out.len += PROTO_HDR_LEN + (size_t)n;
	return 1;
}

/* Send the next chunks of c's file reads; see agent.h. */
void agent_file_pump(struct agent_conn *c)
{
	struct agent_fread **pp = &c->freads;

	while (*pp != NULL && agent_buf_pending(&c->out) < AGENT_OUT_HIGH) {
		struct agent_fread *r = *pp;

		if (agent_fread_step(c, r)) {
			pp = &r->next;
			if (*pp == NULL)
				pp = &c->freads; /* round robin until the buffer is full */
			continue;
		}
		*pp = r->next;
		agent_fread_free(r);
		if (*pp == NULL)
			pp = &c->freads;
	}
}

/* Free every file call of c; see agent.h. */
void agent_file_drop_all(struct agent_conn *c)
{
	while (c->fwrites != NULL)
		agent_fwrite_free(c, c->fwrites);
	while (c->freads != NULL) {
		struct agent_fread *r = c->freads;

		c->freads = r->next;
		agent_fread_free(r);
	}
}

/* STAT; see agent.h. */
int agent_file_stat(struct agent_conn *c, const struct proto_frame *f)
{
	uint8_t head[sizeof(struct proto_stat)];
	const char *path;
	struct stat st;
	int rc, err;

	rc = agent_file_path(f, 0, &path);
	if (rc < 0)
		return rc;
	if (lstat(path, &st) < 0) {
		err = errno;
		return agent_send_error(c, f->hdr.id, err, "stat %s: %s", path, strerror(err));
	}
	agent_file_encode_stat(&st, head);
	return agent_send(c, PROTO_MSG_STAT_REPLY, f->hdr.id, head, sizeof(head), NULL, 0);
}

/* LIST; see agent.h. The entries are sent by agent_file_pump, paced like a file read: a
 * directory of a million entries must not be buffered whole. */
int agent_file_list(struct agent_conn *c, const struct proto_frame *f)
{
	struct agent_fread *r;
	const char *path;
	DIR *dir;
	int fd, rc, err;

	rc = agent_file_path(f, 0, &path);
	if (rc < 0)
		return rc;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || (dir = fdopendir(fd)) == NULL) {
		err = errno;
		if (fd >= 0)
			close(fd);
		return agent_send_error(c, f->hdr.id, err, "list %s: %s", path, strerror(err));
	}
	r = calloc(1, sizeof(*r));
	if (r == NULL) {
		closedir(dir);
		return -ENOMEM;
	}
	r->id = f->hdr.id;
	r->fd = -1;
	r->dir = dir;
	r->next = c->freads;
	c->freads = r;
	return 0;
}

/* mkdir -p path with mode. Returns 0 or -errno. */
static int agent_file_mkdir_parents(const char *path, mode_t mode)
{
	char *copy = strdup(path);
	struct stat st;
	char *p;
	int rc = 0;

	if (copy == NULL)
		return -ENOMEM;
	for (p = copy + 1;; p++) {
		char saved = *p;

		if (saved != '/' && saved != '\0')
			continue;
		*p = '\0';
		if (mkdir(copy, mode) < 0 &&
		    (errno != EEXIST || stat(copy, &st) < 0 || !S_ISDIR(st.st_mode))) {
			rc = errno == EEXIST ? -ENOTDIR : -errno;
			goto out;
		}
		*p = saved;
		if (saved == '\0')
			break;
	}
out:
	free(copy);
	return rc;
}

/* MKDIR; see agent.h. */
int agent_file_mkdir(struct agent_conn *c, const struct proto_frame *f)
{
	uint32_t mode = proto_get_le32(f->payload + offsetof(struct proto_mkdir, mode));
	uint32_t flags = proto_get_le32(f->payload + offsetof(struct proto_mkdir, flags));
	const char *path;
	int rc;

	rc = agent_file_path(f, sizeof(struct proto_mkdir), &path);
	if (rc < 0)
		return rc;
	if (flags & PROTO_MKDIR_PARENTS)
		rc = agent_file_mkdir_parents(path, mode & 07777);
	else if (mkdir(path, mode & 07777) < 0)
		rc = -errno;
	if (rc < 0)
		return agent_send_error(c, f->hdr.id, -rc, "mkdir %s: %s", path, strerror(-rc));
	return agent_send_ok(c, f->hdr.id);
}

/* nftw callback of a recursive remove: remove each entry, children first. */
static int agent_file_remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	return remove(path) < 0 ? errno : 0;
}

/* REMOVE; see agent.h. */
int agent_file_remove(struct agent_conn *c, const struct proto_frame *f)
{
	uint32_t flags = proto_get_le32(f->payload + offsetof(struct proto_remove, flags));
	const char *path;
	struct stat st;
	int rc;

	rc = agent_file_path(f, sizeof(struct proto_remove), &path);
	if (rc < 0)
		return rc;
	if ((flags & PROTO_REMOVE_RECURSIVE) && lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		rc = nftw(path, agent_file_remove_one, 16, FTW_DEPTH | FTW_PHYS);
		if (rc < 0)
			rc = errno;
	} else {
		rc = remove(path) < 0 ? errno : 0;
	}
	if (rc != 0)
		return agent_send_error(c, f->hdr.id, rc, "remove %s: %s", path, strerror(rc));
	return agent_send_ok(c, f->hdr.id);
}

/* SYNC; see agent.h. */
int agent_file_sync(struct agent_conn *c, const struct proto_frame *f)
{
	sync();
	return agent_send_ok(c, f->hdr.id);
}

/* RESEED; see agent.h. */
int agent_file_reseed(struct agent_conn *c, const struct proto_frame *f)
{
	union {
		struct rand_pool_info info;
		uint8_t bytes[sizeof(struct rand_pool_info) + PROTO_RESEED_MAX];
	} pool;
	const char *step;
	int fd, err;

	if (f->hdr.len > PROTO_RESEED_MAX)
		return agent_send_error(c, f->hdr.id, EINVAL, "reseed: more than %u bytes",
					PROTO_RESEED_MAX);
	memset(&pool, 0, sizeof(pool));
	pool.info.entropy_count = (int)(f->hdr.len * 8);
	pool.info.buf_size = (int)f->hdr.len;
	memcpy(pool.bytes + sizeof(struct rand_pool_info), f->payload, f->hdr.len);
	step = "open /dev/urandom";
	fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		goto fail;
	step = "RNDADDENTROPY";
	if (ioctl(fd, RNDADDENTROPY, &pool.info) < 0)
		goto fail;
	/* Crediting the pool does not reseed a CRNG that is ready already: recent kernels (the
	 * guests' 6.1) reseed it on their interval, up to a minute later, and until then a clone
	 * reads what its siblings read. Force it now. */
	step = "RNDRESEEDCRNG";
	if (ioctl(fd, RNDRESEEDCRNG) < 0)
		goto fail;
	close(fd);
	return agent_send_ok(c, f->hdr.id);
fail:
	err = errno;
	if (fd >= 0)
		close(fd);
	return agent_send_error(c, f->hdr.id, err, "reseed: %s: %s", step, strerror(err));
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Small helpers every command uses: messages, numbers, names, atomic files. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client.h"

/* output_mask: the values no output of ours shows, longest first. */
static const char *const *mask_values;
static unsigned mask_count;

void output_mask(const char *const *values, unsigned n)
{
	mask_values = values;
	mask_count = n;
}

/* `s` into out (at most out_len - 1 bytes, NUL-terminated), each masked value as "***". */
static void mask_copy(const char *s, char *out, size_t out_len)
{
	size_t o = 0;

	while (*s && o + 1 < out_len) {
		size_t hit = 0;

		for (unsigned k = 0; k < mask_count && !hit; k++) {
			size_t l = strlen(mask_values[k]);

			if (l && strncmp(s, mask_values[k], l) == 0)
				hit = l;
		}
		if (!hit) {
			out[o++] = *s++;
			continue;
		}
		for (int i = 0; i < 3 && o + 1 < out_len; i++)
			out[o++] = '*';
		s += hit;
	}
	out[o] = '\0';
}

void errmsg(const char *fmt, ...)
{
	char line[1024], masked[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* Messages quote guest output and file contents: nothing in them commands a terminal,
	 * nor shows a secret. */
	mask_copy(line, masked, sizeof(masked));
	printable(masked, strlen(masked), false);
	fprintf(stderr, "sandboxctl: %s\n", masked);
}

/* The length of the valid UTF-8 sequence at p[0, len) of a printable character (U+00A0 up:
 * no C1 control, no surrogate, shortest form), or 0. */
static size_t utf8_printable_len(const unsigned char *p, size_t len)
{
	static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
	size_t n = (p[0] & 0xe0) == 0xc0   ? 2
		   : (p[0] & 0xf0) == 0xe0 ? 3
		   : (p[0] & 0xf8) == 0xf0 ? 4
					   : 0;
	uint32_t cp;

	if (n == 0 || n > len)
		return 0;
	cp = p[0] & (0x7f >> n);
	for (size_t k = 1; k < n; k++) {
		if ((p[k] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[k] & 0x3f);
	}
	if (cp < min_cp[n] || cp < 0xa0 || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return n;
}

void printable(char *buf, size_t len, bool keep_lines)
{
	unsigned char *p = (unsigned char *)buf;

	for (size_t i = 0; i < len;) {
		unsigned char c = p[i];
		size_t n;

		if (c >= 0x80 && (n = utf8_printable_len(p + i, len - i)) > 0) {
			i += n;
			continue;
		}
		if (c >= 0x80 || c == 0x7f ||
		    (c < 0x20 && !(keep_lines && (c == '\n' || c == '\t'))))
			p[i] = '?';
		i++;
	}
}

const char *printable_copy(const char *s, char *out, size_t out_len)
{
	size_t n = strlen(s);

	if (out_len == 0)
		return "";
	if (mask_count) {
		char *tmp = malloc(out_len);

		if (tmp) {
			mask_copy(s, tmp, out_len);
			memcpy(out, tmp, strlen(tmp) + 1);
			free(tmp);
			printable(out, strlen(out), false);
			return out;
		}
		out[0] = '\0'; /* rather nothing than a secret */
		return out;
	}
	if (n > out_len - 1)
		n = out_len - 1;
	memmove(out, s, n); /* out may be s */
	out[n] = '\0';
	printable(out, n, false);
	return out;
}

bool parse_duration(const char *s, uint64_t max_s, uint64_t *out_s)
{
	static const struct {
		char unit;
		uint64_t s;
	} units[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}};
	char num[24];
	size_t n = s ? strlen(s) : 0;
	uint64_t mult = 1, v;

	if (n == 0 || n >= sizeof(num))
		return false;
	memcpy(num, s, n + 1);
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (num[n - 1] == units[i].unit) {
			mult = units[i].s;
			num[--n] = '\0';
			break;
		}
	if (!parse_u64(num, 1, max_s, &v) || v > max_s / mult)
		return false;
	*out_s = v * mult;
	return true;
}

bool valid_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > NAME_MAX_LEN)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool alnum =
			(c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');

		if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
			return false;
	}
	return true;
}

bool snap_valid_layer_name(const char *s)
{
	size_t n = strlen(s);

	if (strcmp(s, "root.layer") == 0)
		return true;
	if (n < 12 || n > 30 || strncmp(s, "root.", 5) != 0 || strcmp(s + n - 6, ".layer") != 0)
		return false;
	for (size_t i = 5; i < n - 6; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

int path_fmt(char *out, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, len, fmt, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

size_t tail_format(const char *path, unsigned nlines, char *out, size_t out_len)
{
	char buf[8192];
	struct stat st;
	size_t o = 0;
	ssize_t n;
	off_t off;
	int fd, w;

	if (!out_len)
		return 0;
	out[0] = '\0';
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || fstat(fd, &st) < 0) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	off = st.st_size > (off_t)sizeof(buf) - 1 ? st.st_size - (off_t)sizeof(buf) + 1 : 0;
	n = pread(fd, buf, sizeof(buf) - 1, off);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* Find the start of the last `nlines` lines (a trailing newline ends the last one). */
	char *p = buf + n;
	unsigned seen = 0;

	if (p > buf && p[-1] == '\n')
		p--;
	while (p > buf && seen < nlines) {
		p--;
		if (*p == '\n' && ++seen == nlines) {
			p++;
			break;
		}
	}
	/* the console is guest output: no control characters reach our terminal */
	printable(p, strlen(p), true);
	w = snprintf(out, out_len, "--- last lines of %s ---\n", path);
	o = w < 0 ? 0 : (size_t)w < out_len ? (size_t)w : out_len - 1;
	for (char *line = p; *line && o < out_len - 1;) {
		char *nl = strchr(line, '\n');
		size_t l = nl ? (size_t)(nl - line) : strlen(line);

		w = snprintf(out + o, out_len - o, "  %.*s\n", (int)l, line);
		o += w < 0 ? 0 : (size_t)w < out_len - o ? (size_t)w : out_len - o - 1;
		line += l + (nl != NULL);
	}
	return o;
}

void print_tail(const char *path, unsigned nlines)
{
	static char text[LC_LOG_MAX];

	if (tail_format(path, nlines, text, sizeof(text)))
		fputs(text, stderr);
}

/* Remove the entries of the directory open as `fd` (taken), and of its subdirectories
 * `depth` levels down, each opened with O_NOFOLLOW through its parent's fd. */
static void remove_entries(int fd, int depth)
{
	struct dirent *e;
	DIR *d = fdopendir(fd);

	if (!d) {
		close(fd);
		return;
	}
	while ((e = readdir(d))) {
		int sub;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (unlinkat(dirfd(d), e->d_name, 0) == 0 || errno != EISDIR || depth == 0)
			continue;
		sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub >= 0)
			remove_entries(sub, depth - 1);
		unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
	}
	closedir(d);
}

void remove_flat_dir(const char *path)
{
	/* The directory itself, never what a symlink put in its place points to: its entries
	 * are removed through the fd of what was opened, and a symlink is refused by
	 * O_NOFOLLOW (then only the link goes). */
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0) {
		struct stat st;

		if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
			unlink(path);
		return;
	}
	/* One level down: a sandbox's proxy/ (the proxy's own directory). */
	remove_entries(fd, 1);
	rmdir(path);
}

int program_find(const char *env, const char *build_dir, const char *name, char *out, size_t len)
{
	const char *v = getenv(env);
	char self[PATH_MAX];
	ssize_t n;
	char *slash;

	if (v && *v)
		return path_fmt(out, len, "%s", v);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			/* the build tree: build/tools/<prog>/ beside build/<build_dir>/ */
			if (path_fmt(out, len, "%s/../../%s/%s", self, build_dir, name) == 0 &&
			    access(out, X_OK) == 0)
				return 0;
			if (path_fmt(out, len, "%s/%s", self, name) == 0 && access(out, X_OK) == 0)
				return 0;
		}
	}
	return path_fmt(out, len, "%s", name);
}

/* The variables a process that faces a guest keeps: PATH (the loader's and sanitizers'
 * messages), SANDBOX_SECCOMP (the VMM's and the proxy's filter mode), the sanitizers' own
 * options, DEVHOST_* (the emulated host's VMM wrapper, tools/devhost/vmm-pinned) and FAKE_VMM_*
 * (the tests' stand-in VMM, tests/integration/fake_vmm.py). */
static bool child_env_keeps(const char *kv)
{
	static const char *const keep[] = {"PATH=",	     "SANDBOX_SECCOMP=", "ASAN_OPTIONS=",
					   "UBSAN_OPTIONS=", "LSAN_OPTIONS=",	 "DEVHOST_",
					   "FAKE_VMM_"};

	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
		if (strncmp(kv, keep[i], strlen(keep[i])) == 0)
			return true;
	return false;
}

char *const *child_env(void)
{
	/* sandboxctl's environment may hold a job's secrets (the variables its credential
	 * rules name, a runner's job token): none of it is handed on to a process that faces a
	 * guest, but what child_env_keeps names. */
	extern char **environ;
	static char *env[64];
	unsigned n = 0;

	for (char **e = environ; e && *e && n + 1 < sizeof(env) / sizeof(env[0]); e++)
		if (child_env_keeps(*e))
			env[n++] = *e;
	env[n] = NULL;
	return env;
}

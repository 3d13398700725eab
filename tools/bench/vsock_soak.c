/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vsock-soak: moves checksummed data both ways through one VMM's vsock device to payload-soak
 * (tests/guests/soak.c), over many connections, and fails on any byte that does not match.
 *
 *   vsock-soak --socket PATH (--soak-gib N | --soak-mib N | --seconds S) [--conns K]
 *       [--cmd-mib M] [--cmds C] [--seed HEX] [--wait S] [--stall S] [--go-stdin]
 *
 * PATH is the VMM's --vsock socket. K slots (default 4, at most 8: the guest's table) each run
 * connections one after another until the total moved (bytes both ways) reaches N GiB (or
 * MiB), or S seconds have passed; commands in flight then finish. Connection i of a slot runs
 * 1 + i % C commands (default C 4) in turn, cycling through SEND, RECV and ECHO
 * (soak_wire.h), each of a pseudo-random size from 1 byte to M MiB (default 64; a quarter of
 * them below 64 KiB, odd sizes included). Checked:
 *   SEND  every byte received against soak_pattern, and the guest's "SENT n sum" against the
 *         checksum of what arrived;
 *   RECV  the guest's "RECVD n sum" against the checksum of the pattern we sent;
 *   ECHO  every byte back against what we sent, and "ECHOED n sum" against its checksum.
 * A connection the VMM closes, a wrong answer, or one that makes no progress for --stall
 * seconds (default 60) is a failure. The first connect is retried for --wait seconds (default
 * 30) while the socket is missing or refuses, or the VMM closes it before its "OK". With
 * --go-stdin, once that first connection is up the driver prints "vsock-soak: ready" and waits
 * for EOF on stdin before its clock starts: how a test starts many drivers at one moment.
 *
 * The last line on stdout:
 *   vsock-soak bytes=.. gib=.. conns=.. cmds=.. send_bytes=.. recv_bytes=.. echo_bytes=..
 *       failures=.. seconds=.. mibs=..
 * (bytes counts each direction: an ECHO of n is 2n; mibs is bytes / seconds in MiB/s).
 * Exit status 0 when every command was checked and matched, 1 otherwise, 2 for bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "soak_wire.h"

#define SOAK_SLOTS_MAX 8
#define SOAK_CHUNK     (256u * 1024)
#define SOAK_ERR_SHOWN 20 /* failures described on stderr; later ones are only counted */

enum soak_kind { KIND_SEND, KIND_RECV, KIND_ECHO };
static const char *const soak_kind_name[] = {"SEND", "RECV", "ECHO"};
static const char *const soak_kind_answer[] = {"SENT", "RECVD", "ECHOED"};

enum slot_state {
	SLOT_IDLE,    /* no connection */
	SLOT_OK_LINE, /* waiting for the VMM's "OK <port>" */
	SLOT_CMD,     /* a command running */
};

struct slot {
	int fd;
	enum slot_state state;
	unsigned cmds_left; /* after the running one */
	uint64_t conn_no;
	int64_t progress_ns; /* the last byte either way */
	/* the running command */
	enum soak_kind kind;
	uint64_t n, seed;
	uint64_t out_off; /* data bytes written (RECV, ECHO) */
	uint64_t in_off;  /* data bytes read (SEND, ECHO) */
	struct soak_sum out_sum, in_sum;
	char cmd[SOAK_LINE_MAX];
	size_t cmd_len, cmd_off;
	char line[SOAK_LINE_MAX + 32];
	size_t line_len;
	uint8_t out[SOAK_CHUNK], want[SOAK_CHUNK], in[SOAK_CHUNK];
	size_t out_len, out_pos; /* out[out_pos..out_len) is generated, not written yet */
};

struct soak {
	const char *path;
	uint64_t target_bytes; /* 0: run by time */
	int64_t end_ns;	       /* 0: run by bytes */
	unsigned nslots, cmds_per_conn;
	uint64_t cmd_max, rng;
	int64_t stall_ns;
	uint64_t bytes, conns, cmds, failures, by_kind[3];
	bool started_all; /* no more commands started */
};

static uint64_t soak_rand(struct soak *s)
{
	return soak_pattern_word(s->rng++, 0);
}

/* Reports one failure (the first SOAK_ERR_SHOWN of them on stderr). */
__attribute__((format(printf, 3, 4))) static void soak_failed(struct soak *s, struct slot *sl,
							      const char *fmt, ...)
{
	va_list ap;

	if (s->failures++ < SOAK_ERR_SHOWN) {
		if (sl->state == SLOT_CMD)
			fprintf(stderr, "vsock-soak: FAIL conn %" PRIu64 " %s %" PRIu64 ": ",
				sl->conn_no, soak_kind_name[sl->kind], sl->n);
		else
			fprintf(stderr, "vsock-soak: FAIL conn %" PRIu64 ": ", sl->conn_no);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc('\n', stderr);
	}
}

/* Whether the run has reached its end (bytes or time). */
static bool soak_done(struct soak *s)
{
	if (s->target_bytes)
		return s->bytes >= s->target_bytes;
	return bench_clock_ns() >= s->end_ns;
}

/* Connects a socket to the VMM and sends its CONNECT line: 0 or -errno. */
__attribute__((warn_unused_result)) static int soak_connect(struct soak *s, int *fd)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char line[32];
	int len, sfd;

	if (strlen(s->path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, s->path);
	sfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sfd < 0)
		return -errno;
	if (connect(sfd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int err = -errno;

		close(sfd);
		return err;
	}
	len = snprintf(line, sizeof(line), "CONNECT %u\n", SOAK_PORT);
	if (write(sfd, line, (size_t)len) != len || fcntl(sfd, F_SETFL, O_NONBLOCK) < 0) {
		int err = errno ? -errno : -EIO;

		close(sfd);
		return err;
	}
	*fd = sfd;
	return 0;
}

/* Ends sl's connection (closing it: the guest sees SHUTDOWN, then RSTs). */
static void slot_close(struct slot *sl)
{
	if (sl->fd >= 0)
		close(sl->fd);
	sl->fd = -1;
	sl->state = SLOT_IDLE;
}

/* Starts sl's next command: picks its kind, size and seed, and queues its line. */
static void slot_start_cmd(struct soak *s, struct slot *sl)
{
	uint64_t r = soak_rand(s);

	sl->kind = (enum soak_kind)(s->cmds % 3);
	sl->n = r % 4 == 0 ? 1 + (r >> 8) % (64 * 1024) : 1 + (r >> 8) % s->cmd_max;
	sl->seed = soak_rand(s);
	sl->out_off = sl->in_off = 0;
	sl->out_len = sl->out_pos = 0;
	sl->line_len = 0;
	soak_sum_init(&sl->out_sum);
	soak_sum_init(&sl->in_sum);
	if (sl->kind == KIND_SEND)
		sl->cmd_len = (size_t)snprintf(sl->cmd, sizeof(sl->cmd),
					       "SEND %" PRIu64 " %" PRIx64 "\n", sl->n, sl->seed);
	else
		sl->cmd_len = (size_t)snprintf(sl->cmd, sizeof(sl->cmd), "%s %" PRIu64 "\n",
					       soak_kind_name[sl->kind], sl->n);
	sl->cmd_off = 0;
	sl->state = SLOT_CMD;
	s->cmds++;
}

/* Opens sl's next connection: 0, or -errno when the VMM cannot be reached. */
__attribute__((warn_unused_result)) static int slot_open(struct soak *s, struct slot *sl)
{
	int err = soak_connect(s, &sl->fd);

	if (err < 0)
		return err;
	sl->state = SLOT_OK_LINE;
	sl->line_len = 0;
	sl->conn_no = s->conns++;
	sl->cmds_left = (unsigned)(sl->conn_no % s->cmds_per_conn);
	sl->progress_ns = bench_clock_ns();
	return 0;
}

/* The command on sl has been answered with `line`: check it, then go on or close. */
static void slot_answer(struct soak *s, struct slot *sl, const char *line)
{
	const struct soak_sum *sum = sl->kind == KIND_RECV ? &sl->out_sum : &sl->in_sum;
	char want[SOAK_LINE_MAX + 32];

	snprintf(want, sizeof(want), "%s %" PRIu64 " %016" PRIx64, soak_kind_answer[sl->kind],
		 sl->n, soak_sum_final(sum));
	if (strcmp(line, want) != 0) {
		soak_failed(s, sl, "answered '%s', want '%s'", line, want);
		slot_close(sl);
		return;
	}
	s->bytes += sl->kind == KIND_ECHO ? 2 * sl->n : sl->n;
	s->by_kind[sl->kind] += sl->kind == KIND_ECHO ? 2 * sl->n : sl->n;
	if (sl->cmds_left && !soak_done(s)) {
		sl->cmds_left--;
		slot_start_cmd(s, sl);
	} else {
		slot_close(sl);
	}
}

/* Data bytes in[0..len) of sl's command (SEND, ECHO): checked against the pattern. */
static int slot_data_in(struct soak *s, struct slot *sl, const uint8_t *in, size_t len)
{
	uint64_t off = sl->in_off;

	soak_pattern(sl->seed, off, sl->want, len);
	if (memcmp(in, sl->want, len) != 0) {
		size_t i = 0;

		while (in[i] == sl->want[i])
			i++;
		soak_failed(s, sl, "byte %" PRIu64 " is 0x%02x, want 0x%02x", off + i, in[i],
			    sl->want[i]);
		slot_close(sl);
		return -1;
	}
	soak_sum_update(&sl->in_sum, in, len);
	sl->in_off += len;
	return 0;
}

/* Bytes the VMM sent on sl: its OK line, the command's data, its answer. */
static void slot_read(struct soak *s, struct slot *sl)
{
	ssize_t n = read(sl->fd, sl->in, sizeof(sl->in));
	size_t i = 0;

	if (n <= 0) {
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (sl->state == SLOT_OK_LINE)
			soak_failed(s, sl, "the VMM closed the connection before OK");
		else
			soak_failed(s, sl,
				    "the connection %s after %" PRIu64 " bytes in, %" PRIu64 " out",
				    n < 0 ? strerror(errno) : "closed", sl->in_off, sl->out_off);
		slot_close(sl);
		return;
	}
	sl->progress_ns = bench_clock_ns();
	while (i < (size_t)n && sl->fd >= 0) {
		uint64_t data_in = sl->kind == KIND_RECV ? 0 : sl->n;

		if (sl->state == SLOT_CMD && sl->in_off < data_in) {
			size_t take = (size_t)n - i;

			if (take > data_in - sl->in_off)
				take = (size_t)(data_in - sl->in_off);
			if (slot_data_in(s, sl, sl->in + i, take) < 0)
				return;
			i += take;
			continue;
		}
		if (sl->in[i] != '\n') {
			if (sl->line_len + 1 >= sizeof(sl->line)) {
				soak_failed(s, sl, "an answer line too long");
				slot_close(sl);
				return;
			}
			sl->line[sl->line_len++] = (char)sl->in[i++];
			continue;
		}
		i++;
		sl->line[sl->line_len] = '\0';
		sl->line_len = 0;
		if (sl->state == SLOT_OK_LINE) {
			if (strncmp(sl->line, "OK ", 3) != 0) {
				soak_failed(s, sl, "CONNECT answered '%s'", sl->line);
				slot_close(sl);
				return;
			}
			slot_start_cmd(s, sl);
		} else if (i != (size_t)n) {
			soak_failed(s, sl, "bytes after the answer '%s'", sl->line);
			slot_close(sl);
		} else {
			slot_answer(s, sl, sl->line);
		}
	}
}

/* Writes what sl owes the VMM: the command line, then its data (RECV, ECHO). */
static void slot_write(struct soak *s, struct slot *sl)
{
	uint64_t data_out = sl->kind == KIND_SEND ? 0 : sl->n;
	ssize_t n;

	if (sl->cmd_off < sl->cmd_len) {
		n = write(sl->fd, sl->cmd + sl->cmd_off, sl->cmd_len - sl->cmd_off);
		if (n < 0)
			goto err;
		sl->cmd_off += (size_t)n;
		return;
	}
	if (sl->out_pos == sl->out_len) {
		uint64_t left = data_out - sl->out_off;
		size_t len = left < SOAK_CHUNK ? (size_t)left : SOAK_CHUNK;

		if (len == 0)
			return;
		soak_pattern(sl->seed, sl->out_off, sl->out, len);
		soak_sum_update(&sl->out_sum, sl->out, len);
		sl->out_pos = 0;
		sl->out_len = len;
	}
	n = write(sl->fd, sl->out + sl->out_pos, sl->out_len - sl->out_pos);
	if (n < 0)
		goto err;
	sl->out_pos += (size_t)n;
	sl->out_off += (uint64_t)n;
	sl->progress_ns = bench_clock_ns();
	return;
err:
	if (errno == EAGAIN || errno == EINTR)
		return;
	soak_failed(s, sl, "write: %s after %" PRIu64 " bytes out", strerror(errno), sl->out_off);
	slot_close(sl);
}

/* Whether sl has bytes to write now. */
static bool slot_wants_write(const struct slot *sl)
{
	if (sl->state != SLOT_CMD)
		return false;
	return sl->cmd_off < sl->cmd_len || (sl->kind != KIND_SEND && sl->out_off < sl->n);
}

/* The first connection, retried for up to wait_ns while the VMM or its guest is not ready:
 * 0 or -errno. */
__attribute__((warn_unused_result)) static int soak_first(struct soak *s, struct slot *sl,
							  int64_t wait_ns)
{
	int64_t deadline = bench_clock_ns() + wait_ns;

	for (;;) {
		int err = slot_open(s, sl);
		struct pollfd p;

		if (err == 0) {
			p = (struct pollfd){.fd = sl->fd, .events = POLLIN};
			/* The OK line, or a close: the guest is not listening yet. */
			if (poll(&p, 1, 10000) == 1) {
				ssize_t n = recv(sl->fd, sl->in, sizeof(sl->in), MSG_PEEK);

				if (n > 0)
					return 0;
			}
			slot_close(sl);
			s->conns--;
		} else if (err != -ENOENT && err != -ECONNREFUSED) {
			return err;
		}
		if (bench_clock_ns() >= deadline)
			return err ? err : -ECONNRESET;
		usleep(100 * 1000);
	}
}

/* Says "vsock-soak: ready" on stdout, then reads stdin to its EOF: 0 or -errno. */
__attribute__((warn_unused_result)) static int soak_wait_go(void)
{
	char buf[64];
	ssize_t n;

	printf("vsock-soak: ready\n");
	if (fflush(stdout) != 0)
		return -errno;
	while ((n = read(STDIN_FILENO, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno != EINTR)
			return -errno;
	}
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: vsock-soak --socket PATH (--soak-gib N | --soak-mib N | "
			"--seconds S) [--conns K] [--cmd-mib M] [--cmds C] [--seed HEX] "
			"[--wait S] [--stall S] [--go-stdin]\n");
	exit(2);
}

/* A number from optarg within [min, max], or usage(). */
static uint64_t opt_num(const char *name, uint64_t min, uint64_t max, int base)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(optarg, &end, base);
	if (errno || end == optarg || *end || v < min || v > max) {
		fprintf(stderr,
			"vsock-soak: --%s %s: give a number from %" PRIu64 " to %" PRIu64 "\n",
			name, optarg, min, max);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"socket", required_argument, NULL, 'S'},
		{"soak-gib", required_argument, NULL, 'g'},
		{"soak-mib", required_argument, NULL, 'm'},
		{"seconds", required_argument, NULL, 't'},
		{"conns", required_argument, NULL, 'k'},
		{"cmd-mib", required_argument, NULL, 'M'},
		{"cmds", required_argument, NULL, 'c'},
		{"seed", required_argument, NULL, 'r'},
		{"wait", required_argument, NULL, 'w'},
		{"stall", required_argument, NULL, 's'},
		{"go-stdin", no_argument, NULL, 'G'},
		{0},
	};
	static struct slot slots[SOAK_SLOTS_MAX];
	struct soak s = {.nslots = 4,
			 .cmds_per_conn = 4,
			 .cmd_max = 64ull << 20,
			 .rng = 1,
			 .stall_ns = 60000000000ll};
	int64_t wait_ns = 30000000000ll, start_ns;
	uint64_t seconds = 0;
	double secs;
	bool go_stdin = false;
	int opt, err;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'S':
			s.path = optarg;
			break;
		case 'g':
			s.target_bytes = opt_num("soak-gib", 1, 1u << 20, 10) << 30;
			break;
		case 'm':
			s.target_bytes = opt_num("soak-mib", 1, 1u << 30, 10) << 20;
			break;
		case 't':
			seconds = opt_num("seconds", 1, 86400, 10);
			break;
		case 'k':
			s.nslots = (unsigned)opt_num("conns", 1, SOAK_SLOTS_MAX, 10);
			break;
		case 'M':
			s.cmd_max = opt_num("cmd-mib", 1, 1u << 16, 10) << 20;
			break;
		case 'c':
			s.cmds_per_conn = (unsigned)opt_num("cmds", 1, 1000, 10);
			break;
		case 'r':
			s.rng = opt_num("seed", 0, UINT64_MAX, 16);
			break;
		case 'w':
			wait_ns = (int64_t)opt_num("wait", 1, 3600, 10) * 1000000000ll;
			break;
		case 's':
			s.stall_ns = (int64_t)opt_num("stall", 1, 3600, 10) * 1000000000ll;
			break;
		case 'G':
			go_stdin = true;
			break;
		default:
			usage();
		}
	}
	if (!s.path || optind != argc || !s.target_bytes == !seconds)
		usage();
	signal(SIGPIPE, SIG_IGN);
	for (unsigned i = 0; i < SOAK_SLOTS_MAX; i++)
		slots[i].fd = -1;
	if ((err = soak_first(&s, &slots[0], wait_ns)) < 0) {
		fprintf(stderr, "vsock-soak: %s: no guest answering on port %u: %s\n", s.path,
			SOAK_PORT, strerror(-err));
		return 1;
	}
	if (go_stdin && (err = soak_wait_go()) < 0) {
		fprintf(stderr, "vsock-soak: waiting for EOF on stdin: %s\n", strerror(-err));
		return 1;
	}
	start_ns = bench_clock_ns();
	slots[0].progress_ns = start_ns;
	s.end_ns = seconds ? start_ns + (int64_t)seconds * 1000000000ll : 0;
	for (;;) {
		struct pollfd pfd[SOAK_SLOTS_MAX];
		unsigned active = 0;
		int64_t now = bench_clock_ns();

		if (!s.started_all && soak_done(&s))
			s.started_all = true;
		for (unsigned i = 0; i < s.nslots; i++) {
			struct slot *sl = &slots[i];

			if (sl->state == SLOT_IDLE && !s.started_all &&
			    (err = slot_open(&s, sl)) < 0) {
				fprintf(stderr, "vsock-soak: connect %s: %s\n", s.path,
					strerror(-err));
				s.failures++;
				s.started_all = true;
			}
			if (sl->state != SLOT_IDLE && now - sl->progress_ns > s.stall_ns) {
				soak_failed(&s, sl,
					    "no progress in %" PRId64 " s (%" PRIu64
					    " bytes in, %" PRIu64 " out)",
					    s.stall_ns / 1000000000, sl->in_off, sl->out_off);
				slot_close(sl);
			}
			pfd[i] = (struct pollfd){
				.fd = sl->fd,
				.events = (short)(POLLIN | (slot_wants_write(sl) ? POLLOUT : 0))};
			active += sl->fd >= 0;
		}
		if (!active && s.started_all)
			break;
		if (poll(pfd, s.nslots, 1000) < 0 && errno != EINTR) {
			perror("vsock-soak: poll");
			return 1;
		}
		for (unsigned i = 0; i < s.nslots; i++) {
			if (slots[i].fd < 0)
				continue;
			if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR))
				slot_read(&s, &slots[i]);
			if (slots[i].fd >= 0 && (pfd[i].revents & POLLOUT))
				slot_write(&s, &slots[i]);
		}
	}
	secs = bench_since_ms(start_ns) / 1000.0;
	printf("vsock-soak bytes=%" PRIu64 " gib=%.2f conns=%" PRIu64 " cmds=%" PRIu64
	       " send_bytes=%" PRIu64 " recv_bytes=%" PRIu64 " echo_bytes=%" PRIu64
	       " failures=%" PRIu64 " seconds=%.1f mibs=%.1f\n",
	       s.bytes, (double)s.bytes / (1ull << 30), s.conns, s.cmds, s.by_kind[KIND_SEND],
	       s.by_kind[KIND_RECV], s.by_kind[KIND_ECHO], s.failures, secs,
	       secs > 0 ? (double)s.bytes / (1 << 20) / secs : 0.0);
	return s.failures ? 1 : 0;
}

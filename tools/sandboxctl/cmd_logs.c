/* SPDX-License-Identifier: Apache-2.0 */
/* sandboxctl logs ID: the sandbox's console (the guest's serial output and the VMM's log). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sandboxctl.h"

int cmd_logs(int argc, char **argv)
{
	char path[4200], buf[65536];
	struct sandbox sb;
	ssize_t n;
	int fd, status;

	if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		return ctl_help("logs");
	}
	if (argc != 2) {
		return ctl_usage("logs");
	}
	if ((status = sandbox_resolve(argv[1], &sb)))
		return status;
	if (sandbox_path(&sb, "console.log", path, sizeof(path)) < 0)
		return EXIT_ERR;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		errmsg("%s: no console log (%s)", sb.id, strerror(errno));
		return EXIT_ERR;
	}
	/* The console is the guest's text: on a terminal its escape sequences would be the
	 * terminal's commands, so control bytes but tab and newline show as '?' there (a
	 * multi-byte character cut by a read's end shows as '?' too). Into a
	 * pipe or a file the bytes go as they are. */
	bool tty = isatty(STDOUT_FILENO);

	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		if (tty)
			printable(buf, (size_t)n, true);
		if (write_all(STDOUT_FILENO, buf, (size_t)n) < 0)
			break;
	}
	close(fd);
	return n < 0 ? EXIT_ERR : EXIT_OK;
}

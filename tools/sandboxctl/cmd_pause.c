/* SPDX-License-Identifier: Apache-2.0 */
/* sandboxctl pause ID / resume ID: park the sandbox's vCPUs (no CPU used) or run them. */
#include <stdio.h>
#include <string.h>

#include "api_proto.h"
#include "sandboxctl.h"

int cmd_pause(int argc, char **argv)
{
	bool pause = strcmp(argv[0], "pause") == 0;
	struct sandbox sb;
	int32_t error;
	int err, status;

	if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		printf("usage: sandboxctl %s ID\n\n%s\n", argv[0],
		       pause ? "Stop the sandbox's vCPUs at a clean point; a paused sandbox uses "
			       "no CPU."
			     : "Run a paused sandbox's vCPUs again, or restore a suspended one.");
		return EXIT_OK;
	}
	if (argc != 2) {
		fprintf(stderr, "usage: sandboxctl %s ID\n", argv[0]);
		return EXIT_USAGE;
	}
	if ((status = sandbox_resolve(argv[1], &sb)))
		return status;
	if (!pause && sandbox_state(&sb, NULL) == SB_SUSPENDED)
		return sandbox_resume_suspended(&sb);
	if (!sandbox_vmm_alive(&sb)) {
		errmsg("%s: not running (%s)", sb.id, sandbox_state_name(sandbox_state(&sb, NULL)));
		return EXIT_SANDBOX;
	}
	err = api_call(&sb, pause ? API_PAUSE : API_RESUME, 5000, &error, NULL);
	if (err < 0) {
		errmsg("%s: the VMM's api.sock does not answer: %s", sb.id, strerror(-err));
		return EXIT_SANDBOX;
	}
	if (error) {
		errmsg("%s: %s failed: %s", sb.id, argv[0], strerror(-error));
		return EXIT_ERR;
	}
	return EXIT_OK;
}

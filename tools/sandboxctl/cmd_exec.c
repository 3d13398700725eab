/* SPDX-License-Identifier: Apache-2.0 */
#include "sandboxctl.h"

int cmd_exec(int argc, char **argv)
{
	errmsg("not yet");
	return EXIT_ERR;
}

/*
 * pmix_debuggee.c - a libpmix client to be held in PMIx_Init by a debugger, the C twin of
 * pmix-debuggee (tests/debugger.rs):
 *
 *     pmix_debuggee MARK
 *
 * PMIx_Init, which libpmix itself holds while the job's data has PMIX_DEBUG_STOP_IN_INIT
 * (pmixrun --stop-in-init) until a PMIX_DEBUGGER_RELEASE arrives; then checks that the file
 * MARK exists (the test creates it just before it has the release sent), prints
 * "debuggee rank=R pid=P released" and finalizes. "FAIL rank=R: <what>" and exit 2 on failure.
 */
#include <pmix.h>
#include <stdio.h>
#include <unistd.h>

static pmix_proc_t me;
static int fail_rank(void) { return me.nspace[0] ? (int) me.rank : -1; }
#include "pmix_fail.h"

int main(int argc, char **argv)
{
    if (argc != 2)
        fail("usage: pmix_debuggee MARK");
    MUST(PMIx_Init(&me, NULL, 0));
    if (access(argv[1], F_OK) != 0)
        fail("PMIx_Init returned before the debugger's release");
    printf("debuggee rank=%u pid=%d released\n", me.rank, (int) getpid());
    fflush(stdout);
    MUST(PMIx_Finalize(NULL, 0));
    return 0;
}

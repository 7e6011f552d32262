/* debuggee: an MPI program held in MPI_Init for a debugger (tests/debugger.rs). Run under
 * `pmixrun --stop-in-init`, Open MPI's libpmix holds MPI_Init until a tool sends
 * PMIX_DEBUGGER_RELEASE. Argument: a file the test creates just before it has the release
 * sent; MPI_Init returning before it exists fails. Then a barrier, and every rank prints
 * "debuggee rank=<r> pid=<pid> released". */
#include "common.h"

int main(int argc, char **argv)
{
    init(&argc, &argv);
    if (argc < 2)
        die("usage: debuggee MARK");
    if (access(argv[1], F_OK) != 0)
        die("MPI_Init returned before the debugger's release");
    CHECK(MPI_Barrier(MPI_COMM_WORLD));
    printf("debuggee rank=%d pid=%d released\n", world_rank, (int)getpid());
    fflush(stdout);
    CHECK(MPI_Finalize());
    return 0;
}

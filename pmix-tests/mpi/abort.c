/* abort <status>: rank 1 waits until every other rank has told it that it is about to
 * block (rank 0 in MPI_Recv from rank 1, the others in MPI_Barrier), then calls
 * MPI_Abort(MPI_COMM_WORLD, status). Nobody can end the others but the launcher; the job
 * must end with <status>. Needs at least 2 ranks. */
#include "common.h"

int main(int argc, char **argv)
{
    init(&argc, &argv);
    if (argc != 2)
        die("usage: %s <status>", argv[0]);
    int status = atoi(argv[1]);
    int size = 0;
    CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    if (size < 2)
        die("needs 2 ranks or more, has %d", size);
    int token = 0;
    if (world_rank == 1) {
        for (int r = 0; r < size; r++) {
            if (r == 1)
                continue;
            CHECK(MPI_Recv(&token, 1, MPI_INT, r, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        }
        printf("rank 1 aborting with %d\n", status);
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, status);
        die("MPI_Abort returned");
    }
    CHECK(MPI_Send(&token, 1, MPI_INT, 1, 1, MPI_COMM_WORLD));
    if (world_rank == 0)
        CHECK(MPI_Recv(&token, 1, MPI_INT, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    else
        CHECK(MPI_Barrier(MPI_COMM_WORLD));
    die("woke up after rank 1 aborted");
    return 1;
}

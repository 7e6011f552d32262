/* exit_early <rank> <status>: <rank> waits until every other rank has told it that it is
 * about to block in MPI_Recv (for a message nobody sends), then exits with <status> without
 * MPI_Finalize. Only the launcher can end the others; the job must fail, even for status 0. */
#include "common.h"

int main(int argc, char **argv)
{
    init(&argc, &argv);
    if (argc != 3)
        die("usage: %s <rank> <status>", argv[0]);
    int leaver = atoi(argv[1]), status = atoi(argv[2]);
    int size = 0;
    CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    if (leaver < 0 || leaver >= size || size < 2)
        die("rank %d of %d cannot leave alone", leaver, size);
    int token = 0;
    if (world_rank == leaver) {
        for (int r = 0; r < size; r++) {
            if (r == leaver)
                continue;
            CHECK(MPI_Recv(&token, 1, MPI_INT, r, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        }
        printf("rank %d exiting with %d without MPI_Finalize\n", world_rank, status);
        fflush(stdout);
        exit(status);
    }
    CHECK(MPI_Send(&token, 1, MPI_INT, leaver, 1, MPI_COMM_WORLD));
    /* From itself, with a tag nobody sends: only the launcher ends this. */
    CHECK(MPI_Recv(&token, 1, MPI_INT, world_rank, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    die("received a message nobody sent");
    return 1;
}

/* mpmd: built twice, as mpmd_a (-DMPMD_APP=0) and mpmd_b (-DMPMD_APP=1), and run as one job
 * `-n <n0> mpmd_a <n0> <n1> : -n <n1> mpmd_b <n0> <n1>`. Each rank checks its MPI_APPNUM
 * is its program's, that the world holds n0+n1 ranks with the first n0 running mpmd_a, and
 * an Allreduce across both programs. Prints "mpmd rank <r> of <n> appnum <a> program <p>". */
#include "common.h"

#ifndef MPMD_APP
#error "build with -DMPMD_APP=0 or -DMPMD_APP=1"
#endif

int main(int argc, char **argv)
{
    init(&argc, &argv);
    if (argc != 3)
        die("usage: %s <ranks of app 0> <ranks of app 1>", argv[0]);
    int n0 = atoi(argv[1]), n1 = atoi(argv[2]);
    int size = 0;
    CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    if (size != n0 + n1)
        die("world size %d, expected %d + %d", size, n0, n1);
    int app = appnum();
    if (app != MPMD_APP)
        die("MPI_APPNUM %d in program %d", app, MPMD_APP);
    int want_app = world_rank < n0 ? 0 : 1;
    if (app != want_app)
        die("rank %d runs app %d, expected app %d", world_rank, app, want_app);
    /* Every rank learns every rank's app number: the layout must be n0 zeros, n1 ones. */
    int *apps = malloc(sizeof(int) * (size_t)size);
    if (!apps)
        die("out of memory");
    CHECK(MPI_Allgather(&app, 1, MPI_INT, apps, 1, MPI_INT, MPI_COMM_WORLD));
    for (int r = 0; r < size; r++)
        if (apps[r] != (r < n0 ? 0 : 1))
            die("rank %d reports appnum %d", r, apps[r]);
    free(apps);
    /* A reduction both programs take part in: sum of (appnum + 1) = n0 + 2 n1. */
    int one = app + 1, sum = 0;
    CHECK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    if (sum != n0 + 2 * n1)
        die("sum of appnum+1 is %d, expected %d", sum, n0 + 2 * n1);
    CHECK(MPI_Barrier(MPI_COMM_WORLD));
    printf("mpmd rank %d of %d appnum %d program %s\n", world_rank, size, app, prog_name);
    fflush(stdout);
    CHECK(MPI_Finalize());
    return 0;
}

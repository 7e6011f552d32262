/* sessions: the MPI-4 sessions model, which Open MPI 5 builds on PMIx groups and process
 * sets. Without MPI_Init: a session, its process sets (MPI_Session_get_num_psets, checked
 * against argv[1], and each name), a communicator made from the group of mpi://WORLD
 * (MPI_Comm_create_from_group, which constructs a PMIx group with a context id), an
 * allreduce over it, then (with two ranks or more) an intercommunicator between the even and
 * the odd ranks (MPI_Intercomm_create_from_groups) and an allreduce across it. Prints
 * "sessions rank <r> of <n>: psets <p> sum <s> remote <m> remote-sum <t>". */
#include "common.h"

int main(int argc, char **argv)
{
    prog_name = "sessions";
    if (argc < 2)
        die("usage: sessions <number of psets>");
    MPI_Session s = MPI_SESSION_NULL;
    CHECK(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s));

    int npsets = -1;
    CHECK(MPI_Session_get_num_psets(s, MPI_INFO_NULL, &npsets));
    if (npsets != atoi(argv[1]))
        die("%d process sets, expected %s", npsets, argv[1]);
    int world_found = 0;
    for (int i = 0; i < npsets; i++) {
        char name[256];
        int len = sizeof name;
        CHECK(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, name));
        if (strcmp(name, "mpi://WORLD") == 0)
            world_found = 1;
    }
    if (!world_found)
        die("mpi://WORLD is not among the process sets");

    MPI_Group world = MPI_GROUP_NULL;
    CHECK(MPI_Group_from_session_pset(s, "mpi://WORLD", &world));
    MPI_Comm comm = MPI_COMM_NULL;
    CHECK(MPI_Comm_create_from_group(world, "pmixrs.sessions.world", MPI_INFO_NULL,
                                             MPI_ERRORS_RETURN, &comm));
    int rank = -1, size = -1;
    CHECK(MPI_Comm_rank(comm, &rank));
    CHECK(MPI_Comm_size(comm, &size));
    world_rank = rank;
    long mine = rank, sum = -1;
    CHECK(MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, comm));
    if (sum != (long)size * (size - 1) / 2)
        die("sum of the ranks is %ld over %d ranks", sum, size);

    int remote = 0;
    long remote_sum = 0;
    if (size >= 2) {
        /* Evens and odds, each group's leader its first member. */
        int nev = (size + 1) / 2, nodd = size / 2;
        int range_ev[1][3] = {{0, size - 1, 2}}, range_odd[1][3] = {{1, size - 1, 2}};
        MPI_Group evens = MPI_GROUP_NULL, odds = MPI_GROUP_NULL;
        CHECK(MPI_Group_range_incl(world, 1, range_ev, &evens));
        CHECK(MPI_Group_range_incl(world, 1, range_odd, &odds));
        int even = rank % 2 == 0;
        MPI_Comm inter = MPI_COMM_NULL;
        CHECK(MPI_Intercomm_create_from_groups(
            even ? evens : odds, 0, even ? odds : evens, 0, "pmixrs.sessions.inter",
            MPI_INFO_NULL, MPI_ERRORS_RETURN, &inter));
        CHECK(MPI_Comm_remote_size(inter, &remote));
        if (remote != (even ? nodd : nev))
            die("remote group of %d, expected %d", remote, even ? nodd : nev);
        /* Across an intercommunicator, each side receives the other side's sum. */
        CHECK(MPI_Allreduce(&mine, &remote_sum, 1, MPI_LONG, MPI_SUM, inter));
        CHECK(MPI_Comm_free(&inter));
        CHECK(MPI_Group_free(&evens));
        CHECK(MPI_Group_free(&odds));
    }

    printf("sessions rank %d of %d: psets %d sum %ld remote %d remote-sum %ld\n", rank, size,
           npsets, sum, remote, remote_sum);
    fflush(stdout);
    CHECK(MPI_Comm_free(&comm));
    CHECK(MPI_Group_free(&world));
    CHECK(MPI_Session_finalize(&s));
    return 0;
}

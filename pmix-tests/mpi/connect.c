/* connect: MPI_Open_port + MPI_Publish_name + MPI_Comm_accept in one job, MPI_Lookup_name +
 * MPI_Comm_connect in another, started separately and sharing a name server. Every rank of
 * each job exchanges data both ways with every rank of the other, then both disconnect.
 *
 *   connect server <svc>    rank 0 opens a port and publishes it as <svc>; all accept;
 *                           after the exchange rank 0 unpublishes <svc> and closes the port.
 *   connect client <svc>    rank 0 polls until <svc> is published; all connect to it.
 *   connect together <svc>  one run of two programs (MPMD): the ranks of app 0 are the server
 *                           side, those of app 1 the client side, each on its own
 *                           communicator; a barrier of the whole world after the publish
 *                           lets the client's rank 0 look the name up once, no polling.
 */
#include "common.h"

int main(int argc, char **argv)
{
    init(&argc, &argv);
    if (argc != 3)
        die("usage: %s server|client|together <service>", argv[0]);
    const char *svc = argv[2];
    int together = strcmp(argv[1], "together") == 0;
    int server = strcmp(argv[1], "server") == 0;
    if (!together && !server && strcmp(argv[1], "client") != 0)
        die("unknown mode %s", argv[1]);
    MPI_Comm side = MPI_COMM_WORLD;
    if (together) {
        int app = appnum();
        server = app == 0;
        CHECK(MPI_Comm_split(MPI_COMM_WORLD, app, world_rank, &side));
    }
    int rank = 0, size = 0;
    CHECK(MPI_Comm_rank(side, &rank));
    CHECK(MPI_Comm_size(side, &size));
    char port[MPI_MAX_PORT_NAME] = "";
    if (server && rank == 0) {
        CHECK(MPI_Open_port(MPI_INFO_NULL, port));
        CHECK(MPI_Publish_name(svc, MPI_INFO_NULL, port));
        printf("server: published %s\n", svc);
        fflush(stdout);
    }
    if (together)
        CHECK(MPI_Barrier(MPI_COMM_WORLD));
    if (!server && rank == 0) {
        if (together)
            CHECK(MPI_Lookup_name(svc, MPI_INFO_NULL, port));
        else
            lookup_until_found(svc, port);
    }
    MPI_Comm inter;
    if (server)
        CHECK(MPI_Comm_accept(port, MPI_INFO_NULL, 0, side, &inter));
    else
        CHECK(MPI_Comm_connect(port, MPI_INFO_NULL, 0, side, &inter));
    int remote = exchange(inter, server ? 0 : 1);
    CHECK(MPI_Comm_disconnect(&inter));
    if (server && rank == 0) {
        CHECK(MPI_Unpublish_name(svc, MPI_INFO_NULL, port));
        CHECK(MPI_Close_port(port));
    }
    if (together)
        CHECK(MPI_Comm_free(&side));
    printf("%s rank %d of %d: exchanged with %d remote ranks\n", server ? "server" : "client",
           rank, size, remote);
    fflush(stdout);
    CHECK(MPI_Finalize());
    return 0;
}

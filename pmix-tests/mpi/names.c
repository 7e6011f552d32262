/* names: MPI_Publish_name / MPI_Lookup_name / MPI_Unpublish_name, within a run and between
 * two runs sharing a name server. Rank 0 does the work; the other ranks wait in a barrier.
 *
 *   names errors <svc> <port1> <port2>
 *       lookup of unpublished <svc> must fail (prints its error class); publish <svc> as
 *       <port1>; publishing it again as <port2> must fail and leave <port1>; unpublish; a
 *       second unpublish and a lookup must fail again.
 *   names publisher <svc> <port> <ack> <ackport>      (run A)
 *       publish <svc> as <port>; poll until <ack> is published (by run B) and check it is
 *       <ackport>; unpublish <svc>.
 *   names looker <svc> <port> <ack> <ackport>         (run B)
 *       poll until <svc> is published, check it is exactly <port>; publishing <svc> again
 *       must fail and change nothing; publish <ack> as <ackport>; poll until <svc> is gone
 *       (A has seen the ack); unpublish <ack>.
 */
#include "common.h"

static const char *class_name(int cls)
{
    switch (cls) {
    case MPI_ERR_NAME:
        return "MPI_ERR_NAME";
    case MPI_ERR_SERVICE:
        return "MPI_ERR_SERVICE";
    case MPI_ERR_PORT:
        return "MPI_ERR_PORT";
    case MPI_ERR_OTHER:
        return "MPI_ERR_OTHER";
    case MPI_ERR_INTERN:
        return "MPI_ERR_INTERN";
    default:
        return "another class";
    }
}

/* The class of error code `rc` of a call that had to fail, as "<name> (<number>)". */
static const char *failed_class(int rc, const char *what)
{
    static char buf[64];
    if (rc == MPI_SUCCESS)
        die("%s succeeded, it must fail", what);
    int cls = -1;
    CHECK(MPI_Error_class(rc, &cls));
    snprintf(buf, sizeof buf, "%s (%d)", class_name(cls), cls);
    return buf;
}

static void expect_port(const char *svc, const char *want)
{
    char port[MPI_MAX_PORT_NAME] = "";
    CHECK(MPI_Lookup_name(svc, MPI_INFO_NULL, port));
    if (strcmp(port, want) != 0)
        die("lookup of %s gave \"%s\", expected \"%s\"", svc, port, want);
}

static void errors(const char *svc, const char *port1, const char *port2)
{
    char port[MPI_MAX_PORT_NAME] = "";
    int rc = MPI_Lookup_name(svc, MPI_INFO_NULL, port);
    printf("errors: lookup of an unpublished name failed: %s\n",
           failed_class(rc, "lookup of an unpublished name"));
    CHECK(MPI_Publish_name(svc, MPI_INFO_NULL, port1));
    expect_port(svc, port1);
    rc = MPI_Publish_name(svc, MPI_INFO_NULL, port2);
    printf("errors: duplicate publish failed: %s\n", failed_class(rc, "duplicate publish"));
    expect_port(svc, port1);
    CHECK(MPI_Unpublish_name(svc, MPI_INFO_NULL, port1));
    rc = MPI_Lookup_name(svc, MPI_INFO_NULL, port);
    printf("errors: lookup after unpublish failed: %s\n",
           failed_class(rc, "lookup after unpublish"));
    rc = MPI_Unpublish_name(svc, MPI_INFO_NULL, port1);
    printf("errors: second unpublish failed: %s\n", failed_class(rc, "second unpublish"));
}

static void publisher(const char *svc, const char *port, const char *ack, const char *ackport)
{
    CHECK(MPI_Publish_name(svc, MPI_INFO_NULL, port));
    printf("publisher: published %s\n", svc);
    fflush(stdout);
    char got[MPI_MAX_PORT_NAME];
    lookup_until_found(ack, got);
    if (strcmp(got, ackport) != 0)
        die("lookup of %s gave \"%s\", expected \"%s\"", ack, got, ackport);
    /* The looker's duplicate publish must not have replaced ours. */
    expect_port(svc, port);
    CHECK(MPI_Unpublish_name(svc, MPI_INFO_NULL, port));
    printf("publisher: got %s = %s, unpublished %s\n", ack, got, svc);
}

static void looker(const char *svc, const char *port, const char *ack, const char *ackport)
{
    char got[MPI_MAX_PORT_NAME];
    lookup_until_found(svc, got);
    if (strcmp(got, port) != 0)
        die("lookup of %s gave \"%s\", expected \"%s\"", svc, got, port);
    int rc = MPI_Publish_name(svc, MPI_INFO_NULL, "looker-port");
    printf("looker: publishing %s again failed: %s\n", svc,
           failed_class(rc, "publishing another run's name again"));
    expect_port(svc, port);
    CHECK(MPI_Publish_name(ack, MPI_INFO_NULL, ackport));
    lookup_until_gone(svc);
    CHECK(MPI_Unpublish_name(ack, MPI_INFO_NULL, ackport));
    printf("looker: found %s = %s, acknowledged, saw it unpublished\n", svc, got);
}

int main(int argc, char **argv)
{
    init(&argc, &argv);
    if (argc < 2)
        die("usage: %s errors|publisher|looker ...", argv[0]);
    const char *mode = argv[1];
    if (world_rank == 0) {
        if (strcmp(mode, "errors") == 0 && argc == 5)
            errors(argv[2], argv[3], argv[4]);
        else if (strcmp(mode, "publisher") == 0 && argc == 6)
            publisher(argv[2], argv[3], argv[4], argv[5]);
        else if (strcmp(mode, "looker") == 0 && argc == 6)
            looker(argv[2], argv[3], argv[4], argv[5]);
        else
            die("bad arguments for mode %s", mode);
        fflush(stdout);
    }
    CHECK(MPI_Barrier(MPI_COMM_WORLD));
    CHECK(MPI_Finalize());
    printf("names %s rank %d ok\n", mode, world_rank);
    return 0;
}

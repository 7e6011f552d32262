/* A PMI-2 client linked to Slurm's libpmi2 (Debian libpmi2-0-dev), run under pmixrun by
 * pmix-tests/tests/pmi2.rs. One scenario per run, named by argv[1]; every line it prints
 * starts with a word the test looks for. Exits non-zero on the first unexpected answer. */
#include <slurm/pmi2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(cond, ...)                                                                    \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "pmi2_client rank %d: %s:%d: ", rank, __FILE__, __LINE__);      \
            fprintf(stderr, __VA_ARGS__);                                                   \
            fprintf(stderr, "\n");                                                          \
            exit(2);                                                                        \
        }                                                                                   \
    } while (0)

static int rank = -1;

/* A value with the characters the wire escapes or splits on. */
static void value_of(int r, char *buf, size_t len) {
    snprintf(buf, len, "v;%d=x;;y;", r);
}

static void kvs(int size) {
    char key[64], val[256], want[256], got[1024];
    int len;
    snprintf(key, sizeof key, "key-%d", rank);
    value_of(rank, val, sizeof val);
    CHECK(PMI2_KVS_Put(key, val) == PMI2_SUCCESS, "put");
    CHECK(PMI2_KVS_Fence() == PMI2_SUCCESS, "fence");
    char jobid[256];
    CHECK(PMI2_Job_GetId(jobid, sizeof jobid) == PMI2_SUCCESS, "getid");
    for (int r = 0; r < size; r++) {
        snprintf(key, sizeof key, "key-%d", r);
        value_of(r, want, sizeof want);
        CHECK(PMI2_KVS_Get(jobid, r, key, got, sizeof got, &len) == PMI2_SUCCESS, "get %s", key);
        CHECK(strcmp(got, want) == 0, "get %s: %s, not %s", key, got, want);
        CHECK(len == (int)strlen(want), "get %s: length %d", key, len);
    }
    CHECK(PMI2_KVS_Get(jobid, PMI2_ID_NULL, "nobody-put-this", got, sizeof got, &len) != PMI2_SUCCESS,
          "a missing key was found");
    printf("kvs rank=%d ok\n", rank);
}

static void nodeattr(void) {
    char got[1024];
    int found = -1;
    /* Local rank 0 of each node is not known here: every rank puts its own, then all wait
     * for "shared", which the rank named by the lowest key puts. */
    if (rank % 2 == 0) {
        CHECK(PMI2_Info_PutNodeAttr("shared", "n;1=a") == PMI2_SUCCESS, "putnodeattr");
    }
    CHECK(PMI2_Info_GetNodeAttr("shared", got, sizeof got, &found, 1) == PMI2_SUCCESS,
          "getnodeattr wait");
    CHECK(found == 1 && strcmp(got, "n;1=a") == 0, "getnodeattr: found %d %s", found, got);
    found = -1;
    CHECK(PMI2_Info_GetNodeAttr("absent", got, sizeof got, &found, 0) == PMI2_SUCCESS,
          "getnodeattr nowait");
    CHECK(found == 0, "absent attribute found");
    CHECK(PMI2_KVS_Fence() == PMI2_SUCCESS, "fence");
    /* Everybody on the node waits for what nobody will put: every wait fails, none hangs. */
    int rc = PMI2_Info_GetNodeAttr("never", got, sizeof got, &found, 1);
    printf("nodeattr rank=%d shared=ok never=%s\n", rank, rc == PMI2_SUCCESS ? "found" : "failed");
}

static void names(void) {
    char port[256];
    if (rank == 0) {
        CHECK(PMI2_Nameserv_publish("pmi2-svc", NULL, "tag#0$p;o=rt$") == PMI2_SUCCESS, "publish");
        CHECK(PMI2_Nameserv_publish("pmi2-svc", NULL, "other") != PMI2_SUCCESS,
              "a duplicate publish succeeded");
    }
    CHECK(PMI2_KVS_Fence() == PMI2_SUCCESS, "fence");
    CHECK(PMI2_Nameserv_lookup("pmi2-svc", NULL, port, sizeof port) == PMI2_SUCCESS, "lookup");
    CHECK(strcmp(port, "tag#0$p;o=rt$") == 0, "lookup gave %s", port);
    CHECK(PMI2_Nameserv_lookup("pmi2-nobody", NULL, port, sizeof port) != PMI2_SUCCESS,
          "an unknown name was found");
    CHECK(PMI2_KVS_Fence() == PMI2_SUCCESS, "fence");
    if (rank == 0) {
        CHECK(PMI2_Nameserv_unpublish("pmi2-svc", NULL) == PMI2_SUCCESS, "unpublish");
        CHECK(PMI2_Nameserv_unpublish("pmi2-svc", NULL) != PMI2_SUCCESS, "unpublished twice");
    }
    printf("names rank=%d port=%s\n", rank, port);
}

static void spawn(const char *self, int size) {
    char jobid[256], child_job[256];
    CHECK(PMI2_Job_GetId(jobid, sizeof jobid) == PMI2_SUCCESS, "getid");
    if (rank == 0)
        CHECK(PMI2_KVS_Put("parent-key", "pk;=1") == PMI2_SUCCESS, "put");
    CHECK(PMI2_KVS_Fence() == PMI2_SUCCESS, "fence");
    if (rank != 0)
        return;
    /* Two commands (spawn_multiple), one process each, with their own arguments and wdir. */
    const char *cmds[2] = {self, self};
    int argcs[2] = {3, 3};
    const char *argv0[3] = {"child", jobid, "a b;c"};
    const char *argv1[3] = {"child", jobid, "d=e"};
    const char **argvs[2] = {argv0, argv1};
    int maxprocs[2] = {1, 1};
    MPID_Info wdir0 = {0, 0, 0, NULL, "wdir", "/tmp"};
    MPID_Info wdir1 = {0, 0, 0, NULL, "wdir", "/"};
    const MPID_Info *infos[2] = {&wdir0, &wdir1};
    int infosizes[2] = {1, 1};
    MPID_Info pre = {0, 0, 0, NULL, "PARENT_PORT", "tag#1$a;b=c$"};
    const MPID_Info *preput[1] = {&pre};
    int errors[2] = {-1, -1};
    int rc = PMI2_Job_Spawn(2, cmds, argcs, argvs, maxprocs, infosizes, infos, 1, preput,
                            child_job, sizeof child_job, errors);
    CHECK(rc == PMI2_SUCCESS, "spawn: %d", rc);
    CHECK(strcmp(child_job, jobid) != 0 && child_job[0], "spawn gave job %s", child_job);
    /* A key of the children's job, from its rank 0: the get waits until that rank put
     * something (which keeps this parent, and so the children's access to its job, alive). */
    char got[1024];
    int len;
    CHECK(PMI2_KVS_Get(child_job, 0, "child-key", got, sizeof got, &len) == PMI2_SUCCESS,
          "get in the children's job");
    CHECK(strcmp(got, "ck;=0") == 0, "child key %s", got);
    printf("spawn rank=%d size=%d child_job_differs=1 child_key=ok\n", rank, size);
}

static void child(const char *parent_job, const char *arg, int size, int spawned, int appnum) {
    char got[1024], cwd[1024], jobid[256];
    int len;
    CHECK(spawned == 1, "spawned=%d", spawned);
    CHECK(PMI2_Job_GetId(jobid, sizeof jobid) == PMI2_SUCCESS, "getid");
    CHECK(PMI2_KVS_Get(jobid, PMI2_ID_NULL, "PARENT_PORT", got, sizeof got, &len) == PMI2_SUCCESS,
          "get preput");
    CHECK(strcmp(got, "tag#1$a;b=c$") == 0, "preput %s", got);
    /* The parent is alive until rank 0 put its key (it waits for it). */
    if (rank == 1) {
        CHECK(PMI2_KVS_Get(parent_job, 0, "parent-key", got, sizeof got, &len) == PMI2_SUCCESS,
              "get in the parent's job");
        CHECK(strcmp(got, "pk;=1") == 0, "parent key %s", got);
    }
    CHECK(PMI2_KVS_Fence() == PMI2_SUCCESS, "fence");
    if (rank == 0)
        CHECK(PMI2_KVS_Put("child-key", "ck;=0") == PMI2_SUCCESS, "put");
    CHECK(getcwd(cwd, sizeof cwd) != NULL, "getcwd");
    printf("child rank=%d size=%d appnum=%d preput=ok parent=ok cwd=%s arg=%s\n", rank, size, appnum,
           cwd, arg);
}

int main(int argc, char **argv) {
    int spawned = -1, size = -1, appnum = -1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(argc >= 2, "usage: pmi2_client basic|nodeattr|names|spawn|abort");
    CHECK(PMI2_Init(&spawned, &size, &rank, &appnum) == PMI2_SUCCESS, "init");
    CHECK(PMI2_Initialized(), "not initialized");
    const char *what = argv[1];
    if (strcmp(what, "basic") == 0) {
        char jobid[256], map[1024], univ[64], xml[64];
        int found_map = -1, found_univ = -1, found_xml = -1;
        CHECK(PMI2_Job_GetId(jobid, sizeof jobid) == PMI2_SUCCESS, "getid");
        CHECK(PMI2_Info_GetJobAttr("PMI_process_mapping", map, sizeof map, &found_map) == PMI2_SUCCESS,
              "mapping");
        CHECK(PMI2_Info_GetJobAttr("universeSize", univ, sizeof univ, &found_univ) == PMI2_SUCCESS,
              "universe");
        CHECK(PMI2_Info_GetJobAttr("PMI_hwloc_xmlfile", xml, sizeof xml, &found_xml) == PMI2_SUCCESS,
              "hwloc");
        printf("init rank=%d size=%d appnum=%d spawned=%d jobid=%s mapping=%s universe=%s hwloc_found=%d\n",
               rank, size, appnum, spawned, jobid, found_map ? map : "(none)",
               found_univ ? univ : "(none)", found_xml);
        kvs(size);
    } else if (strcmp(what, "nodeattr") == 0) {
        nodeattr();
    } else if (strcmp(what, "names") == 0) {
        names();
    } else if (strcmp(what, "spawn") == 0) {
        spawn(argv[0], size);
    } else if (strcmp(what, "child") == 0) {
        CHECK(argc >= 4, "child needs the parent's job id and an argument");
        child(argv[2], argv[3], size, spawned, appnum);
    } else if (strcmp(what, "abort") == 0) {
        if (rank == 1) {
            printf("abort rank=1 aborting\n");
            fflush(stdout);
            PMI2_Abort(1, "pmi2_client; aborting on purpose");
        }
        /* The others wait in a fence rank 1 never joins: only the abort ends them. */
        if (PMI2_KVS_Fence() == PMI2_SUCCESS)
            printf("abort rank=%d survived\n", rank);
        return 3;
    } else {
        CHECK(0, "unknown scenario %s", what);
    }
    CHECK(PMI2_Finalize() == PMI2_SUCCESS, "finalize");
    return 0;
}

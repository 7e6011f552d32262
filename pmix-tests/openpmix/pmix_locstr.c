/*
 * pmix_locstr.c - the locality strings the real OpenPMIx server library (libpmix, with hwloc)
 * writes for CPU sets of this machine: the reference pmixrun's are compared with.
 *
 *   pmix_locstr CPULIST...
 *
 * Starts a server (PMIx_server_init, its directories in a private temporary directory), and
 * for each CPU list (hwloc's list form, OS indexes, such as "0-1,4") prints
 *   "locstr cpus=CPULIST locality=STRING"
 * with STRING what PMIx_server_generate_locality_string gives ("(null)" for none). With
 * HWLOC_FSROOT set, hwloc reads the machine from that tree instead. Then finalizes. A
 * failure prints
 * "FAIL rank=-1: <what>" on stderr and exits 2.
 *
 * Build: gcc -O1 -Wall -Wextra -o pmix_locstr pmix_locstr.c \
 *          $(pkg-config --cflags --libs pmix) -lhwloc
 */
#include <pmix.h>
#include <pmix_server.h>

#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fail_rank(void)
{
    return -1;
}

#include "pmix_fail.h"

int main(int argc, char **argv)
{
    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/pmix_locstr.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL)
        fail("mkdtemp %s", dir);
    pmix_server_module_t module;
    memset(&module, 0, sizeof module);
    pmix_info_t info[2];
    PMIX_INFO_LOAD(&info[0], PMIX_SERVER_TMPDIR, dir, PMIX_STRING);
    PMIX_INFO_LOAD(&info[1], PMIX_SYSTEM_TMPDIR, dir, PMIX_STRING);
    MUST(PMIx_server_init(&module, info, 2));
    for (int i = 1; i < argc; i++) {
        pmix_cpuset_t cpuset;
        PMIX_CPUSET_CONSTRUCT(&cpuset);
        cpuset.source = "hwloc";
        cpuset.bitmap = hwloc_bitmap_alloc();
        if (hwloc_bitmap_list_sscanf(cpuset.bitmap, argv[i]) != 0)
            fail("%s is not a CPU list", argv[i]);
        char *loc = NULL;
        MUST(PMIx_server_generate_locality_string(&cpuset, &loc));
        printf("locstr cpus=%s locality=%s\n", argv[i], loc ? loc : "(null)");
        free(loc);
        hwloc_bitmap_free(cpuset.bitmap);
    }
    fflush(stdout);
    MUST(PMIx_server_finalize());
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "pmix_locstr: could not remove %s\n", dir);
    return 0;
}

/*
 * pmix_locality.c - a libpmix client reading where its launcher placed it: its own
 * PMIX_CPUSET, PMIX_LOCALITY_STRING and PMIX_PACKAGE_RANK, the locality string of the next
 * rank (a peer on the same node), and what libpmix makes of them.
 *
 *   pmix_locality
 *
 * Prints one line per rank:
 *   "loc rank=R allowed=A cpuset=C parsed=P locality=L pkgrank=K peer=Q peerloc=M
 *    rel=0xX rel_rc=S bare_parse_rc=T bare_rel=0xY bare_rel_rc=U"
 * A: the process's Cpus_allowed_list (/proc/self/status); C: PMIX_CPUSET; P: C as libpmix's
 * PMIx_Parse_cpuset_string parses it ("hwloc:" prepended; printed with hwloc's list form);
 * L: PMIX_LOCALITY_STRING; M: the peer's; X: PMIx_Get_relative_locality of "hwloc:"L and
 * "hwloc:"M, S its status (libpmix 4.2 and 5.0 answer PMIX_ERR_TAKE_NEXT_OPTION, -1366, even
 * when they computed X); T, Y and U: the same calls given the bare strings, as the launcher
 * stores them (libpmix 4.2 and 5.0 do not parse those, wanting the prefix).
 * Then finalizes and prints "OK rank=R size=N". Any failure: "FAIL rank=R: <what>" on stderr,
 * exit 2.
 *
 * Build: gcc -O1 -Wall -Wextra -o pmix_locality pmix_locality.c \
 *          $(pkg-config --cflags --libs pmix) -lhwloc   (libpmix-dev brings libhwloc-dev)
 */
#include <pmix.h>

#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pmix_proc_t me;

static int fail_rank(void)
{
    return me.nspace[0] ? (int) me.rank : -1;
}

#include "pmix_fail.h"

/* A string value of `rank` (this job), which must be there. */
static char *get_string(pmix_rank_t rank, const char *key)
{
    pmix_proc_t p;
    pmix_value_t *v = NULL;
    PMIX_LOAD_PROCID(&p, me.nspace, rank);
    MUST(PMIx_Get(&p, key, NULL, 0, &v));
    if (v->type != PMIX_STRING || v->data.string == NULL)
        fail("%s of rank %u is not a string (type %d)", key, rank, v->type);
    char *s = strdup(v->data.string);
    PMIX_VALUE_RELEASE(v);
    return s;
}

/* The process's Cpus_allowed_list. */
static char *allowed_list(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL)
        fail("cannot open /proc/self/status");
    char line[4096];
    char *found = NULL;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
            char *s = line + 18;
            s += strspn(s, " \t");
            s[strcspn(s, "\n")] = '\0';
            found = strdup(s);
            break;
        }
    }
    fclose(f);
    if (found == NULL)
        fail("no Cpus_allowed_list in /proc/self/status");
    return found;
}

static char *prefixed(const char *s)
{
    size_t n = strlen(s) + 7;
    char *p = malloc(n);
    snprintf(p, n, "hwloc:%s", s);
    return p;
}

int main(void)
{
    MUST(PMIx_Init(&me, NULL, 0));
    pmix_proc_t wild;
    pmix_value_t *v = NULL;
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    MUST(PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &v));
    uint32_t size = v->data.uint32;
    PMIX_VALUE_RELEASE(v);

    char *allowed = allowed_list();
    char *cpuset = get_string(me.rank, PMIX_CPUSET);
    char *locality = get_string(me.rank, PMIX_LOCALITY_STRING);
    MUST(PMIx_Get(&me, PMIX_PACKAGE_RANK, NULL, 0, &v));
    if (v->type != PMIX_UINT16)
        fail("PMIX_PACKAGE_RANK is not a uint16 (type %d)", v->type);
    unsigned pkgrank = v->data.uint16;
    PMIX_VALUE_RELEASE(v);

    pmix_rank_t peer = (me.rank + 1) % size;
    char *peerloc = get_string(peer, PMIX_LOCALITY_STRING);

    pmix_cpuset_t parsed;
    PMIX_CPUSET_CONSTRUCT(&parsed);
    char *pc = prefixed(cpuset);
    MUST(PMIx_Parse_cpuset_string(pc, &parsed));
    char *parsed_list = NULL;
    if (parsed.bitmap == NULL || hwloc_bitmap_list_asprintf(&parsed_list, parsed.bitmap) < 0)
        fail("PMIx_Parse_cpuset_string(%s) gave no bitmap", pc);

    pmix_locality_t rel = 0;
    char *pl = prefixed(locality), *pp = prefixed(peerloc);
    pmix_status_t rel_rc = PMIx_Get_relative_locality(pl, pp, &rel);

    pmix_cpuset_t bare;
    PMIX_CPUSET_CONSTRUCT(&bare);
    char *bare_cpuset = strdup(cpuset);
    pmix_status_t bare_parse_rc = PMIx_Parse_cpuset_string(bare_cpuset, &bare);
    pmix_locality_t bare_rel = 0;
    pmix_status_t bare_rel_rc = PMIx_Get_relative_locality(locality, peerloc, &bare_rel);

    printf("loc rank=%u allowed=%s cpuset=%s parsed=%s locality=%s pkgrank=%u peer=%u "
           "peerloc=%s rel=0x%x rel_rc=%d bare_parse_rc=%d bare_rel=0x%x bare_rel_rc=%d\n",
           me.rank, allowed, cpuset, parsed_list, locality, pkgrank, peer, peerloc,
           (unsigned) rel, rel_rc, bare_parse_rc, (unsigned) bare_rel, bare_rel_rc);
    fflush(stdout);
    MUST(PMIx_Finalize(NULL, 0));
    printf("OK rank=%u size=%u\n", me.rank, size);
    return 0;
}

/*
 * pmix_types.c - one value of each structured data type of pmix_common.h, put by one rank and
 * got by the others, for pmix-tests/tests/capi.rs: run on libpmix (Debian's 4.2, OpenPMIx
 * 5.0.11) and on pmix-rs's libpmix.so.2, rank by rank, the getters must print the same lines
 * whichever library put and whichever got.
 *
 *   pmix_types PUTTER
 *
 * Rank PUTTER puts the values (keys "t.<name>") and commits; every rank joins a fence that
 * collects data; every other rank gets each value and prints "<name> <text>" (the type's name
 * as the library says it, then the fields), then "OK".
 * A failure prints "FAIL rank=R: <what>" on stderr and exits 2.
 *
 * Not here: a cpuset and a topology (hwloc objects), and process and node statistics, which
 * OpenPMIx's own packers write otherwise than its unpackers read (docs/OPENPMIX.md).
 *
 * Build: gcc -O1 -Wall -Wextra -o pmix_types pmix_types.c $(pkg-config --cflags --libs pmix)
 */
#include <pmix.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pmix_proc_t me;

static int fail_rank(void)
{
    return me.rank == PMIX_RANK_UNDEF ? -1 : (int)me.rank;
}

#include "pmix_fail.h"

/* The length of the long string: longer than libpmix 5's compression limit (4096). */
#define LONG_LEN 6000

static pmix_coord_t coord(pmix_coord_view_t view, size_t dims, uint32_t first)
{
    pmix_coord_t c;
    c.view = view;
    c.dims = dims;
    c.coord = calloc(dims, sizeof(uint32_t));
    for (size_t i = 0; i < dims; i++)
        c.coord[i] = first + (uint32_t)i;
    return c;
}

static void put(const char *name, pmix_value_t *v)
{
    char key[64];
    snprintf(key, sizeof key, "t.%s", name);
    MUST(PMIx_Put(PMIX_GLOBAL, key, v));
}

static void put_all(void)
{
    pmix_value_t v;
    static pmix_coord_t c, coords[2];
    static pmix_geometry_t geo;
    static pmix_device_distance_t dist;
    static pmix_endpoint_t ep;
    static pmix_disk_stats_t disk;
    static pmix_net_stats_t net;
    static pmix_nspace_t ns = "some-namespace";
    static char longstr[LONG_LEN + 1];

    c = coord(PMIX_COORD_LOGICAL_VIEW, 3, 1);
    v.type = PMIX_COORD;
    v.data.coord = &c;
    put("coord", &v);

    geo.fabric = 7;
    geo.uuid = "geo-uuid";
    geo.osname = "mlx5_0";
    coords[0] = coord(PMIX_COORD_LOGICAL_VIEW, 2, 10);
    coords[1] = coord(PMIX_COORD_PHYSICAL_VIEW, 1, 90);
    geo.coordinates = coords;
    geo.ncoords = 2;
    v.type = PMIX_GEOMETRY;
    v.data.geometry = &geo;
    put("geometry", &v);

    dist.uuid = "gpu-uuid";
    dist.osname = NULL;
    dist.type = PMIX_DEVTYPE_GPU | PMIX_DEVTYPE_NETWORK;
    dist.mindist = 10;
    dist.maxdist = 20;
    v.type = PMIX_DEVICE_DIST;
    v.data.devdist = &dist;
    put("devdist", &v);

    ep.uuid = "ep-uuid";
    ep.osname = "eth0";
    ep.endpt.bytes = "\x00\x01\x02\xff";
    ep.endpt.size = 4;
    v.type = PMIX_ENDPOINT;
    v.data.endpoint = &ep;
    put("endpoint", &v);

    v.type = PMIX_DEVTYPE;
    v.data.devtype = PMIX_DEVTYPE_OPENFABRICS | PMIX_DEVTYPE_DMA;
    put("devtype", &v);

    disk.disk = "sda";
    disk.num_reads_completed = 1;
    disk.num_reads_merged = 2;
    disk.num_sectors_read = 3;
    disk.milliseconds_reading = 4;
    disk.num_writes_completed = 5;
    disk.num_writes_merged = 6;
    disk.num_sectors_written = 7;
    disk.milliseconds_writing = 8;
    disk.num_ios_in_progress = 9;
    disk.milliseconds_io = 10;
    disk.weighted_milliseconds_io = 11;
    v.type = PMIX_DISK_STATS;
    v.data.dkstats = &disk;
    put("diskstats", &v);

    net.net_interface = "eth1";
    net.num_bytes_recvd = 100;
    net.num_packets_recvd = 200;
    net.num_recv_errs = 300;
    net.num_bytes_sent = 400;
    net.num_packets_sent = 500;
    net.num_send_errs = 600;
    v.type = PMIX_NET_STATS;
    v.data.netstats = &net;
    put("netstats", &v);

    v.type = PMIX_PROC_NSPACE;
    v.data.nspace = &ns;
    put("nspace", &v);

    v.type = PMIX_PROC_RANK;
    v.data.rank = 42;
    put("rank", &v);

    for (size_t i = 0; i < LONG_LEN; i++)
        longstr[i] = (char)('a' + i % 26);
    v.type = PMIX_STRING;
    v.data.string = longstr;
    put("long", &v);

    v.type = PMIX_STRING;
    v.data.string = "";
    put("empty", &v);

    v.type = PMIX_STRING;
    v.data.string = NULL;
    put("null", &v);

    MUST(PMIx_Commit());
}

static const char *str(const char *s)
{
    return s ? s : "(null)";
}

static void print_coord(const pmix_coord_t *c)
{
    printf(" [view %u:", (unsigned)c->view);
    for (size_t i = 0; i < c->dims; i++)
        printf(" %u", c->coord[i]);
    printf("]");
}

/* "<name> <type> <fields>". */
static void show(const char *name, const pmix_value_t *v)
{
    printf("%s %s", name, PMIx_Data_type_string(v->type));
    switch (v->type) {
    case PMIX_COORD:
        print_coord(v->data.coord);
        break;
    case PMIX_GEOMETRY: {
        const pmix_geometry_t *g = v->data.geometry;
        printf(" fabric %zu uuid %s osname %s", g->fabric, str(g->uuid), str(g->osname));
        for (size_t i = 0; i < g->ncoords; i++)
            print_coord(&g->coordinates[i]);
        break;
    }
    case PMIX_DEVICE_DIST: {
        const pmix_device_distance_t *d = v->data.devdist;
        printf(" uuid %s osname %s type %#llx min %u max %u", str(d->uuid), str(d->osname),
               (unsigned long long)d->type, (unsigned)d->mindist, (unsigned)d->maxdist);
        break;
    }
    case PMIX_ENDPOINT: {
        const pmix_endpoint_t *e = v->data.endpoint;
        printf(" uuid %s osname %s bytes", str(e->uuid), str(e->osname));
        for (size_t i = 0; i < e->endpt.size; i++)
            printf(" %02x", (unsigned char)e->endpt.bytes[i]);
        break;
    }
    case PMIX_DEVTYPE:
        printf(" %#llx", (unsigned long long)v->data.devtype);
        break;
    case PMIX_DISK_STATS: {
        const pmix_disk_stats_t *d = v->data.dkstats;
        printf(" %s %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", str(d->disk),
               (unsigned long long)d->num_reads_completed, (unsigned long long)d->num_reads_merged,
               (unsigned long long)d->num_sectors_read,
               (unsigned long long)d->milliseconds_reading,
               (unsigned long long)d->num_writes_completed,
               (unsigned long long)d->num_writes_merged,
               (unsigned long long)d->num_sectors_written,
               (unsigned long long)d->milliseconds_writing,
               (unsigned long long)d->num_ios_in_progress, (unsigned long long)d->milliseconds_io,
               (unsigned long long)d->weighted_milliseconds_io);
        break;
    }
    case PMIX_NET_STATS: {
        const pmix_net_stats_t *n = v->data.netstats;
        printf(" %s %llu %llu %llu %llu %llu %llu", str(n->net_interface),
               (unsigned long long)n->num_bytes_recvd, (unsigned long long)n->num_packets_recvd,
               (unsigned long long)n->num_recv_errs, (unsigned long long)n->num_bytes_sent,
               (unsigned long long)n->num_packets_sent, (unsigned long long)n->num_send_errs);
        break;
    }
    case PMIX_PROC_NSPACE:
        printf(" %s", v->data.nspace ? *v->data.nspace : "(null)");
        break;
    case PMIX_PROC_RANK:
        printf(" %u", (unsigned)v->data.rank);
        break;
    case PMIX_STRING:
        if (v->data.string == NULL) {
            printf(" (null)");
        } else {
            /* The length and a sum, for the long one. */
            unsigned long sum = 0;
            size_t len = strlen(v->data.string);
            for (size_t i = 0; i < len; i++)
                sum = sum * 31 + (unsigned char)v->data.string[i];
            printf(" len %zu sum %lu", len, sum);
        }
        break;
    default:
        printf(" (unexpected)");
    }
    printf("\n");
}

static const char *NAMES[] = {"coord",    "geometry", "devdist", "endpoint", "devtype",
                              "diskstats", "netstats", "nspace",  "rank",     "long",
                              "empty",    "null"};

int main(int argc, char **argv)
{
    me.rank = PMIX_RANK_UNDEF;
    if (argc != 2)
        fail("usage: pmix_types PUTTER");
    pmix_rank_t putter = (pmix_rank_t)atoi(argv[1]);
    MUST(PMIx_Init(&me, NULL, 0));
    if (me.rank == putter)
        put_all();

    pmix_info_t collect;
    bool yes = true;
    PMIX_INFO_LOAD(&collect, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    MUST(PMIx_Fence(NULL, 0, &collect, 1));

    if (me.rank != putter) {
        pmix_proc_t from;
        PMIX_LOAD_PROCID(&from, me.nspace, putter);
        for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++) {
            char key[64];
            pmix_value_t *v = NULL;
            snprintf(key, sizeof key, "t.%s", NAMES[i]);
            MUST(PMIx_Get(&from, key, NULL, 0, &v));
            show(NAMES[i], v);
            PMIX_VALUE_RELEASE(v);
        }
        printf("OK\n");
    }
    fflush(stdout);
    MUST(PMIx_Finalize(NULL, 0));
    return 0;
}

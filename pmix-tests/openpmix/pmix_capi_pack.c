/*
 * pmix_capi_pack.c - PMIx_Data_pack and PMIx_Data_unpack of values of many types, to compare
 * the bytes of libpmix (Debian's 4.2, OpenPMIx 5.0.11) and pmix-capi, and to read each
 * library's bytes with the others (pmix-tests/tests/capi.rs). One process under a server
 * (libpmix packs only once initialised):
 *
 *   pmix_capi_pack pack FILE     packs the values below (one PMIx_Data_pack call each
 *                                group), writes the buffer's bytes to FILE and prints them in
 *                                hex, 32 bytes a line ("bytes <hex>"), then "packed N"
 *   pmix_capi_pack unpack FILE   unpacks FILE's bytes in the same calls and prints each value
 *                                read, one line a call, then "end S" with S the status of
 *                                one more unpack (past the end)
 *
 * A failure prints "FAIL ..." to stderr and exits 1.
 */
#include <pmix.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pmix_proc_t me;

static void fail(const char *what, pmix_status_t rc)
{
    fprintf(stderr, "FAIL %s: %d %s\n", what, rc, PMIx_Error_string(rc));
    exit(1);
}

/* ---- the values ---- */

static pmix_proc_t a_proc(const char *ns, pmix_rank_t r)
{
    pmix_proc_t p;
    memset(&p, 0, sizeof p);
    strncpy(p.nspace, ns, PMIX_MAX_NSLEN);
    p.rank = r;
    return p;
}

#define PACK(what, src, n, type)                                                     \
    do {                                                                             \
        pmix_status_t rc_ = PMIx_Data_pack(NULL, &buf, (src), (n), (type));          \
        if (PMIX_SUCCESS != rc_) {                                                   \
            fail("pack " what, rc_);                                                 \
        }                                                                            \
        packs++;                                                                     \
    } while (0)

static int pack_all(pmix_data_buffer_t *bufp)
{
    pmix_data_buffer_t buf = *bufp;
    int packs = 0;

    int32_t i32[3] = {7, -1, 300000};
    PACK("int32", i32, 3, PMIX_INT32);
    char *strs[3] = {"hello", "", "a longer string, with spaces"};
    PACK("string", strs, 3, PMIX_STRING);
    bool bools[2] = {true, false};
    PACK("bool", bools, 2, PMIX_BOOL);
    uint8_t bytes[3] = {0, 127, 255};
    PACK("byte", bytes, 3, PMIX_BYTE);
    int8_t i8 = -5;
    PACK("int8", &i8, 1, PMIX_INT8);
    int16_t i16[2] = {-300, 32767};
    PACK("int16", i16, 2, PMIX_INT16);
    int64_t i64[2] = {-1234567890123LL, INT64_MAX};
    PACK("int64", i64, 2, PMIX_INT64);
    uint8_t u8 = 200;
    PACK("uint8", &u8, 1, PMIX_UINT8);
    uint16_t u16[2] = {7, 65535};
    PACK("uint16", u16, 2, PMIX_UINT16);
    uint32_t u32[2] = {0, 4294967295u};
    PACK("uint32", u32, 2, PMIX_UINT32);
    uint64_t u64[2] = {1ULL << 56, UINT64_MAX};
    PACK("uint64", u64, 2, PMIX_UINT64);
    size_t sz = 4096;
    PACK("size", &sz, 1, PMIX_SIZE);
    pid_t pid = 31337;
    PACK("pid", &pid, 1, PMIX_PID);
    int ints[2] = {-2, 65536};
    PACK("int", ints, 2, PMIX_INT);
    unsigned int uints[1] = {3000000000u};
    PACK("uint", uints, 1, PMIX_UINT);
    float f = 1.5f;
    PACK("float", &f, 1, PMIX_FLOAT);
    double d[2] = {-2.25, 1234.5678};
    PACK("double", d, 2, PMIX_DOUBLE);
    struct timeval tv = {1700000000, 123456};
    PACK("timeval", &tv, 1, PMIX_TIMEVAL);
    time_t t = 1700000001;
    PACK("time", &t, 1, PMIX_TIME);
    pmix_status_t st[2] = {PMIX_SUCCESS, PMIX_ERR_NOT_FOUND};
    PACK("status", st, 2, PMIX_STATUS);
    pmix_rank_t ranks[2] = {5, PMIX_RANK_WILDCARD};
    PACK("rank", ranks, 2, PMIX_PROC_RANK);
    pmix_proc_t procs[2] = {a_proc("job-a", 0), a_proc("another.namespace", 17)};
    PACK("proc", procs, 2, PMIX_PROC);
    pmix_byte_object_t bo = {.bytes = "\x01\x00\x02\xff", .size = 4};
    PACK("byte_object", &bo, 1, PMIX_BYTE_OBJECT);
    pmix_persistence_t pers = PMIX_PERSIST_SESSION;
    PACK("persist", &pers, 1, PMIX_PERSIST);
    pmix_scope_t scope = PMIX_GLOBAL;
    PACK("scope", &scope, 1, PMIX_SCOPE);
    pmix_data_range_t range = PMIX_RANGE_NAMESPACE;
    PACK("range", &range, 1, PMIX_DATA_RANGE);
    pmix_info_directives_t dirs = PMIX_INFO_REQD;
    PACK("directives", &dirs, 1, PMIX_INFO_DIRECTIVES);
    pmix_data_type_t dt = PMIX_PROC_INFO;
    PACK("data_type", &dt, 1, PMIX_DATA_TYPE);
    pmix_proc_state_t ps = PMIX_PROC_STATE_RUNNING;
    PACK("proc_state", &ps, 1, PMIX_PROC_STATE);
    pmix_envar_t env = {.envar = "PATH", .value = "/bin", .separator = ':'};
    PACK("envar", &env, 1, PMIX_ENVAR);
    pmix_nspace_t ns;
    PMIX_LOAD_NSPACE(ns, "a.namespace");
    PACK("nspace", &ns, 1, PMIX_PROC_NSPACE);

    /* Values of several types, among them a proc and an array held by pointer. */
    pmix_value_t vals[4];
    PMIX_VALUE_LOAD(&vals[0], "in a value", PMIX_STRING);
    uint32_t u = 42;
    PMIX_VALUE_LOAD(&vals[1], &u, PMIX_UINT32);
    PMIX_VALUE_LOAD(&vals[2], &procs[1], PMIX_PROC);
    pmix_data_array_t arr;
    uint16_t elems[3] = {1, 2, 3};
    arr.type = PMIX_UINT16;
    arr.size = 3;
    arr.array = elems;
    vals[3].type = PMIX_DATA_ARRAY;
    vals[3].data.darray = &arr;
    PACK("value", vals, 4, PMIX_VALUE);

    /* Infos, one holding a data array of infos. */
    pmix_info_t inner[2];
    PMIX_INFO_LOAD(&inner[0], "inner.one", "x", PMIX_STRING);
    int64_t big = -77;
    PMIX_INFO_LOAD(&inner[1], "inner.two", &big, PMIX_INT64);
    pmix_data_array_t infos = {.type = PMIX_INFO, .size = 2, .array = inner};
    pmix_info_t info[2];
    PMIX_INFO_LOAD(&info[0], PMIX_JOB_SIZE, &u, PMIX_UINT32);
    PMIX_INFO_REQUIRED(&info[0]);
    PMIX_INFO_LOAD(&info[1], "outer", &infos, PMIX_DATA_ARRAY);
    PACK("info", info, 2, PMIX_INFO);

    /* A data array of strings. */
    pmix_data_array_t sarr = {.type = PMIX_STRING, .size = 3, .array = strs};
    PACK("data_array", &sarr, 1, PMIX_DATA_ARRAY);

    *bufp = buf;
    return packs;
}

/* ---- printing what was unpacked ---- */

static void print_value(const pmix_value_t *v);

static void print_proc(const pmix_proc_t *p)
{
    printf(" %s.%u", p->nspace, p->rank);
}

static void print_info(const pmix_info_t *i)
{
    printf(" {%s flags=%u", i->key, i->flags);
    print_value(&i->value);
    printf("}");
}

static void print_array(const pmix_data_array_t *a)
{
    printf(" [type=%u n=%zu", a->type, a->size);
    for (size_t k = 0; k < a->size; k++) {
        switch (a->type) {
        case PMIX_STRING:
            printf(" '%s'", ((char **) a->array)[k]);
            break;
        case PMIX_UINT16:
            printf(" %u", ((uint16_t *) a->array)[k]);
            break;
        case PMIX_INFO:
            print_info(&((pmix_info_t *) a->array)[k]);
            break;
        default:
            printf(" ?");
        }
    }
    printf("]");
}

static void print_value(const pmix_value_t *v)
{
    printf(" <%u", v->type);
    switch (v->type) {
    case PMIX_STRING:
        printf(" '%s'", v->data.string);
        break;
    case PMIX_UINT32:
        printf(" %u", v->data.uint32);
        break;
    case PMIX_INT64:
        printf(" %lld", (long long) v->data.int64);
        break;
    case PMIX_PROC:
        print_proc(v->data.proc);
        break;
    case PMIX_DATA_ARRAY:
        print_array(v->data.darray);
        break;
    default:
        printf(" ?");
    }
    printf(">");
}

#define UNPACK(what, dst, n, type)                                                   \
    do {                                                                             \
        int32_t n_ = (n);                                                            \
        pmix_status_t rc_ = PMIx_Data_unpack(NULL, buf, (dst), &n_, (type));         \
        if (PMIX_SUCCESS != rc_) {                                                   \
            fail("unpack " what, rc_);                                               \
        }                                                                            \
        if (n_ != (n)) {                                                             \
            fprintf(stderr, "FAIL unpack %s: %d values, not %d\n", what, n_, (n));   \
            exit(1);                                                                 \
        }                                                                            \
        printf("%s", what);                                                          \
    } while (0)

static void unpack_all(pmix_data_buffer_t *buf)
{
    int32_t i32[3];
    UNPACK("int32", i32, 3, PMIX_INT32);
    printf(" %d %d %d\n", i32[0], i32[1], i32[2]);
    char *strs[3];
    UNPACK("string", strs, 3, PMIX_STRING);
    printf(" '%s' '%s' '%s'\n", strs[0], strs[1], strs[2]);
    bool bools[2];
    UNPACK("bool", bools, 2, PMIX_BOOL);
    printf(" %d %d\n", bools[0], bools[1]);
    uint8_t bytes[3];
    UNPACK("byte", bytes, 3, PMIX_BYTE);
    printf(" %u %u %u\n", bytes[0], bytes[1], bytes[2]);
    int8_t i8;
    UNPACK("int8", &i8, 1, PMIX_INT8);
    printf(" %d\n", i8);
    int16_t i16[2];
    UNPACK("int16", i16, 2, PMIX_INT16);
    printf(" %d %d\n", i16[0], i16[1]);
    int64_t i64[2];
    UNPACK("int64", i64, 2, PMIX_INT64);
    printf(" %lld %lld\n", (long long) i64[0], (long long) i64[1]);
    uint8_t u8;
    UNPACK("uint8", &u8, 1, PMIX_UINT8);
    printf(" %u\n", u8);
    uint16_t u16[2];
    UNPACK("uint16", u16, 2, PMIX_UINT16);
    printf(" %u %u\n", u16[0], u16[1]);
    uint32_t u32[2];
    UNPACK("uint32", u32, 2, PMIX_UINT32);
    printf(" %u %u\n", u32[0], u32[1]);
    uint64_t u64[2];
    UNPACK("uint64", u64, 2, PMIX_UINT64);
    printf(" %llu %llu\n", (unsigned long long) u64[0], (unsigned long long) u64[1]);
    size_t sz;
    UNPACK("size", &sz, 1, PMIX_SIZE);
    printf(" %zu\n", sz);
    pid_t pid;
    UNPACK("pid", &pid, 1, PMIX_PID);
    printf(" %d\n", (int) pid);
    int ints[2];
    UNPACK("int", ints, 2, PMIX_INT);
    printf(" %d %d\n", ints[0], ints[1]);
    unsigned int uints[1];
    UNPACK("uint", uints, 1, PMIX_UINT);
    printf(" %u\n", uints[0]);
    float f;
    UNPACK("float", &f, 1, PMIX_FLOAT);
    printf(" %f\n", f);
    double d[2];
    UNPACK("double", d, 2, PMIX_DOUBLE);
    printf(" %f %f\n", d[0], d[1]);
    struct timeval tv;
    UNPACK("timeval", &tv, 1, PMIX_TIMEVAL);
    printf(" %ld.%06ld\n", (long) tv.tv_sec, (long) tv.tv_usec);
    time_t t;
    UNPACK("time", &t, 1, PMIX_TIME);
    printf(" %ld\n", (long) t);
    pmix_status_t st[2];
    UNPACK("status", st, 2, PMIX_STATUS);
    printf(" %d %d\n", st[0], st[1]);
    pmix_rank_t ranks[2];
    UNPACK("rank", ranks, 2, PMIX_PROC_RANK);
    printf(" %u %u\n", ranks[0], ranks[1]);
    pmix_proc_t procs[2];
    UNPACK("proc", procs, 2, PMIX_PROC);
    print_proc(&procs[0]);
    print_proc(&procs[1]);
    printf("\n");
    pmix_byte_object_t bo;
    UNPACK("byte_object", &bo, 1, PMIX_BYTE_OBJECT);
    printf(" size=%zu", bo.size);
    for (size_t k = 0; k < bo.size; k++) {
        printf(" %02x", (unsigned char) bo.bytes[k]);
    }
    printf("\n");
    pmix_persistence_t pers;
    UNPACK("persist", &pers, 1, PMIX_PERSIST);
    printf(" %u\n", pers);
    pmix_scope_t scope;
    UNPACK("scope", &scope, 1, PMIX_SCOPE);
    printf(" %u\n", scope);
    pmix_data_range_t range;
    UNPACK("range", &range, 1, PMIX_DATA_RANGE);
    printf(" %u\n", range);
    pmix_info_directives_t dirs;
    UNPACK("directives", &dirs, 1, PMIX_INFO_DIRECTIVES);
    printf(" %u\n", dirs);
    pmix_data_type_t dt;
    UNPACK("data_type", &dt, 1, PMIX_DATA_TYPE);
    printf(" %u\n", dt);
    pmix_proc_state_t ps;
    UNPACK("proc_state", &ps, 1, PMIX_PROC_STATE);
    printf(" %u\n", ps);
    pmix_envar_t env;
    UNPACK("envar", &env, 1, PMIX_ENVAR);
    printf(" %s=%s sep=%c\n", env.envar, env.value, env.separator);
    pmix_nspace_t ns;
    UNPACK("nspace", &ns, 1, PMIX_PROC_NSPACE);
    printf(" %s\n", ns);
    pmix_value_t vals[4];
    UNPACK("value", vals, 4, PMIX_VALUE);
    for (int k = 0; k < 4; k++) {
        print_value(&vals[k]);
    }
    printf("\n");
    pmix_info_t info[2];
    UNPACK("info", info, 2, PMIX_INFO);
    print_info(&info[0]);
    print_info(&info[1]);
    printf("\n");
    pmix_data_array_t arr;
    UNPACK("data_array", &arr, 1, PMIX_DATA_ARRAY);
    print_array(&arr);
    printf("\n");

    int32_t more = 1;
    int32_t one;
    printf("end %d\n", PMIx_Data_unpack(NULL, buf, &one, &more, PMIX_INT32));
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: pmix_capi_pack pack|unpack FILE\n");
        return 2;
    }
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    if (PMIX_SUCCESS != rc) {
        fail("PMIx_Init", rc);
    }
    pmix_data_buffer_t buf;
    PMIX_DATA_BUFFER_CONSTRUCT(&buf);
    if (0 == strcmp(argv[1], "pack")) {
        int packs = pack_all(&buf);
        pmix_byte_object_t bo;
        PMIX_DATA_BUFFER_UNLOAD(&buf, bo.bytes, bo.size);
        FILE *out = fopen(argv[2], "wb");
        if (NULL == out || bo.size != fwrite(bo.bytes, 1, bo.size, out) || 0 != fclose(out)) {
            fprintf(stderr, "FAIL writing %s\n", argv[2]);
            return 1;
        }
        for (size_t k = 0; k < bo.size; k++) {
            printf("%s%02x%s", 0 == k % 32 ? "bytes " : "", (unsigned char) bo.bytes[k],
                   (31 == k % 32 || k + 1 == bo.size) ? "\n" : "");
        }
        printf("packed %d\n", packs);
        free(bo.bytes);
    } else if (0 == strcmp(argv[1], "unpack")) {
        FILE *in = fopen(argv[2], "rb");
        if (NULL == in) {
            fprintf(stderr, "FAIL reading %s\n", argv[2]);
            return 1;
        }
        char *bytes = malloc(1 << 16);
        size_t n = fread(bytes, 1, 1 << 16, in);
        fclose(in);
        PMIX_DATA_BUFFER_LOAD(&buf, bytes, n);
        unpack_all(&buf);
        PMIX_DATA_BUFFER_DESTRUCT(&buf);
    } else {
        fprintf(stderr, "usage: pmix_capi_pack pack|unpack FILE\n");
        return 2;
    }
    rc = PMIx_Finalize(NULL, 0);
    if (PMIX_SUCCESS != rc) {
        fail("PMIx_Finalize", rc);
    }
    return 0;
}

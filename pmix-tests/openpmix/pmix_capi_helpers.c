/*
 * pmix_capi_helpers.c - the helper functions OpenPMIx 5's headers call from their macros
 * (argv lists, PMIx_Setenv, info flags and truth, process checks, structure
 * create/construct/destruct/free), which 4.2's headers do inline: so this program declares
 * them itself, looks them up in the loaded libpmix (dlsym), and runs on a library that has
 * them: OpenPMIx 5.0.11's or pmix-capi (pmix-rs's libpmix.so.2), through LD_LIBRARY_PATH.
 * pmix-tests/tests/capi.rs runs it on both (no server: these need no init) and compares what
 * they print, one line per check, "<what> <result>". A library without one of them fails
 * the program with "FAIL rank=-1: the loaded libpmix has no <name>" and exit status 2.
 *
 * Build: gcc -O1 -Wall -Wextra -o pmix_capi_helpers pmix_capi_helpers.c \
 *          $(pkg-config --cflags --libs pmix)
 */
#include <pmix.h>

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* OpenPMIx 5's functions (declared in 5.0's pmix_deprecated.h and pmix.h, absent from 4.2's
 * headers), looked up in the loaded libpmix at start: the program is linked against Debian's
 * 4.2 and run on a library that has them. Each call below goes through its pointer. */
static int (*PMIx_Argv_count_p)(char **a);
static pmix_status_t (*PMIx_Argv_prepend_nosize_p)(char ***argv, const char *arg);
static pmix_status_t (*PMIx_Argv_append_unique_nosize_p)(char ***argv, const char *arg);
static void (*PMIx_Argv_free_p)(char **argv);
static char ** (*PMIx_Argv_split_p)(const char *src_string, int delimiter);
static char ** (*PMIx_Argv_split_with_empty_p)(const char *src_string, int delimiter);
static char * (*PMIx_Argv_join_p)(char **argv, int delimiter);
static char ** (*PMIx_Argv_copy_p)(char **argv);
static pmix_status_t (*PMIx_Argv_append_nosize_p)(char ***argv, const char *arg);
static pmix_status_t (*PMIx_Setenv_p)(const char *name, const char *value, bool overwrite, char ***env);
static void (*PMIx_Info_required_p)(pmix_info_t *p);
static void (*PMIx_Info_optional_p)(pmix_info_t *p);
static bool (*PMIx_Info_is_required_p)(const pmix_info_t *p);
static bool (*PMIx_Info_is_optional_p)(const pmix_info_t *p);
static void (*PMIx_Info_processed_p)(pmix_info_t *p);
static bool (*PMIx_Info_was_processed_p)(const pmix_info_t *p);
static void (*PMIx_Info_set_end_p)(pmix_info_t *p);
static bool (*PMIx_Info_is_end_p)(const pmix_info_t *p);
static void (*PMIx_Info_qualifier_p)(pmix_info_t *p);
static bool (*PMIx_Info_is_qualifier_p)(const pmix_info_t *p);
static void (*PMIx_Info_persistent_p)(pmix_info_t *p);
static bool (*PMIx_Info_is_persistent_p)(const pmix_info_t *p);
static int (*PMIx_Value_true_p)(const pmix_value_t *v);
static int (*PMIx_Info_true_p)(const pmix_info_t *p);
static bool (*PMIx_Check_reserved_key_p)(const char *key);
static bool (*PMIx_Nspace_invalid_p)(const char *nspace);
static bool (*PMIx_Check_rank_p)(pmix_rank_t a, pmix_rank_t b);
static bool (*PMIx_Check_procid_p)(const pmix_proc_t *a, const pmix_proc_t *b);
static bool (*PMIx_Procid_invalid_p)(const pmix_proc_t *p);
static void (*PMIx_Xfer_procid_p)(pmix_proc_t *dst, const pmix_proc_t *src);
static pmix_byte_object_t * (*PMIx_Byte_object_create_p)(size_t n);
static void (*PMIx_Byte_object_load_p)(pmix_byte_object_t *b, char *d, size_t sz);
static void (*PMIx_Byte_object_destruct_p)(pmix_byte_object_t *b);
static pmix_envar_t * (*PMIx_Envar_create_p)(size_t n);
static void (*PMIx_Envar_load_p)(pmix_envar_t *e, char *var, char *value, char separator);
static void (*PMIx_Envar_destruct_p)(pmix_envar_t *e);
static pmix_query_t * (*PMIx_Query_create_p)(size_t n);
static void (*PMIx_Query_qualifiers_create_p)(pmix_query_t *p, size_t n);
static void (*PMIx_Query_release_p)(pmix_query_t *p);
static void (*PMIx_App_construct_p)(pmix_app_t *p);
static void (*PMIx_App_info_create_p)(pmix_app_t *p, size_t n);
static void (*PMIx_App_destruct_p)(pmix_app_t *p);
static pmix_pdata_t * (*PMIx_Pdata_create_p)(size_t n);
#define PMIx_Argv_count PMIx_Argv_count_p
#define PMIx_Argv_prepend_nosize PMIx_Argv_prepend_nosize_p
#define PMIx_Argv_append_unique_nosize PMIx_Argv_append_unique_nosize_p
#define PMIx_Argv_free PMIx_Argv_free_p
#define PMIx_Argv_split PMIx_Argv_split_p
#define PMIx_Argv_split_with_empty PMIx_Argv_split_with_empty_p
#define PMIx_Argv_join PMIx_Argv_join_p
#define PMIx_Argv_copy PMIx_Argv_copy_p
#define PMIx_Argv_append_nosize PMIx_Argv_append_nosize_p
#define PMIx_Setenv PMIx_Setenv_p
#define PMIx_Info_required PMIx_Info_required_p
#define PMIx_Info_optional PMIx_Info_optional_p
#define PMIx_Info_is_required PMIx_Info_is_required_p
#define PMIx_Info_is_optional PMIx_Info_is_optional_p
#define PMIx_Info_processed PMIx_Info_processed_p
#define PMIx_Info_was_processed PMIx_Info_was_processed_p
#define PMIx_Info_set_end PMIx_Info_set_end_p
#define PMIx_Info_is_end PMIx_Info_is_end_p
#define PMIx_Info_qualifier PMIx_Info_qualifier_p
#define PMIx_Info_is_qualifier PMIx_Info_is_qualifier_p
#define PMIx_Info_persistent PMIx_Info_persistent_p
#define PMIx_Info_is_persistent PMIx_Info_is_persistent_p
#define PMIx_Value_true PMIx_Value_true_p
#define PMIx_Info_true PMIx_Info_true_p
#define PMIx_Check_reserved_key PMIx_Check_reserved_key_p
#define PMIx_Nspace_invalid PMIx_Nspace_invalid_p
#define PMIx_Check_rank PMIx_Check_rank_p
#define PMIx_Check_procid PMIx_Check_procid_p
#define PMIx_Procid_invalid PMIx_Procid_invalid_p
#define PMIx_Xfer_procid PMIx_Xfer_procid_p
#define PMIx_Byte_object_create PMIx_Byte_object_create_p
#define PMIx_Byte_object_load PMIx_Byte_object_load_p
#define PMIx_Byte_object_destruct PMIx_Byte_object_destruct_p
#define PMIx_Envar_create PMIx_Envar_create_p
#define PMIx_Envar_load PMIx_Envar_load_p
#define PMIx_Envar_destruct PMIx_Envar_destruct_p
#define PMIx_Query_create PMIx_Query_create_p
#define PMIx_Query_qualifiers_create PMIx_Query_qualifiers_create_p
#define PMIx_Query_release PMIx_Query_release_p
#define PMIx_App_construct PMIx_App_construct_p
#define PMIx_App_info_create PMIx_App_info_create_p
#define PMIx_App_destruct PMIx_App_destruct_p
#define PMIx_Pdata_create PMIx_Pdata_create_p

/* Points each of them at the loaded library's function, or fails naming the first missing. */
static void load_functions(void)
{
#define LOAD(name)                                                                  \
    do {                                                                            \
        *(void **) &name##_p = dlsym(RTLD_DEFAULT, #name);                         \
        if (name##_p == NULL) {                                                     \
            fprintf(stderr, "FAIL rank=-1: the loaded libpmix has no %s\n", #name); \
            exit(2);                                                                \
        }                                                                           \
    } while (0)
    /* LOAD's # and ## take the names as written, not as the #defines above redirect them. */
    LOAD(PMIx_Argv_count);
    LOAD(PMIx_Argv_prepend_nosize);
    LOAD(PMIx_Argv_append_unique_nosize);
    LOAD(PMIx_Argv_free);
    LOAD(PMIx_Argv_split);
    LOAD(PMIx_Argv_split_with_empty);
    LOAD(PMIx_Argv_join);
    LOAD(PMIx_Argv_copy);
    LOAD(PMIx_Argv_append_nosize);
    LOAD(PMIx_Setenv);
    LOAD(PMIx_Info_required);
    LOAD(PMIx_Info_optional);
    LOAD(PMIx_Info_is_required);
    LOAD(PMIx_Info_is_optional);
    LOAD(PMIx_Info_processed);
    LOAD(PMIx_Info_was_processed);
    LOAD(PMIx_Info_set_end);
    LOAD(PMIx_Info_is_end);
    LOAD(PMIx_Info_qualifier);
    LOAD(PMIx_Info_is_qualifier);
    LOAD(PMIx_Info_persistent);
    LOAD(PMIx_Info_is_persistent);
    LOAD(PMIx_Value_true);
    LOAD(PMIx_Info_true);
    LOAD(PMIx_Check_reserved_key);
    LOAD(PMIx_Nspace_invalid);
    LOAD(PMIx_Check_rank);
    LOAD(PMIx_Check_procid);
    LOAD(PMIx_Procid_invalid);
    LOAD(PMIx_Xfer_procid);
    LOAD(PMIx_Byte_object_create);
    LOAD(PMIx_Byte_object_load);
    LOAD(PMIx_Byte_object_destruct);
    LOAD(PMIx_Envar_create);
    LOAD(PMIx_Envar_load);
    LOAD(PMIx_Envar_destruct);
    LOAD(PMIx_Query_create);
    LOAD(PMIx_Query_qualifiers_create);
    LOAD(PMIx_Query_release);
    LOAD(PMIx_App_construct);
    LOAD(PMIx_App_info_create);
    LOAD(PMIx_App_destruct);
    LOAD(PMIx_Pdata_create);
#undef LOAD
}

/* Prints "<what> [a][b]..." for a list (NULL: "NULL"). */
static void print_list(const char *what, char **l)
{
    printf("%s", what);
    if (l == NULL)
        printf(" NULL");
    for (size_t i = 0; l != NULL && l[i] != NULL; i++)
        printf(" [%s]", l[i]);
    printf("\n");
}

static void lists(void)
{
    char **l = PMIx_Argv_split("a,b,,c", ',');
    print_list("split", l);
    printf("count %d\n", PMIx_Argv_count(l));
    char *joined = PMIx_Argv_join(l, ':');
    printf("join [%s]\n", joined);
    free(joined);
    char **copy = PMIx_Argv_copy(l);
    printf("prepend %d\n", PMIx_Argv_prepend_nosize(&copy, "z"));
    printf("unique-new %d\n", PMIx_Argv_append_unique_nosize(&copy, "y"));
    printf("unique-old %d\n", PMIx_Argv_append_unique_nosize(&copy, "a"));
    print_list("edited", copy);
    print_list("original", l);
    PMIx_Argv_free(copy);
    PMIx_Argv_free(l);
    l = PMIx_Argv_split_with_empty("a,b,,c", ',');
    print_list("split-empty", l);
    PMIx_Argv_free(l);
    print_list("split-nothing", PMIx_Argv_split("", ','));
    printf("count-null %d\n", PMIx_Argv_count(NULL));

    char **env = NULL;
    printf("setenv %d\n", PMIx_Setenv("A", "1", true, &env));
    printf("setenv-again %d\n", PMIx_Setenv("B", "2", true, &env));
    printf("setenv-replace %d\n", PMIx_Setenv("A", "3", true, &env));
    printf("setenv-keep %d\n", PMIx_Setenv("B", "4", false, &env));
    print_list("env", env);
    PMIx_Argv_free(env);
    /* The process's own environment. */
    extern char **environ;
    pmix_status_t rc = PMIx_Setenv("PMIX_CAPI_HELPERS", "on", true, &environ);
    printf("setenv-environ %d %s\n", rc, getenv("PMIX_CAPI_HELPERS"));
}

static void flags(void)
{
    pmix_info_t i;
    bool yes = true;
    PMIX_INFO_LOAD(&i, "k", &yes, PMIX_BOOL);
    printf("fresh req=%d opt=%d end=%d qual=%d pers=%d proc=%d\n", PMIx_Info_is_required(&i),
           PMIx_Info_is_optional(&i), PMIx_Info_is_end(&i), PMIx_Info_is_qualifier(&i),
           PMIx_Info_is_persistent(&i), PMIx_Info_was_processed(&i));
    PMIx_Info_required(&i);
    PMIx_Info_set_end(&i);
    PMIx_Info_qualifier(&i);
    PMIx_Info_processed(&i);
    printf("set req=%d opt=%d end=%d qual=%d pers=%d proc=%d flags=%#x\n",
           PMIx_Info_is_required(&i), PMIx_Info_is_optional(&i), PMIx_Info_is_end(&i),
           PMIx_Info_is_qualifier(&i), PMIx_Info_is_persistent(&i), PMIx_Info_was_processed(&i),
           i.flags);
    PMIx_Info_optional(&i);
    PMIx_Info_persistent(&i);
    printf("then req=%d opt=%d pers=%d flags=%#x\n", PMIx_Info_is_required(&i),
           PMIx_Info_is_optional(&i), PMIx_Info_is_persistent(&i), i.flags);
    PMIX_INFO_DESTRUCT(&i);

    const char *strings[] = {"", "  ", "yes", "TRUE", "no", "False", "0", "17", " 00", "maybe"};
    printf("truth");
    for (size_t n = 0; n < sizeof strings / sizeof strings[0]; n++) {
        pmix_value_t v;
        PMIX_VALUE_LOAD(&v, strings[n], PMIX_STRING);
        printf(" [%s]=%d", strings[n], PMIx_Value_true(&v));
        PMIX_VALUE_DESTRUCT(&v);
    }
    bool t = true, f = false;
    int n = 3;
    pmix_value_t v;
    PMIX_VALUE_LOAD(&v, &t, PMIX_BOOL);
    printf(" bool-true=%d", PMIx_Value_true(&v));
    PMIX_VALUE_LOAD(&v, &f, PMIX_BOOL);
    printf(" bool-false=%d", PMIx_Value_true(&v));
    PMIX_VALUE_LOAD(&v, &n, PMIX_INT);
    printf(" int=%d", PMIx_Value_true(&v));
    v.type = PMIX_UNDEF;
    printf(" undef=%d", PMIx_Value_true(&v));
    PMIX_INFO_LOAD(&i, "k", "no", PMIX_STRING);
    printf(" info-no=%d\n", PMIx_Info_true(&i));
    PMIX_INFO_DESTRUCT(&i);
}

static void procs(void)
{
    pmix_proc_t a, b, w, none, inval;
    PMIX_LOAD_PROCID(&a, "ns", 1);
    PMIX_LOAD_PROCID(&b, "ns", 2);
    PMIX_LOAD_PROCID(&w, "ns", PMIX_RANK_WILDCARD);
    PMIX_LOAD_PROCID(&none, "", 1);
    PMIX_LOAD_PROCID(&inval, "ns", PMIX_RANK_INVALID);
    printf("reserved pmix.x=%d pmi=%d user=%d\n", PMIx_Check_reserved_key("pmix.x"),
           PMIx_Check_reserved_key("pmi"), PMIx_Check_reserved_key("user.key"));
    printf("nspace-invalid empty=%d ns=%d\n", PMIx_Nspace_invalid(""), PMIx_Nspace_invalid("ns"));
    printf("rank 1,1=%d 1,2=%d 1,wild=%d\n", PMIx_Check_rank(1, 1), PMIx_Check_rank(1, 2),
           PMIx_Check_rank(1, PMIX_RANK_WILDCARD));
    printf("procid a,a=%d a,b=%d a,w=%d a,none=%d\n", PMIx_Check_procid(&a, &a),
           PMIx_Check_procid(&a, &b), PMIx_Check_procid(&a, &w), PMIx_Check_procid(&a, &none));
    printf("procid-invalid a=%d none=%d inval=%d\n", PMIx_Procid_invalid(&a),
           PMIx_Procid_invalid(&none), PMIx_Procid_invalid(&inval));
    pmix_proc_t c;
    PMIx_Xfer_procid(&c, &b);
    printf("xfer %s %u\n", c.nspace, c.rank);
}

static void structures(void)
{
    pmix_byte_object_t *bo = PMIx_Byte_object_create(1);
    printf("bo-create %d %zu\n", bo->bytes == NULL, bo->size);
    PMIx_Byte_object_load(bo, strdup("abc"), 3);
    printf("bo-load %.3s %zu\n", bo->bytes, bo->size);
    PMIx_Byte_object_destruct(bo);
    printf("bo-destruct %d %zu\n", bo->bytes == NULL, bo->size);
    free(bo);

    pmix_envar_t *e = PMIx_Envar_create(1);
    PMIx_Envar_load(e, "PATH", "/bin", ':');
    printf("envar %s %s %c\n", e->envar, e->value, e->separator);
    PMIx_Envar_destruct(e);
    printf("envar-destruct %d %d\n", e->envar == NULL, e->value == NULL);
    free(e);

    pmix_query_t *q = PMIx_Query_create(1);
    PMIx_Argv_append_nosize(&q->keys, PMIX_QUERY_NAMESPACES);
    PMIx_Query_qualifiers_create(q, 2);
    printf("query nqual=%zu keys=%d\n", q->nqual, PMIx_Argv_count(q->keys));
    PMIx_Query_release(q);

    pmix_app_t app;
    PMIx_App_construct(&app);
    PMIx_App_info_create(&app, 3);
    app.cmd = strdup("x");
    printf("app ninfo=%zu cmd=%s\n", app.ninfo, app.cmd);
    PMIx_App_destruct(&app);
    printf("app-destruct cmd=%d info=%d\n", app.cmd == NULL, app.info == NULL);

    pmix_pdata_t *pd = PMIx_Pdata_create(2);
    printf("pdata type=%d\n", pd[1].value.type);
    PMIX_PDATA_FREE(pd, 2);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    load_functions();
    lists();
    flags();
    procs();
    structures();
    return 0;
}

/*
 * pmix_fail.h - how the libpmix test programs of this directory fail, in one place: the
 * tests read "FAIL rank=R: <what>" on stderr and exit status 2 (distinct from abort codes).
 *
 * The including program defines `static int fail_rank(void)` (its rank, -1 when unknown)
 * before including this file, after <pmix.h>.
 */
#ifndef PMIX_TESTS_PMIX_FAIL_H
#define PMIX_TESTS_PMIX_FAIL_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* Prints "FAIL rank=R: <message>" on stderr and exits 2. */
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL rank=%d: ", fail_rank());
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stderr);
    exit(2);
}

/* A PMIx call that must succeed. */
#define MUST(call)                                                                      \
    do {                                                                                \
        pmix_status_t must_rc_ = (call);                                                \
        if (must_rc_ != PMIX_SUCCESS)                                                   \
            fail("%s returned %s (%d)", #call, PMIx_Error_string(must_rc_), must_rc_); \
    } while (0)

#endif

/*
 * cpu_time.h - the CPU time of a bench rank and of its parent: under a launcher, the daemon that
 * started this rank (pmixrun's node daemon, prted, orted, slurmstepd, hydra_pmi_proxy), so
 * that a bench rank can say how much CPU its daemon spent on a loop of collectives, in the
 * same run as their latency (both ranks of a node read the same daemon), and what the rank
 * itself (its library's threads included) spent.
 *
 * The sum over the parent's threads of the run time the scheduler accounts in nanoseconds
 * (/proc/<ppid>/task/<tid>/schedstat, first field); where the kernel has no schedstat, the
 * utime and stime of /proc/<ppid>/stat in clock ticks. Threads that end between two
 * readings take their time with them: the daemons measured keep theirs for the job's life.
 */
#ifndef XTASK_CPU_TIME_H
#define XTASK_CPU_TIME_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* The parent's CPU time in nanoseconds, -1 if it cannot be read. */
static inline double parent_cpu_ns(void)
{
    char path[128];
    pid_t parent = getppid();
    snprintf(path, sizeof path, "/proc/%d/task", (int) parent);
    DIR *tasks = opendir(path);
    if (tasks != NULL) {
        struct dirent *t;
        double sum = 0;
        int read = 0;
        while ((t = readdir(tasks)) != NULL) {
            if (t->d_name[0] == '.') {
                continue;
            }
            char stat_path[300];
            unsigned long long ns;
            snprintf(stat_path, sizeof stat_path, "%s/%s/schedstat", path, t->d_name);
            FILE *f = fopen(stat_path, "r");
            if (f == NULL) {
                continue;
            }
            if (fscanf(f, "%llu", &ns) == 1) {
                sum += (double) ns;
                read++;
            }
            fclose(f);
        }
        closedir(tasks);
        if (read > 0) {
            return sum;
        }
    }
    /* No schedstat: utime and stime, fields 14 and 15, after the command's parentheses. */
    snprintf(path, sizeof path, "/proc/%d/stat", (int) parent);
    FILE *f = fopen(path, "r");
    char buf[1024];
    size_t n = f != NULL ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f != NULL) {
        fclose(f);
    }
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    unsigned long long utime, stime;
    if (p == NULL
        || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime)
               != 2) {
        return -1;
    }
    return (double) (utime + stime) * 1e9 / (double) sysconf(_SC_CLK_TCK);
}

/* The parent's command name (/proc/<ppid>/comm) into buf, "?" if unknown. */
static inline void parent_name(char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/comm", (int) getppid());
    FILE *f = fopen(path, "r");
    snprintf(buf, len, "?");
    if (f != NULL) {
        if (fgets(buf, (int) len, f) != NULL) {
            buf[strcspn(buf, "\n")] = '\0';
        }
        fclose(f);
    }
}

/* This process's CPU time (every thread's, user and system) in nanoseconds, -1 if unknown. */
static inline double self_cpu_ns(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) {
        return -1;
    }
    return ((double) (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e9
            + (double) (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e3);
}

/* A reading of both clocks. */
typedef struct {
    double parent_ns, self_ns;
} cpu_mark_t;

static inline cpu_mark_t cpu_mark(void)
{
    cpu_mark_t m = {parent_cpu_ns(), self_cpu_ns()};
    return m;
}

/* Microseconds of CPU per round between two readings; -1 if either failed. */
static inline double cpu_per_round_us(double before_ns, double after_ns, long rounds)
{
    if (before_ns < 0 || after_ns < 0 || rounds <= 0) {
        return -1;
    }
    return (after_ns - before_ns) / 1e3 / (double) rounds;
}

/* The parent's and this process's CPU per round since `from`, over `rounds` rounds. */
static inline void cpu_since(cpu_mark_t from, long rounds, double *parent_us, double *self_us)
{
    cpu_mark_t now = cpu_mark();
    *parent_us = cpu_per_round_us(from.parent_ns, now.parent_ns, rounds);
    *self_us = cpu_per_round_us(from.self_ns, now.self_ns, rounds);
}

#endif

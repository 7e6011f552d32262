//! The conformance scenarios, as data: one entry per row of the matrix.
//!
//! Each row names the rows of `shared/research/tests.md` it covers: the make-check numbers
//! ("00" to "13") and the conformance ids ("C01" to "C17"); "-" marks a row of our own (the
//! launcher's contract, an authentication rule). A row runs `pmixrun` with a scenario client of
//! pmix-tests (`pmix-test-client`, or the name-service, dynamic-process and group clients)
//! and states what the job must produce, from the scenario's meaning: exit status, output
//! lines, pmixrun's one-line reason. A row for a feature not implemented would be listed as
//! skipped (`Plan::Skip`), with the reason, so that the matrix shows what is missing; none is
//! today.
//!
//! The make-check rows that fence across two namespaces (01, 02) get their second namespace
//! from a spawn: the job's rank 0 spawns it, and both fence together (`pmix-dyn-client
//! fence-part` and `fence-both`). Rows 00 and 03-05 run in their one-namespace form: an
//! explicit rank list for 00, a subset of the job with one rank standing aside for 03-05 (as
//! the second namespace stands aside in the original). C15-C17 (regex vectors, churn,
//! malformed input) are library-level tests, not process scenarios, and are not listed.

/// The placeholder for the job's namespace in a scenario argument. pmixrun names its job only
/// when it starts, so such a command runs through `sh`, which fills in `$PMIX_NAMESPACE`.
pub(crate) const NS: &str = "{ns}";

/// One row of the matrix.
pub(crate) struct Scenario {
    /// The tests.md rows it covers ("-" for none).
    pub(crate) ids: &'static [&'static str],
    /// Unique short name, what `--filter` matches besides the ids.
    pub(crate) name: &'static str,
    /// What it shows, in a line.
    pub(crate) about: &'static str,
    /// How to run it, or why it is not run.
    pub(crate) plan: Plan,
}

/// Whether and how a scenario runs.
pub(crate) enum Plan {
    /// Run a job under pmixrun.
    Run(Job),
    /// Not run; the reason is shown in the matrix and does not fail the run. No row is
    /// skipped since C01 runs; kept so that a row for a feature still missing can be listed.
    #[allow(dead_code)]
    Skip(&'static str),
}

/// A pmixrun job and what it must produce.
pub(crate) struct Job {
    /// pmixrun's `--timeout` in seconds. The runner's own deadline is later (see
    /// `exec::DEADLINE_MARGIN`), for a pmixrun that does not end by itself.
    pub(crate) timeout_s: u64,
    /// The application contexts, in rank order.
    pub(crate) apps: &'static [App],
    /// What counts as a pass.
    pub(crate) expect: Expect,
}

/// One application context: `-n np pmix-test-client args...`.
pub(crate) struct App {
    /// The scenario client it runs: a binary of pmix-tests ([`TEST_CLIENT`] mostly).
    pub(crate) bin: &'static str,
    /// Number of processes.
    pub(crate) np: u32,
    /// Arguments of the client (scenario first); [`NS`] stands for the namespace.
    pub(crate) args: &'static [&'static str],
}

/// The outcome a scenario must have.
pub(crate) struct Expect {
    /// pmixrun's exit status.
    pub(crate) status: i32,
    /// What the job writes to stdout.
    pub(crate) stdout: Stdout,
    /// What pmixrun writes to stderr (its own messages, its server's log, the job's stderr).
    pub(crate) stderr: Stderr,
}

/// What stdout must hold; lines are compared as a multiset (ranks write in any order).
pub(crate) enum Stdout {
    /// Every rank passed its checks: each prints pmix-test-client's `ok` line and the
    /// `per_rank` lines (with `{rank}` and `{size}` filled in), plus the `lines` once each;
    /// nothing else.
    Passed {
        /// Lines each rank prints.
        per_rank: &'static [&'static str],
        /// Further lines, once each.
        lines: &'static [&'static str],
    },
    /// Exactly these lines.
    Lines(&'static [&'static str]),
    /// Not checked: the job is killed at a moment the scenario does not fix, so what the
    /// other ranks managed to print is not part of the outcome.
    Unchecked,
}

/// What stderr must hold.
pub(crate) enum Stderr {
    /// Exactly this text ("" for nothing).
    Exactly(&'static str),
    /// One line per rank containing this text (with `{rank}` filled in), and nothing else:
    /// for log lines, whose timestamps and fields vary.
    PerRankContaining(&'static str),
}

/// The general scenario client.
pub(crate) const TEST_CLIENT: &str = "pmix-test-client";
/// The name-service scenario client.
pub(crate) const NAMES_CLIENT: &str = "pmix-names-client";
/// The dynamic-process scenario client (spawn, connect, resolve, events).
pub(crate) const DYN_CLIENT: &str = "pmix-dyn-client";
/// The group scenario client (invite, join, leave, group info).
pub(crate) const GROUP_CLIENT: &str = "pmix-group-client";

/// Default `--timeout` of a job: far above what any row needs (well under a second, two for
/// the timeout rows), low enough that a hang costs little.
const T: u64 = 15;

/// Every rank printed `ok`, the job exited 0 and nobody wrote to stderr.
const PASSED: Expect = Expect {
    status: 0,
    stdout: Stdout::Passed {
        per_rank: &[],
        lines: &[],
    },
    stderr: Stderr::Exactly(""),
};

/// Scenarios whose checks say every rank is on one node, with why: the multi-node column
/// skips them (what they check across nodes is checked by the others).
pub(crate) const ONE_NODE: &[(&str, &str)] = &[
    (
        "tools",
        "one node: tools attach to the root's server only, each rank's here is its daemon's",
    ),
    ("job-info", "one node: checks LOCAL_SIZE == JOB_SIZE"),
    ("put-scopes", "one node: every peer sees LOCAL data"),
    ("resolve-peers", "one node: every rank is a peer here"),
    (
        "spawn-connect-resolve",
        "one node: every rank is a peer here",
    ),
];

/// The scenarios, in matrix order: make-check rows, then the simple-client ones, then our own.
pub(crate) const SCENARIOS: &[Scenario] = &[
    // ---- make check (pmix_test) ----------------------------------------------------------
    Scenario {
        ids: &["00", "C04"],
        name: "fence-list-data",
        about: "blocking fence with data over an explicit rank list; all get each other's keys",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: TEST_CLIENT,
                np: 4,
                args: &["fence", "{ns}:0-3", "db"],
            }],
            expect: PASSED,
        }),
    },
    Scenario {
        ids: &["01", "C04"],
        name: "fence-nspace-plus-rank",
        about: "collecting fence over a whole job plus rank 0 of a job it spawned; the rank \
                left out is read through the server",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: DYN_CLIENT,
                np: 3,
                args: &["fence-part", "spawn", "2"],
            }],
            expect: Expect {
                status: 0,
                stdout: Stdout::Passed {
                    per_rank: &["a {rank}: fenced over a and b 0, held 3 values"],
                    lines: &[
                        "b 0: fenced over a and b 0, held 3 values",
                        "b 1: stayed out of the fence",
                        "ok",
                        "ok",
                    ],
                },
                stderr: Stderr::Exactly(""),
            },
        }),
    },
    Scenario {
        ids: &["02", "C04"],
        name: "fence-two-nspaces",
        about: "collecting fence over a job and the whole job it spawned, with no connect",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: DYN_CLIENT,
                np: 3,
                args: &["fence-both", "spawn", "1"],
            }],
            expect: Expect {
                status: 0,
                stdout: Stdout::Passed {
                    per_rank: &["a {rank}: fenced over a and b, held 3 values"],
                    lines: &["b 0: fenced over a and b, held 3 values", "ok"],
                },
                stderr: Stderr::Exactly(""),
            },
        }),
    },
    Scenario {
        ids: &["03", "C04"],
        name: "fence-subset-barrier-nb",
        about: "non-blocking barrier of ranks 0-2 while rank 3 stays out; gets by direct modex",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: TEST_CLIENT,
                np: 4,
                args: &["fence", "{ns}:0-2", ""],
            }],
            expect: PASSED,
        }),
    },
    Scenario {
        ids: &["04", "C04"],
        name: "fence-subset-barrier",
        about: "blocking barrier of ranks 0-2 while rank 3 stays out; gets by direct modex",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: TEST_CLIENT,
                np: 4,
                args: &["fence", "{ns}:0-2", "b"],
            }],
            expect: PASSED,
        }),
    },
    Scenario {
        ids: &["05", "C04"],
        name: "fence-subset-data-nb",
        about: "non-blocking fence with data of ranks 0-2 (no injected lateness)",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: TEST_CLIENT,
                np: 4,
                args: &["fence", "{ns}:0-2", "d"],
            }],
            expect: PASSED,
        }),
    },
    Scenario {
        ids: &["06", "C04"],
        name: "job-fence-collect",
        about: "job-wide fence collecting data; every peer's put is local afterwards",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: TEST_CLIENT,
                np: 4,
                args: &["fence", "{ns}:", "db"],
            }],
            expect: PASSED,
        }),
    },
    Scenario {
        ids: &["07", "C05"],
        name: "job-fence-dmodex",
        about: "job-wide fence without data; every peer's put arrives by direct modex",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: TEST_CLIENT,
                np: 4,
                args: &["fence", "{ns}:", "b"],
            }],
            expect: PASSED,
        }),
    },
    Scenario {
        ids: &["08", "C08"],
        name: "publish-lookup",
        about: "publish / lookup / unpublish (+_nb), NOT_FOUND after unpublish",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: NAMES_CLIENT,
                np: 3,
                args: &["basic"],
            }],
            expect: PASSED,
        }),
    },
    Scenario {
        ids: &["C08"],
        name: "publish-duplicates",
        about: "duplicate key refused whole, first value kept",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: NAMES_CLIENT,
                np: 2,
                args: &["duplicates"],
            }],
            expect: PASSED,
        }),
    },
    Scenario {
        ids: &["C08"],
        name: "publish-wait",
        about: "lookup with WAIT answered by a later publish",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: NAMES_CLIENT,
                np: 3,
                args: &["wait"],
            }],
            expect: PASSED,
        }),
    },
    Scenario {
        ids: &["C08"],
        name: "publish-wait-timeout",
        about: "lookup with WAIT and TIMEOUT fails with ERR_TIMEOUT",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: NAMES_CLIENT,
                np: 2,
                args: &["wait-timeout"],
            }],
            expect: PASSED,
        }),
    },
    Scenario {
        ids: &["C08"],
        name: "unpublish-rules",
        about: "unpublish: foreign or unknown keys refused, nothing removed",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: NAMES_CLIENT,
                np: 2,
                args: &["unpublish"],
            }],
            expect: PASSED,
        }),
    },
    Scenario {
        ids: &["09", "C11"],
        name: "spawn",
        about: "3 ranks spawn a job of 2 that sees its parent; both jobs fence together",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: DYN_CLIENT,
                np: 3,
                args: &["spawned", "spawn", "2"],
            }],
            expect: Expect {
                status: 0,
                stdout: Stdout::Passed {
                    per_rank: &["a {rank} of 3: b has 2 processes"],
                    lines: &[
                        "b 0 of 2: spawned by a 0 of 3",
                        "b 1 of 2: spawned by a 0 of 3",
                        "ok",
                        "ok",
                    ],
                },
                stderr: Stderr::Exactly(""),
            },
        }),
    },
    Scenario {
        ids: &["10", "C11"],
        name: "connect",
        about: "connect with a spawned job: committed and job data exchanged; disconnect (+_nb)",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: DYN_CLIENT,
                np: 3,
                args: &["exchange+disconnect", "spawn", "2"],
            }],
            expect: Expect {
                status: 0,
                stdout: Stdout::Passed {
                    per_rank: &[
                        "a {rank} of 3: connected to b of 2, read 4 values",
                        "a {rank}: connected and disconnected twice",
                    ],
                    lines: &[
                        "b 0 of 2: connected to a of 3, read 4 values",
                        "b 1 of 2: connected to a of 3, read 4 values",
                        "b 0: connected and disconnected twice",
                        "b 1: connected and disconnected twice",
                        "ok",
                        "ok",
                    ],
                },
                stderr: Stderr::Exactly(""),
            },
        }),
    },
    Scenario {
        ids: &["11", "C11"],
        name: "resolve-peers",
        about: "resolve peers and nodes of both jobs, before and after connect",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: DYN_CLIENT,
                np: 3,
                args: &["resolve", "spawn", "2"],
            }],
            expect: Expect {
                status: 0,
                stdout: Stdout::Passed {
                    per_rank: &["a {rank}: a has 3 and b 2 processes on this node"],
                    lines: &[
                        "b 0: a has 3 and b 2 processes on this node",
                        "b 1: a has 3 and b 2 processes on this node",
                        "ok",
                        "ok",
                    ],
                },
                stderr: Stderr::Exactly(""),
            },
        }),
    },
    Scenario {
        ids: &["12", "C07"],
        name: "replace-keys",
        about: "100 keys put and fenced, 5 replaced and fenced again; every peer sees the new",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: TEST_CLIENT,
                np: 5,
                args: &["replace", "100", "0,1,10,50,99"],
            }],
            expect: PASSED,
        }),
    },
    Scenario {
        ids: &["13", "C07"],
        name: "store-internal",
        about: "store_internal keys are visible to self only",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: TEST_CLIENT,
                np: 5,
                args: &["internal", "10"],
            }],
            expect: PASSED,
        }),
    },
    // ---- simple clients and the C rows ----------------------------------------------------
    Scenario {
        ids: &["C01"],
        name: "init-cycle",
        about: "init/finalize cycles in one process; singleton init without a server",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: TEST_CLIENT,
                np: 3,
                args: &["init-cycle", "3"],
            }],
            expect: PASSED,
        }),
    },
    Scenario {
        ids: &["C02"],
        name: "job-info",
        about: "job-level keys at init, and the values derived from the maps",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: TEST_CLIENT,
                np: 4,
                args: &["jobinfo"],
            }],
            expect: PASSED,
        }),
    },
    Scenario {
        ids: &["C02"],
        name: "app-info",
        about: "two app contexts: app number, app size, leader and app rank of each process",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[
                App {
                    bin: TEST_CLIENT,
                    np: 2,
                    args: &["appinfo", "0", "2"],
                },
                App {
                    bin: TEST_CLIENT,
                    np: 3,
                    args: &["appinfo", "1", "2"],
                },
            ],
            expect: Expect {
                status: 0,
                stdout: Stdout::Passed {
                    per_rank: &[],
                    lines: &[
                        "rank 0 appnum 0 of 2 apps, app size 2, leader 0",
                        "rank 1 appnum 0 of 2 apps, app size 2, leader 0",
                        "rank 2 appnum 1 of 2 apps, app size 3, leader 2",
                        "rank 3 appnum 1 of 2 apps, app size 3, leader 2",
                        "rank 4 appnum 1 of 2 apps, app size 3, leader 2",
                    ],
                },
                stderr: Stderr::Exactly(""),
            },
        }),
    },
    Scenario {
        ids: &["C03"],
        name: "put-scopes",
        about: "LOCAL and GLOBAL seen by node peers, REMOTE not; get of all a peer's data",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: TEST_CLIENT,
                np: 3,
                args: &["scope"],
            }],
            expect: PASSED,
        }),
    },
    Scenario {
        ids: &["C04"],
        name: "allgather-8",
        about: "8 ranks put, fence with data and read every rank back",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: TEST_CLIENT,
                np: 8,
                args: &["allgather"],
            }],
            expect: Expect {
                status: 0,
                stdout: Stdout::Passed {
                    per_rank: &["rank {rank} of {size}: saw all {size} values"],
                    lines: &[],
                },
                stderr: Stderr::Exactly(""),
            },
        }),
    },
    Scenario {
        ids: &["C05", "C06"],
        name: "get-semantics",
        about: "get waits for a commit; IMMEDIATE, OPTIONAL, TIMEOUT, NOT_FOUND; reserved keys",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: TEST_CLIENT,
                np: 3,
                args: &["get-semantics"],
            }],
            expect: PASSED,
        }),
    },
    Scenario {
        ids: &["C09"],
        name: "fence-timeout",
        about: "a fence only rank 0 joins fails with ERR_TIMEOUT; the next job fence completes",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: TEST_CLIENT,
                np: 3,
                args: &["fence-timeout"],
            }],
            expect: PASSED,
        }),
    },
    Scenario {
        ids: &["C10"],
        name: "abort",
        about: "rank 0 aborts while the others wait in a fence: the job ends with its status",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: TEST_CLIENT,
                np: 3,
                args: &["abort", "5"],
            }],
            expect: Expect {
                status: 5,
                stdout: Stdout::Unchecked,
                stderr: Stderr::Exactly(
                    "pmixrun: rank 0 called abort with status 5: test abort; killing the job\n",
                ),
            },
        }),
    },
    Scenario {
        ids: &["C10"],
        name: "exit-without-finalize",
        about: "rank 2 exits 3 without finalize while the others wait: the job ends with 3",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: TEST_CLIENT,
                np: 4,
                args: &["exit-rank", "2", "3"],
            }],
            expect: Expect {
                status: 3,
                stdout: Stdout::Unchecked,
                stderr: Stderr::Exactly(
                    "pmixrun: rank 2 exited with status 3 without calling finalize; \
                         killing the job\n",
                ),
            },
        }),
    },
    Scenario {
        ids: &["C10"],
        name: "exit-zero-without-finalize",
        about: "rank 1 exits 0 without finalize: still a failure of the job",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: TEST_CLIENT,
                np: 2,
                args: &["exit-rank", "1", "0"],
            }],
            expect: Expect {
                status: 1,
                stdout: Stdout::Unchecked,
                stderr: Stderr::Exactly(
                    "pmixrun: rank 1 exited with status 0 without calling finalize; \
                         killing the job\n",
                ),
            },
        }),
    },
    Scenario {
        ids: &["C11"],
        name: "spawn-connect-resolve",
        about: "spawn a child job, connect to it, resolve peers and nodes, disconnect",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: DYN_CLIENT,
                np: 3,
                args: &["spawned+exchange+resolve+disconnect", "spawn", "2"],
            }],
            expect: Expect {
                status: 0,
                stdout: Stdout::Passed {
                    per_rank: &[
                        "a {rank} of 3: b has 2 processes",
                        "a {rank} of 3: connected to b of 2, read 4 values",
                        "a {rank}: a has 3 and b 2 processes on this node",
                        "a {rank}: connected and disconnected twice",
                    ],
                    lines: &[
                        "b 0 of 2: spawned by a 0 of 3",
                        "b 1 of 2: spawned by a 0 of 3",
                        "b 0 of 2: connected to a of 3, read 4 values",
                        "b 1 of 2: connected to a of 3, read 4 values",
                        "b 0: a has 3 and b 2 processes on this node",
                        "b 1: a has 3 and b 2 processes on this node",
                        "b 0: connected and disconnected twice",
                        "b 1: connected and disconnected twice",
                        "ok",
                        "ok",
                    ],
                },
                stderr: Stderr::Exactly(""),
            },
        }),
    },
    Scenario {
        ids: &["C12"],
        name: "events",
        about: "NAMESPACE, CUSTOM and PROC_LOCAL ranges across a job and its spawned job; deregistration",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: DYN_CLIENT,
                np: 3,
                args: &["events", "spawn", "2"],
            }],
            expect: Expect {
                status: 0,
                stdout: Stdout::Passed {
                    per_rank: &[],
                    lines: &[
                        "a 0: received 1 events as the ranges say",
                        "a 1: received 1 events as the ranges say",
                        "a 2: received 2 events as the ranges say",
                        "b 0: received 2 events as the ranges say",
                        "b 1: received 1 events as the ranges say",
                        "ok",
                        "ok",
                    ],
                },
                stderr: Stderr::Exactly(""),
            },
        }),
    },
    Scenario {
        ids: &["C13"],
        name: "groups",
        about: "group construct with context ids (all ranks, then pairs) and destruct",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: TEST_CLIENT,
                np: 5,
                args: &["groups"],
            }],
            expect: PASSED,
        }),
    },
    Scenario {
        ids: &["C13"],
        name: "group-invite",
        about: "group by invitation: two invitees accept, one leaves, the others destruct",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: GROUP_CLIENT,
                np: 3,
                args: &["accept-destruct"],
            }],
            expect: Expect {
                status: 0,
                stdout: Stdout::Lines(&[
                    "invited rank=0",
                    "joined rank=1 leader=0 members=3",
                    "joined rank=2 leader=0 members=3",
                    "left rank=1",
                    "heard rank=0 left=1",
                    "heard rank=2 left=1",
                    "destructed rank=0",
                    "destructed rank=2",
                ]),
                stderr: Stderr::Exactly(""),
            },
        }),
    },
    Scenario {
        ids: &["C13"],
        name: "group-invite-declined",
        about: "an invitation declined fails the leader's invite",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: GROUP_CLIENT,
                np: 2,
                args: &["decline"],
            }],
            expect: Expect {
                status: 0,
                stdout: Stdout::Lines(&["declining rank=1", "declined rank=0 by=1"]),
                stderr: Stderr::Exactly(""),
            },
        }),
    },
    Scenario {
        ids: &["C13"],
        name: "group-invitee-ends",
        about: "an invitee that finalizes without answering fails the invite",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: GROUP_CLIENT,
                np: 2,
                args: &["ends"],
            }],
            expect: Expect {
                status: 0,
                stdout: Stdout::Lines(&["ending rank=1", "failed rank=0 affected=1"]),
                stderr: Stderr::Exactly(""),
            },
        }),
    },
    Scenario {
        ids: &["C13"],
        name: "group-info",
        about: "local CIDs shared in GROUP_INFO, read back under the context id",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: GROUP_CLIENT,
                np: 3,
                args: &["lcid"],
            }],
            expect: Expect {
                status: 0,
                stdout: Stdout::Lines(&[
                    "lcid rank=0 cids=1000,1010,1020 other=ERR_NOT_FOUND",
                    "lcid rank=1 cids=1000,1010,1020 other=ERR_NOT_FOUND",
                    "lcid rank=2 cids=1000,1010,1020 other=ERR_NOT_FOUND",
                ]),
                stderr: Stderr::Exactly(""),
            },
        }),
    },
    Scenario {
        ids: &["C14"],
        name: "tools",
        about: "tool init (by the server's namespace), process-table query, finalize; the \
                job goes on",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: TEST_CLIENT,
                np: 3,
                args: &["tool"],
            }],
            expect: PASSED,
        }),
    },
    // ---- ours: the launcher's contract and the authentication rules -----------------------
    Scenario {
        ids: &["-"],
        name: "launcher-timeout",
        about: "a job that hangs is killed by pmixrun --timeout, exit 124",
        plan: Plan::Run(Job {
            timeout_s: 1,
            apps: &[App {
                bin: TEST_CLIENT,
                np: 3,
                args: &["hang"],
            }],
            expect: Expect {
                status: 124,
                stdout: Stdout::Lines(&["ready", "ready", "ready"]),
                stderr: Stderr::Exactly(
                    "pmixrun: the job did not finish within --timeout 1 s; killing the job\n",
                ),
            },
        }),
    },
    Scenario {
        ids: &["-"],
        name: "double-init",
        about: "a second init as the same process is refused (ERR_EXISTS); the first works on",
        plan: Plan::Run(Job {
            timeout_s: T,
            apps: &[App {
                bin: TEST_CLIENT,
                np: 2,
                args: &["double-init"],
            }],
            expect: Expect {
                status: 0,
                stdout: PASSED.stdout,
                // The server logs each refusal.
                stderr: Stderr::PerRankContaining(":{rank} is already connected"),
            },
        }),
    },
];

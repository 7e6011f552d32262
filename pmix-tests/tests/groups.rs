//! Groups formed by invitation and left, from pmix-rs's client (`pmix-group-client`) and
//! mixed with libpmix 4.2 and 5.0.11 processes (`openpmix/pmix_invite.c`) in one job: the two
//! programs print the same lines, so any rank may run either. Under `pmixrun`, on one node and
//! two logical ones; an invitee killed without finalize under a test server (pmixrun would end
//! the whole job). Every run is bounded by a deadline.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use pmix_server::NoHost;
use pmix_tests::pmixrun_bin;
use pmix_tests::{
    Output, Running, TestHost, assert_ok, cargo_build, openpmix_program, profile_dir, wait_all,
    workspace_bin,
};
use pmix_types::Proc;

/// For one run; each takes well under a second, the timeouts tested a few.
const DEADLINE: Duration = Duration::from_secs(60);

fn group_client() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        cargo_build(&["-p", "pmix-tests", "--bin", "pmix-group-client"]);
        profile_dir().join("pmix-group-client")
    })
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Lib {
    Rust,
    /// `pmix_invite.c` with Debian's libpmix 4.2.
    C,
    /// `pmix_invite.c` with Open MPI 5's OpenPMIx 5.0.11.
    CWheel,
}

fn program(lib: Lib) -> OsString {
    match lib {
        Lib::Rust => group_client().into(),
        Lib::C | Lib::CWheel => openpmix_program("pmix_invite").into(),
    }
}

/// `pmixrun` with the leader (rank 0) running `leader`'s program and the `n - 1` others
/// `others`', all in one job, with `scenario`; on logical nodes `a` (the leader) and `b` when
/// `nodes`. Both C libraries in one job cannot be: `LD_LIBRARY_PATH` is the run's.
fn run(leader: Lib, others: Lib, n: u32, nodes: bool, scenario: &str) -> Output {
    let what = format!("{scenario}: leader {leader:?}, others {others:?}, nodes {nodes}");
    let mut cmd = Command::new(pmixrun_bin());
    if nodes {
        cmd.args(["--launcher", "local", "--host", "a:1,b:3"]);
    }
    cmd.args(["-n", "1"])
        .arg(program(leader))
        .arg(scenario)
        .args([":", "-n", &(n - 1).to_string()])
        .arg(program(others))
        .arg(scenario)
        .env_remove("PMIXRS_NAMESERVER")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if leader == Lib::CWheel || others == Lib::CWheel {
        pmix_tests::use_ompi5_libpmix(&mut cmd);
    }
    let out = Running::start(cmd, &what).finish(Instant::now() + DEADLINE, &what);
    assert_ok(&out, &what);
    out
}

fn lines(out: &Output) -> Vec<&str> {
    let mut l: Vec<&str> = out.stdout.lines().collect();
    l.sort_unstable();
    l
}

/// What `accept` prints; pmix-rs's members that stay also destruct the group.
fn accepted(leader: Lib, others: Lib) -> Vec<String> {
    let mut want = vec![
        "heard rank=0 left=1".to_owned(),
        "heard rank=2 left=1".to_owned(),
        "invited rank=0".to_owned(),
        "joined rank=1 leader=0 members=3".to_owned(),
        "joined rank=2 leader=0 members=3".to_owned(),
        "left rank=1".to_owned(),
    ];
    if leader == Lib::Rust && others == Lib::Rust {
        want.push("destructed rank=0".to_owned());
        want.push("destructed rank=2".to_owned());
    }
    want.sort_unstable();
    want
}

/// Every pairing of the libraries, one node and two: invitations accepted and a member
/// leaving, a decline, and an invitee that finalizes without answering.
#[test]
fn invitations_are_accepted_declined_and_failed_between_every_library() {
    let pairs = [
        (Lib::Rust, Lib::Rust),
        (Lib::Rust, Lib::C),
        (Lib::C, Lib::Rust),
        (Lib::Rust, Lib::CWheel),
        (Lib::CWheel, Lib::Rust),
    ];
    for (leader, others) in pairs {
        for nodes in [false, true] {
            let accept = if others == Lib::Rust && leader == Lib::Rust {
                "accept-destruct"
            } else {
                "accept"
            };
            let out = run(leader, others, 3, nodes, accept);
            assert_eq!(lines(&out), accepted(leader, others), "{out:#?}");
            let out = run(leader, others, 2, nodes, "decline");
            assert_eq!(
                lines(&out),
                ["declined rank=0 by=1", "declining rank=1"],
                "{out:#?}"
            );
            let out = run(leader, others, 2, nodes, "ends");
            assert_eq!(
                lines(&out),
                ["ending rank=1", "failed rank=0 affected=1"],
                "{out:#?}"
            );
        }
    }
}

/// An invitee that never answers: the invitation's `TIMEOUT` (2 s) ends it.
#[test]
fn an_invitation_nobody_answers_ends_at_its_timeout() {
    for nodes in [false, true] {
        let out = run(Lib::Rust, Lib::Rust, 2, nodes, "silent");
        assert_eq!(lines(&out), ["timeout rank=0"], "{out:#?}");
    }
}

/// An invitee that exits without finalize when invited: the leader's invitation fails
/// (`GROUP_INVITE_FAILED`) well within the deadline, though it set no `TIMEOUT`.
#[test]
fn an_invitee_that_dies_fails_the_invitation() {
    let h = TestHost::start(NoHost);
    let ns = h.job("grpdies", 2);
    let started: Vec<_> = (0..2)
        .map(|r| {
            h.spawn_program(
                &workspace_bin("pmix-group-client"),
                &Proc::new(ns.clone(), r),
                &["dies"],
                &[],
            )
        })
        .collect();
    let done = wait_all(started, DEADLINE);
    let leader = done.iter().find(|f| f.proc.rank.0 == 0).expect("rank 0");
    assert_eq!(leader.code, Some(0), "{done:#?}");
    assert_eq!(
        leader.stdout.trim(),
        "failed rank=0 affected=1",
        "{done:#?}"
    );
    let invitee = done.iter().find(|f| f.proc.rank.0 == 1).expect("rank 1");
    assert_eq!(invitee.stdout.trim(), "ending rank=1", "{done:#?}");
}

/// Local CIDs shared in `GROUP_INFO` and read back under the context id, by pmix-rs's client
/// alone and with libpmix processes (`openpmix/pmix_group.c lcid`) in the same group, on one
/// node and two.
#[test]
fn members_read_each_others_local_cids_whatever_their_library() {
    let c_program = || OsString::from(openpmix_program("pmix_group"));
    for (others, not_found) in [
        (Lib::Rust, "ERR_NOT_FOUND"),
        (Lib::C, "NOT-FOUND"),
        (Lib::CWheel, "PMIX_ERR_NOT_FOUND"),
    ] {
        for nodes in [false, true] {
            let what = format!("lcid, others {others:?}, nodes {nodes}");
            let mut cmd = Command::new(pmixrun_bin());
            if nodes {
                cmd.args(["--launcher", "local", "--host", "a:1,b:3"]);
            }
            let other_program = match others {
                Lib::Rust => group_client().into(),
                Lib::C | Lib::CWheel => c_program(),
            };
            cmd.args(["-n", "1"])
                .arg(group_client())
                .args(["lcid", ":", "-n", "2"])
                .arg(other_program)
                .arg("lcid")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            if others == Lib::CWheel {
                pmix_tests::use_ompi5_libpmix(&mut cmd);
            }
            let out = Running::start(cmd, &what).finish(Instant::now() + DEADLINE, &what);
            assert_ok(&out, &what);
            let want: Vec<String> = (0..3)
                .map(|r| {
                    let other = if r == 0 { "ERR_NOT_FOUND" } else { not_found };
                    format!("lcid rank={r} cids=1000,1010,1020 other={other}")
                })
                .collect();
            assert_eq!(lines(&out), want, "{what}: {out:#?}");
        }
    }
}

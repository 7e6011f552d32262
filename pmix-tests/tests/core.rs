//! Server and client core over real sockets with real processes: the reference's make-check
//! scenarios and the get / authentication rules.

use std::time::Duration;

use pmix_server::NoHost;
use pmix_tests::{TestHost, assert_all_ok, run_jobs, wait_all};
use pmix_types::Proc;

const DEADLINE: Duration = Duration::from_secs(60);

#[test]
fn fence_subset_of_two_namespaces_blocking_with_data() {
    // make-check 00
    let h = TestHost::start(NoHost);
    run_jobs(
        &h,
        &[("t00a", 3), ("t00b", 1)],
        &["fence", "t00a:0-2;t00b:0", "db"],
        DEADLINE,
    );
}

#[test]
fn fence_whole_namespace_plus_one_rank() {
    // make-check 01
    let h = TestHost::start(NoHost);
    run_jobs(
        &h,
        &[("t01a", 3), ("t01b", 1)],
        &["fence", "t01a:;t01b:0", "db"],
        DEADLINE,
    );
}

#[test]
fn fence_two_whole_namespaces() {
    // make-check 02
    let h = TestHost::start(NoHost);
    run_jobs(
        &h,
        &[("t02a", 3), ("t02b", 1)],
        &["fence", "t02a:;t02b:", "db"],
        DEADLINE,
    );
}

#[test]
fn barrier_non_blocking_and_blocking() {
    // make-check 03 and 04: no data, so later gets go through direct modex
    let h = TestHost::start(NoHost);
    run_jobs(
        &h,
        &[("t03a", 3), ("t03b", 1)],
        &["fence", "t03a:", ""],
        DEADLINE,
    );
    run_jobs(
        &h,
        &[("t04a", 3), ("t04b", 1)],
        &["fence", "t04a:", "b"],
        DEADLINE,
    );
}

#[test]
fn non_blocking_fence_with_data() {
    // make-check 05 (without injected lateness: arrival order is whatever the OS gives)
    let h = TestHost::start(NoHost);
    run_jobs(
        &h,
        &[("t05a", 3), ("t05b", 1)],
        &["fence", "t05a:", "d"],
        DEADLINE,
    );
}

#[test]
fn job_fence_with_and_without_collection() {
    // make-check 06 and 07
    let h = TestHost::start(NoHost);
    run_jobs(&h, &[("t06", 4)], &["fence", "t06:", "db"], DEADLINE);
    run_jobs(&h, &[("t07", 4)], &["fence", "t07:", "b"], DEADLINE);
}

#[test]
fn replaced_keys_are_seen_by_every_peer() {
    // make-check 12
    let h = TestHost::start(NoHost);
    run_jobs(
        &h,
        &[("t12", 5)],
        &["replace", "100", "0,1,10,50,99"],
        DEADLINE,
    );
}

#[test]
fn store_internal_is_visible_to_self_only() {
    // make-check 13
    let h = TestHost::start(NoHost);
    run_jobs(&h, &[("t13", 5)], &["internal", "10"], DEADLINE);
}

#[test]
fn get_semantics_immediate_wait_timeout_optional_reserved() {
    let h = TestHost::start(NoHost);
    run_jobs(&h, &[("tget", 3)], &["get-semantics"], DEADLINE);
}

#[test]
fn job_level_data_and_derived_values() {
    let h = TestHost::start(NoHost);
    run_jobs(&h, &[("tjob", 4)], &["jobinfo"], DEADLINE);
}

#[test]
fn anl_map_and_refreshed_gets() {
    let h = TestHost::start(NoHost);
    run_jobs(&h, &[("tanl", 3)], &["anl-map"], DEADLINE);
    run_jobs(&h, &[("trefresh", 3)], &["refresh"], DEADLINE);
}

#[test]
fn process_sets_the_host_defines_are_listed_with_their_members() {
    let h = TestHost::start(NoHost);
    let ns = h.job("tpsets", 3);
    let (a, b) = (Proc::new(ns.clone(), 0), Proc::new(ns.clone(), 2));
    h.server
        .define_process_set("host://ab", &[a.clone(), b])
        .expect("defining a process set");
    h.server
        .define_process_set("host://gone", &[a])
        .expect("defining another");
    h.server
        .delete_process_set("host://gone")
        .expect("deleting it");
    assert!(h.server.delete_process_set("host://gone").is_err());
    let started: Vec<_> = (0..3)
        .map(|r| {
            h.spawn(
                &Proc::new(ns.clone(), r),
                &["psets", "1", "host://ab", "host://ab=0,2"],
                &[],
            )
        })
        .collect();
    assert_all_ok(&wait_all(started, DEADLINE));
}

#[test]
fn put_scopes_on_one_node() {
    let h = TestHost::start(NoHost);
    run_jobs(&h, &[("tscope", 3)], &["scope"], DEADLINE);
}

#[test]
fn refused_clients_while_others_are_served() {
    let h = TestHost::start(NoHost);
    let ns = h.job("tauth", 2);
    let bad = h.job("tauthbad", 3);
    let mut started = vec![
        h.spawn(&Proc::new(ns.clone(), 0), &["double-init"], &[]),
        h.spawn(&Proc::new(ns.clone(), 1), &["double-init"], &[]),
        // Wrong secret.
        h.spawn(
            &Proc::new(bad.clone(), 0),
            &["expect-refused", "ERR_INVALID_CRED"],
            &[("PMIXRS_SECRET", "00000000000000000000000000000000")],
        ),
        // A rank that was never registered.
        h.spawn(
            &Proc::new(bad.clone(), 1),
            &["expect-refused", "ERR_NOT_FOUND"],
            &[("PMIX_RANK", "7")],
        ),
    ];
    // Registered as another user than the one that connects.
    let proc2 = Proc::new(bad.clone(), 2);
    h.server.deregister_client(&proc2);
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    h.server
        .register_client(&proc2, uid.wrapping_add(1), gid)
        .unwrap();
    started.push(h.spawn(&proc2, &["expect-refused", "ERR_NO_PERMISSIONS"], &[]));
    let finished = wait_all(started, DEADLINE);
    assert_all_ok(&finished);
}

#[test]
fn a_client_that_exits_without_finalize_does_not_hang_the_others() {
    let h = TestHost::start(NoHost);
    let ns = h.job("tdie", 3);
    let started = vec![
        h.spawn(&Proc::new(ns.clone(), 0), &["fence", "tdie:", "db"], &[]),
        h.spawn(&Proc::new(ns.clone(), 1), &["fence", "tdie:", "db"], &[]),
        h.spawn(&Proc::new(ns.clone(), 2), &["exit-early"], &[]),
    ];
    let finished = wait_all(started, DEADLINE);
    for f in &finished {
        match f.proc.rank.0 {
            2 => assert_eq!(f.code, Some(3)),
            _ => {
                assert_eq!(
                    f.code,
                    Some(1),
                    "{} should fail its fence: {}",
                    f.proc,
                    f.stdout
                );
                assert!(f.stdout.contains("fence"), "{}: {}", f.proc, f.stdout);
            }
        }
    }
}

#[test]
fn finalize_removes_what_init_created_and_nothing_else() {
    let h = TestHost::start(NoHost);
    let socket = h.server.socket_path().to_path_buf();
    let dir = socket.parent().unwrap().to_path_buf();
    let parent = dir.parent().unwrap().to_path_buf();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    assert_eq!(
        std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777,
        0o600
    );
    run_jobs(&h, &[("tfin", 2)], &["jobinfo"], DEADLINE);
    h.server.finalize().unwrap();
    assert!(!socket.exists() && !dir.exists(), "rendezvous left behind");
    assert!(parent.exists());
}

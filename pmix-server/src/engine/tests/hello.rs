//! Handshakes: refusals and their statuses, identity claims, the host's refusal, finalize.

use pmix_types::{Proc, Rank, Scope, Status, Value};
use pmix_wire::Request;

use super::{GID, Sim, UID, commit, fence, ns, proofs, proofs_by, secret};
use crate::engine::{Auth, ConnId, GetAnswers, HostCall, HostOutcome, PeerCreds};

#[test]
fn handshake_refusals_have_their_statuses() {
    let mut s = Sim::new();
    s.job("a", 2);
    let good = PeerCreds { uid: UID, gid: GID };
    s.hello(1, "nope", 0, &secret("nope", 0), good);
    s.hello(2, "a", 7, &secret("a", 7), good);
    s.hello(
        3,
        "a",
        0,
        &secret("a", 0),
        PeerCreds {
            uid: UID + 1,
            gid: GID,
        },
    );
    s.hello(4, "a", 0, &secret("a", 1), good);
    s.hello(5, "a", 0, &secret("a", 0), good);
    s.hello(6, "a", 0, &secret("a", 0), good);
    assert_eq!(
        s.refused,
        vec![
            (1, Status::ERR_NOT_FOUND),
            (2, Status::ERR_NOT_FOUND),
            (3, Status::ERR_NO_PERMISSIONS),
            (4, Status::ERR_INVALID_CRED),
            (6, Status::ERR_EXISTS),
        ]
    );
    assert_eq!(s.accepted, vec![5]);
    // The accepted client is still served.
    let id = s.send(5, commit(&[("k", Scope::GLOBAL, Value::Uint8(1))]));
    assert_eq!(s.reply(5, id).status, Status::SUCCESS);
}

#[test]
fn a_vouched_identity_needs_no_secret_but_still_its_registration_and_credentials() {
    let mut s = Sim::new();
    s.job("a", 3);
    let me = |rank| Proc::new(ns("a"), Rank(rank));
    let vouched = |creds| Auth::Vouched { creds };
    let good = PeerCreds { uid: UID, gid: GID };
    let other_gid = PeerCreds {
        uid: UID,
        gid: GID + 1,
    };
    s.eng
        .handle_hello(1, &me(0), vouched(None), GetAnswers::WholeProcess);
    s.eng
        .handle_hello(2, &me(1), vouched(Some(good)), GetAnswers::WholeProcess);
    s.eng.handle_hello(
        3,
        &me(2),
        vouched(Some(other_gid)),
        GetAnswers::WholeProcess,
    );
    s.eng
        .handle_hello(4, &me(9), vouched(None), GetAnswers::WholeProcess);
    s.eng
        .handle_hello(5, &me(0), vouched(None), GetAnswers::WholeProcess);
    s.pump();
    let refused = [
        (3, Status::ERR_NO_PERMISSIONS),
        (4, Status::ERR_NOT_FOUND),
        (5, Status::ERR_EXISTS),
    ];
    assert_hellos(&s, &[1, 2], &refused);
}

/// Registers `name:rank` again, saying whether a claim by uid alone may take it.
fn register_by_uid(s: &mut Sim, name: &str, rank: u32, by_uid: bool) {
    let proofs = proofs_by(name, rank, by_uid);
    s.eng
        .register_client(&Proc::new(ns(name), Rank(rank)), UID, GID, proofs)
        .unwrap();
}

/// Asserts which hellos were accepted and which refused, with what.
fn assert_hellos(s: &Sim, accepted: &[ConnId], refused: &[(ConnId, Status)]) {
    assert_eq!(s.accepted, accepted);
    assert_eq!(s.refused, refused, "{:?}", s.reasons);
}

#[test]
fn a_uid_claim_takes_only_a_client_registered_for_it() {
    let mut s = Sim::new();
    s.job("a", 4);
    // Ranks 0 and 2 are pmix-rs and PMI-1 clients; 1 and 3 may be libpmix ones.
    register_by_uid(&mut s, "a", 0, false);
    register_by_uid(&mut s, "a", 2, false);
    let me = |rank| Proc::new(ns("a"), Rank(rank));
    let uid = |gid| Auth::Uid {
        creds: PeerCreds { uid: UID, gid },
        socket: None,
    };
    s.eng
        .handle_hello(1, &me(0), uid(GID), GetAnswers::WholeProcess);
    s.eng
        .handle_hello(2, &me(1), uid(GID), GetAnswers::WholeProcess);
    s.eng
        .handle_hello(3, &me(3), uid(GID + 1), GetAnswers::WholeProcess);
    s.eng.handle_hello(
        4,
        &me(2),
        Auth::Vouched { creds: None },
        GetAnswers::WholeProcess,
    );
    s.pump();
    let refused = [
        (1, Status::ERR_NO_PERMISSIONS),
        (3, Status::ERR_NO_PERMISSIONS),
    ];
    assert_hellos(&s, &[2, 4], &refused);
    assert!(
        s.reasons[0].contains("a:0") && s.reasons[0].contains("uid alone"),
        "{:?}",
        s.reasons
    );
    // The real rank 0, with its secret, is not kept out by the refused claim.
    s.connect(5, "a", 0);
}

#[test]
fn a_name_claimed_with_its_secret_is_not_taken_by_uid_alone_after() {
    let mut s = Sim::new();
    s.job("a", 2);
    let me = |rank| Proc::new(ns("a"), Rank(rank));
    let uid = || Auth::Uid {
        creds: PeerCreds { uid: UID, gid: GID },
        socket: None,
    };
    s.connect(1, "a", 0);
    s.eng
        .handle_hello(2, &me(0), uid(), GetAnswers::WholeProcess);
    s.pump();
    // Its connection goes without a finalize: the name is still not the uid's to take, but
    // the secret still claims it.
    s.eng.handle_closed(1);
    s.eng
        .handle_hello(3, &me(0), uid(), GetAnswers::WholeProcess);
    s.pump();
    assert_eq!(
        s.refused,
        vec![
            (2, Status::ERR_NO_PERMISSIONS),
            (3, Status::ERR_NO_PERMISSIONS)
        ]
    );
    assert!(s.reasons[1].contains("with its secret"), "{:?}", s.reasons);
    s.connect(4, "a", 0);
    // Where the uid came first, the real rank is refused, and told how the name was taken.
    s.eng
        .handle_hello(5, &me(1), uid(), GetAnswers::WholeProcess);
    s.pump();
    assert!(s.accepted.contains(&5));
    s.hello(6, "a", 1, &secret("a", 1), PeerCreds { uid: UID, gid: GID });
    assert_eq!(s.refused[2], (6, Status::ERR_EXISTS));
    assert!(s.reasons[2].contains("by uid alone"), "{:?}", s.reasons);
}

#[test]
fn host_can_refuse_a_client() {
    let mut s = Sim::new();
    s.job("a", 1);
    s.auto_host = false;
    s.hello(1, "a", 0, &secret("a", 0), PeerCreds { uid: UID, gid: GID });
    assert!(s.accepted.is_empty(), "accepted before the host answered");
    let (op, call) = s.host_calls.remove(0);
    assert!(matches!(call, HostCall::ClientConnected { .. }));
    s.eng
        .handle_host_done(op, HostOutcome::Unit(Err(Status::ERR_NO_PERMISSIONS)));
    s.pump();
    assert_eq!(s.refused, vec![(1, Status::ERR_NO_PERMISSIONS)]);
    // It may try again once the host agrees.
    s.auto_host = true;
    s.connect(2, "a", 0);
}

#[test]
fn finalize_replies_after_the_host_and_closes() {
    let mut s = Sim::new();
    s.job("a", 2);
    s.connect(0, "a", 0);
    s.connect(1, "a", 1);
    s.auto_host = false;
    let f = s.send(0, Request::Finalize { info: vec![] });
    assert!(s.take_reply(0, f).is_none());
    let (op, call) = s.host_calls.remove(0);
    assert!(matches!(call, HostCall::ClientFinalized { .. }));
    s.eng.handle_host_done(op, HostOutcome::Unit(Ok(())));
    s.pump();
    assert_eq!(s.reply(0, f).status, Status::SUCCESS);
    assert!(s.closed.contains(&0));
    // A finalized process may init again, with its secret; and a second instance of it is
    // refused while it is connected again.
    s.auto_host = true;
    s.hello(9, "a", 0, &secret("a", 0), PeerCreds { uid: UID, gid: GID });
    assert_eq!(s.accepted.last(), Some(&9));
    s.hello(
        10,
        "a",
        0,
        &secret("a", 0),
        PeerCreds { uid: UID, gid: GID },
    );
    assert_eq!(s.refused.last(), Some(&(10, Status::ERR_EXISTS)));
    // It is a member again: a fence over the job waits for it rather than failing at once.
    let f = s.send(1, fence(vec![], false));
    assert!(s.take_reply(1, f).is_none());
    let f9 = s.send(9, fence(vec![], false));
    assert_eq!(s.reply(9, f9).status, Status::SUCCESS);
    assert_eq!(s.reply(1, f).status, Status::SUCCESS);
}

/// A client whose host reports its process: a claim by uid over a socket the kernel names is
/// held against that process's tree. A stranger's claim is refused and leaves the name free;
/// a claim made before the host said waits for it; a socket nobody can place (`None`) falls
/// back on the uid.
#[test]
fn a_uid_claim_is_taken_only_from_the_process_started_for_the_name() {
    let mut s = Sim::new();
    s.job("a", 3);
    for rank in 0..3 {
        let mut proofs = proofs("a", rank);
        proofs.lineage = true;
        s.eng
            .register_client(&Proc::new(ns("a"), Rank(rank)), UID, GID, proofs)
            .unwrap();
    }
    let me = |rank| Proc::new(ns("a"), Rank(rank));
    let uid = |inode| Auth::Uid {
        creds: PeerCreds { uid: UID, gid: GID },
        socket: Some(inode),
    };
    // Rank 0 started as pid 100; a stranger's socket 7 claims it first.
    s.eng.client_started(&me(0), 100);
    s.eng
        .handle_hello(1, &me(0), uid(7), GetAnswers::WholeProcess);
    s.pump();
    assert_eq!(s.lineage, vec![(1, 100, 7)]);
    assert!(s.host_calls.is_empty() && s.accepted.is_empty());
    s.eng.lineage_checked(1, Some(false));
    s.pump();
    assert_hellos(&s, &[], &[(1, Status::ERR_NO_PERMISSIONS)]);
    assert!(s.reasons[0].contains("pid 100"), "{:?}", s.reasons);
    // The real rank 0 (its socket 8 in pid 100's tree) is not kept out.
    s.eng
        .handle_hello(2, &me(0), uid(8), GetAnswers::WholeProcess);
    s.pump();
    s.eng.lineage_checked(2, Some(true));
    s.pump();
    assert_hellos(&s, &[2], &[(1, Status::ERR_NO_PERMISSIONS)]);

    // Rank 1: two claims before the host said which process it started; both wait, and
    // are checked when it does; the stranger's refusal does not hold up the real one.
    s.eng
        .handle_hello(3, &me(1), uid(9), GetAnswers::WholeProcess);
    s.eng
        .handle_hello(4, &me(1), uid(10), GetAnswers::WholeProcess);
    s.pump();
    assert_eq!(s.lineage.len(), 2, "checked before the pid was known");
    s.eng.client_started(&me(1), 200);
    s.pump();
    assert_eq!(s.lineage[2..], [(3, 200, 9), (4, 200, 10)]);
    s.eng.lineage_checked(3, Some(false));
    s.eng.lineage_checked(4, Some(true));
    s.pump();
    assert_hellos(
        &s,
        &[2, 4],
        &[
            (1, Status::ERR_NO_PERMISSIONS),
            (3, Status::ERR_NO_PERMISSIONS),
        ],
    );

    // Rank 2: where the system cannot tell, the uid stands alone, as without a pid.
    s.eng.client_started(&me(2), 300);
    s.eng
        .handle_hello(5, &me(2), uid(11), GetAnswers::WholeProcess);
    s.pump();
    s.eng.lineage_checked(5, None);
    s.pump();
    assert_eq!(s.accepted, [2, 4, 5]);
    // A check whose connection closed meanwhile is dropped.
    s.eng.lineage_checked(6, Some(true));
    s.pump();
    assert_eq!(s.accepted, [2, 4, 5]);
}

//! The core alone, byte for byte: requests out as frames, frames in as completions, events
//! and store contents, with no socket and no thread.
#![allow(clippy::unwrap_used, clippy::panic)]

use pmix_types::{DataRange, Key, Nspace, Proc, Rank, Scope, Status, Value};
use pmix_wire::openpmix::{Dialect, MsgReader};
use pmix_wire::{
    ClientMsg, Decoded, Event, FrameDecoder, FrameReader, Kv, ProcKvs, Reply, ReplyBody, Request,
    ServerMsg, decode_body, encode_frame,
};

use super::get::{GetDirectives, Local};
use super::openpmix::{Context, Session};
use super::wire::{Input, Wire};
use super::{ClientCore, Output, Submitted};
use crate::Error;

fn me() -> Proc {
    Proc::new(Nspace::new("job").unwrap(), Rank(0))
}

fn peer(r: u32) -> Proc {
    Proc::new(Nspace::new("job").unwrap(), Rank(r))
}

fn native() -> (ClientCore, Input) {
    let mut core = ClientCore::new(Wire::Native);
    core.store_mut().set_me(me());
    (
        core,
        Input::native(FrameReader::new(FrameDecoder::default())),
    )
}

/// What the core wrote, as the requests a server reads.
fn sent(core: &mut ClientCore) -> Vec<ClientMsg> {
    let mut bytes = Vec::new();
    core.poll_transmit(&mut bytes);
    let dec = FrameDecoder::default();
    let mut rest = &bytes[..];
    let mut out = Vec::new();
    while !rest.is_empty() {
        let Decoded::Frame { body, consumed } = dec.decode(rest).unwrap() else {
            panic!("a cut frame")
        };
        out.push(decode_body(body).unwrap());
        rest = &rest[consumed..];
    }
    out
}

fn frame(msg: &ServerMsg) -> Vec<u8> {
    let mut out = Vec::new();
    encode_frame(msg, &mut out).unwrap();
    out
}

/// Feeds `bytes` as reads of at most 64 KiB would bring them, handing every whole message to
/// the core after each.
fn receive(core: &mut ClientCore, input: &mut Input, bytes: &[u8]) -> Result<(), Error> {
    for chunk in bytes.chunks(64 << 10) {
        input.feed(chunk);
        while let Some(f) = input.next_frame()? {
            core.handle_frame(f)?;
        }
    }
    Ok(())
}

fn outputs(core: &mut ClientCore) -> Vec<Output> {
    std::iter::from_fn(|| core.poll_output()).collect()
}

fn submit(core: &mut ClientCore, req: Request) -> u32 {
    let s = core.submit(req, false).unwrap();
    assert!(!s.once_written);
    s.id
}

fn fence_reply(id: u32, data: Vec<ProcKvs>) -> Vec<u8> {
    frame(&ServerMsg::Reply {
        id,
        reply: Reply {
            status: Status::SUCCESS,
            body: ReplyBody::Fence { data },
        },
    })
}

fn peer_data(r: u32) -> ProcKvs {
    ProcKvs {
        proc: peer(r),
        kvs: vec![Kv {
            scope: Scope::GLOBAL,
            key: Key::new("demo.rank").unwrap(),
            value: Value::Uint32(r),
        }],
    }
}

#[test]
fn a_request_goes_out_as_a_frame_and_its_reply_completes_it() {
    let (mut core, mut input) = native();
    let a = submit(&mut core, Request::Commit { kvs: vec![] });
    let b = submit(&mut core, Request::Finalize { info: vec![] });
    assert_ne!(a, b);
    let msgs = sent(&mut core);
    assert_eq!(msgs.len(), 2);
    assert_eq!((msgs[0].id, msgs[1].id), (a, b));
    assert!(matches!(msgs[0].req, Request::Commit { .. }));
    assert!(!core.poll_transmit(&mut Vec::new()), "written once");
    assert!(core.has_pending());

    // The second reply first, cut in two reads.
    let bytes = frame(&ServerMsg::Reply {
        id: b,
        reply: Reply::status(Status::ERR_NOT_FOUND),
    });
    let (head, tail) = bytes.split_at(3);
    receive(&mut core, &mut input, head).unwrap();
    assert!(outputs(&mut core).is_empty(), "half a frame is nothing yet");
    receive(&mut core, &mut input, tail).unwrap();
    let out = outputs(&mut core);
    assert!(
        matches!(&out[..], [Output::Complete(id, Ok(r))] if *id == b && r.status == Status::ERR_NOT_FOUND),
        "{out:?}"
    );
    assert!(core.has_pending());
    receive(
        &mut core,
        &mut input,
        &frame(&ServerMsg::Reply {
            id: a,
            reply: Reply::status(Status::SUCCESS),
        }),
    )
    .unwrap();
    assert!(matches!(&outputs(&mut core)[..], [Output::Complete(id, Ok(_))] if *id == a));
    assert!(!core.has_pending());
}

#[test]
fn events_and_replies_come_out_in_the_order_they_came_in() {
    let (mut core, mut input) = native();
    let id = submit(&mut core, Request::Commit { kvs: vec![] });
    let ev = Event {
        code: Status(-101),
        source: peer(3),
        range: DataRange::SESSION,
        info: vec![],
    };
    let mut bytes = frame(&ServerMsg::Event(ev.clone()));
    bytes.extend(frame(&ServerMsg::Reply {
        id,
        reply: Reply::status(Status::SUCCESS),
    }));
    receive(&mut core, &mut input, &bytes).unwrap();
    let out = outputs(&mut core);
    assert!(
        matches!(&out[..], [Output::Event(e), Output::Complete(i, Ok(_))] if *e == ev && *i == id),
        "{out:?}"
    );
}

#[test]
fn a_collecting_fence_is_kept_encoded_and_unpacked_on_demand() {
    let (mut core, mut input) = native();
    let id = submit(
        &mut core,
        Request::Fence {
            procs: vec![],
            info: vec![],
        },
    );
    receive(
        &mut core,
        &mut input,
        &fence_reply(id, vec![peer_data(1), peer_data(2)]),
    )
    .unwrap();
    let out = outputs(&mut core);
    let [Output::Complete(i, Ok(reply))] = &out[..] else {
        panic!("{out:?}")
    };
    assert_eq!(*i, id);
    // The data went to the store, not into the reply.
    assert_eq!(reply.body, ReplyBody::Fence { data: vec![] });
    assert!(core.store().has_packed(&peer(2)));
    core.store_mut().unpack(&peer(2)).unwrap();
    assert_eq!(
        core.store().get_data(&peer(2), "demo.rank", None),
        Some(Value::Uint32(2))
    );
}

#[test]
fn a_caller_that_wants_the_reply_whole_gets_the_fence_data_in_it() {
    let (mut core, mut input) = native();
    let s = core
        .submit(
            Request::Fence {
                procs: vec![],
                info: vec![],
            },
            true,
        )
        .unwrap();
    receive(
        &mut core,
        &mut input,
        &fence_reply(s.id, vec![peer_data(1)]),
    )
    .unwrap();
    let out = outputs(&mut core);
    let [Output::Complete(_, Ok(reply))] = &out[..] else {
        panic!("{out:?}")
    };
    assert_eq!(
        reply.body,
        ReplyBody::Fence {
            data: vec![peer_data(1)]
        }
    );
    assert!(!core.store().has_packed(&peer(1)), "the caller ingests it");
    core.ingest(reply.clone());
    assert_eq!(
        core.store().get_data(&peer(1), "demo.rank", None),
        Some(Value::Uint32(1))
    );
}

#[test]
fn a_cancelled_request_drops_its_late_reply_but_keeps_fence_data() {
    let (mut core, mut input) = native();
    let id = submit(
        &mut core,
        Request::Fence {
            procs: vec![],
            info: vec![],
        },
    );
    core.cancel(id);
    assert!(!core.has_pending());
    receive(&mut core, &mut input, &fence_reply(id, vec![peer_data(1)])).unwrap();
    assert!(outputs(&mut core).is_empty());
    // The server counts it as delivered: the data is kept.
    assert!(core.store().has_packed(&peer(1)));
}

#[test]
fn a_lost_connection_fails_everything_outstanding_and_later() {
    let (mut core, _) = native();
    let a = submit(&mut core, Request::Commit { kvs: vec![] });
    let b = submit(&mut core, Request::Finalize { info: vec![] });
    core.handle_lost();
    let mut failed: Vec<u32> = Vec::new();
    let mut lost = None;
    for o in outputs(&mut core) {
        match o {
            Output::Complete(id, Err(Error::LostConnection)) => failed.push(id),
            Output::Lost(p) => lost = Some(p),
            other => panic!("{other:?}"),
        }
    }
    failed.sort_unstable();
    assert_eq!(failed, vec![a.min(b), a.max(b)]);
    assert_eq!(lost, Some(me()));
    assert!(core.is_closed());
    assert!(matches!(
        core.submit(Request::Commit { kvs: vec![] }, false),
        Err(Error::LostConnection)
    ));
    // Told once.
    core.handle_lost();
    assert!(outputs(&mut core).is_empty());
}

#[test]
fn closing_is_not_losing() {
    let (mut core, _) = native();
    core.handle_close();
    core.handle_lost();
    assert!(outputs(&mut core).is_empty());
    assert!(core.is_closed());
}

#[test]
fn a_frame_that_does_not_decode_breaks_the_stream() {
    let (mut core, mut input) = native();
    let mut bytes = Vec::new();
    encode_frame(&"not a server message", &mut bytes).unwrap();
    assert!(receive(&mut core, &mut input, &bytes).is_err());
}

fn openpmix() -> (ClientCore, Input) {
    let cx = Context {
        me: me(),
        dialect: Dialect::V41,
        hostname: None,
    };
    let core = ClientCore::new(Wire::Openpmix(Session::new(cx, 1000, 0)));
    let input = Input::openpmix(MsgReader::after_handshake(
        pmix_wire::openpmix::DEFAULT_MAX_MESSAGE,
    ));
    (core, input)
}

#[test]
fn an_unanswered_openpmix_request_completes_once_written() {
    let (mut core, _) = openpmix();
    let s = core
        .submit(
            Request::DeregisterEvents {
                codes: vec![Status(-101)],
            },
            false,
        )
        .unwrap();
    assert_eq!(
        s,
        Submitted {
            id: s.id,
            once_written: true,
            needs_server: false,
        }
    );
    let mut bytes = Vec::new();
    assert!(core.poll_transmit(&mut bytes));
    assert!(outputs(&mut core).is_empty(), "not before it is written");
    core.handle_written(s.id);
    assert!(
        matches!(&outputs(&mut core)[..], [Output::Complete(id, Ok(r))] if *id == s.id && r.status == Status::SUCCESS)
    );
}

#[test]
fn an_openpmix_answer_completes_its_request_by_tag() {
    let (mut core, mut input) = openpmix();
    let id = submit(&mut core, Request::Finalize { info: vec![] });
    let mut bytes = Vec::new();
    core.poll_transmit(&mut bytes);
    let header: [u8; 16] = bytes[..16].try_into().unwrap();
    let tag = pmix_wire::openpmix::Header::decode(&header).tag;
    let mut answer = Vec::new();
    pmix_wire::openpmix::encode_message_with(&mut answer, 0, tag, |o| {
        pmix_wire::openpmix::Reply::Status(Status::SUCCESS).encode(Dialect::V41, o)
    })
    .unwrap();
    receive(&mut core, &mut input, &answer).unwrap();
    assert!(
        matches!(&outputs(&mut core)[..], [Output::Complete(i, Ok(r))] if *i == id && r.status == Status::SUCCESS)
    );
}

/// A singleton's core, its log lines kept in `log`.
fn local(log: &std::sync::Arc<std::sync::Mutex<Vec<String>>>) -> ClientCore {
    let log = std::sync::Arc::clone(log);
    let console: super::local::Console = Box::new(move |_, line| {
        log.lock().unwrap().push(line.to_owned());
        true
    });
    let responder = super::local::Responder::new(me(), console);
    let mut core = ClientCore::new(Wire::Local(Box::new(responder)));
    core.store_mut().set_me(me());
    core
}

fn key(k: &str) -> Key {
    Key::new(k).unwrap()
}

fn lookup(k: &str, info: Vec<pmix_types::Info>) -> Request {
    Request::Lookup {
        keys: vec![key(k)],
        info,
    }
}

fn wait_for_it() -> pmix_types::Info {
    pmix_types::Info::attr(pmix_types::attr::WAIT, true)
}

fn publish(k: &str) -> Request {
    Request::Publish {
        data: vec![pmix_types::Info::new(key(k), 1u32)],
        info: vec![],
    }
}

/// Submits a spawn, which the local wire cannot answer.
fn spawn(core: &mut ClientCore) -> Submitted {
    let s = core
        .submit(
            Request::Spawn {
                job_info: vec![],
                apps: vec![],
            },
            false,
        )
        .unwrap();
    assert!(s.needs_server);
    s
}

fn status_of(out: &Output) -> (u32, Status) {
    match out {
        Output::Complete(id, Ok(r)) => (*id, r.status),
        other => panic!("not a reply: {other:?}"),
    }
}

#[test]
fn a_local_wire_answers_at_once_and_sends_nothing() {
    let log = std::sync::Arc::default();
    let mut core = local(&log);
    let commit = submit(&mut core, Request::Commit { kvs: vec![] });
    let query = submit(&mut core, Request::Query { queries: vec![] });
    let other = Proc::new(Nspace::new("other").unwrap(), Rank(0));
    let fence = submit(
        &mut core,
        Request::Fence {
            procs: vec![other],
            info: vec![],
        },
    );
    let logged = submit(
        &mut core,
        Request::Log {
            data: vec![pmix_types::Info::attr(pmix_types::attr::LOG_STDOUT, "hi")],
            directives: vec![],
        },
    );
    let got: Vec<_> = outputs(&mut core).iter().map(status_of).collect();
    assert_eq!(
        got,
        [
            (commit, Status::SUCCESS),
            (query, Status::ERR_UNREACH),
            (fence, Status::ERR_UNREACH),
            (logged, Status::SUCCESS),
        ]
    );
    assert_eq!(*log.lock().unwrap(), ["[job:0] hi\n"]);
    assert!(!core.poll_transmit(&mut Vec::new()));
    assert!(!core.has_pending());
}

#[test]
fn a_held_lookup_is_released_by_a_publish_or_times_out() {
    let mut core = local(&std::sync::Arc::default());
    let held = submit(&mut core, lookup("a", vec![wait_for_it()]));
    assert!(outputs(&mut core).is_empty());
    assert!(core.is_waiting(held));
    let timeout = pmix_types::Info::attr(pmix_types::attr::TIMEOUT, 5i32);
    let timed = submit(&mut core, lookup("b", vec![wait_for_it(), timeout]));
    assert!(matches!(
        &outputs(&mut core)[..],
        [Output::Timer(id, t)] if *id == timed && t.as_secs() == 5
    ));
    let publ = submit(&mut core, publish("a"));
    let got: Vec<_> = outputs(&mut core).iter().map(status_of).collect();
    assert_eq!(got, [(held, Status::SUCCESS), (publ, Status::SUCCESS)]);
    core.handle_timeout(timed);
    let got: Vec<_> = outputs(&mut core).iter().map(status_of).collect();
    assert_eq!(got, [(timed, Status::ERR_TIMEOUT)]);
    // Once only.
    core.handle_timeout(timed);
    assert!(outputs(&mut core).is_empty());
}

#[test]
fn a_spawn_on_the_local_wire_waits_for_a_server_which_is_told_what_was_done_alone() {
    let mut core = local(&std::sync::Arc::default());
    let kv = Kv {
        scope: Scope::GLOBAL,
        key: key("k"),
        value: Value::Uint32(7),
    };
    submit(&mut core, Request::Commit { kvs: vec![kv] });
    submit(&mut core, publish("p"));
    submit(
        &mut core,
        Request::RegisterEvents {
            codes: vec![Status(-101)],
            info: vec![],
        },
    );
    outputs(&mut core);
    let held = submit(&mut core, lookup("q", vec![wait_for_it()]));
    let s = spawn(&mut core);
    assert!(s.needs_server);
    assert!(outputs(&mut core).is_empty());
    assert!(!core.poll_transmit(&mut Vec::new()));
    core.handle_connected(Wire::Native).unwrap();
    let msgs = sent(&mut core);
    let kinds: Vec<_> = msgs
        .iter()
        .map(|m| match &m.req {
            Request::Commit { kvs } => format!("commit {}", kvs.len()),
            Request::Publish { .. } => "publish".into(),
            Request::RegisterEvents { .. } => "register".into(),
            Request::Lookup { .. } => format!("lookup {}", m.id == held),
            Request::Spawn { .. } => format!("spawn {}", m.id == s.id),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "commit 1",
            "publish",
            "register",
            "lookup true",
            "spawn true"
        ]
    );
    // What the core sent itself completes nothing; the spawn's reply completes the spawn.
    let mut input = Input::native(FrameReader::new(FrameDecoder::default()));
    for m in &msgs {
        let reply = ServerMsg::Reply {
            id: m.id,
            reply: Reply::status(Status::SUCCESS),
        };
        receive(&mut core, &mut input, &frame(&reply)).unwrap();
    }
    let got: Vec<_> = outputs(&mut core).iter().map(status_of).collect();
    assert_eq!(got, [(held, Status::SUCCESS), (s.id, Status::SUCCESS)]);
    assert!(core.handle_connected(Wire::Native).is_err());
}

#[test]
fn a_spawn_that_gets_no_server_fails_alone() {
    let mut core = local(&std::sync::Arc::default());
    let s = spawn(&mut core);
    core.fail(s.id, Error::PrivateServer("no pmixrun".into()));
    assert!(matches!(
        &outputs(&mut core)[..],
        [Output::Complete(id, Err(Error::PrivateServer(_)))] if *id == s.id
    ));
    let commit = submit(&mut core, Request::Commit { kvs: vec![] });
    let got: Vec<_> = outputs(&mut core).iter().map(status_of).collect();
    assert_eq!(got, [(commit, Status::SUCCESS)]);
}

#[test]
fn closing_the_local_wire_fails_what_waits_and_what_follows() {
    let mut core = local(&std::sync::Arc::default());
    let held = submit(&mut core, lookup("a", vec![wait_for_it()]));
    core.handle_close();
    assert!(matches!(
        &outputs(&mut core)[..],
        [Output::Complete(id, Err(Error::NotInitialized))] if *id == held
    ));
    assert!(matches!(
        core.submit(Request::Commit { kvs: vec![] }, false),
        Err(Error::LostConnection)
    ));
}

#[test]
fn a_large_fence_reply_is_kept_in_the_buffer_it_was_read_into() {
    let (mut core, mut input) = native();
    let id = submit(
        &mut core,
        Request::Fence {
            procs: vec![],
            info: vec![],
        },
    );
    let big = ProcKvs {
        proc: peer(1),
        kvs: vec![Kv {
            scope: Scope::GLOBAL,
            key: Key::new("demo.blob").unwrap(),
            value: Value::String("x".repeat(super::wire::LARGE_FRAME + 1)),
        }],
    };
    let mut bytes = fence_reply(id, vec![big]);
    // A small frame right behind it is still read.
    bytes.extend(frame(&ServerMsg::Event(Event {
        code: Status(-101),
        source: peer(2),
        range: DataRange::SESSION,
        info: vec![],
    })));
    receive(&mut core, &mut input, &bytes).unwrap();
    let out = outputs(&mut core);
    assert!(
        matches!(&out[..], [Output::Complete(i, Ok(_)), Output::Event(_)] if *i == id),
        "{out:?}"
    );
    core.store_mut().unpack(&peer(1)).unwrap();
    let Some(Value::String(s)) = core.store().get_data(&peer(1), "demo.blob", None) else {
        panic!("not kept")
    };
    assert_eq!(s.len(), super::wire::LARGE_FRAME + 1);
}

fn get(core: &ClientCore, proc: &Proc, key: &str, info: &[pmix_types::Info]) -> Option<Local> {
    let d = GetDirectives::parse(info).unwrap();
    core.resolve_get(&me(), proc, Some(key), &d, false)
}

#[test]
fn a_get_is_answered_from_the_store_once_fence_data_is_unpacked() {
    let (mut core, mut input) = native();
    let id = submit(
        &mut core,
        Request::Fence {
            procs: vec![],
            info: vec![],
        },
    );
    receive(&mut core, &mut input, &fence_reply(id, vec![peer_data(1)])).unwrap();
    // Still encoded: the driver must unpack first.
    assert!(get(&core, &peer(1), "demo.rank", &[]).is_none());
    core.store_mut().unpack(&peer(1)).unwrap();
    assert!(matches!(
        get(&core, &peer(1), "demo.rank", &[]),
        Some(Local::Done(Ok(Value::Uint32(1))))
    ));
    // Another process's missing key is the server's to answer, unless optional.
    assert!(matches!(
        get(&core, &peer(1), "demo.other", &[]),
        Some(Local::AskServer)
    ));
    let optional = [pmix_types::Info::attr(pmix_types::attr::OPTIONAL, true)];
    assert!(matches!(
        get(&core, &peer(1), "demo.other", &optional),
        Some(Local::Done(Err(Error::NotFound { .. })))
    ));
    // A refresh asks the server even for what is cached.
    let refresh = [pmix_types::Info::attr(
        pmix_types::attr::GET_REFRESH_CACHE,
        true,
    )];
    assert!(matches!(
        get(&core, &peer(1), "demo.rank", &refresh),
        Some(Local::AskServer)
    ));
}

#[test]
fn this_processs_own_data_is_always_local() {
    let (mut core, _) = native();
    core.store_mut().insert_data(
        &me(),
        Key::new("mine").unwrap(),
        Value::Uint32(7),
        Scope::GLOBAL,
    );
    assert!(matches!(
        get(&core, &me(), "mine", &[]),
        Some(Local::Done(Ok(Value::Uint32(7))))
    ));
    assert!(matches!(
        get(&core, &me(), "not.put", &[]),
        Some(Local::Done(Err(Error::NotFound { .. })))
    ));
}

#[test]
fn pulled_output_comes_out_for_a_tool() {
    let (mut core, mut input) = native();
    let chunk = pmix_wire::IofChunk {
        tag: 7,
        source: peer(1),
        channel: pmix_types::IofChannel::STDOUT,
        info: vec![],
        data: b"hello\n".to_vec(),
    };
    receive(
        &mut core,
        &mut input,
        &frame(&ServerMsg::Iof(chunk.clone())),
    )
    .unwrap();
    assert!(matches!(&outputs(&mut core)[..], [Output::Iof(c)] if *c == chunk));
}

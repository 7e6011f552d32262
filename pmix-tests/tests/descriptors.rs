//! Running out of file descriptors while a client connects: the server must take the
//! connection once descriptors are free again. The descriptor limit is the process's, so this
//! file holds one test and runs in a process of its own; the server runs in it, the client is
//! a raw socket made before the descriptors ran out.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use nix::sys::resource::{Resource, getrlimit, setrlimit};
use nix::sys::socket::{AddressFamily, SockFlag, SockType, UnixAddr, connect, socket};
use pmix_server::NoHost;
use pmix_server::types::{Proc, Rank};
use pmix_tests::{TestHost, native_hello, native_socket};
use pmix_wire::{Welcome, decode_body};

fn open_descriptors() -> u64 {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count() as u64
}

#[test]
fn a_client_that_connects_while_the_server_is_out_of_descriptors_gets_in_once_they_free_up() {
    let host = TestHost::start(NoHost);
    let ns = host.job("fds", 1);
    let me = Proc::new(ns.clone(), Rank(0));
    let env = host.server.setup_fork(&me).expect("setup_fork");
    let path = native_socket(&env);
    // The client's socket exists before the descriptors run out; connecting needs none.
    let client: OwnedFd = socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .expect("socket");
    // Use up every descriptor the process may have.
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
    setrlimit(Resource::RLIMIT_NOFILE, open_descriptors() + 32, hard).expect("setrlimit");
    let mut hog = Vec::new();
    loop {
        match std::fs::File::open("/dev/null") {
            Ok(f) => hog.push(f),
            Err(e) if e.raw_os_error() == Some(nix::libc::EMFILE) => break,
            Err(e) => panic!("opening /dev/null: {e}"),
        }
    }
    connect(client.as_raw_fd(), &UnixAddr::new(&path).unwrap()).expect("connect");
    // A call through the server's loop: by its answer the loop has seen the connection and
    // failed to accept it.
    host.server
        .setup_fork(&me)
        .expect("setup_fork while out of descriptors");
    drop(hog);
    setrlimit(Resource::RLIMIT_NOFILE, soft, hard).expect("setrlimit");
    // Now the server must take the connection without being told again.
    let mut s = UnixStream::from(client);
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&native_hello(&me, &env)).unwrap();
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap_or_else(|e| {
        panic!("no welcome 10 s after descriptors were free again: the server never took the connection ({e})")
    });
    let mut body = vec![0; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).unwrap();
    match decode_body::<Welcome>(&body).unwrap() {
        Welcome::Accepted { .. } => {}
        refused => panic!("refused: {refused:?}"),
    }
}

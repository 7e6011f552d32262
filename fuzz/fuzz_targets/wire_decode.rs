//! Feeds arbitrary bytes to every decoder of the native protocol: the frame splitter,
//! `decode_body` for each message type and `decode_hello`. Whatever decodes must survive a
//! second round trip. The corpus is replayed on stable by `pmix-wire/tests/fuzz_corpus.rs`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pmix_wire::fuzzing::check(data));

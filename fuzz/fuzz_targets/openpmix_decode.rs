//! Feeds arbitrary bytes to every decoder of the OpenPMIx wire format: the handshake, the
//! server's answers, the message reader, and every request, reply, notification and item
//! decoder in every dialect. Whatever decodes must encode and be a fixed point from then on.
//! The corpus is replayed on stable by `pmix-wire/tests/fuzz_corpus.rs`; its seeds are
//! messages cut from the relay captures in `pmix-wire/tests/data/openpmix`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pmix_wire::fuzzing::check_openpmix(data));

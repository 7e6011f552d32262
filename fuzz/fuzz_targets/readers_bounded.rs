//! Feeds arbitrary bytes, in pieces, to the stream readers of the native and the OpenPMIx
//! wire: what a reader holds stays within what arrived, and its "a whole unit is here" answer
//! agrees with what it then hands out. The corpus is replayed on stable by
//! `pmix-wire/tests/fuzz_corpus.rs`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pmix_wire::fuzzing::check_readers(data));

//! Feeds arbitrary bytes to the job image reader and asks whatever parses every question a
//! client or server asks of an image. The corpus is replayed on stable by
//! `pmix-wire/tests/fuzz_corpus.rs`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pmix_wire::fuzzing::check_image(data));

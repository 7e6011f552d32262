//! Feeds arbitrary bytes to the tree's frame reader and message decoder (`pmix_tree::msg`):
//! nothing panics, and whatever decodes survives a second round trip. The corpus is replayed
//! on stable by `pmix-tree/tests/fuzz_corpus.rs`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pmix_tree::msg::fuzz_check(data));

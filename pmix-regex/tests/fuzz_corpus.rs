//! Replays every input of the `regex_parse` fuzz corpus on stable, with the fuzz target's
//! checks: no panic, and whatever parses generates again and parses back the same.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use pmix_regex::{
    Form, ParseLimits, generate_ppn_with, generate_regex_with, parse_ppn_ranges, parse_ppn_with,
    parse_regex_with,
};

/// Same body as `fuzz/fuzz_targets/regex_parse.rs`; returns how many parsers accepted `data`.
fn check(data: &[u8]) -> usize {
    let mut limits = ParseLimits::default();
    limits.max_items = 1 << 16;
    limits.max_bytes = 1 << 20;
    let mut accepted = 0;

    if let Ok(nodes) = parse_regex_with(data, &limits) {
        accepted += 1;
        for form in [Form::Raw, Form::Native, Form::Compressed] {
            let map = generate_regex_with(&nodes, form).unwrap();
            assert_eq!(parse_regex_with(&map, &limits).unwrap(), nodes, "{form:?}");
        }
    }
    if let Ok(ranks) = parse_ppn_with(data, &limits) {
        accepted += 1;
        for form in [Form::Raw, Form::Native, Form::Compressed] {
            let map = generate_ppn_with(&ranks, form).unwrap();
            assert_eq!(parse_ppn_with(&map, &limits).unwrap(), ranks, "{form:?}");
        }
    }
    let _ = parse_ppn_ranges(data);
    accepted
}

#[test]
fn fuzz_corpus_replays_cleanly() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/regex_parse");
    let mut files = 0;
    let mut accepted = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let data = std::fs::read(&path).unwrap();
            let result = std::panic::catch_unwind(|| check(&data));
            assert!(result.is_ok(), "{} panicked", path.display());
            accepted += result.unwrap();
            files += 1;
        }
    }
    // The seeds are mostly valid maps: a replay that accepts nothing is testing nothing.
    assert!(
        files >= 10,
        "only {files} corpus files in {}",
        dir.display()
    );
    assert!(accepted >= 10, "only {accepted} parses succeeded");
}

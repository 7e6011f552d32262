//! Replays the `wire_decode` fuzz corpus on stable through the fuzz target's own checks, so
//! that every input that once found a bug (and every seed) stays a regression test.

use std::path::Path;

#[test]
fn wire_decode_corpus_replays() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/wire_decode");
    let mut replayed = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .path();
        if path.is_file() {
            let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            pmix_wire::fuzzing::check(&data);
            replayed += 1;
        }
    }
    // The seeds are the golden frames (written by `PMIX_BLESS=1 cargo test --test golden`).
    assert!(
        replayed >= 5,
        "only {replayed} corpus files in {}",
        dir.display()
    );
}

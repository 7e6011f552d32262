//! Replays the `wire_decode`, `openpmix_decode`, `readers_bounded` and `job_image` fuzz corpora on stable through the fuzz
//! targets' own checks, so that every input that once found a bug (and every seed) stays a
//! regression test.

use std::path::Path;

/// Runs `check` on every file of the corpus `name`; returns how many there were.
fn replay(name: &str, check: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(name);
    let mut replayed = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .path();
        if path.is_file() {
            let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            check(&data);
            replayed += 1;
        }
    }
    replayed
}

#[test]
fn openpmix_decode_corpus_replays() {
    // The seeds are messages cut from the captures of tests/data/openpmix.
    let replayed = replay("openpmix_decode", pmix_wire::fuzzing::check_openpmix);
    assert!(
        replayed >= 10,
        "only {replayed} openpmix_decode corpus files"
    );
}

#[test]
fn wire_decode_corpus_replays() {
    // The seeds are the golden frames (written by `PMIX_BLESS=1 cargo test --test golden`).
    let replayed = replay("wire_decode", pmix_wire::fuzzing::check);
    assert!(replayed >= 5, "only {replayed} wire_decode corpus files");
}

#[test]
fn readers_bounded_corpus_replays() {
    // The seeds: big announcements trickled in, frames and messages back to back, garbage.
    let replayed = replay("readers_bounded", pmix_wire::fuzzing::check_readers);
    assert!(
        replayed >= 4,
        "only {replayed} readers_bounded corpus files"
    );
}

#[test]
fn job_image_corpus_replays() {
    // The seeds: images of registrations and of expanded job data
    // (`PMIX_BLESS=1 cargo test -p pmix-wire --lib corpus_seeds`).
    let replayed = replay("job_image", pmix_wire::fuzzing::check_image);
    assert!(replayed >= 4, "only {replayed} job_image corpus files");
}

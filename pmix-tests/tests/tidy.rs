//! Repository hygiene checks that keep the documentation and the code honest.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn read(p: impl AsRef<Path>) -> String {
    let p = root().join(p);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
}

/// The `members = [...]` list of the root manifest.
fn workspace_members() -> Vec<String> {
    let manifest = read("Cargo.toml");
    let start = manifest
        .find("members = [")
        .expect("workspace members list");
    let list = &manifest[start..];
    let end = list.find(']').expect("end of members list");
    list[..end]
        .split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_workspace_crate_is_in_the_architecture_code_map() {
    let arch = read("docs/ARCHITECTURE.md");
    let members = workspace_members();
    assert!(
        members.len() >= 8,
        "workspace members not found: {members:?}"
    );
    let missing: Vec<_> = members
        .iter()
        .filter(|m| !arch.contains(&format!("### `{m}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/ARCHITECTURE.md has no code-map section for {missing:?}"
    );
}

#[test]
fn every_crate_opens_with_a_crate_doc() {
    for m in workspace_members() {
        let lib = root().join(&m).join("src/lib.rs");
        let main = root().join(&m).join("src/main.rs");
        let src = if lib.exists() { lib } else { main };
        let text = std::fs::read_to_string(&src).expect("crate root");
        assert!(
            text.trim_start().starts_with("//!"),
            "{} does not open with a crate doc",
            src.display()
        );
    }
}

/// Files under `dir` (recursively) with extension `.rs`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = entry.expect("dir entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn sans_io_cores_do_no_io() {
    // Sockets, threads, event loops and clock reads belong to the I/O shells only.
    let forbidden = [
        "mio::",
        "std::net",
        "os::unix::net",
        "std::thread",
        "Instant::now",
        "SystemTime::now",
        "std::fs",
        "crossbeam_channel",
        "libc::",
        "nix::",
    ];
    let cores = [
        root().join("pmix-server/src/engine"),
        root().join("pmix-server/src/frontend"),
        root().join("pmix-wire/src"),
        // The tree's state machine, its shape and its messages; its I/O shell is net.rs (and
        // auth.rs reads the nonces' randomness; sim.rs reads the clock once, to seed virtual
        // time).
        root().join("pmix-tree/src/core.rs"),
        root().join("pmix-tree/src/topology.rs"),
        root().join("pmix-tree/src/msg.rs"),
        // The client's core: pending requests, wire personalities, dispatch; and the store it
        // owns (with its fence index). Its driver is pmix-client/src/conn.rs.
        root().join("pmix-client/src/core"),
        root().join("pmix-client/src/store.rs"),
        root().join("pmix-client/src/fence_data.rs"),
    ];
    // The client's core is also free of locks: its driver holds it under one.
    let lock_free = root().join("pmix-client/src/core");
    let locks = [
        "parking_lot",
        "Mutex",
        "RwLock",
        "Condvar",
        "std::sync::atomic",
    ];
    // The one front-end part that is I/O by design: it writes the shared-memory segments
    // libpmix clients read (the ds21 store).
    let exempt = root().join("pmix-server/src/frontend/openpmix/ds21");
    let mut checked = 0;
    let mut exempted = 0;
    let mut client_core = 0;
    for dir in cores {
        let files = if dir.is_file() {
            vec![dir]
        } else {
            rust_files(&dir)
        };
        for file in files {
            if file.starts_with(&exempt) {
                exempted += 1;
                continue;
            }
            let text = std::fs::read_to_string(&file).expect("source file");
            // Tests may use a clock to seed virtual time.
            let code = text.split("#[cfg(test)]").next().unwrap_or(&text);
            // A test harness: a sibling `tests.rs`, or the `mod.rs` of a `tests/` folder (its
            // concern files are checked like any other).
            let is_test_file = file.file_name().is_some_and(|n| n == "tests.rs")
                || (file.file_name().is_some_and(|n| n == "mod.rs")
                    && file
                        .parent()
                        .and_then(|d| d.file_name())
                        .is_some_and(|d| d == "tests"));
            if is_test_file {
                continue;
            }
            checked += 1;
            for f in forbidden {
                assert!(
                    !code.contains(f),
                    "{} uses `{f}`, but it must stay sans-IO",
                    file.display()
                );
            }
            if file.starts_with(&lock_free) {
                client_core += 1;
                for f in locks {
                    assert!(
                        !code.contains(f),
                        "{} uses `{f}`, but the client's core takes no lock",
                        file.display()
                    );
                }
            }
        }
    }
    assert!(
        checked >= 5,
        "found only {checked} core files: did the layout change?"
    );
    assert!(
        client_core >= 3,
        "found only {client_core} files of the client's core: did it move?"
    );
    assert!(
        exempted > 0,
        "no file under {}: the exemption names a folder that moved",
        exempt.display()
    );
}

#[test]
fn unsafe_code_lives_only_where_the_architecture_says() {
    // `docs/ARCHITECTURE.md` ("Invariants") names these two places and argues each; any other
    // `unsafe` must be argued there first.
    let allowed = [
        root().join("pmix-server/src/frontend/openpmix/ds21/shm.rs"),
        root().join("pmix-server/src/shell.rs"),
        root().join("pmix-client/src/job_file.rs"),
    ];
    let mut seen = Vec::new();
    for krate in workspace_members() {
        let src = root().join(&krate).join("src");
        if !src.is_dir() {
            continue;
        }
        for file in rust_files(&src) {
            let text = std::fs::read_to_string(&file).expect("source file");
            let uses = text
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .any(|l| {
                    l.contains("unsafe {") || l.contains("unsafe impl") || l.contains("unsafe fn")
                });
            if uses {
                assert!(
                    allowed.contains(&file),
                    "{} has unsafe code; only {:?} may",
                    file.display(),
                    allowed
                );
                seen.push(file);
            }
        }
    }
    for a in &allowed {
        assert!(
            seen.contains(a),
            "{} no longer has unsafe code: take it off the list and out of ARCHITECTURE.md",
            a.display()
        );
    }
}

//! `src/attr/generated.rs` must be exactly what `cargo xtask gen-attrs` makes of
//! `attributes.tsv`, and the table must agree with the installed PMIx headers.
//!
//! The generator is compiled into this test from xtask's source, so the check needs no
//! subprocess and runs the very code the command runs.

#![allow(clippy::unwrap_used)]

#[path = "../../xtask/src/gen_attrs.rs"]
mod gen_attrs;

use std::path::{Path, PathBuf};

use pmix_types::DataType;
use pmix_types::attr::{ATTRIBUTES, lookup_name};

fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

#[test]
fn generated_module_is_fresh() {
    let root = workspace_root();
    let tsv = std::fs::read_to_string(root.join(gen_attrs::TSV_PATH)).unwrap();
    let checked_in = std::fs::read_to_string(root.join(gen_attrs::OUT_PATH)).unwrap();
    let fresh = match gen_attrs::generate(&tsv) {
        Ok(text) => text,
        Err(errors) => panic!("{} is invalid:\n{}", gen_attrs::TSV_PATH, errors.join("\n")),
    };
    if fresh != checked_in {
        let line = fresh
            .lines()
            .zip(checked_in.lines())
            .position(|(a, b)| a != b)
            .map_or_else(|| "the end".to_owned(), |i| format!("line {}", i + 1));
        panic!(
            "{} is stale (first difference at {line}); run `cargo xtask gen-attrs`",
            gen_attrs::OUT_PATH
        );
    }
}

#[test]
fn generator_knows_exactly_the_data_types() {
    let mut ours: Vec<&str> = gen_attrs::TYPE_NAMES.to_vec();
    let mut theirs: Vec<&str> = DataType::NAMED.iter().map(|(_, n)| *n).collect();
    ours.sort_unstable();
    theirs.sort_unstable();
    assert_eq!(ours, theirs, "update TYPE_NAMES in xtask/src/gen_attrs.rs");
}

#[test]
fn every_row_is_in_the_table() {
    let root = workspace_root();
    let tsv = std::fs::read_to_string(root.join(gen_attrs::TSV_PATH)).unwrap();
    let rows = gen_attrs::parse(&tsv).unwrap();
    assert_eq!(rows.len(), ATTRIBUTES.len());
    for row in &rows {
        let attr = lookup_name(&row.name).unwrap();
        assert_eq!(attr.key, row.key, "line {}", row.line);
        assert_eq!(
            attr.ty,
            DataType::from_name(&row.ty).unwrap(),
            "line {}",
            row.line
        );
        assert_eq!(attr.levels.len(), row.levels.len(), "line {}", row.line);
    }
}

/// The value type a header comment gives, as a `DataType` name. Only the spellings the
/// headers use; a new one makes the test below fail, so it gets a deliberate mapping.
fn data_type_of(c_type: &str) -> Option<&'static str> {
    Some(match c_type {
        "bool" => "BOOL",
        "char*" => "STRING",
        "int" => "INT",
        "int32_t" => "INT32",
        "uint16_t" => "UINT16",
        "uint32_t" => "UINT32",
        "uint64_t" => "UINT64",
        "size_t" => "SIZE",
        "pid_t" => "PID",
        "time_t" => "TIME",
        "float" => "FLOAT",
        "double" => "DOUBLE",
        "pmix_rank_t" => "PROC_RANK",
        "pmix_status_t" => "STATUS",
        "pmix_proc_t*" => "PROC",
        "pmix_data_array_t*" => "DATA_ARRAY",
        "pmix_byte_object_t" => "BYTE_OBJECT",
        "pmix_envar_t*" => "ENVAR",
        "pmix_scope_t" => "SCOPE",
        "pmix_data_range_t" => "DATA_RANGE",
        "pmix_persistence_t" => "PERSIST",
        "pmix_proc_state_t" => "PROC_STATE",
        "pmix_cpuset_t*" => "PROC_CPUSET",
        "pmix_topology_t*" => "TOPO",
        "pmix_geometry_t" => "GEOMETRY",
        "pmix_link_state_t" => "LINK_STATE",
        "pmix_device_type_t" => "DEVTYPE",
        "pmix_storage_medium_t" => "STOR_MEDIUM",
        "pmix_storage_accessibility_t" => "STOR_ACCESS",
        "pmix_storage_persistence_t" => "STOR_PERSIST",
        "pmix_storage_access_type_t" => "STOR_ACCESS_TYPE",
        "void*" | "pointer" | "struct event_base *" | "hwloc_topology_t" => "POINTER",
        "varies" => "UNDEF",
        _ => return None,
    })
}

/// `(name, key, type comment)` of every `#define PMIX_x "pmix..."` line of a header.
fn header_attributes(text: &str) -> Vec<(String, String, Option<String>)> {
    let mut found = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("#define PMIX_") else {
            continue;
        };
        let Some((name, rest)) = rest.split_once(char::is_whitespace) else {
            continue;
        };
        let Some(rest) = rest.trim_start().strip_prefix("\"pmix") else {
            continue;
        };
        let Some((key_tail, rest)) = rest.split_once('"') else {
            continue;
        };
        let c_type = rest
            .trim_start()
            .strip_prefix("//")
            .and_then(|c| c.trim_start().strip_prefix('('))
            .and_then(|c| c.split_once(')'))
            .map(|(t, _)| t.trim().to_owned());
        found.push((name.to_owned(), format!("pmix{key_tail}"), c_type));
    }
    found
}

fn header_dir() -> PathBuf {
    std::env::var_os("PMIX_INCLUDE_DIR")
        .map(Into::into)
        .unwrap_or_else(|| "/usr/lib/x86_64-linux-gnu/pmix2/include".into())
}

#[test]
fn table_matches_the_installed_headers() {
    let dir = header_dir();
    // CI installs libpmix-dev, so this comparison runs there; without the headers there is
    // nothing to compare against.
    let Ok(common) = std::fs::read_to_string(dir.join("pmix_common.h")) else {
        return;
    };
    let mut found = header_attributes(&common);
    // A parser that silently stopped matching would make the loop below vacuous.
    assert!(found.len() >= 400, "only {} attributes parsed", found.len());
    if let Ok(deprecated) = std::fs::read_to_string(dir.join("pmix_deprecated.h")) {
        found.extend(header_attributes(&deprecated));
    }
    let mut problems = Vec::new();
    for (name, key, c_type) in &found {
        let Some(attr) = lookup_name(name) else {
            problems.push(format!("PMIX_{name} ({key}) is missing"));
            continue;
        };
        if attr.key != key {
            problems.push(format!(
                "PMIX_{name}: key {} but the header says {key}",
                attr.key
            ));
        }
        // Only PMIX_ATTR_UNDEF has no type comment; the table gives it UNDEF.
        let want = match c_type.as_deref() {
            None => Some("UNDEF"),
            Some(c) => data_type_of(c),
        };
        match want {
            None => problems.push(format!("PMIX_{name}: no mapping for C type {c_type:?}")),
            Some(want) if attr.ty.name() != Some(want) => problems.push(format!(
                "PMIX_{name}: type {:?} but the header says {c_type:?}",
                attr.ty
            )),
            Some(_) => {}
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

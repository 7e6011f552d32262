//! `gen-attrs`: turns `pmix-types/attributes.tsv` into `pmix-types/src/attr/generated.rs`.
//!
//! This file is pure (text in, text out) and depends on nothing but `std`, because the
//! freshness test of pmix-types compiles it a second time via `#[path]` and must produce the
//! very same output the command wrote.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Where the table lives, relative to the workspace root.
pub(crate) const TSV_PATH: &str = "pmix-types/attributes.tsv";
/// Where the generated module goes, relative to the workspace root.
pub(crate) const OUT_PATH: &str = "pmix-types/src/attr/generated.rs";

/// The names of `pmix_types::DataType`'s constants, the valid `TYPE` cells. Kept here so the
/// generator needs nothing but `std` (it must run even when pmix-types does not build); the
/// freshness test of pmix-types checks this list against `DataType::NAMED`.
pub(crate) const TYPE_NAMES: &[&str] = &[
    "UNDEF",
    "BOOL",
    "BYTE",
    "STRING",
    "SIZE",
    "PID",
    "INT",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "UINT",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "FLOAT",
    "DOUBLE",
    "TIMEVAL",
    "TIME",
    "STATUS",
    "VALUE",
    "PROC",
    "APP",
    "INFO",
    "PDATA",
    "BYTE_OBJECT",
    "KVAL",
    "PERSIST",
    "POINTER",
    "SCOPE",
    "DATA_RANGE",
    "COMMAND",
    "INFO_DIRECTIVES",
    "DATA_TYPE",
    "PROC_STATE",
    "PROC_INFO",
    "DATA_ARRAY",
    "PROC_RANK",
    "QUERY",
    "COMPRESSED_STRING",
    "ALLOC_DIRECTIVE",
    "IOF_CHANNEL",
    "ENVAR",
    "COORD",
    "REGATTR",
    "REGEX",
    "JOB_STATE",
    "LINK_STATE",
    "PROC_CPUSET",
    "GEOMETRY",
    "DEVICE_DIST",
    "ENDPOINT",
    "TOPO",
    "DEVTYPE",
    "LOCTYPE",
    "COMPRESSED_BYTE_OBJECT",
    "PROC_NSPACE",
    "PROC_STATS",
    "DISK_STATS",
    "NET_STATS",
    "NODE_STATS",
    "BUFFER",
    "DATA_BUFFER",
    "STOR_MEDIUM",
    "STOR_ACCESS",
    "STOR_PERSIST",
    "STOR_ACCESS_TYPE",
];

/// The column heading line the table must start with (after comments).
const HEADING: &str = "NAME\tKEY\tTYPE\tLEVELS\tSTATE";

/// Keys the standard gives to more than one attribute. A repeated key outside this list is a
/// typo; one in it that is no longer repeated means the list went stale. The first row with a
/// key is the one `lookup` returns.
const SHARED_KEYS: &[&str] = &[
    // PROC_INFO_ARRAY and its older name PROC_DATA.
    "pmix.pdata",
    // QUERY_QUALIFIERS and QUERY_SUPPORTED_QUALIFIERS.
    "pmix.qry.quals",
    // The header gives CHECKPOINT_SIGNAL's key to CHECKPOINT_TIMEOUT as well.
    "pmix.jctrl.ckptsig",
    // FABRIC_COORDINATES and FABRIC_DEVICE_COORDINATES.
    "pmix.fab.coord",
    // ALLOC_FABRIC_* and their deprecated ALLOC_NETWORK_* names.
    "pmix.alloc.net",
    "pmix.alloc.netid",
    "pmix.alloc.netqos",
    "pmix.alloc.nettype",
    "pmix.alloc.netplane",
    "pmix.alloc.endpts",
    "pmix.alloc.endpts.nd",
    "pmix.alloc.nsec",
];

/// The storage levels in their canonical order, with the `Level` variant each one becomes.
const LEVELS: &[(&str, &str)] = &[
    ("session", "Session"),
    ("job", "Job"),
    ("app", "App"),
    ("node", "Node"),
    ("proc", "Proc"),
    ("directive", "Directive"),
];

/// Whether the standard still carries an attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// In `pmix_common.h`.
    Current,
    /// In `pmix_deprecated.h`.
    Deprecated,
    /// Marked internal to OpenPMIx, yet seen on the wire.
    Internal,
}

/// One row of the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Row {
    /// 1-based line number, for messages.
    pub(crate) line: usize,
    /// Name without `PMIX_`.
    pub(crate) name: String,
    /// Key string.
    pub(crate) key: String,
    /// `DataType` constant name.
    pub(crate) ty: String,
    /// Indices into [`LEVELS`], strictly increasing.
    pub(crate) levels: Vec<usize>,
    /// Lifecycle.
    pub(crate) state: State,
}

/// Parses and validates the table; every problem found is reported, each with its line.
pub(crate) fn parse(tsv: &str) -> Result<Vec<Row>, Vec<String>> {
    parse_with(tsv, TYPE_NAMES, SHARED_KEYS)
}

fn parse_with(
    tsv: &str,
    type_names: &[&str],
    shared_keys: &[&str],
) -> Result<Vec<Row>, Vec<String>> {
    let mut errors = Vec::new();
    let mut rows: Vec<Row> = Vec::new();
    let mut seen_heading = false;
    for (index, raw) in tsv.lines().enumerate() {
        let line = index + 1;
        if raw.trim().is_empty() || raw.starts_with('#') {
            continue;
        }
        if !seen_heading {
            if raw != HEADING {
                errors.push(format!("line {line}: expected the heading `{HEADING}`"));
            }
            seen_heading = true;
            continue;
        }
        match parse_row(line, raw, type_names) {
            Ok(row) => rows.push(row),
            Err(e) => errors.push(format!("line {line}: {e}")),
        }
    }
    if !seen_heading {
        errors.push("the table has no heading line".to_owned());
    }

    let mut by_name: BTreeMap<&str, usize> = BTreeMap::new();
    let mut by_key: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for row in &rows {
        if let Some(first) = by_name.insert(&row.name, row.line) {
            errors.push(format!(
                "line {}: {} is already defined on line {first}",
                row.line, row.name
            ));
        }
        by_key.entry(&row.key).or_default().push(row.line);
    }
    for (key, lines) in &by_key {
        if lines.len() > 1 && !shared_keys.contains(key) {
            errors.push(format!(
                "key {key} is used on lines {lines:?}; if the standard really shares it, \
                 add it to SHARED_KEYS"
            ));
        }
    }
    for key in shared_keys {
        if by_key.get(key).is_none_or(|lines| lines.len() < 2) {
            errors.push(format!(
                "SHARED_KEYS lists {key}, which the table does not share"
            ));
        }
    }

    if errors.is_empty() {
        Ok(rows)
    } else {
        Err(errors)
    }
}

fn parse_row(line: usize, raw: &str, type_names: &[&str]) -> Result<Row, String> {
    let cols: Vec<&str> = raw.split('\t').collect();
    let [name, key, ty, levels, state] = cols[..] else {
        return Err(format!(
            "expected 5 tab-separated columns, found {}",
            cols.len()
        ));
    };
    let is_ident = |s: &str| {
        s.chars().next().is_some_and(|c| c.is_ascii_uppercase())
            && s.chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    };
    if !is_ident(name) {
        return Err(format!(
            "name {name:?} must be upper case without the PMIX_ prefix"
        ));
    }
    if name.starts_with("PMIX_") {
        return Err(format!("name {name} must not carry the PMIX_ prefix"));
    }
    // Keys are emitted inside Rust string literals and docs; keeping them to this alphabet
    // means no escaping is ever needed.
    if !key.starts_with("pmix.")
        || !key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return Err(format!("key {key:?} is not a pmix.* key"));
    }
    if !type_names.contains(&ty) {
        return Err(format!("type {ty:?} is not a DataType constant"));
    }
    let mut level_ids = Vec::new();
    for level in levels.split(',') {
        let Some(id) = LEVELS.iter().position(|(l, _)| *l == level) else {
            return Err(format!("unknown level {level:?}"));
        };
        if level_ids.last().is_some_and(|&last| last >= id) {
            return Err(format!(
                "levels {levels:?} must be distinct and in the order session,job,app,node,proc"
            ));
        }
        level_ids.push(id);
    }
    let directive = LEVELS.len() - 1;
    if level_ids.contains(&directive) && level_ids.len() > 1 {
        return Err("`directive` means not stored, so it cannot be combined with levels".into());
    }
    let state = match state {
        "current" => State::Current,
        "deprecated" => State::Deprecated,
        "internal" => State::Internal,
        other => {
            return Err(format!(
                "state {other:?} is not current, deprecated or internal"
            ));
        }
    };
    Ok(Row {
        line,
        name: name.to_owned(),
        key: key.to_owned(),
        ty: ty.to_owned(),
        levels: level_ids,
        state,
    })
}

/// The whole text of `generated.rs` for this table.
pub(crate) fn generate(tsv: &str) -> Result<String, Vec<String>> {
    let rows = parse(tsv)?;
    Ok(render(&rows))
}

fn render(rows: &[Row]) -> String {
    let mut out = String::new();
    out.push_str(
        "// @generated by `cargo xtask gen-attrs` from pmix-types/attributes.tsv. Do not edit.\n",
    );
    out.push_str("use super::{Attribute, Level};\nuse crate::DataType;\n");

    let first_with_key = |key: &str| rows.iter().position(|r| r.key == key);
    for (i, row) in rows.iter().enumerate() {
        out.push('\n');
        let _ = writeln!(out, "/// {}", describe(row));
        let others: Vec<String> = rows
            .iter()
            .filter(|r| r.key == row.key && r.name != row.name)
            .map(|r| format!("`PMIX_{}`", r.name))
            .collect();
        if !others.is_empty() {
            out.push_str("///\n");
            let which = match first_with_key(&row.key) {
                Some(first) if first != i => format!("`PMIX_{}`", rows[first].name),
                _ => "this one".to_owned(),
            };
            let _ = writeln!(
                out,
                "/// Shares its key with {}; [`lookup`](super::lookup) returns {which}.",
                others.join(", ")
            );
        }
        let _ = writeln!(out, "pub const {}: &str = {:?};", row.name, row.key);
    }

    out.push_str("\n/// Every attribute of the table, in the order of `attributes.tsv`.\n");
    out.push_str("pub static ATTRIBUTES: &[Attribute] = &[\n");
    for row in rows {
        let levels: Vec<String> = row
            .levels
            .iter()
            .map(|&l| format!("Level::{}", LEVELS[l].1))
            .collect();
        let _ = writeln!(
            out,
            "    Attribute {{ name: {:?}, key: {}, ty: DataType::{}, levels: &[{}] }},",
            row.name,
            row.name,
            row.ty,
            levels.join(", ")
        );
    }
    out.push_str("];\n");

    // Sorted indices let `lookup` binary-search without building anything at run time; a
    // shared key keeps only its first row so the answer does not depend on the sort.
    let mut by_key: Vec<usize> = (0..rows.len())
        .filter(|&i| first_with_key(&rows[i].key) == Some(i))
        .collect();
    by_key.sort_by(|&a, &b| rows[a].key.cmp(&rows[b].key));
    let mut by_name: Vec<usize> = (0..rows.len()).collect();
    by_name.sort_by(|&a, &b| rows[a].name.cmp(&rows[b].name));
    write_index(
        &mut out,
        "BY_KEY",
        "key (first row of a shared key only)",
        &by_key,
    );
    write_index(&mut out, "BY_NAME", "name", &by_name);
    out
}

fn write_index(out: &mut String, ident: &str, what: &str, indices: &[usize]) {
    let _ = writeln!(out, "\n/// Indices into [`ATTRIBUTES`] sorted by {what}.");
    let _ = writeln!(out, "pub(super) static {ident}: &[u16] = &[");
    for chunk in indices.chunks(16) {
        let line: Vec<String> = chunk.iter().map(usize::to_string).collect();
        let _ = writeln!(out, "    {},", line.join(", "));
    }
    out.push_str("];\n");
}

/// "`PMIX_JOB_SIZE` (`pmix.job.size`): uint32, job level."
fn describe(row: &Row) -> String {
    let ty = row.ty.to_ascii_lowercase();
    let names: Vec<&str> = row.levels.iter().map(|&l| LEVELS[l].0).collect();
    let levels = match names.as_slice() {
        ["directive"] => "directive".to_owned(),
        [one] => format!("{one} level"),
        many => format!("{} levels", many.join("/")),
    };
    let ty = if ty == "undef" {
        "type varies".to_owned()
    } else {
        ty
    };
    let state = match row.state {
        State::Current => "",
        State::Deprecated => " Deprecated by the standard.",
        State::Internal => " Internal to OpenPMIx, but seen on the wire.",
    };
    format!(
        "`PMIX_{}` (`{}`): {ty}, {levels}.{state}",
        row.name, row.key
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const TYPES: &[&str] = &["UINT32", "STRING", "BOOL", "DATA_ARRAY"];

    fn table(rows: &str) -> String {
        format!("# comment\n{HEADING}\n{rows}")
    }

    fn errors(rows: &str, shared: &[&str]) -> Vec<String> {
        parse_with(&table(rows), TYPES, shared)
            .err()
            .unwrap_or_default()
    }

    #[test]
    fn a_good_row_renders_its_doc_constant_and_entry() {
        let rows = parse_with(
            &table("JOB_SIZE\tpmix.job.size\tUINT32\tjob\tcurrent\n"),
            TYPES,
            &[],
        );
        let Ok(rows) = rows else {
            panic!("rejected: {rows:?}");
        };
        let out = render(&rows);
        assert!(out.contains("/// `PMIX_JOB_SIZE` (`pmix.job.size`): uint32, job level.\n"));
        assert!(out.contains("pub const JOB_SIZE: &str = \"pmix.job.size\";\n"));
        assert!(out.contains("ty: DataType::UINT32, levels: &[Level::Job] }"));
    }

    #[test]
    fn duplicate_names_are_rejected() {
        let e = errors(
            "A\tpmix.a\tBOOL\tjob\tcurrent\nA\tpmix.b\tBOOL\tjob\tcurrent\n",
            &[],
        );
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].contains("line 4: A is already defined on line 3"),
            "{e:?}"
        );
    }

    #[test]
    fn repeated_keys_need_to_be_known() {
        let rows = "A\tpmix.a\tBOOL\tjob\tcurrent\nB\tpmix.a\tBOOL\tjob\tcurrent\n";
        let e = errors(rows, &[]);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("key pmix.a is used on lines [3, 4]"), "{e:?}");
        assert!(errors(rows, &["pmix.a"]).is_empty());
    }

    #[test]
    fn a_stale_shared_key_is_reported() {
        let e = errors("A\tpmix.a\tBOOL\tjob\tcurrent\n", &["pmix.a"]);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("SHARED_KEYS lists pmix.a"), "{e:?}");
    }

    #[test]
    fn a_shared_key_is_indexed_once_and_cross_referenced() {
        let rows = "Z\tpmix.z\tBOOL\tproc\tcurrent\n\
                    B\tpmix.x\tDATA_ARRAY\tproc\tcurrent\n\
                    A\tpmix.x\tDATA_ARRAY\tproc\tdeprecated\n";
        let parsed = parse_with(&table(rows), TYPES, &["pmix.x"]);
        let Ok(parsed) = parsed else {
            panic!("rejected: {parsed:?}");
        };
        let out = render(&parsed);
        assert!(out.contains(
            "/// Shares its key with `PMIX_A`; [`lookup`](super::lookup) returns this one.\n\
             pub const B: &str"
        ));
        assert!(out.contains(
            "/// Shares its key with `PMIX_B`; [`lookup`](super::lookup) returns `PMIX_B`.\n\
             pub const A: &str"
        ));
        assert!(out.contains("proc level. Deprecated by the standard.\n"));
        // pmix.x (row 1 only) sorts before pmix.z (row 0); names sort A, B, Z.
        assert!(out.contains("pub(super) static BY_KEY: &[u16] = &[\n    1, 0,\n];\n"));
        assert!(out.contains("pub(super) static BY_NAME: &[u16] = &[\n    2, 1, 0,\n];\n"));
    }

    #[test]
    fn several_levels_and_varying_types_are_described() {
        let parsed = parse_with(
            &table("M\tpmix.m\tUNDEF\tsession,job,app\tcurrent\n"),
            &["UNDEF"],
            &[],
        );
        let Ok(parsed) = parsed else {
            panic!("rejected: {parsed:?}");
        };
        assert_eq!(
            describe(&parsed[0]),
            "`PMIX_M` (`pmix.m`): type varies, session/job/app levels."
        );
    }

    #[test]
    fn bad_cells_are_rejected_with_their_line() {
        let cases = [
            ("A\tpmix.a\tUINT31\tjob\tcurrent", "not a DataType"),
            ("A\tpmix.a\tBOOL\tjobs\tcurrent", "unknown level"),
            ("A\tpmix.a\tBOOL\tproc,job\tcurrent", "in the order"),
            ("A\tpmix.a\tBOOL\tjob,job\tcurrent", "distinct"),
            (
                "A\tpmix.a\tBOOL\tjob,directive\tcurrent",
                "cannot be combined",
            ),
            ("A\tpmix.a\tBOOL\tjob\tnew", "state"),
            ("A\tpmix.a\tBOOL\tjob", "5 tab-separated"),
            ("PMIX_A\tpmix.a\tBOOL\tjob\tcurrent", "prefix"),
            ("a\tpmix.a\tBOOL\tjob\tcurrent", "upper case"),
            ("A\tpmix.\"a\tBOOL\tjob\tcurrent", "not a pmix"),
            ("A\tother.a\tBOOL\tjob\tcurrent", "not a pmix"),
        ];
        for (row, want) in cases {
            let e = errors(&format!("{row}\n"), &[]);
            assert!(
                e.len() == 1 && e[0].starts_with("line 3: ") && e[0].contains(want),
                "{row:?} gave {e:?}"
            );
        }
    }

    #[test]
    fn the_heading_is_required() {
        let e = parse_with("A\tpmix.a\tBOOL\tjob\tcurrent\n", TYPES, &[])
            .err()
            .unwrap_or_default();
        assert!(
            e.iter().any(|m| m.contains("expected the heading")),
            "{e:?}"
        );
    }
}

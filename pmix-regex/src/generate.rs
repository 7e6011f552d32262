//! Generators for node maps (`generate_regex`) and process maps (`generate_ppn`).

use crate::error::{GenerateError, ParseError};
use crate::{Form, blob, num, parse};

/// Builds a node map (`PMIX_NODE_MAP`) from node names, in the default [`Form::Raw`].
///
/// Names must be non-empty and contain neither `,` nor NUL. An empty list is allowed.
///
/// ```
/// use pmix_regex::{generate_regex, parse_regex};
///
/// let map = generate_regex(&["node01", "node02", "login1"]).unwrap();
/// assert_eq!(map, b"raw:node01,node02,login1");
/// assert_eq!(parse_regex(&map).unwrap(), ["node01", "node02", "login1"]);
/// ```
pub fn generate_regex<S: AsRef<str>>(nodes: &[S]) -> Result<Vec<u8>, GenerateError> {
    generate_regex_with(nodes, Form::Raw)
}

/// Builds a node map in the given form.
///
/// [`Form::Native`] produces exactly what OpenPMIx's native component produces (the default of
/// OpenPMIx 4.2.0–4.2.7), except when a name contains `[` or `]`, which that form cannot carry:
/// the whole map is then [`Form::Raw`]. [`Form::Compressed`] always produces a blob.
///
/// ```
/// use pmix_regex::{Form, generate_regex_with, parse_regex};
///
/// let nodes = ["nid00001", "nid00002", "nid00003", "login1", "login2", "gpu-01"];
/// let map = generate_regex_with(&nodes, Form::Native).unwrap();
/// assert_eq!(map, b"pmix[nid[5:1-3],login[1:1-2],gpu-01]");
/// assert_eq!(parse_regex(&map).unwrap(), nodes);
///
/// let blob = generate_regex_with(&nodes, Form::Compressed).unwrap();
/// assert!(blob.starts_with(b"blob:\0component=zlib:\0size="));
/// assert_eq!(parse_regex(&blob).unwrap(), nodes);
/// ```
pub fn generate_regex_with<S: AsRef<str>>(
    nodes: &[S],
    form: Form,
) -> Result<Vec<u8>, GenerateError> {
    for (index, name) in nodes.iter().enumerate() {
        check_name(index, name.as_ref())?;
    }
    Ok(match form {
        Form::Native => match native_nodes(nodes) {
            Some(map) => map,
            None => prefixed(crate::RAW_PREFIX.as_bytes(), &joined_names(nodes)),
        },
        Form::Compressed => blob::compress(&joined_names(nodes))?,
        Form::Raw => prefixed(crate::RAW_PREFIX.as_bytes(), &joined_names(nodes)),
    })
}

/// Builds a node map from the comma-separated text the reference's `PMIx_generate_regex`
/// takes, e.g. `"n1,n2,n3"`.
///
/// The raw and compressed forms carry the text byte for byte, so the output equals the
/// reference's for the same text and form. Empty names (`a,,b`) are an error.
///
/// ```
/// use pmix_regex::{Form, generate_regex_str};
///
/// assert_eq!(generate_regex_str("c001,c002,c005", Form::Raw).unwrap(), b"raw:c001,c002,c005");
/// assert_eq!(
///     generate_regex_str("c001,c002,c005", Form::Native).unwrap(),
///     b"pmix[c[3:1-2,5]]"
/// );
/// assert!(generate_regex_str("a,,b", Form::Raw).is_err());
/// ```
pub fn generate_regex_str(input: &str, form: Form) -> Result<Vec<u8>, GenerateError> {
    let names = parse::split_names(input, 0, usize::MAX)?;
    if let Some(p) = input.bytes().position(|c| c == 0) {
        return Err(ParseError::Unexpected {
            pos: p,
            found: 0,
            expected: "text without NUL",
        }
        .into());
    }
    generate_regex_with(&names, form)
}

/// Builds a process map (`PMIX_PROC_MAP`) from the ranks on each node (same node order as the
/// node map), in the default [`Form::Raw`].
///
/// Ranks are listed one by one (`raw:0,1,2,3;4,5,6,7`), as PRRTE feeds them to the reference,
/// so every OpenPMIx reads the result without having to expand ranges. Every node must have at
/// least one rank.
///
/// ```
/// use pmix_regex::{generate_ppn, parse_ppn};
///
/// let ranks = vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]];
/// let map = generate_ppn(&ranks).unwrap();
/// assert_eq!(map, b"raw:0,1,2,3;4,5,6,7");
/// assert_eq!(parse_ppn(&map).unwrap(), ranks);
/// ```
pub fn generate_ppn<R: AsRef<[u32]>>(ranks_per_node: &[R]) -> Result<Vec<u8>, GenerateError> {
    generate_ppn_with(ranks_per_node, Form::Raw)
}

/// Builds a process map in the given form.
///
/// [`Form::Native`] folds consecutive ranks into `a-b` runs, and, like the reference, falls
/// back to [`Form::Raw`] when that would be longer than the raw text. Unlike the reference it
/// never loses ranks.
///
/// ```
/// use pmix_regex::{Form, generate_ppn_with, parse_ppn};
///
/// let ranks = vec![(0..8).collect::<Vec<u32>>(), (8..16).collect()];
/// let map = generate_ppn_with(&ranks, Form::Native).unwrap();
/// assert_eq!(map, b"pmix[0-7;8-15]");
/// assert_eq!(parse_ppn(&map).unwrap(), ranks);
///
/// // Scattered ranks gain nothing from runs: raw instead.
/// assert_eq!(generate_ppn_with(&[[0, 2], [1, 3]], Form::Native).unwrap(), b"raw:0,2;1,3");
/// ```
pub fn generate_ppn_with<R: AsRef<[u32]>>(
    ranks_per_node: &[R],
    form: Form,
) -> Result<Vec<u8>, GenerateError> {
    if let Some(index) = ranks_per_node.iter().position(|r| r.as_ref().is_empty()) {
        return Err(GenerateError::EmptyNode { index });
    }
    match form {
        Form::Native => {
            let native = native_ppn(
                ranks_per_node
                    .iter()
                    .map(|r| r.as_ref().iter().map(|&x| (x, x))),
            );
            // The reference compares its output, prefix included, with its input.
            if native.len() <= explicit_len(ranks_per_node) {
                Ok(native)
            } else {
                Ok(prefixed(
                    crate::RAW_PREFIX.as_bytes(),
                    &explicit_ranks(ranks_per_node),
                ))
            }
        }
        Form::Compressed => blob::compress(&explicit_ranks(ranks_per_node)),
        Form::Raw => Ok(prefixed(
            crate::RAW_PREFIX.as_bytes(),
            &explicit_ranks(ranks_per_node),
        )),
    }
}

/// Builds a process map from the text the reference's `PMIx_generate_ppn` takes: per-node
/// entries separated by `;`, ranks or `a-b` ranges separated by `,`, e.g.
/// `"1-4;2-5;8,10,11,12;6,7,9"`.
///
/// The raw and compressed forms carry the text byte for byte. [`Form::Native`] behaves like the
/// reference's native component (used when not longer than the input, else raw), except that
/// a range continuing a run extends it by its full length, so no rank is lost.
///
/// ```
/// use pmix_regex::{Form, generate_ppn_str, parse_ppn};
///
/// assert_eq!(generate_ppn_str("0-3;4-7", Form::Raw).unwrap(), b"raw:0-3;4-7");
/// // The reference emits "pmix[0-8]" here, losing ranks 9-15.
/// let map = generate_ppn_str("0,1,2,3,4,5,6,7,8-15", Form::Native).unwrap();
/// assert_eq!(map, b"pmix[0-15]");
/// assert_eq!(parse_ppn(&map).unwrap(), [(0..16).collect::<Vec<u32>>()]);
/// ```
pub fn generate_ppn_str(input: &str, form: Form) -> Result<Vec<u8>, GenerateError> {
    // Validates without expanding, so `0-4000000000` costs nothing.
    let runs = parse::rank_runs(input.as_bytes(), 0, usize::MAX)?;
    match form {
        Form::Native => {
            let native = native_ppn(runs.nodes().map(|node| node.iter().copied()));
            if native.len() <= input.len() {
                Ok(native)
            } else {
                Ok(prefixed(crate::RAW_PREFIX.as_bytes(), input.as_bytes()))
            }
        }
        Form::Compressed => blob::compress(input.as_bytes()),
        Form::Raw => Ok(prefixed(crate::RAW_PREFIX.as_bytes(), input.as_bytes())),
    }
}

fn check_name(index: usize, name: &str) -> Result<(), GenerateError> {
    if name.is_empty() {
        return Err(GenerateError::EmptyName { index });
    }
    match name.bytes().position(|c| c == b',' || c == 0) {
        Some(pos) => Err(GenerateError::InvalidName {
            index,
            pos,
            byte: name.as_bytes()[pos],
        }),
        None => Ok(()),
    }
}

fn prefixed(prefix: &[u8], text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(prefix.len() + text.len());
    out.extend_from_slice(prefix);
    out.extend_from_slice(text);
    out
}

fn joined_names<S: AsRef<str>>(nodes: &[S]) -> Vec<u8> {
    let len = nodes.iter().map(|n| n.as_ref().len() + 1).sum();
    let mut out = Vec::with_capacity(len);
    for (i, name) in nodes.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(name.as_ref().as_bytes());
    }
    out
}

/// Length of [`explicit_ranks`]'s output, without building it.
fn explicit_len<R: AsRef<[u32]>>(ranks_per_node: &[R]) -> usize {
    let digits: usize = ranks_per_node
        .iter()
        .flat_map(|r| r.as_ref())
        .map(|&r| num::dec_len(u64::from(r)))
        .sum();
    let ranks: usize = ranks_per_node.iter().map(|r| r.as_ref().len()).sum();
    // One separator after every rank but the last.
    digits + ranks.saturating_sub(1)
}

/// `0,1,2,3;4,5,6,7`: every rank listed, nodes separated by `;`.
fn explicit_ranks<R: AsRef<[u32]>>(ranks_per_node: &[R]) -> Vec<u8> {
    let mut out = Vec::with_capacity(explicit_len(ranks_per_node));
    for (i, node) in ranks_per_node.iter().enumerate() {
        if i > 0 {
            out.push(b';');
        }
        for (j, &rank) in node.as_ref().iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            num::push_dec(&mut out, u64::from(rank));
        }
    }
    out
}

/// `pmix[...]` from per-node sequences of inclusive ranges; a range that starts right after
/// the previous one ends extends it.
fn native_ppn<N, I>(nodes: N) -> Vec<u8>
where
    N: Iterator<Item = I>,
    I: Iterator<Item = (u32, u32)>,
{
    let mut out = Vec::new();
    out.extend_from_slice(crate::NATIVE_PREFIX.as_bytes());
    for (i, node) in nodes.enumerate() {
        if i > 0 {
            out.push(b';');
        }
        let mut current: Option<(u32, u32)> = None;
        for (start, end) in node {
            current = match current {
                Some((s, e)) if e.checked_add(1) == Some(start) => Some((s, end)),
                Some((s, e)) => {
                    push_run(&mut out, (u64::from(s), u64::from(e)));
                    out.push(b',');
                    Some((start, end))
                }
                None => Some((start, end)),
            };
        }
        if let Some((s, e)) = current {
            push_run(&mut out, (u64::from(s), u64::from(e)));
        }
    }
    out.push(b']');
    out
}

fn push_run(out: &mut Vec<u8>, (start, end): (u64, u64)) {
    num::push_dec(out, start);
    if end != start {
        out.push(b'-');
        num::push_dec(out, end);
    }
}

/// A name the native form can fold: `prefix`, a number printed `width` digits wide, `suffix`.
struct Foldable<'a> {
    prefix: &'a str,
    value: u64,
    width: usize,
    suffix: &'a str,
}

/// Splits a name the way the reference does; `None` means the name is kept verbatim.
fn classify(name: &str) -> Option<Foldable<'_>> {
    let b = name.as_bytes();
    // Names with punctuation (FQDNs, `gpu-01`, addresses) are kept whole.
    if !b.iter().all(u8::is_ascii_alphanumeric) {
        return None;
    }
    let start = b.iter().position(u8::is_ascii_digit)?;
    let end = b[start..]
        .iter()
        .position(|c| !c.is_ascii_digit())
        .map_or(b.len(), |p| start + p);
    let width = end - start;
    // Longer runs do not fit a u64; keeping them verbatim is always correct.
    if width > 19 {
        return None;
    }
    let value = b[start..end]
        .iter()
        .fold(0u64, |v, &c| v * 10 + u64::from(c - b'0'));
    Some(Foldable {
        prefix: &name[..start],
        value,
        width,
        suffix: &name[end..],
    })
}

/// A `prefix[width:ranges]suffix` term being written; its last run is still open.
struct OpenTerm<'a> {
    prefix: &'a str,
    width: usize,
    suffix: &'a str,
    run: (u64, u64),
}

impl OpenTerm<'_> {
    fn close(self, out: &mut Vec<u8>) {
        push_run(out, self.run);
        out.push(b']');
        out.extend_from_slice(self.suffix.as_bytes());
    }
}

/// `pmix[...]` for node names, or `None` when a name contains a bracket.
fn native_nodes<S: AsRef<str>>(nodes: &[S]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(crate::NATIVE_PREFIX.as_bytes());
    let mut open: Option<OpenTerm<'_>> = None;
    for (i, name) in nodes.iter().enumerate() {
        let name = name.as_ref();
        let Some(f) = classify(name) else {
            if name.bytes().any(|c| c == b'[' || c == b']') {
                return None;
            }
            if let Some(term) = open.take() {
                term.close(&mut out);
            }
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(name.as_bytes());
            continue;
        };
        if let Some(term) = open.as_mut() {
            // Only the most recent term accepts names, which keeps the order.
            if term.prefix == f.prefix && term.suffix == f.suffix && term.width == f.width {
                if term.run.1.checked_add(1) == Some(f.value) {
                    term.run.1 = f.value;
                } else {
                    push_run(&mut out, term.run);
                    out.push(b',');
                    term.run = (f.value, f.value);
                }
                continue;
            }
        }
        if let Some(term) = open.take() {
            term.close(&mut out);
        }
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(f.prefix.as_bytes());
        out.push(b'[');
        num::push_dec(&mut out, f.width as u64);
        out.push(b':');
        open = Some(OpenTerm {
            prefix: f.prefix,
            width: f.width,
            suffix: f.suffix,
            run: (f.value, f.value),
        });
    }
    if let Some(term) = open {
        term.close(&mut out);
    }
    out.push(b']');
    Some(out)
}

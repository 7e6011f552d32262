//! Parsers for node maps and process maps in all three forms plus the bare-list fallback.

use std::borrow::Cow;
use std::ops::RangeInclusive;

use crate::error::ParseError;
use crate::num::number;
use crate::{Form, MAX_WIDTH, blob, num};

/// Bounds on what a parser may build from one map.
///
/// A map is untrusted input whose ranges expand: the 14 bytes `pmix[0-4000000000]` name four
/// billion ranks (16 GB as `u32`). The parsers check these bounds *before* allocating, so the
/// memory a map can make them use is bounded by the limits, never by a number inside the map.
///
/// The defaults allow 16,777,216 node names or ranks (64 MiB of ranks; ten times the largest
/// jobs run today) and 64 MiB of name text or decompressed text.
///
/// ```
/// use pmix_regex::{ParseError, ParseLimits, parse_ppn_with};
///
/// let mut limits = ParseLimits::default();
/// limits.max_items = 1000;
/// assert!(parse_ppn_with(b"raw:0-999", &limits).is_ok());
/// assert!(matches!(
///     parse_ppn_with(b"raw:0-999;1000", &limits),
///     Err(ParseError::TooManyItems { pos: 10, limit: 1000 })
/// ));
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseLimits {
    /// Most node names (node maps) or ranks, summed over all nodes (process maps), a map may
    /// expand to.
    pub max_items: usize,
    /// Most bytes of node-name text a map may expand to, and most bytes a `blob:` map may
    /// decompress to.
    pub max_bytes: usize,
}

impl Default for ParseLimits {
    fn default() -> Self {
        ParseLimits {
            max_items: 1 << 24,
            max_bytes: 1 << 26,
        }
    }
}

/// Reads a node map (`PMIX_NODE_MAP`) back into the node names, in order, with the default
/// [`ParseLimits`].
///
/// Accepts `pmix[...]`, `raw:`, `blob:` and, like the reference, a bare comma-separated list.
/// One trailing NUL (as a C peer sends it) is ignored.
///
/// ```
/// use pmix_regex::parse_regex;
///
/// assert_eq!(
///     parse_regex(b"pmix[nid[5:1-2],login[1:1-2],gpu-01]").unwrap(),
///     ["nid00001", "nid00002", "login1", "login2", "gpu-01"]
/// );
/// assert_eq!(parse_regex(b"raw:n1,n2\0").unwrap(), ["n1", "n2"]);
/// assert!(parse_regex(b"pmix[node[2:1-4]").is_err());
/// ```
pub fn parse_regex(map: &[u8]) -> Result<Vec<String>, ParseError> {
    parse_regex_with(map, &ParseLimits::default())
}

/// [`parse_regex`] with explicit limits.
///
/// ```
/// use pmix_regex::{ParseError, ParseLimits, parse_regex_with};
///
/// let mut limits = ParseLimits::default();
/// limits.max_items = 100;
/// let err = parse_regex_with(b"pmix[n[1:1-4000000000]]", &limits).unwrap_err();
/// assert!(matches!(err, ParseError::TooManyItems { pos: 9, .. }));
/// ```
pub fn parse_regex_with(map: &[u8], limits: &ParseLimits) -> Result<Vec<String>, ParseError> {
    let opened = open(map, limits)?;
    match opened.form {
        Some(Form::Native) => native_names(&opened.text, opened.base, limits),
        _ => Ok(split_names(&opened.text, opened.base, limits.max_items)?
            .into_iter()
            .map(str::to_owned)
            .collect()),
    }
}

/// Reads a process map (`PMIX_PROC_MAP`) back into the ranks on each node, in node order and
/// in the order listed, with the default [`ParseLimits`].
///
/// Ranges `a-b` are expanded in every form (the reference leaves them unexpanded in `raw:`
/// entries and expects the consumer to do it).
///
/// ```
/// use pmix_regex::parse_ppn;
///
/// assert_eq!(parse_ppn(b"pmix[0-3;4-7]").unwrap(), [vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
/// assert_eq!(parse_ppn(b"raw:1-2;5,3").unwrap(), [vec![1, 2], vec![5, 3]]);
/// assert!(parse_ppn(b"raw:0;;1").is_err());
/// ```
pub fn parse_ppn(map: &[u8]) -> Result<Vec<Vec<u32>>, ParseError> {
    parse_ppn_with(map, &ParseLimits::default())
}

/// [`parse_ppn`] with explicit limits.
///
/// ```
/// use pmix_regex::{ParseError, ParseLimits, parse_ppn_with};
///
/// let err = parse_ppn_with(b"raw:0-4000000000", &ParseLimits::default()).unwrap_err();
/// assert!(matches!(err, ParseError::TooManyItems { pos: 4, .. }));
/// ```
pub fn parse_ppn_with(map: &[u8], limits: &ParseLimits) -> Result<Vec<Vec<u32>>, ParseError> {
    let opened = open(map, limits)?;
    let runs = rank_runs(opened.text.as_bytes(), opened.base, limits.max_items)?;
    Ok(runs
        .nodes()
        .map(|node| {
            // rank_runs has checked the sum of all counts against max_items, so this
            // allocation is bounded by the limit.
            let count = node.iter().map(|&(a, b)| (b - a) as usize + 1).sum();
            let mut ranks = Vec::with_capacity(count);
            for &(a, b) in node {
                ranks.extend(a..=b);
            }
            ranks
        })
        .collect())
}

/// Reads a process map without expanding it: for each node, the rank ranges as listed.
///
/// Memory use is proportional to the map's length, so no item limit applies; a `blob:` map is
/// decompressed under the default [`ParseLimits::max_bytes`].
///
/// ```
/// use pmix_regex::parse_ppn_ranges;
///
/// assert_eq!(
///     parse_ppn_ranges(b"raw:0-4000000000;4000000001").unwrap(),
///     [vec![0..=4_000_000_000], vec![4_000_000_001..=4_000_000_001]]
/// );
/// ```
pub fn parse_ppn_ranges(map: &[u8]) -> Result<Vec<Vec<RangeInclusive<u32>>>, ParseError> {
    let limits = ParseLimits::default();
    let opened = open(map, &limits)?;
    let runs = rank_runs(opened.text.as_bytes(), opened.base, usize::MAX)?;
    Ok(runs
        .nodes()
        .map(|node| node.iter().map(|&(a, b)| a..=b).collect())
        .collect())
}

/// The text of a map with its form prefix removed.
struct Opened<'a> {
    /// `None` for a bare list.
    form: Option<Form>,
    text: Cow<'a, str>,
    /// Offset of `text` in the map, for error positions.
    base: usize,
}

fn open<'a>(map: &'a [u8], limits: &ParseLimits) -> Result<Opened<'a>, ParseError> {
    if map.starts_with(crate::BLOB_PREFIX) {
        let text = blob::decompress(map, limits.max_bytes)?;
        reject_nul(&text, 0)?;
        return Ok(Opened {
            form: Some(Form::Compressed),
            text: Cow::Owned(text),
            base: 0,
        });
    }
    // A C peer's string arrives with its terminator.
    let map = map.strip_suffix(b"\0").unwrap_or(map);
    let text = std::str::from_utf8(map).map_err(|e| ParseError::InvalidUtf8 {
        pos: e.valid_up_to(),
    })?;
    reject_nul(text, 0)?;
    if let Some(rest) = text.strip_prefix(crate::RAW_PREFIX) {
        return Ok(Opened {
            form: Some(Form::Raw),
            text: Cow::Borrowed(rest),
            base: crate::RAW_PREFIX.len(),
        });
    }
    if let Some(rest) = text.strip_prefix(crate::NATIVE_PREFIX) {
        let body = rest.strip_suffix(']').ok_or(ParseError::UnexpectedEnd {
            pos: map.len(),
            expected: "']' closing \"pmix[\"",
        })?;
        return Ok(Opened {
            form: Some(Form::Native),
            text: Cow::Borrowed(body),
            base: crate::NATIVE_PREFIX.len(),
        });
    }
    Ok(Opened {
        form: None,
        text: Cow::Borrowed(text),
        base: 0,
    })
}

fn reject_nul(text: &str, base: usize) -> Result<(), ParseError> {
    match text.bytes().position(|c| c == 0) {
        Some(p) => Err(ParseError::Unexpected {
            pos: base + p,
            found: 0,
            expected: "text without NUL",
        }),
        None => Ok(()),
    }
}

/// Splits a comma-separated list of node names, refusing empty names.
pub(crate) fn split_names(
    text: &str,
    base: usize,
    max_items: usize,
) -> Result<Vec<&str>, ParseError> {
    let mut names = Vec::new();
    if text.is_empty() {
        return Ok(names);
    }
    let mut pos = base;
    for name in text.split(',') {
        if name.is_empty() {
            return Err(ParseError::Empty {
                pos,
                what: "node name",
            });
        }
        if names.len() >= max_items {
            return Err(ParseError::TooManyItems {
                pos,
                limit: max_items,
            });
        }
        names.push(name);
        pos += name.len() + 1;
    }
    Ok(names)
}

/// Reads `a` or `a-b` at `i`; returns the range and the index after it.
pub(crate) fn range(
    b: &[u8],
    i: usize,
    base: usize,
    max: u64,
) -> Result<(u64, u64, usize), ParseError> {
    let (start, j) = number(b, i, base, max)?;
    if b.get(j) != Some(&b'-') {
        return Ok((start, start, j));
    }
    let (end, k) = number(b, j + 1, base, max)?;
    if end < start {
        return Err(ParseError::DescendingRange {
            pos: base + i,
            start,
            end,
        });
    }
    Ok((start, end, k))
}

/// The ranges of every node of a process map, stored flat (one allocation for all nodes).
pub(crate) struct RankRuns {
    /// Inclusive ranges as listed.
    runs: Vec<(u32, u32)>,
    /// For each node, the index in `runs` after its last range.
    ends: Vec<usize>,
}

impl RankRuns {
    /// Each node's ranges, in node order.
    pub(crate) fn nodes(&self) -> impl Iterator<Item = &[(u32, u32)]> {
        let mut start = 0;
        self.ends.iter().map(move |&end| {
            let node = self.runs.get(start..end).unwrap_or_default();
            start = end;
            node
        })
    }
}

/// Parses `;`-separated per-node entries of `,`-separated ranks or `a-b` ranges (the body of
/// every process-map form), checking the expanded rank count against `max_items`.
pub(crate) fn rank_runs(b: &[u8], base: usize, max_items: usize) -> Result<RankRuns, ParseError> {
    let mut out = RankRuns {
        runs: Vec::new(),
        ends: Vec::new(),
    };
    if b.is_empty() {
        return Ok(out);
    }
    let mut left = max_items as u64;
    let mut i = 0;
    loop {
        if matches!(b.get(i), None | Some(b';')) {
            return Err(ParseError::Empty {
                pos: base + i,
                what: "rank list",
            });
        }
        loop {
            let (start, end, j) = range(b, i, base, u64::from(u32::MAX))?;
            let count = end - start + 1;
            if count > left {
                return Err(ParseError::TooManyItems {
                    pos: base + i,
                    limit: max_items,
                });
            }
            left -= count;
            // Both fit: `range` checked them against u32::MAX.
            out.runs.push((start as u32, end as u32));
            i = j;
            if b.get(i) == Some(&b',') {
                i += 1;
            } else {
                break;
            }
        }
        out.ends.push(out.runs.len());
        match b.get(i) {
            None => return Ok(out),
            Some(b';') => i += 1,
            Some(&found) => {
                return Err(ParseError::Unexpected {
                    pos: base + i,
                    found,
                    expected: "',', ';', '-' or the end",
                });
            }
        }
    }
}

/// Index of the next `,`, `[` or `]` at or after `i`, or the end.
fn plain_end(b: &[u8], i: usize) -> usize {
    b.get(i..)
        .and_then(|rest| rest.iter().position(|&c| matches!(c, b',' | b'[' | b']')))
        .map_or(b.len(), |p| i + p)
}

/// Expands the body of a `pmix[...]` node map.
fn native_names(body: &str, base: usize, limits: &ParseLimits) -> Result<Vec<String>, ParseError> {
    let b = body.as_bytes();
    let mut names = Vec::new();
    if b.is_empty() {
        return Ok(names);
    }
    let mut items_left = limits.max_items;
    let mut bytes_left = limits.max_bytes;
    let mut i = 0;
    loop {
        let start = i;
        i = plain_end(b, i);
        // The delimiters are ASCII, so these slices fall on character boundaries.
        let prefix = body.get(start..i).unwrap_or_default();
        if b.get(i) == Some(&b'[') {
            let (width, j) = number(b, i + 1, base, u64::MAX)?;
            if width > MAX_WIDTH as u64 {
                return Err(ParseError::WidthTooLarge {
                    pos: base + i + 1,
                    width,
                });
            }
            let width = width as usize;
            i = expect(b, j, base, b':', "':' after the width")?;
            let mut ranges = Vec::new();
            loop {
                let (lo, hi, j) = range(b, i, base, u64::MAX)?;
                ranges.push((lo, hi, i));
                i = j;
                match b.get(i) {
                    Some(b',') => i += 1,
                    Some(b']') => {
                        i += 1;
                        break;
                    }
                    Some(&found) => {
                        return Err(ParseError::Unexpected {
                            pos: base + i,
                            found,
                            expected: "',', '-' or ']'",
                        });
                    }
                    None => {
                        return Err(ParseError::UnexpectedEnd {
                            pos: base + i,
                            expected: "']'",
                        });
                    }
                }
            }
            let suffix_start = i;
            i = plain_end(b, i);
            let suffix = body.get(suffix_start..i).unwrap_or_default();
            for (lo, hi, at) in ranges {
                let pos = base + at;
                let span = hi - lo;
                if span >= items_left as u64 {
                    return Err(ParseError::TooManyItems {
                        pos,
                        limit: limits.max_items,
                    });
                }
                let count = span as usize + 1;
                items_left -= count;
                let name_len = prefix.len() + suffix.len() + num::dec_len(hi).max(width);
                let need = name_len
                    .checked_mul(count)
                    .filter(|&n| n <= bytes_left)
                    .ok_or(ParseError::TooManyBytes {
                        pos,
                        limit: limits.max_bytes,
                    })?;
                bytes_left -= need;
                names.reserve(count);
                for v in lo..=hi {
                    let mut name = String::with_capacity(name_len);
                    name.push_str(prefix);
                    num::push_padded_str(&mut name, v, width);
                    name.push_str(suffix);
                    names.push(name);
                }
            }
        } else {
            if prefix.is_empty() {
                return Err(ParseError::Empty {
                    pos: base + start,
                    what: "node name",
                });
            }
            if items_left == 0 {
                return Err(ParseError::TooManyItems {
                    pos: base + start,
                    limit: limits.max_items,
                });
            }
            items_left -= 1;
            names.push(prefix.to_owned());
        }
        match b.get(i) {
            None => return Ok(names),
            Some(b',') => i += 1,
            Some(&found) => {
                return Err(ParseError::Unexpected {
                    pos: base + i,
                    found,
                    expected: "',' or the end of the map",
                });
            }
        }
    }
}

fn expect(
    b: &[u8],
    i: usize,
    base: usize,
    want: u8,
    expected: &'static str,
) -> Result<usize, ParseError> {
    match b.get(i) {
        Some(&c) if c == want => Ok(i + 1),
        Some(&found) => Err(ParseError::Unexpected {
            pos: base + i,
            found,
            expected,
        }),
        None => Err(ParseError::UnexpectedEnd {
            pos: base + i,
            expected,
        }),
    }
}

//! Slurm's hostlist syntax and `SLURM_TASKS_PER_NODE`, for pmixrun inside an allocation.
//!
//! Slurm hands a job its nodes as a hostlist expression (`SLURM_JOB_NODELIST`, for example
//! `node[01-04,7],login1`) and the tasks of each node as a run-length list
//! (`SLURM_TASKS_PER_NODE`, for example `2(x3),1`). [`expand`] and [`tasks_per_node`] read them;
//! [`compress`] writes a list of names back in the same syntax (for `srun --nodelist=...`).
//!
//! # Syntax read by [`expand`]
//!
//! A list is items separated by `,` (a `,` inside brackets separates ranges, not items). An
//! item is text with zero or more bracket groups `[r,r,...]`, each `r` a number `a` or a range
//! `a-b` with `a <= b`. The number of digits written for `a` is the width every value of the
//! range is zero-padded to (`n[08-10]` is `n08,n09,n10`; `n[8-10]` is `n8,n9,n10`). Several
//! groups in one item multiply out with the leftmost group varying slowest, as Slurm does:
//! `rack[1-2]-node[1-3]` is `rack1-node1, rack1-node2, rack1-node3, rack2-node1, ...`. Text
//! outside brackets, digits included, is kept as it is.
//!
//! Differences from Slurm, all refusals of input Slurm would not produce: only `,` separates
//! items (Slurm's parser also splits at blanks and newlines; here ASCII whitespace is an
//! error), empty items (`a,,b`, a trailing `,`) are errors rather than skipped, and bracket
//! groups cannot nest.
//!
//! # Untrusted input
//!
//! Nothing panics. The number of names and bytes a list expands to is computed with checked
//! arithmetic before anything is allocated, and refused above [`MAX_ITEMS`] names or
//! [`MAX_BYTES`] bytes (or the limits passed to the `_with` functions).

use crate::num::number;
use crate::parse::range;
use crate::{MAX_WIDTH, ParseError, ParseLimits, num};

/// The error of this module's parsers: the crate's [`ParseError`], whose `pos` is a byte offset
/// into the text given.
pub type Error = ParseError;

/// Most names [`expand`] produces, and most entries [`tasks_per_node`] produces.
pub const MAX_ITEMS: usize = 1_000_000;
/// Most bytes of name text [`expand`] produces.
pub const MAX_BYTES: usize = 1 << 26;

fn default_limits() -> ParseLimits {
    ParseLimits {
        max_items: MAX_ITEMS,
        max_bytes: MAX_BYTES,
    }
}

/// Expands a Slurm hostlist expression into its names, in order, within [`MAX_ITEMS`] and
/// [`MAX_BYTES`]. An empty list is no names.
///
/// ```
/// use pmix_regex::hostlist::expand;
///
/// assert_eq!(
///     expand("node[01-03,7],login1")?,
///     ["node01", "node02", "node03", "node7", "login1"]
/// );
/// assert_eq!(expand("r[1-2]n[1-2]")?, ["r1n1", "r1n2", "r2n1", "r2n2"]);
/// assert!(expand("node[1-3").is_err());
/// # Ok::<(), pmix_regex::ParseError>(())
/// ```
pub fn expand(list: &str) -> Result<Vec<String>, Error> {
    expand_with(list, &default_limits())
}

/// [`expand`] with explicit limits.
pub fn expand_with(list: &str, limits: &ParseLimits) -> Result<Vec<String>, Error> {
    let items = parse_items(list, limits)?;
    let total = items.iter().map(|item| item.count).sum();
    let mut names = Vec::with_capacity(total);
    for item in &items {
        item.expand_into(list, &mut names);
    }
    Ok(names)
}

/// One range of a bracket group.
#[derive(Debug, Clone, Copy)]
struct Run {
    lo: u64,
    hi: u64,
    width: usize,
}

/// A piece of an item: text kept as is (a byte range of the list) or a bracket group.
enum Part {
    Text(usize, usize),
    Group(Vec<Run>),
}

/// One item of a list, checked: `count` names of at most `max_len` bytes.
struct Item {
    parts: Vec<Part>,
    count: usize,
    max_len: usize,
}

impl Item {
    /// Appends the item's names, the last group varying fastest.
    fn expand_into(&self, list: &str, out: &mut Vec<String>) {
        // Per group: the index of the current run and the current value.
        let groups: Vec<&[Run]> = self
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::Group(runs) => Some(runs.as_slice()),
                Part::Text(..) => None,
            })
            .collect();
        let mut state: Vec<(usize, u64)> = groups
            .iter()
            .map(|runs| (0, runs.first().map_or(0, |r| r.lo)))
            .collect();
        loop {
            let mut name = String::with_capacity(self.max_len);
            let mut g = 0;
            for part in &self.parts {
                match part {
                    Part::Text(a, b) => name.push_str(list.get(*a..*b).unwrap_or_default()),
                    Part::Group(runs) => {
                        let (r, v) = state.get(g).copied().unwrap_or_default();
                        let width = runs.get(r).map_or(0, |run| run.width);
                        num::push_padded_str(&mut name, v, width);
                        g += 1;
                    }
                }
            }
            out.push(name);
            // Advance the odometer from the last group.
            let mut g = groups.len();
            loop {
                let Some(i) = g.checked_sub(1) else {
                    return;
                };
                g = i;
                let (Some(runs), Some(slot)) = (groups.get(i), state.get_mut(i)) else {
                    return;
                };
                let (r, v) = *slot;
                match runs.get(r) {
                    Some(run) if v < run.hi => {
                        *slot = (r, v + 1);
                        break;
                    }
                    _ => {}
                }
                if let Some(next) = runs.get(r + 1) {
                    *slot = (r + 1, next.lo);
                    break;
                }
                *slot = (0, runs.first().map_or(0, |run| run.lo));
            }
        }
    }
}

/// Parses and checks every item of `list` against `limits` (nothing is expanded yet).
fn parse_items(list: &str, limits: &ParseLimits) -> Result<Vec<Item>, Error> {
    let b = list.as_bytes();
    let mut items = Vec::new();
    if b.is_empty() {
        return Ok(items);
    }
    let (mut names, mut bytes) = (0usize, 0usize);
    let mut i = 0;
    loop {
        let start = i;
        let mut parts = Vec::new();
        let mut text_start = i;
        while let Some(&c) = b.get(i) {
            match c {
                b',' => break,
                b'[' => {
                    if text_start < i {
                        parts.push(Part::Text(text_start, i));
                    }
                    let (runs, end) = group(b, i + 1)?;
                    parts.push(Part::Group(runs));
                    i = end;
                    text_start = i;
                }
                b']' | 0 => return Err(unexpected(b, i, "a name character, '[' or ','")),
                c if c.is_ascii_whitespace() => {
                    return Err(unexpected(b, i, "a name character, '[' or ','"));
                }
                _ => i += 1,
            }
        }
        if text_start < i {
            parts.push(Part::Text(text_start, i));
        }
        if parts.is_empty() {
            return Err(ParseError::Empty {
                pos: start,
                what: "node name",
            });
        }
        let item = check(parts, start, limits, &mut names, &mut bytes)?;
        items.push(item);
        if i >= b.len() {
            return Ok(items);
        }
        i += 1; // the ','
        if i >= b.len() {
            return Err(ParseError::Empty {
                pos: i,
                what: "node name",
            });
        }
    }
}

/// Counts an item's names and their longest length, adds them to the list's totals, and
/// refuses the item when a total crosses its limit.
fn check(
    parts: Vec<Part>,
    pos: usize,
    limits: &ParseLimits,
    names: &mut usize,
    bytes: &mut usize,
) -> Result<Item, Error> {
    let too_many = ParseError::TooManyItems {
        pos,
        limit: limits.max_items,
    };
    let too_long = ParseError::TooManyBytes {
        pos,
        limit: limits.max_bytes,
    };
    let mut count: u64 = 1;
    let mut max_len: usize = 0;
    for part in &parts {
        match part {
            Part::Text(a, b) => max_len = max_len.saturating_add(b - a),
            Part::Group(runs) => {
                let mut size: u64 = 0;
                let mut longest = 0;
                for run in runs {
                    size = (run.hi - run.lo)
                        .checked_add(1)
                        .and_then(|n| size.checked_add(n))
                        .ok_or_else(|| too_many.clone())?;
                    longest = longest.max(run.width.max(num::dec_len(run.hi)));
                }
                count = count.checked_mul(size).ok_or_else(|| too_many.clone())?;
                max_len = max_len.saturating_add(longest);
            }
        }
    }
    let count = usize::try_from(count).map_err(|_| too_many.clone())?;
    *names = names
        .checked_add(count)
        .filter(|&n| n <= limits.max_items)
        .ok_or(too_many)?;
    *bytes = count
        .checked_mul(max_len)
        .and_then(|n| bytes.checked_add(n))
        .filter(|&n| n <= limits.max_bytes)
        .ok_or(too_long)?;
    Ok(Item {
        parts,
        count,
        max_len,
    })
}

/// Reads the ranges of a bracket group starting at `i` (just after its `[`); returns them and
/// the index after the `]`.
fn group(b: &[u8], mut i: usize) -> Result<(Vec<Run>, usize), Error> {
    let mut runs = Vec::new();
    loop {
        let width = b
            .get(i..)
            .unwrap_or_default()
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if width > MAX_WIDTH {
            return Err(ParseError::WidthTooLarge {
                pos: i,
                width: width as u64,
            });
        }
        let (lo, hi, j) = range(b, i, 0, u64::MAX)?;
        runs.push(Run { lo, hi, width });
        match b.get(j) {
            Some(b',') => i = j + 1,
            Some(b']') => return Ok((runs, j + 1)),
            Some(_) => return Err(unexpected(b, j, "',', '-' or ']'")),
            None => {
                return Err(ParseError::UnexpectedEnd {
                    pos: j,
                    expected: "']'",
                });
            }
        }
    }
}

fn unexpected(b: &[u8], pos: usize, expected: &'static str) -> ParseError {
    ParseError::Unexpected {
        pos,
        found: b.get(pos).copied().unwrap_or_default(),
        expected,
    }
}

/// Writes `names` as a Slurm hostlist expression: the inverse of [`expand`].
///
/// The names are kept exactly in the order given, repetitions included, so that
/// `expand(&compress(names)) == names`. Names next to each other that differ only in their
/// last run of digits (same text before and after it) share one bracket group, and within it
/// values that go up by one, written with the same zero-padding, form a range `a-b`. Nothing
/// is sorted, as `scontrol show hostlist` does not sort: for sorted input the result is the
/// one Slurm prints (`n1,n2,n3,n5` is `n[1-3,5]`), for unsorted input it follows the input
/// (`tux2,tux1,tux2` is `tux[2,1-2]`, as Slurm's `scontrol` manual shows).
///
/// Names must be non-empty and contain no `,`, `[`, `]`, NUL or ASCII whitespace (no host
/// name does); other names are written unchanged and [`expand`] then reads them differently or
/// refuses them.
///
/// ```
/// use pmix_regex::hostlist::{compress, expand};
///
/// let names = ["node08", "node09", "node10", "node12", "login1"];
/// assert_eq!(compress(&names), "node[08-10,12],login1");
/// assert_eq!(expand(&compress(&names))?, names);
/// # Ok::<(), pmix_regex::ParseError>(())
/// ```
pub fn compress(names: &[impl AsRef<str>]) -> String {
    let mut out = String::new();
    let mut current: Option<Group<'_>> = None;
    for name in names {
        let name = name.as_ref();
        match split_number(name) {
            Some((prefix, value, width, suffix)) => {
                if let Some(g) = current.as_mut() {
                    if g.prefix == prefix && g.suffix == suffix {
                        g.push(value, width);
                        continue;
                    }
                }
                if let Some(g) = current.take() {
                    g.write(&mut out);
                }
                current = Some(Group {
                    prefix,
                    suffix,
                    runs: vec![Run {
                        lo: value,
                        hi: value,
                        width,
                    }],
                });
            }
            None => {
                if let Some(g) = current.take() {
                    g.write(&mut out);
                }
                separate(&mut out);
                out.push_str(name);
            }
        }
    }
    if let Some(g) = current {
        g.write(&mut out);
    }
    out
}

/// Names sharing the text around their last number, gathered by [`compress`].
struct Group<'a> {
    prefix: &'a str,
    suffix: &'a str,
    runs: Vec<Run>,
}

impl Group<'_> {
    /// Adds a value written with `width` digits: extends the last run when [`expand`] would
    /// write the value exactly so as the next one of that run, else starts a new run.
    fn push(&mut self, value: u64, width: usize) {
        if let Some(last) = self.runs.last_mut() {
            // `expand` writes `value` with max(run width, its own digits) digits.
            if last.hi.checked_add(1) == Some(value) && width == last.width.max(num::dec_len(value))
            {
                last.hi = value;
                return;
            }
        }
        self.runs.push(Run {
            lo: value,
            hi: value,
            width,
        });
    }

    fn write(&self, out: &mut String) {
        separate(out);
        out.push_str(self.prefix);
        let single = matches!(self.runs.as_slice(), [run] if run.lo == run.hi);
        if !single {
            out.push('[');
        }
        for (k, run) in self.runs.iter().enumerate() {
            if k > 0 {
                out.push(',');
            }
            num::push_padded_str(out, run.lo, run.width);
            if run.hi != run.lo {
                out.push('-');
                num::push_padded_str(out, run.hi, run.width);
            }
        }
        if !single {
            out.push(']');
        }
        out.push_str(self.suffix);
    }
}

fn separate(out: &mut String) {
    if !out.is_empty() {
        out.push(',');
    }
}

/// Splits a name at its last run of digits: the text before, the value, the number of digits
/// and the text after. `None` when the name has no digits or the number exceeds a `u64`.
fn split_number(name: &str) -> Option<(&str, u64, usize, &str)> {
    let b = name.as_bytes();
    let end = b.iter().rposition(u8::is_ascii_digit)? + 1;
    let start = b
        .get(..end)?
        .iter()
        .rposition(|c| !c.is_ascii_digit())
        .map_or(0, |p| p + 1);
    let (value, _) = number(b, start, 0, u64::MAX).ok()?;
    Some((name.get(..start)?, value, end - start, name.get(end..)?))
}

/// Reads `SLURM_TASKS_PER_NODE` into one task count per node, within [`MAX_ITEMS`] nodes.
///
/// The value is counts separated by `,`; a count followed by `(xN)` stands for `N` nodes with
/// that count. An empty value is no nodes.
///
/// ```
/// use pmix_regex::hostlist::tasks_per_node;
///
/// assert_eq!(tasks_per_node("2(x3),1")?, [2, 2, 2, 1]);
/// assert!(tasks_per_node("2(x3").is_err());
/// # Ok::<(), pmix_regex::ParseError>(())
/// ```
pub fn tasks_per_node(spec: &str) -> Result<Vec<u32>, Error> {
    tasks_per_node_with(spec, &default_limits())
}

/// [`tasks_per_node`] with explicit limits (only `max_items` applies).
pub fn tasks_per_node_with(spec: &str, limits: &ParseLimits) -> Result<Vec<u32>, Error> {
    let b = spec.as_bytes();
    let mut counts = Vec::new();
    if b.is_empty() {
        return Ok(counts);
    }
    let mut i = 0;
    loop {
        let start = i;
        let (tasks, mut j) = number(b, i, 0, u64::from(u32::MAX))?;
        let mut repeat: u64 = 1;
        if b.get(j) == Some(&b'(') {
            if b.get(j + 1) != Some(&b'x') {
                return Err(expected(b, j + 1, "'x'"));
            }
            let at = j + 2;
            (repeat, j) = number(b, at, 0, u64::MAX)?;
            if repeat == 0 {
                return Err(unexpected(b, at, "a repetition count of at least 1"));
            }
            if b.get(j) != Some(&b')') {
                return Err(expected(b, j, "')'"));
            }
            j += 1;
        }
        let total = usize::try_from(repeat)
            .ok()
            .and_then(|r| counts.len().checked_add(r))
            .filter(|&n| n <= limits.max_items)
            .ok_or(ParseError::TooManyItems {
                pos: start,
                limit: limits.max_items,
            })?;
        // `number` was bounded by u32::MAX.
        counts.resize(total, u32::try_from(tasks).unwrap_or(u32::MAX));
        match b.get(j) {
            None => return Ok(counts),
            Some(b',') if j + 1 < b.len() => i = j + 1,
            Some(b',') => {
                return Err(ParseError::Empty {
                    pos: j + 1,
                    what: "task count",
                });
            }
            Some(_) => return Err(expected(b, j, "',' or '(x'")),
        }
    }
}

/// `Unexpected` at `pos`, or `UnexpectedEnd` when `pos` is the end.
fn expected(b: &[u8], pos: usize, expected: &'static str) -> ParseError {
    if pos < b.len() {
        unexpected(b, pos, expected)
    } else {
        ParseError::UnexpectedEnd { pos, expected }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_empty_list_is_no_names() {
        assert_eq!(expand(""), Ok(Vec::<String>::new()));
        let none: [&str; 0] = [];
        assert_eq!(compress(&none), "");
        assert_eq!(tasks_per_node(""), Ok(Vec::new()));
    }

    #[test]
    fn split_number_takes_the_last_digit_run() {
        assert_eq!(split_number("r1n07a"), Some(("r1n", 7, 2, "a")));
        assert_eq!(split_number("login"), None);
        assert_eq!(split_number("9"), Some(("", 9, 1, "")));
        assert_eq!(split_number("n99999999999999999999999"), None);
    }
}

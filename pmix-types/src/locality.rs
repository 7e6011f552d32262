//! CPU lists and locality strings in the forms hwloc and OpenPMIx write them, and the relative
//! locality of two processes (`PMIx_Get_relative_locality`).
//!
//! - A **CPU list** is hwloc's list form of a bitmap: comma-separated indexes and ranges,
//!   ascending, such as `0-3,8,10-11` (the empty set is the empty string). PRRTE registers a
//!   bound process's `PMIX_CPUSET` in this form (OS indexes of the hardware threads), and Open
//!   MPI reads it so; libpmix's `PMIx_Parse_cpuset_string` wants it behind a `hwloc:` prefix.
//! - A **locality string** (`PMIX_LOCALITY_STRING`) lists, for each kind of object the process's
//!   CPUs touch, the objects touched: `SK0:L30:L20-1:L10-1:CR0-1:HT0-1:NM0` (packages, L3, L2
//!   and L1 caches, cores, hardware threads, NUMA nodes; hwloc's logical indexes), as OpenPMIx's
//!   `PMIx_server_generate_locality_string` writes it: no prefix. libpmix 4.2 and 5.0's
//!   `PMIx_Get_relative_locality` only accept such a string behind a `hwloc:` prefix (OpenPMIx's
//!   own later versions take both); Open MPI compares the bare strings itself.

use crate::Locality;

/// The most CPUs a list may name: a bound on what a peer's string can make us allocate.
pub const MAX_CPUS: u32 = 1 << 20;

/// Parses a CPU list (`0-3,8`): the indexes, ascending, each once. `None` if it is not one, or
/// names an index of [`MAX_CPUS`] or more.
pub fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    let text = text.trim();
    let mut cpus = Vec::new();
    if text.is_empty() {
        return Some(cpus);
    }
    for item in text.split(',') {
        let (lo, hi) = match item.split_once('-') {
            Some((a, b)) => (a.parse::<u32>().ok()?, b.parse::<u32>().ok()?),
            None => {
                let n = item.parse::<u32>().ok()?;
                (n, n)
            }
        };
        if lo > hi || hi >= MAX_CPUS {
            return None;
        }
        cpus.extend(lo..=hi);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

/// Writes `cpus` (ascending, each once) as a CPU list, runs as ranges: `0-3,8`.
pub fn format_cpu_list(cpus: &[u32]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
        i += 1;
    }
    out
}

/// The kinds of object of a locality string, each with the bit two processes sharing one get.
const KINDS: [(&str, Locality); 7] = [
    ("NM", Locality::SHARE_NUMA),
    ("SK", Locality::SHARE_PACKAGE),
    ("L3", Locality::SHARE_L3CACHE),
    ("L2", Locality::SHARE_L2CACHE),
    ("L1", Locality::SHARE_L1CACHE),
    ("CR", Locality::SHARE_CORE),
    ("HT", Locality::SHARE_HWTHREAD),
];

/// The parts of a locality string (with or without the `hwloc:` prefix): each kind with its
/// objects. `None` if it is not one.
fn parse_locality(text: &str) -> Option<Vec<(&str, Vec<u32>)>> {
    let body = text.strip_prefix("hwloc:").unwrap_or(text);
    if body.is_empty() {
        return Some(Vec::new());
    }
    body.split(':')
        .map(|part| {
            let kind = part.get(..2)?;
            KINDS.iter().find(|(k, _)| *k == kind)?;
            Some((kind, parse_cpu_list(&part[2..])?))
        })
        .collect()
}

/// Whether two ascending lists have an element in common.
fn intersects(a: &[u32], b: &[u32]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => return true,
        }
    }
    false
}

/// How close two processes on one node are, from their locality strings: `SHARE_NODE`, plus
/// the bit of every kind of object both strings name a common one of (`SHARE_PACKAGE` when
/// both list package 0, ...), as OpenPMIx's `PMIx_Get_relative_locality` answers. `None` if a
/// string is not a locality string.
pub fn relative_locality(a: &str, b: &str) -> Option<Locality> {
    let (a, b) = (parse_locality(a)?, parse_locality(b)?);
    let mut bits = Locality::SHARE_NODE.0;
    for (kind, objs) in &a {
        let shared = b
            .iter()
            .find(|(k, _)| k == kind)
            .is_some_and(|(_, other)| intersects(objs, other));
        if shared {
            if let Some((_, bit)) = KINDS.iter().find(|(k, _)| k == kind) {
                bits |= bit.0;
            }
        }
    }
    Some(Locality(bits))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_round_trip_as_hwloc_writes_them() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(format_cpu_list(&[]), "");
        assert_eq!(parse_cpu_list("5,1,1-2"), Some(vec![1, 2, 5]));
        assert_eq!(format_cpu_list(&[7]), "7");
        for bad in ["x", "3-1", "1,", "-", "0-4000000000", "1 2"] {
            assert_eq!(parse_cpu_list(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn relative_locality_sets_the_bits_of_the_objects_shared() {
        let core0 = "SK0:L30:L20:L10:CR0:HT0-1:NM0";
        let core1 = "SK0:L30:L21:L11:CR1:HT2-3:NM0";
        let other_pkg = "SK1:L31:L22:L12:CR2:HT4-5:NM1";
        let s = |l: Option<Locality>| l.map(|l| l.0);
        let node = Locality::SHARE_NODE.0;
        assert_eq!(
            s(relative_locality(core0, core1)),
            Some(
                node | Locality::SHARE_PACKAGE.0
                    | Locality::SHARE_L3CACHE.0
                    | Locality::SHARE_NUMA.0
            )
        );
        assert_eq!(s(relative_locality(core0, other_pkg)), Some(node));
        // The prefix libpmix 4.2 and 5.0 want is accepted too.
        assert_eq!(
            s(relative_locality(&format!("hwloc:{core0}"), core0)),
            Some(0x4000 | 0x7f)
        );
        assert_eq!(relative_locality("XX0", core0), None);
        assert_eq!(relative_locality(core0, "SKa"), None);
    }
}

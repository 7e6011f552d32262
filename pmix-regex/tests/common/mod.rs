//! Helpers shared by the integration tests.

/// The ranks of one process-map entry in the text form the reference prints (`8,10-12`).
pub(crate) fn expand_entry(entry: &str) -> Vec<u32> {
    let mut ranks = Vec::new();
    for item in entry.split(',') {
        match item.split_once('-') {
            Some((a, b)) => ranks.extend(a.parse::<u32>().unwrap()..=b.parse().unwrap()),
            None => ranks.push(item.parse().unwrap()),
        }
    }
    ranks
}

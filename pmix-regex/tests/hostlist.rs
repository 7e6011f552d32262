//! Slurm's hostlist syntax and `SLURM_TASKS_PER_NODE`: Slurm's documented examples, the
//! refusals, and properties (round trip, never panics, bounded).
#![allow(clippy::unwrap_used)]

use pmix_regex::ParseError;
use pmix_regex::hostlist::{MAX_ITEMS, compress, expand, tasks_per_node};
use proptest::prelude::*;

fn names(list: &str) -> Vec<String> {
    expand(list).unwrap()
}

#[test]
fn slurm_documented_expansions() {
    // scontrol(1), `hostnames`: "tux[1-3]" is mapped to tux1, tux2 and tux3.
    assert_eq!(names("tux[1-3]"), ["tux1", "tux2", "tux3"]);
    // slurm.conf(5), NodeName: "linux[0-64,128]", "lx[15,18,32-33]", "rack[0-63]_blade[0-41]",
    // leading zeros fix the width ("linux[0000-1023]").
    let linux = names("linux[0-64,128]");
    assert_eq!(linux.len(), 66);
    assert_eq!(
        (linux[0].as_str(), linux[65].as_str()),
        ("linux0", "linux128")
    );
    assert_eq!(names("lx[15,18,32-33]"), ["lx15", "lx18", "lx32", "lx33"]);
    let blades = names("rack[0-63]_blade[0-41]");
    assert_eq!(blades.len(), 64 * 42);
    assert_eq!(&blades[..2], ["rack0_blade0", "rack0_blade1"]);
    assert_eq!(blades[42], "rack1_blade0");
    let fixed = names("linux[0000-1023]");
    assert_eq!(
        (fixed[0].as_str(), fixed[1023].as_str()),
        ("linux0000", "linux1023")
    );
    // scontrol(1), `hostlist`: "tux[2,1-2]" is the list tux2,tux1,tux2.
    assert_eq!(names("tux[2,1-2]"), ["tux2", "tux1", "tux2"]);
}

#[test]
fn issue_examples() {
    // Issue 20 / MULTINODE.md. Each range has its own width: 7 is written with one digit
    // (hostlist.c's _parse_single_range takes the width of each range's start).
    assert_eq!(
        names("node[01-04,7],login1"),
        ["node01", "node02", "node03", "node04", "node7", "login1"]
    );
    // Several groups multiply out, leftmost slowest: hostlist.c's _push_range_list recurses
    // over the prefix's ranges outside the last group's.
    assert_eq!(
        names("rack[1-2]-node[1-3]"),
        [
            "rack1-node1",
            "rack1-node2",
            "rack1-node3",
            "rack2-node1",
            "rack2-node2",
            "rack2-node3"
        ]
    );
    // Width is the digits of the range's start (hostlist.c's _parse_single_range).
    assert_eq!(names("n[08-10]"), ["n08", "n09", "n10"]);
    assert_eq!(names("n[8-10]"), ["n8", "n9", "n10"]);
    // Text after a group (hostlist.c accepts a suffix), literal digits kept.
    assert_eq!(
        names("c[1-2]b0,gpu-01,10.0.0.1"),
        ["c1b0", "c2b0", "gpu-01", "10.0.0.1"]
    );
}

#[test]
fn slurm_documented_compressions() {
    // scontrol(1), `hostlist`: unsorted tux2,tux1,tux2 = tux[2,1-2]; sorted tux[1-2,2].
    assert_eq!(compress(&["tux2", "tux1", "tux2"]), "tux[2,1-2]");
    assert_eq!(compress(&["tux1", "tux2", "tux2"]), "tux[1-2,2]");
    // scontrol(1): "lx[10-20]".
    let lx: Vec<String> = (10..=20).map(|i| format!("lx{i}")).collect();
    assert_eq!(compress(&lx), "lx[10-20]");
    assert_eq!(compress(&names("linux[0000-1023]")), "linux[0000-1023]");
    assert_eq!(
        compress(&names("node[01-04,7],login1")),
        "node[01-04,7],login1"
    );
    assert_eq!(compress(&["n8", "n9", "n10", "n011"]), "n[8-10,011]");
    assert_eq!(compress(&["n1"]), "n1");
    assert_eq!(compress(&["a", "b1", "c"]), "a,b1,c");
}

#[test]
fn slurm_documented_tasks_per_node() {
    // sbatch(1) and srun(1), SLURM_TASKS_PER_NODE: "2(x3),1" is three nodes of two tasks
    // then one node of one.
    assert_eq!(tasks_per_node("2(x3),1").unwrap(), [2, 2, 2, 1]);
    // Slurm's env.c writes "%u(x%u)" for every repeated count.
    assert_eq!(tasks_per_node("1(x2),4(x2)").unwrap(), [1, 1, 4, 4]);
    assert_eq!(tasks_per_node("8").unwrap(), [8]);
}

#[test]
fn refusals() {
    let bad = |list: &str| expand(list).unwrap_err();
    assert!(matches!(
        bad("n[1-3"),
        ParseError::UnexpectedEnd { pos: 5, .. }
    ));
    assert!(matches!(
        bad("n1-3]"),
        ParseError::Unexpected {
            pos: 4,
            found: b']',
            ..
        }
    ));
    assert!(matches!(
        bad("n[[1]]"),
        ParseError::Unexpected { pos: 2, .. }
    ));
    assert!(matches!(bad("n[]"), ParseError::Unexpected { pos: 2, .. }));
    assert!(matches!(bad("a,,b"), ParseError::Empty { pos: 2, .. }));
    assert!(matches!(bad(",a"), ParseError::Empty { pos: 0, .. }));
    assert!(matches!(bad("a,"), ParseError::Empty { pos: 2, .. }));
    assert!(matches!(bad("a b"), ParseError::Unexpected { pos: 1, .. }));
    assert!(matches!(
        bad("n[3-1]"),
        ParseError::DescendingRange {
            start: 3,
            end: 1,
            ..
        }
    ));
    assert!(matches!(
        bad("n[1-a]"),
        ParseError::Unexpected { pos: 4, .. }
    ));
    assert!(matches!(
        bad("n[99999999999999999999]"),
        ParseError::NumberTooLarge { .. }
    ));
    // Over the bound before anything is allocated: 10^6 names is fine, one more is not, and
    // products that overflow a u64 are refused the same way.
    assert_eq!(expand("n[1-1000000]").unwrap().len(), MAX_ITEMS);
    assert!(matches!(
        bad("n[1-1000000],x"),
        ParseError::TooManyItems {
            pos: 13,
            limit: MAX_ITEMS
        }
    ));
    assert!(matches!(
        bad("a[0-18446744073709551615]"),
        ParseError::TooManyItems { .. }
    ));
    assert!(matches!(
        bad("a[0-4294967295][0-4294967295][0-4294967295]"),
        ParseError::TooManyItems { .. }
    ));
    assert!(matches!(
        bad("a[1-1000]b[1-1000]c[1-2]"),
        ParseError::TooManyItems { .. }
    ));
    let long = format!("{}[1-100000]", "x".repeat(1000));
    assert!(matches!(bad(&long), ParseError::TooManyBytes { .. }));

    let bad = |spec: &str| tasks_per_node(spec).unwrap_err();
    assert!(matches!(
        bad("2(x3"),
        ParseError::UnexpectedEnd { pos: 4, .. }
    ));
    assert!(matches!(bad("2(3)"), ParseError::Unexpected { pos: 2, .. }));
    assert!(matches!(
        bad("2(x0)"),
        ParseError::Unexpected { pos: 3, .. }
    ));
    assert!(matches!(bad("2,"), ParseError::Empty { pos: 2, .. }));
    assert!(matches!(bad(",2"), ParseError::Unexpected { pos: 0, .. }));
    assert!(matches!(bad("-1"), ParseError::Unexpected { pos: 0, .. }));
    assert!(matches!(
        bad("4294967296"),
        ParseError::NumberTooLarge { .. }
    ));
    assert!(matches!(
        bad("1(x1000000),1"),
        ParseError::TooManyItems {
            pos: 12,
            limit: MAX_ITEMS
        }
    ));
    assert!(matches!(
        bad("1(x99999999999999999999)"),
        ParseError::NumberTooLarge { .. }
    ));
}

/// Names a hostlist can carry: no `,`, `[`, `]`, NUL or whitespace.
fn host_name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{1,6}[0-9]{1,4}",
        "[a-z]{1,3}[0-9]{1,3}[a-z._-]{0,3}[0-9]{0,3}",
        "[0-9]{1,25}",
        "[a-zA-Z0-9._-]{1,10}",
        "[^,\\[\\]\\x00\\s]{1,8}",
    ]
}

/// Runs of numbered names, the shape of real node lists.
fn numbered_run() -> impl Strategy<Value = Vec<String>> {
    (
        prop::sample::select(vec!["node", "n", "rack1-n", "", "c"]),
        1usize..5,
        0u64..1200,
        1usize..30,
        prop::sample::select(vec!["", "", "b0", "-ib"]),
    )
        .prop_map(|(prefix, width, start, len, suffix)| {
            (start..start + len as u64)
                .map(|v| format!("{prefix}{v:0width$}{suffix}"))
                .collect()
        })
}

fn node_list() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(
        prop_oneof![
            2 => numbered_run(),
            1 => prop::collection::vec(host_name(), 1..5),
        ],
        0..6,
    )
    .prop_map(|runs| runs.concat())
}

/// Whether both parsers, when they accept `text`, give at most [`MAX_ITEMS`] entries (and
/// `expand` no empty name). A panic fails the property by itself.
fn bounded(text: &str) -> bool {
    let names = expand(text).map_or(true, |v| {
        v.len() <= MAX_ITEMS && v.iter().all(|n| !n.is_empty())
    });
    let tasks = tasks_per_node(text).map_or(true, |v| v.len() <= MAX_ITEMS);
    names && tasks
}

proptest! {
    #[test]
    fn compress_round_trips(list in node_list()) {
        let text = compress(&list);
        prop_assert_eq!(expand(&text).unwrap(), list);
    }

    #[test]
    fn expand_never_panics_and_stays_bounded(list in "\\PC{0,40}") {
        prop_assert!(bounded(&list));
    }

    #[test]
    fn expand_never_panics_on_near_miss_syntax(list in "[a0-9\\[\\],\\-x()]{0,30}") {
        prop_assert!(bounded(&list));
    }

    #[test]
    fn tasks_per_node_reads_what_slurm_writes(counts in prop::collection::vec((0u32..5, 1u32..4), 0..10)) {
        // Slurm's env.c form: a count, then "(xN)" when N > 1.
        let spec: Vec<String> = counts
            .iter()
            .map(|&(c, n)| if n > 1 { format!("{c}(x{n})") } else { c.to_string() })
            .collect();
        let want: Vec<u32> = counts
            .iter()
            .flat_map(|&(c, n)| std::iter::repeat_n(c, n as usize))
            .collect();
        prop_assert_eq!(tasks_per_node(&spec.join(",")).unwrap(), want);
    }
}

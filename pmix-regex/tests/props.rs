//! Round-trip properties: whatever we generate, in any form, parses back to the input.
#![allow(clippy::unwrap_used)]

use pmix_regex::{
    Form, generate_ppn_str, generate_ppn_with, generate_regex_str, generate_regex_with, parse_ppn,
    parse_ppn_ranges, parse_regex,
};
use proptest::prelude::*;

mod common;

const FORMS: [Form; 3] = [Form::Raw, Form::Native, Form::Compressed];

/// Runs of names the native form folds: a prefix, zero-padded numbers, a suffix.
fn numbered_run() -> impl Strategy<Value = Vec<String>> {
    (
        prop::sample::select(vec!["nid", "node", "cn", "x", "", "Rack", "a"]),
        1usize..7,
        0u64..2000,
        1usize..12,
        prop::sample::select(vec![1u64, 1, 1, 2, 3]),
        prop::sample::select(vec!["", "", "a", "c0s0b0n0", "n01", "b"]),
        any::<bool>(),
    )
        .prop_map(|(prefix, width, start, len, step, suffix, descending)| {
            let mut values: Vec<u64> = (0..len as u64).map(|i| start + i * step).collect();
            if descending {
                values.reverse();
            }
            values
                .into_iter()
                .map(|v| format!("{prefix}{v:0width$}{suffix}"))
                .collect()
        })
}

/// One name of any kind the maps may carry.
fn any_name() -> impl Strategy<Value = String> {
    prop_oneof![
        // FQDNs and punctuation: kept verbatim by the native form.
        (0u32..500).prop_map(|i| format!("n{i}.cluster.org")),
        (0u32..50).prop_map(|i| format!("gpu-{i:02}")),
        // No digits at all.
        "[a-zA-Z]{1,8}",
        // Digit runs too long for a u64, and digits only.
        "[a-z]{0,2}[0-9]{18,24}[a-z]{0,2}",
        "[0-9]{1,5}",
        // Anything a map can carry: no ',' and no NUL; brackets, ':' and non-ASCII included.
        "[^,\\x00]{1,10}",
    ]
}

fn node_list() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(
        prop_oneof![
            3 => numbered_run(),
            2 => prop::collection::vec(any_name(), 1..4),
        ],
        0..8,
    )
    .prop_flat_map(|chunks| {
        let names: Vec<String> = chunks.into_iter().flatten().collect();
        let n = names.len();
        // Repeat some names later in the list, as a host may when oversubscribing.
        (
            Just(names),
            prop::collection::vec((0..n.max(1), 0..n.max(1)), 0..4),
        )
    })
    .prop_map(|(mut names, repeats)| {
        for (from, to) in repeats {
            if from < names.len() && to <= names.len() {
                let name = names[from].clone();
                names.insert(to, name);
            }
        }
        names
    })
}

/// Per-node rank lists: blocks, cyclic layouts, scattered and extreme values, duplicates.
fn rank_map() -> impl Strategy<Value = Vec<Vec<u32>>> {
    let node = prop_oneof![
        (0u32..100_000, 1u32..40).prop_map(|(start, len)| (start..start + len).collect()),
        prop::collection::vec(any::<u32>(), 1..8),
        prop::collection::vec(u32::MAX - 5..=u32::MAX, 1..8),
        prop::collection::vec(0u32..20, 1..12),
        (0u32..16, 1u32..6, 1u32..10)
            .prop_map(|(first, stride, len)| (0..len).map(|i| first + i * stride).collect()),
    ];
    prop::collection::vec(node, 0..12)
}

/// Reference-style process-map text: entries of ranks and `a-b` ranges.
fn ppn_text() -> impl Strategy<Value = String> {
    let item = prop_oneof![
        (0u32..60).prop_map(|a| a.to_string()),
        (0u32..60, 0u32..8).prop_map(|(a, len)| format!("{a}-{}", a + len)),
    ];
    let entry = prop::collection::vec(item, 1..6).prop_map(|items| items.join(","));
    prop::collection::vec(entry, 1..6).prop_map(|entries| entries.join(";"))
}

fn expand_text(text: &str) -> Vec<Vec<u32>> {
    text.split(';').map(common::expand_entry).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn node_lists_round_trip(nodes in node_list()) {
        for form in FORMS {
            let map = generate_regex_with(&nodes, form).unwrap();
            prop_assert_eq!(&parse_regex(&map).unwrap(), &nodes, "{:?} {:?}", form, String::from_utf8_lossy(&map));
            // The text entry point gives the same bytes.
            if !nodes.is_empty() {
                prop_assert_eq!(generate_regex_str(&nodes.join(","), form).unwrap(), map);
            }
        }
    }

    #[test]
    fn native_node_maps_are_never_longer_than_one_term_per_name(nodes in node_list()) {
        let map = generate_regex_with(&nodes, Form::Native).unwrap();
        if map.starts_with(b"pmix[") {
            // A folded term `p[w:v]s` costs at most 5 bytes more than the name `p<v>s`
            // (`[`, up to two width digits, `:` and `]`).
            let bound: usize = nodes.iter().map(|n| n.len() + 6).sum::<usize>() + 6;
            prop_assert!(map.len() <= bound);
        } else {
            prop_assert!(nodes.iter().any(|n| n.contains(['[', ']'])));
        }
    }

    #[test]
    fn rank_maps_round_trip(ranks in rank_map()) {
        for form in FORMS {
            let map = generate_ppn_with(&ranks, form).unwrap();
            prop_assert_eq!(&parse_ppn(&map).unwrap(), &ranks, "{:?} {:?}", form, String::from_utf8_lossy(&map));
            let ranges = parse_ppn_ranges(&map).unwrap();
            let expanded: Vec<Vec<u32>> = ranges
                .into_iter()
                .map(|node| node.into_iter().flatten().collect())
                .collect();
            prop_assert_eq!(&expanded, &ranks);
        }
    }

    #[test]
    fn reference_text_round_trips_without_losing_ranks(text in ppn_text()) {
        let expected = expand_text(&text);
        for form in FORMS {
            let map = generate_ppn_str(&text, form).unwrap();
            prop_assert_eq!(&parse_ppn(&map).unwrap(), &expected, "{:?} {:?}", form, String::from_utf8_lossy(&map));
        }
        let native = generate_ppn_str(&text, Form::Native).unwrap();
        prop_assert!(native.len() <= text.len() || native == [b"raw:", text.as_bytes()].concat());
    }

    #[test]
    fn parsers_never_panic_on_arbitrary_bytes(map in prop::collection::vec(any::<u8>(), 0..64)) {
        let _ = parse_regex(&map);
        let _ = parse_ppn(&map);
        let _ = parse_ppn_ranges(&map);
    }

    #[test]
    fn parsers_never_panic_on_damaged_maps(
        nodes in node_list(),
        ranks in rank_map(),
        form in prop::sample::select(FORMS.to_vec()),
        damage in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        for mut map in [
            generate_regex_with(&nodes, form).unwrap(),
            generate_ppn_with(&ranks, form).unwrap(),
        ] {
            if map.is_empty() {
                continue;
            }
            for (at, byte) in &damage {
                let i = at.index(map.len());
                map[i] = *byte;
            }
            let _ = parse_regex(&map);
            let _ = parse_ppn(&map);
            map.truncate(cut.index(map.len()));
            let _ = parse_regex(&map);
            let _ = parse_ppn(&map);
        }
    }
}

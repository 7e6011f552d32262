//! Feeds arbitrary bytes to the node-map and process-map parsers. Whatever parses must also
//! generate again, in every form, and parse back to the same lists.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pmix_regex::{
    Form, ParseLimits, generate_ppn_with, generate_regex_with, parse_ppn_ranges, parse_ppn_with,
    parse_regex_with,
};

fuzz_target!(|data: &[u8]| {
    // Small limits keep each run fast; the parsers must refuse bigger expansions cleanly.
    let mut limits = ParseLimits::default();
    limits.max_items = 1 << 16;
    limits.max_bytes = 1 << 20;

    if let Ok(nodes) = parse_regex_with(data, &limits) {
        for form in [Form::Raw, Form::Native, Form::Compressed] {
            let map = generate_regex_with(&nodes, form).expect("parsed names are representable");
            let back = parse_regex_with(&map, &limits).expect("generated map parses");
            assert_eq!(back, nodes, "{form:?}");
        }
    }
    if let Ok(ranks) = parse_ppn_with(data, &limits) {
        for form in [Form::Raw, Form::Native, Form::Compressed] {
            let map = generate_ppn_with(&ranks, form).expect("parsed rank lists are non-empty");
            let back = parse_ppn_with(&map, &limits).expect("generated map parses");
            assert_eq!(back, ranks, "{form:?}");
        }
    }
    let _ = parse_ppn_ranges(data);
});

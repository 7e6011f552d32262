//! Malformed maps and unrepresentable inputs give positioned errors, within bounded memory.
#![allow(clippy::unwrap_used)]

use std::io::Write;

use flate2::Compression;
use flate2::write::ZlibEncoder;
use pmix_regex::{
    Form, GenerateError, ParseError, ParseLimits, generate_ppn, generate_ppn_str, generate_regex,
    generate_regex_str, generate_regex_with, parse_ppn, parse_ppn_with, parse_regex,
    parse_regex_with,
};

/// A blob built by hand, so that its header can lie.
fn blob(declared_len: u32, stream: &[u8], size: Option<usize>) -> Vec<u8> {
    let size = size.unwrap_or(stream.len() + 4);
    let mut out = format!("blob:\0component=zlib:\0size={size}:\0").into_bytes();
    out.extend_from_slice(&declared_len.to_le_bytes());
    out.extend_from_slice(stream);
    out
}

fn zlib(data: &[u8]) -> Vec<u8> {
    let mut enc = ZlibEncoder::new(Vec::new(), Compression::best());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

#[test]
fn syntax_errors_carry_the_position() {
    assert_eq!(
        parse_regex(b"pmix[node[2:1-4]").unwrap_err(),
        // The last `]` closes the map, so the term inside is the one left open.
        ParseError::UnexpectedEnd {
            pos: 15,
            expected: "']'"
        }
    );
    assert_eq!(
        parse_regex(b"pmix[a,b").unwrap_err(),
        ParseError::UnexpectedEnd {
            pos: 8,
            expected: "']' closing \"pmix[\""
        }
    );
    assert!(matches!(
        parse_regex(b"pmix[node[2:1-4,x]]").unwrap_err(),
        ParseError::Unexpected {
            pos: 16,
            found: b'x',
            ..
        }
    ));
    assert!(matches!(
        parse_regex(b"pmix[node[2;1]]").unwrap_err(),
        ParseError::Unexpected {
            pos: 11,
            found: b';',
            ..
        }
    ));
    assert!(matches!(
        parse_regex(b"pmix[a[1:1]b[1:2]]").unwrap_err(),
        ParseError::Unexpected {
            pos: 12,
            found: b'[',
            ..
        }
    ));
    assert!(matches!(
        parse_regex(b"pmix[a]b]").unwrap_err(),
        ParseError::Unexpected {
            pos: 6,
            found: b']',
            ..
        }
    ));
    assert!(matches!(
        parse_ppn(b"raw:0,1;2,x").unwrap_err(),
        ParseError::Unexpected {
            pos: 10,
            found: b'x',
            ..
        }
    ));
    assert!(matches!(
        parse_ppn(b"pmix[0-3;4-7").unwrap_err(),
        ParseError::UnexpectedEnd { pos: 12, .. }
    ));
    assert!(matches!(
        parse_ppn(b"raw:0-").unwrap_err(),
        ParseError::UnexpectedEnd { pos: 6, .. }
    ));
}

#[test]
fn empty_fields_are_refused_not_dropped() {
    assert_eq!(
        parse_regex(b"raw:a,,b").unwrap_err(),
        ParseError::Empty {
            pos: 6,
            what: "node name"
        }
    );
    assert_eq!(
        parse_regex(b"pmix[a,]").unwrap_err(),
        ParseError::Empty {
            pos: 7,
            what: "node name"
        }
    );
    assert_eq!(
        parse_ppn(b"raw:0;;1").unwrap_err(),
        ParseError::Empty {
            pos: 6,
            what: "rank list"
        }
    );
    assert_eq!(
        parse_ppn(b"0;").unwrap_err(),
        ParseError::Empty {
            pos: 2,
            what: "rank list"
        }
    );
    // An empty list is not an empty field.
    assert_eq!(parse_regex(b"raw:").unwrap(), Vec::<String>::new());
    assert_eq!(parse_regex(b"pmix[]").unwrap(), Vec::<String>::new());
    assert_eq!(parse_ppn(b"raw:").unwrap(), Vec::<Vec<u32>>::new());
}

#[test]
fn numbers_are_checked() {
    assert_eq!(
        parse_ppn(b"raw:4294967296").unwrap_err(),
        ParseError::NumberTooLarge {
            pos: 4,
            max: u64::from(u32::MAX)
        }
    );
    assert_eq!(parse_ppn(b"raw:4294967295").unwrap(), [[u32::MAX]]);
    assert_eq!(
        parse_ppn(b"raw:0,5-3").unwrap_err(),
        ParseError::DescendingRange {
            pos: 6,
            start: 5,
            end: 3
        }
    );
    assert_eq!(
        parse_regex(b"pmix[n[99:1]]").unwrap_err(),
        ParseError::WidthTooLarge { pos: 7, width: 99 }
    );
    assert!(matches!(
        parse_regex(b"pmix[n[1:99999999999999999999]]").unwrap_err(),
        ParseError::NumberTooLarge { pos: 9, .. }
    ));
    // Values wider than the width print in full, as C's %0*d does.
    assert_eq!(
        parse_regex(b"pmix[n[2:9-10,100]]").unwrap(),
        ["n09", "n10", "n100"]
    );
}

#[test]
fn text_must_be_utf8_without_nul() {
    assert_eq!(
        parse_regex(b"raw:ab\xffc").unwrap_err(),
        ParseError::InvalidUtf8 { pos: 6 }
    );
    assert!(matches!(
        parse_regex(b"raw:a\0b").unwrap_err(),
        ParseError::Unexpected {
            pos: 5,
            found: 0,
            ..
        }
    ));
    // One terminating NUL, as a C peer sends the string, is fine.
    assert_eq!(parse_regex(b"pmix[n[1:1-2]]\0").unwrap(), ["n1", "n2"]);
}

#[test]
fn huge_ranges_are_refused_before_allocating() {
    // Four billion ranks would be 16 GB.
    assert_eq!(
        parse_ppn(b"raw:0-4000000000").unwrap_err(),
        ParseError::TooManyItems {
            pos: 4,
            limit: 1 << 24
        }
    );
    assert_eq!(
        parse_ppn(b"pmix[0-4294967295]").unwrap_err(),
        ParseError::TooManyItems {
            pos: 5,
            limit: 1 << 24
        }
    );
    // The limit is on the total, not per range.
    let mut limits = ParseLimits::default();
    limits.max_items = 10;
    assert_eq!(parse_ppn_with(b"0-4;5-9", &limits).unwrap().len(), 2);
    assert_eq!(
        parse_ppn_with(b"0-4;5-9;10", &limits).unwrap_err(),
        ParseError::TooManyItems { pos: 8, limit: 10 }
    );
    assert!(matches!(
        parse_regex(b"pmix[n[1:0-18446744073709551615]]").unwrap_err(),
        ParseError::TooManyItems { pos: 9, .. }
    ));
    assert_eq!(
        parse_regex_with(b"raw:a,b,c", &limits).unwrap(),
        ["a", "b", "c"]
    );
    limits.max_items = 2;
    assert!(matches!(
        parse_regex_with(b"raw:a,b,c", &limits).unwrap_err(),
        ParseError::TooManyItems { pos: 8, limit: 2 }
    ));
    // Long names times many values: bounded by bytes.
    let long = format!("pmix[{}[1:1-1000000]]", "a".repeat(1000));
    assert!(matches!(
        parse_regex(long.as_bytes()).unwrap_err(),
        ParseError::TooManyBytes {
            limit: 67_108_864,
            ..
        }
    ));
}

#[test]
fn blobs_are_read_strictly_and_boundedly() {
    let text = b"node01,node02";
    let good = blob(text.len() as u32, &zlib(text), None);
    assert_eq!(parse_regex(&good).unwrap(), ["node01", "node02"]);

    // Declared length above the limit: refused before decompressing.
    let bomb_text = vec![b'a'; 4 << 20];
    let bomb = blob(bomb_text.len() as u32, &zlib(&bomb_text), None);
    assert!(bomb.len() < 20_000);
    let mut limits = ParseLimits::default();
    limits.max_bytes = 1 << 20;
    assert!(matches!(
        parse_regex_with(&bomb, &limits).unwrap_err(),
        ParseError::TooManyBytes {
            limit: 1_048_576,
            ..
        }
    ));
    assert_eq!(parse_regex(&bomb).unwrap().len(), 1);
    assert!(matches!(
        parse_regex(&blob(u32::MAX, &zlib(text), None)).unwrap_err(),
        ParseError::TooManyBytes {
            limit: 67_108_864,
            ..
        }
    ));
    // Declared length small, stream much larger: stops one byte past the declaration.
    let liar = blob(1000, &zlib(&bomb_text), None);
    assert!(matches!(
        parse_regex(&liar).unwrap_err(),
        ParseError::Decompress { .. }
    ));
    // Declared length larger than the stream.
    let short = blob(100, &zlib(text), None);
    assert!(matches!(
        parse_regex(&short).unwrap_err(),
        ParseError::Decompress { .. }
    ));
    // size= disagreeing with the bytes present.
    let stream = zlib(text);
    let wrong_size = blob(text.len() as u32, &stream, Some(stream.len() + 5));
    assert!(matches!(
        parse_regex(&wrong_size).unwrap_err(),
        ParseError::BadBlob { .. }
    ));
    // Truncated stream (size= adjusted so only the stream is wrong).
    let cut = &stream[..stream.len() - 6];
    assert!(matches!(
        parse_regex(&blob(text.len() as u32, cut, None)).unwrap_err(),
        ParseError::Decompress { .. }
    ));
    // Checksum damaged.
    let mut damaged = stream.clone();
    let last = damaged.len() - 1;
    damaged[last] ^= 1;
    assert!(matches!(
        parse_regex(&blob(text.len() as u32, &damaged, None)).unwrap_err(),
        ParseError::Decompress { .. }
    ));
    // Bytes after the stream.
    let mut trailing = stream.clone();
    trailing.extend_from_slice(b"xx");
    assert!(matches!(
        parse_regex(&blob(text.len() as u32, &trailing, None)).unwrap_err(),
        ParseError::BadBlob { .. }
    ));
    // Another component.
    let mut gzip = good.clone();
    gzip[16..20].copy_from_slice(b"gzip");
    assert_eq!(
        parse_regex(&gzip).unwrap_err(),
        ParseError::UnsupportedCompression {
            pos: 16,
            component: "gzip".into()
        }
    );
    // Header cut short.
    assert!(matches!(
        parse_regex(b"blob:\0component=zlib:\0size=").unwrap_err(),
        ParseError::UnexpectedEnd { pos: 27, .. }
    ));
}

#[test]
fn unrepresentable_inputs_are_generation_errors() {
    assert_eq!(
        generate_regex(&["a", ""]).unwrap_err(),
        GenerateError::EmptyName { index: 1 }
    );
    assert_eq!(
        generate_regex(&["a", "b,c"]).unwrap_err(),
        GenerateError::InvalidName {
            index: 1,
            pos: 1,
            byte: b','
        }
    );
    assert_eq!(
        generate_regex_with(&["a\0"], Form::Native).unwrap_err(),
        GenerateError::InvalidName {
            index: 0,
            pos: 1,
            byte: 0
        }
    );
    assert_eq!(
        generate_ppn(&[vec![0], vec![]]).unwrap_err(),
        GenerateError::EmptyNode { index: 1 }
    );
    assert_eq!(
        generate_ppn_str("0-3;4-a", Form::Raw).unwrap_err(),
        GenerateError::InvalidInput(ParseError::Unexpected {
            pos: 6,
            found: b'a',
            expected: "a digit"
        })
    );
    assert!(matches!(
        generate_regex_str("a,,b", Form::Native).unwrap_err(),
        GenerateError::InvalidInput(ParseError::Empty { pos: 2, .. })
    ));
    // Huge ranges are validated, not expanded.
    assert_eq!(
        generate_ppn_str("0-4000000000", Form::Native).unwrap(),
        b"raw:0-4000000000"
    );
}

#[test]
fn names_with_brackets_fall_back_to_raw_in_native_form() {
    let nodes = ["n1", "weird[1]"];
    let map = generate_regex_with(&nodes, Form::Native).unwrap();
    assert_eq!(map, b"raw:n1,weird[1]");
    assert_eq!(parse_regex(&map).unwrap(), nodes);
}

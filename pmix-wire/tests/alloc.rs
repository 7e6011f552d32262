//! Decoding never allocates more than the input can justify: a header announcing gigabytes
//! inside a small frame fails without reserving them, and a valid message needs memory in
//! proportion to its size.
//!
//! Measured with a counting global allocator, which is why this is a test binary of its own
//! holding a single test (other tests running on other threads would be counted too).

#![allow(clippy::unwrap_used)]
// A `GlobalAlloc` implementation is necessarily unsafe; it only forwards to the system
// allocator and counts.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use pmix_types::Value;
use pmix_wire::{ClientMsg, HEADER_LEN, Hello, ServerMsg, Welcome, decode_body, encode_frame};

struct Counting;

static LARGEST: AtomicUsize = AtomicUsize::new(0);
static TOTAL: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to `System`, which upholds the contract.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Relaxed);
        TOTAL.fetch_add(layout.size(), Relaxed);
        // SAFETY: as above.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Relaxed);
        TOTAL.fetch_add(new_size, Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// (largest single allocation, total bytes allocated) while running `f`.
fn measure(f: impl FnOnce()) -> (usize, usize) {
    LARGEST.store(0, Relaxed);
    TOTAL.store(0, Relaxed);
    f();
    (LARGEST.load(Relaxed), TOTAL.load(Relaxed))
}

fn decode_all(bytes: &[u8]) {
    let _ = decode_body::<ClientMsg>(bytes);
    let _ = decode_body::<ServerMsg>(bytes);
    let _ = decode_body::<Welcome>(bytes);
    let _ = decode_body::<Hello>(bytes);
    let _ = decode_body::<Value>(bytes);
    let _ = pmix_wire::decode_hello(bytes);
}

#[test]
fn allocation_is_bounded_by_the_input() {
    // Headers announcing 4 Gi bytes or elements, alone and nested under many others that
    // each announce 64 Ki elements (which serde would otherwise preallocate for, up to 1 MiB
    // per collection).
    let mut crafted: Vec<Vec<u8>> = Vec::new();
    for h in [
        &[0xdb, 0xff, 0xff, 0xff, 0xff][..],
        &[0xc6, 0xff, 0xff, 0xff, 0xff],
        &[0xdd, 0xff, 0xff, 0xff, 0xff],
        &[0xdf, 0xff, 0xff, 0xff, 0xff],
    ] {
        crafted.push(h.to_vec());
        let mut nested = [0xdc, 0xff, 0xff].repeat(60);
        nested.extend_from_slice(h);
        crafted.push(nested);
        // ClientMsg [id, {"Commit": [<huge>]}]
        let mut inside = b"\x92\x07\x81\xa6Commit\x91".to_vec();
        inside.extend_from_slice(h);
        crafted.push(inside);
    }
    for input in &crafted {
        let (largest, total) = measure(|| decode_all(input));
        // Error messages are the only allocations left.
        assert!(
            largest < 512,
            "{largest} bytes allocated at once for {input:x?}"
        );
        assert!(total < 8192, "{total} bytes allocated for {input:x?}");
    }

    // A valid message of many small values: memory in proportion to the bytes.
    let value = Value::from(pmix_types::DataArray::from_infos((0..2000).map(|i| {
        pmix_types::Info::new(pmix_types::Key::new(format!("k{i}")).unwrap(), i as u32)
    })));
    let mut frame = Vec::new();
    encode_frame(&value, &mut frame).unwrap();
    let body = &frame[HEADER_LEN..];
    let (largest, total) = measure(|| assert_eq!(decode_body::<Value>(body).unwrap(), value));
    assert!(
        total < 64 * body.len(),
        "{total} bytes allocated for a body of {}",
        body.len()
    );
    assert!(largest < 32 * body.len());
}

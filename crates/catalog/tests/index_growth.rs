//! The catalog grows linearly in what backends send: twice the tools, or a description twice as
//! long, takes about twice the memory, never the square (one 40,000-character word once took
//! the search index to 3.2 GB). Memory is counted by a global allocator, so this is exact and
//! not timing-dependent.

#![allow(clippy::expect_used)]
#![expect(
    unsafe_code,
    reason = "a counting global allocator needs it; it only forwards to `System`"
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use sandgate_catalog::{Catalog, ToolSpec};
use serde_json::json;

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: defers to the system allocator and only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same layout, passed through.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Tests run on parallel threads; the counter is process-wide, so measurements take turns.
static MEASURING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Bytes a catalog (with its search index) holds beyond its input.
fn held_by(make: impl Fn() -> Vec<ToolSpec>) -> isize {
    let _turn = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let tools = make();
    let before = LIVE.load(Ordering::Relaxed);
    let catalog = Catalog::new(tools);
    let held = LIVE.load(Ordering::Relaxed) - before;
    drop(catalog);
    held
}

fn tools(count: usize) -> Vec<ToolSpec> {
    (0..count)
        .map(|i| ToolSpec {
            backend: format!("backend{}", i % 10),
            name: format!("tool_number_{i}"),
            description: Some(format!("Does thing {i} to a widget, carefully and quickly")),
            input_schema: json!({"type": "object", "properties": {"id": {"type": "string"}}}),
            output_schema: None,
            annotations: None,
            origin: Default::default(),
        })
        .collect()
}

/// One word of `chars` letters with no repeating pattern (a repeated letter would make every
/// deletion variant the same string, and hide the cost).
fn word(chars: usize) -> String {
    let mut state: u32 = 0x2545_f491;
    (0..chars)
        .map(|_| {
            state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            char::from(b'a' + ((state >> 16) % 26) as u8)
        })
        .collect()
}

fn one_word_description(chars: usize) -> Vec<ToolSpec> {
    vec![ToolSpec {
        backend: "b".into(),
        name: "long".into(),
        description: Some(word(chars)),
        input_schema: json!({"type": "object"}),
        output_schema: None,
        annotations: None,
        origin: Default::default(),
    }]
}

fn assert_linear(small: isize, large: isize, what: &str) {
    let ratio = large as f64 / small as f64;
    eprintln!("{what}: {small} → {large} bytes ({ratio:.2}×)");
    assert!(
        ratio < 2.4,
        "{what}: twice the input took {ratio:.2}× the memory ({small} → {large} bytes)"
    );
}

#[test]
fn memory_is_linear_in_the_number_of_tools() {
    let small = held_by(|| tools(10_000));
    let large = held_by(|| tools(20_000));
    assert_linear(small, large, "tools");
}

#[test]
fn memory_is_linear_in_the_length_of_a_word() {
    let small = held_by(|| one_word_description(5_000));
    let large = held_by(|| one_word_description(10_000));
    assert_linear(small, large, "one long word");
    let huge = held_by(|| one_word_description(100_000));
    eprintln!("one 100 KB word: {huge} bytes");
    assert!(huge < 4 << 20, "a 100 KB description took {huge} bytes");
}

#[test]
fn a_long_word_is_still_found_by_its_start() {
    let _turn = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let catalog = Catalog::new(one_word_description(100_000));
    let hits = catalog.search_index().search(&word(60), 5);
    assert_eq!(hits.len(), 1);
}

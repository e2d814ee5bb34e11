//! A counting global allocator: glibc malloc (`System`), with the live
//! bytes asked for, the live allocations, and the live malloc chunks
//! (`malloc_usable_size` + glibc's 8-byte chunk header) kept in atomics.

use std::{
    alloc::{GlobalAlloc, Layout, System},
    sync::atomic::{AtomicI64, Ordering::Relaxed},
};

/// The global allocator of this program.
pub struct Counting;

static BYTES: AtomicI64 = AtomicI64::new(0);
static ALLOCS: AtomicI64 = AtomicI64::new(0);
static CHUNKS: AtomicI64 = AtomicI64::new(0);

/// glibc's chunk of an allocation: what it can hold plus its size header.
fn chunk(ptr: *mut u8) -> i64 {
    // SAFETY: `ptr` is a live allocation of glibc malloc (System).
    unsafe { libc::malloc_usable_size(ptr.cast()) as i64 + 8 }
}

// SAFETY: every call is forwarded to `System`; the counters only observe.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            BYTES.fetch_add(layout.size() as i64, Relaxed);
            ALLOCS.fetch_add(1, Relaxed);
            CHUNKS.fetch_add(chunk(p), Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            BYTES.fetch_add(layout.size() as i64, Relaxed);
            ALLOCS.fetch_add(1, Relaxed);
            CHUNKS.fetch_add(chunk(p), Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        BYTES.fetch_sub(layout.size() as i64, Relaxed);
        ALLOCS.fetch_sub(1, Relaxed);
        CHUNKS.fetch_sub(chunk(ptr), Relaxed);
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let before = chunk(ptr);
        // SAFETY: the caller's contract, forwarded.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            BYTES.fetch_add(new_size as i64 - layout.size() as i64, Relaxed);
            CHUNKS.fetch_add(chunk(p) - before, Relaxed);
        }
        p
    }
}

/// The live heap at one moment.
#[derive(Clone, Copy, Debug)]
pub struct Counts {
    /// Bytes asked for (the sum of live `Layout::size`s).
    pub bytes: i64,
    /// Live allocations.
    pub allocs: i64,
    /// Bytes of the live malloc chunks (asked for + rounding + headers).
    pub chunks: i64,
}

impl Counts {
    /// The live heap now.
    pub fn now() -> Self {
        Counts {
            bytes: BYTES.load(Relaxed),
            allocs: ALLOCS.load(Relaxed),
            chunks: CHUNKS.load(Relaxed),
        }
    }

    /// What was allocated (and is still live) since `before`.
    pub fn since(self, before: Counts) -> Counts {
        Counts {
            bytes: self.bytes - before.bytes,
            allocs: self.allocs - before.allocs,
            chunks: self.chunks - before.chunks,
        }
    }
}

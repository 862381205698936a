//! Where uploaded matrices live: an [`Arena`] of large chunks, each aligned to 2 MiB and, on
//! Linux, marked `MADV_HUGEPAGE` before its first write, so the kernel can back the weights
//! with transparent huge pages where it allows them (`enabled` = `always` or `madvise`, the
//! common defaults). A matrix is a read-only [`WeightBuf`]: a range of one chunk, which stays
//! allocated while any of its matrices does. The bytes are the same as anywhere else; where
//! huge pages are off or unavailable the advice is simply not taken.
//!
//! Why: decode streams every weight byte once per token. With 4 KiB pages a model of ~90 MB
//! spans ~22 000 pages, far beyond the second-level TLB (3 072 entries on Zen 4), so every page
//! costs a table walk, and the hardware prefetchers stop at each page boundary. Most of a small
//! model's matrices are below 2 MiB (SmolLM2-135M: 0.06-1 MB each), so each matrix in its own
//! allocation could never sit in a huge page; packed into shared chunks they can (90 of the
//! Q4_0 file's 92 MB were then on huge pages, `AnonHugePages` in `/proc/PID/smaps_rollup`).
//! SmolLM2-135M decode, 2 threads, before → after, mean of three interleaved runs each
//! (`lowbit speed -m FILE -t 2 -p 0 -n 64 -r 3`, 2026-12-01 16:05 UTC, the EPYC of
//! docs/BENCHMARKS.md): Q8_0 108 → 151 tok/s, Q4_0 109 → 141, the distributed Q4_1 100 → 133,
//! IQ2_M 92 → 101.
//!
//! This is an FFI (`madvise`) and allocator module: every `unsafe` block states why it is
//! sound. What must not live here: anything about formats or kernels.

use std::alloc::{self, Layout};
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

/// The huge-page size the chunks are aligned to and sized in.
pub const HUGE_PAGE: usize = 2 << 20;

/// The size of a chunk (a matrix larger than this gets a chunk of its own, rounded up to
/// whole huge pages). Untouched parts of a chunk are never faulted in, so the cost of a
/// half-used chunk is address space, not memory.
pub const CHUNK: usize = 32 << 20;

/// Matrices start at multiples of this (a cache line, for the kernels' aligned loads).
const ALIGN: usize = 64;

/// One 2 MiB-aligned allocation; freed when the last [`WeightBuf`] in it is dropped.
struct Chunk {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: a chunk is plain memory owned by its `Arc`; its bytes are written only by
// `Arena::store` into a range no `WeightBuf` covers yet (under the arena's lock) and then only
// read, through `WeightBuf`s of disjoint ranges.
unsafe impl Send for Chunk {}
// SAFETY: as above.
unsafe impl Sync for Chunk {}

impl Chunk {
    fn new(size: usize) -> Chunk {
        let layout = Layout::from_size_align(size, HUGE_PAGE).expect("chunk size fits isize");
        // SAFETY: `layout` has a non-zero size (at least one huge page).
        let raw = unsafe { alloc::alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else { alloc::handle_alloc_error(layout) };
        // Before the first write, so the first touch can fault in huge pages.
        advise_huge(ptr, size);
        Chunk { ptr, layout }
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        // SAFETY: allocated in `Chunk::new` with exactly this layout, freed once.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

/// Asks the kernel for transparent huge pages over `len` bytes at `ptr` (Linux); a refusal
/// is harmless.
#[cfg(target_os = "linux")]
fn advise_huge(ptr: NonNull<u8>, len: usize) {
    // SAFETY: `madvise` takes an address range and changes no contents; `ptr` is 2 MiB-aligned
    // (a multiple of the page size, as it requires) and the range is our allocation. The result
    // is ignored on purpose: without THP support it fails with EINVAL and the memory stays on
    // normal pages.
    unsafe {
        libc::madvise(ptr.as_ptr().cast(), len, libc::MADV_HUGEPAGE);
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge(_ptr: NonNull<u8>, _len: usize) {}

/// Hands out [`WeightBuf`]s from shared chunks (see the module doc).
#[derive(Default)]
pub struct Arena {
    /// The chunk being filled and the bytes of it used so far.
    open: Mutex<Option<(Arc<Chunk>, usize)>>,
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Arena")
    }
}

impl Arena {
    /// A copy of `bytes` in the arena.
    ///
    /// # Panics
    /// Like `Vec`, aborts through [`alloc::handle_alloc_error`] if an allocation fails.
    pub fn store(&self, bytes: &[u8]) -> WeightBuf {
        let len = bytes.len();
        // SAFETY: copies exactly `len` bytes into the `len` writable bytes `place` hands over;
        // `bytes` is a live slice elsewhere, so the ranges cannot overlap.
        unsafe { self.place(len, |dst| std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, len)) }
    }

    /// `len` bytes in the arena, zeroed, then written by `fill`.
    ///
    /// `fill` runs under the arena's lock: uploads to the same backend wait for it.
    ///
    /// # Panics
    /// Like `Vec`, aborts through [`alloc::handle_alloc_error`] if an allocation fails; a
    /// panic in `fill` propagates (the range is then never handed out).
    pub fn store_with(&self, len: usize, fill: impl FnOnce(&mut [u8])) -> WeightBuf {
        // SAFETY: zeroes all `len` bytes `place` hands over before making a slice of them, so
        // `fill` sees initialised memory, and the slice lives only inside this call.
        unsafe {
            self.place(len, |dst| {
                dst.write_bytes(0, len);
                fill(std::slice::from_raw_parts_mut(dst, len));
            })
        }
    }

    /// Reserves `len` bytes (at a multiple of 64 in the open chunk, or at the start of a new
    /// one) and lets `write` initialise them, under the lock, before handing them out.
    ///
    /// # Safety
    /// `write` must initialise all `len` bytes at the pointer it gets and touch no other byte.
    unsafe fn place(&self, len: usize, write: impl FnOnce(*mut u8)) -> WeightBuf {
        if len == 0 {
            write(NonNull::dangling().as_ptr());
            return WeightBuf { chunk: None, off: 0, len: 0 };
        }
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let fits =
            |(c, used): &(Arc<Chunk>, usize)| used.next_multiple_of(ALIGN) + len <= c.layout.size();
        let (chunk, off) = match open.as_ref().filter(|o| fits(o)) {
            Some((c, used)) => (c.clone(), used.next_multiple_of(ALIGN)),
            None => (Arc::new(Chunk::new(len.max(CHUNK).next_multiple_of(HUGE_PAGE))), 0),
        };
        // SAFETY: `off + len <= chunk size` (checked by `fits`, or a fresh chunk of at least
        // `len` bytes), so the pointer and the `len` bytes after it are inside the allocation;
        // no `WeightBuf` covers bytes at or past the chunk's `used` mark and we hold the lock,
        // so nothing else reads or writes them while `write` runs.
        write(unsafe { chunk.ptr.as_ptr().add(off) });
        // A chunk that a matrix filled past `CHUNK` is not reused; others stay open.
        *open = Some((chunk.clone(), off + len));
        WeightBuf { chunk: Some(chunk), off, len }
    }
}

/// The read-only bytes of one uploaded matrix, inside an [`Arena`] chunk.
#[derive(Clone)]
pub struct WeightBuf {
    /// `None` for an empty buffer.
    chunk: Option<Arc<Chunk>>,
    off: usize,
    len: usize,
}

impl WeightBuf {
    /// The bytes as `u64`s: `None` unless the length is a multiple of 8 (the start always is
    /// aligned: chunks are 2 MiB-aligned and buffers start at multiples of 64).
    pub fn as_u64s(&self) -> Option<&[u64]> {
        bytemuck::try_cast_slice(self).ok()
    }
}

impl Deref for WeightBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.chunk {
            // SAFETY: `off..off + len` lies inside the chunk and was fully written by
            // `Arena::store` before this `WeightBuf` existed; nothing writes it afterwards.
            Some(c) => unsafe {
                std::slice::from_raw_parts(c.ptr.as_ptr().add(self.off), self.len)
            },
            None => &[],
        }
    }
}

impl std::fmt::Debug for WeightBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WeightBuf({} bytes at {})", self.len, self.off)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(len: usize, seed: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 31 + seed) as u8).collect()
    }

    #[test]
    fn every_buffer_keeps_its_bytes_across_chunks() {
        let arena = Arena::default();
        let lens = [0, 1, 63, 64, 4097, HUGE_PAGE - 1, CHUNK / 2, CHUNK / 2 + 5, 3, CHUNK + 9, 100];
        let bufs: Vec<_> =
            lens.iter().enumerate().map(|(i, &l)| arena.store(&pattern(l, i))).collect();
        for (i, (b, &l)) in bufs.iter().zip(&lens).enumerate() {
            assert_eq!(&b[..], &pattern(l, i)[..], "buffer {i} ({l} bytes)");
            if l > 0 {
                assert_eq!(b.as_ptr() as usize % ALIGN, 0, "buffer {i} not aligned");
            }
        }
        // A clone shares the bytes; dropping others leaves it intact.
        let keep = bufs[7].clone();
        drop(bufs);
        drop(arena);
        assert_eq!(&keep[..], &pattern(CHUNK / 2 + 5, 7)[..]);
    }

    #[test]
    fn chunks_are_huge_page_aligned() {
        let arena = Arena::default();
        let a = arena.store(&[1, 2, 3]);
        assert_eq!(a.as_ptr() as usize % HUGE_PAGE, 0);
        let big = arena.store(&pattern(CHUNK + 1, 0));
        assert_eq!(big.as_ptr() as usize % HUGE_PAGE, 0, "an oversized matrix gets its own chunk");
    }
}

//! Read-only memory maps of input files (GGUF, safetensors). The only `unsafe` in
//! lowbit-runtime is the one call that creates a map.
//! What must not live here: parsing (callers get a plain `&[u8]`).
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::ops::Deref;

/// A read-only map of a whole file (an empty file maps to an empty slice).
#[derive(Debug)]
pub struct Map {
    map: Option<memmap2::Mmap>,
}

impl Map {
    /// Maps `file` read-only.
    pub fn of(file: &File) -> io::Result<Map> {
        if file.metadata()?.len() == 0 {
            // mmap(2) rejects zero-length maps.
            return Ok(Map { map: None });
        }
        // SAFETY: the map is read-only and private to this process, and every access goes
        // through the `&[u8]` it derefs to, bounds-checked by the parsers. The remaining hazard
        // is the one every file map has: another process truncating or rewriting the file while
        // it is mapped (a truncation faults with SIGBUS, a rewrite changes the bytes under us).
        // lowbit itself never writes a file it reads: its outputs are written to a temporary
        // file and renamed over the target, which replaces the directory entry and leaves a
        // mapped file's contents untouched.
        let map = unsafe { memmap2::Mmap::map(file)? };
        Ok(Map { map: Some(map) })
    }
}

impl Deref for Map {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

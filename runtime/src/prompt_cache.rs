//! The disk tier of the prompt cache: KV state for token prefixes, kept in a directory across
//! requests (and, when asked, across runs), so a prompt that starts with a cached prefix skips
//! that part of the prefill.
//!
//! Rules, each tested below:
//! * **Atomic entries.** An entry is written to a temporary file in the directory, flushed to
//!   disk, then renamed into place; a crash leaves at most a temporary file, which the next
//!   [`DiskCache::open`] removes.
//! * **Validated before reuse.** An entry is used only if its magic, version, model fingerprint,
//!   length and checksum all agree and its stored tokens equal the prompt's prefix; anything
//!   else is reported as a [`Miss`] with the reason, the entry is deleted, and the caller does a
//!   cold prefill.
//! * **Bounded.** After every write the oldest entries (by last use) are deleted until the
//!   directory's entries fit the limit; an entry larger than the whole limit is not stored.
//! * **Nothing kept unless asked.** Dropping a cache opened with `keep = false` deletes every
//!   entry it can find and the directory, if it created it.
//!
//! Entry file (`<hex fingerprint>-<hex prefix hash>.lbkv`, little endian): magic `LBKV`,
//! version u32 (1), model fingerprint u64, token count u64, payload length u64, checksum u64 of
//! the tokens and payload, the tokens as u32s, the payload. The payload is the model's KV state
//! for those tokens, opaque here.
//! What must not live here: the KV layout (the model owns it) and the in-memory cache.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

const MAGIC: &[u8; 4] = b"LBKV";
const VERSION: u32 = 1;
const HEADER: usize = 4 + 4 + 8 * 4;
const EXT: &str = "lbkv";
const TMP_PREFIX: &str = ".tmp-";

/// A 64-bit checksum (word-wise multiply-xorshift mixing; detects corruption, not attacks).
pub fn checksum(seed: u64, bytes: &[u8]) -> u64 {
    const M: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = seed ^ (bytes.len() as u64).wrapping_mul(M);
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let v = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
        h = (h ^ v).wrapping_mul(M);
        h ^= h >> 29;
    }
    let mut tail = [0u8; 8];
    tail[..words.remainder().len()].copy_from_slice(words.remainder());
    h = (h ^ u64::from_le_bytes(tail)).wrapping_mul(M);
    h ^ (h >> 32)
}

fn tokens_bytes(tokens: &[u32]) -> Vec<u8> {
    tokens.iter().flat_map(|t| t.to_le_bytes()).collect()
}

fn prefix_hash(tokens: &[u32]) -> u64 {
    checksum(0x7072_6566, &tokens_bytes(tokens))
}

/// Why a cached entry was not used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Miss {
    /// No entry covers any prefix of the prompt.
    None,
    /// An entry was found but rejected (and deleted); the reason names the file and the check.
    Rejected(String),
}

/// A hit: the longest cached prefix of the prompt and its payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hit {
    /// How many tokens of the prompt the entry covers.
    pub tokens: usize,
    /// The model's KV state for those tokens.
    pub payload: Vec<u8>,
}

/// A bounded directory of prompt-prefix entries for one model.
#[derive(Debug)]
pub struct DiskCache {
    dir: PathBuf,
    limit: u64,
    keep: bool,
    created_dir: bool,
    fingerprint: u64,
}

struct EntryMeta {
    path: PathBuf,
    tokens: usize,
    hash: u64,
    bytes: u64,
    used: SystemTime,
}

impl DiskCache {
    /// Opens (creating if needed) `dir` for the model identified by `fingerprint` (callers hash
    /// what identifies the weights: file size, tensor table, dialect), bounded to `limit` bytes.
    /// Removes temporary files a crashed writer left. `keep = false` deletes the entries on drop.
    pub fn open(dir: &Path, limit: u64, keep: bool, fingerprint: u64) -> io::Result<DiskCache> {
        let created_dir = !dir.exists();
        fs::create_dir_all(dir)?;
        for e in fs::read_dir(dir)? {
            let e = e?;
            if e.file_name().to_string_lossy().starts_with(TMP_PREFIX) {
                let _ = fs::remove_file(e.path());
            }
        }
        Ok(DiskCache { dir: dir.to_path_buf(), limit, keep, created_dir, fingerprint })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn entry_path(&self, hash: u64) -> PathBuf {
        self.dir.join(format!("{:016x}-{hash:016x}.{EXT}", self.fingerprint))
    }

    /// This model's entries, newest use first.
    fn entries(&self) -> io::Result<Vec<EntryMeta>> {
        let mut out = Vec::new();
        let prefix = format!("{:016x}-", self.fingerprint);
        for e in fs::read_dir(&self.dir)? {
            let e = e?;
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(stem) = name.strip_suffix(&format!(".{EXT}")) else { continue };
            let Some(hex) = stem.strip_prefix(&prefix) else { continue };
            let Ok(hash) = u64::from_str_radix(hex, 16) else { continue };
            let meta = e.metadata()?;
            let mut head = [0u8; HEADER];
            let tokens = match File::open(e.path()).and_then(|mut f| f.read_exact(&mut head)) {
                Ok(()) => u64::from_le_bytes(head[16..24].try_into().unwrap_or([0; 8])),
                Err(_) => 0,
            };
            out.push(EntryMeta {
                path: e.path(),
                tokens: usize::try_from(tokens).unwrap_or(usize::MAX),
                hash,
                bytes: meta.len(),
                used: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            });
        }
        out.sort_by_key(|e| std::cmp::Reverse(e.used));
        Ok(out)
    }

    /// Stores `payload` as the KV state of `tokens`, atomically, then trims the directory to
    /// its limit. Returns whether it was stored (an entry larger than the limit is not).
    pub fn put(&self, tokens: &[u32], payload: &[u8]) -> io::Result<bool> {
        let tb = tokens_bytes(tokens);
        let total = (HEADER + tb.len() + payload.len()) as u64;
        if total > self.limit || tokens.is_empty() {
            return Ok(false);
        }
        let mut sum_input = tb.clone();
        sum_input.extend_from_slice(payload);
        let mut head = Vec::with_capacity(HEADER);
        head.extend_from_slice(MAGIC);
        head.extend_from_slice(&VERSION.to_le_bytes());
        head.extend_from_slice(&self.fingerprint.to_le_bytes());
        head.extend_from_slice(&(tokens.len() as u64).to_le_bytes());
        head.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        head.extend_from_slice(&checksum(self.fingerprint, &sum_input).to_le_bytes());
        let final_path = self.entry_path(prefix_hash(tokens));
        let tmp =
            self.dir.join(format!("{TMP_PREFIX}{}-{:x}", std::process::id(), prefix_hash(tokens)));
        let write = || -> io::Result<()> {
            let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
            f.write_all(&head)?;
            f.write_all(&tb)?;
            f.write_all(payload)?;
            f.sync_all()?;
            fs::rename(&tmp, &final_path)
        };
        if let Err(e) = write() {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        self.trim(&final_path)?;
        Ok(true)
    }

    /// Deletes least recently used entries until the total fits the limit, never `keep_path`.
    fn trim(&self, keep_path: &Path) -> io::Result<()> {
        let entries = self.entries()?;
        let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
        for e in entries.iter().rev() {
            if total <= self.limit {
                break;
            }
            if e.path != keep_path && fs::remove_file(&e.path).is_ok() {
                total -= e.bytes;
            }
        }
        Ok(())
    }

    /// Bytes held by this model's entries.
    pub fn bytes(&self) -> io::Result<u64> {
        Ok(self.entries()?.iter().map(|e| e.bytes).sum())
    }

    /// The longest valid cached prefix of `prompt` (at most `prompt.len()` tokens), or why none.
    /// A rejected entry is deleted; the next candidate (shorter prefix) is tried after it.
    pub fn get(&self, prompt: &[u32]) -> io::Result<Result<Hit, Miss>> {
        let mut entries = self.entries()?;
        entries.sort_by_key(|e| std::cmp::Reverse(e.tokens));
        let mut rejected = None;
        for e in entries {
            if e.tokens == 0
                || e.tokens > prompt.len()
                || prefix_hash(&prompt[..e.tokens]) != e.hash
            {
                continue;
            }
            match self.read_entry(&e.path, &prompt[..e.tokens]) {
                Ok(payload) => {
                    // Mark as recently used for the LRU trim.
                    let _ = File::options()
                        .append(true)
                        .open(&e.path)
                        .and_then(|f| f.set_modified(SystemTime::now()));
                    return Ok(Ok(Hit { tokens: e.tokens, payload }));
                }
                Err(why) => {
                    let _ = fs::remove_file(&e.path);
                    rejected = Some(format!("{}: {why}", e.path.display()));
                }
            }
        }
        Ok(Err(rejected.map_or(Miss::None, Miss::Rejected)))
    }

    fn read_entry(&self, path: &Path, tokens: &[u32]) -> Result<Vec<u8>, String> {
        let bytes = fs::read(path).map_err(|e| format!("unreadable: {e}"))?;
        if bytes.len() < HEADER {
            return Err(format!("{} bytes, shorter than the {HEADER}-byte header", bytes.len()));
        }
        let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap_or([0; 8]));
        if &bytes[..4] != MAGIC {
            return Err("bad magic".into());
        }
        let version = u32::from_le_bytes(bytes[4..8].try_into().unwrap_or([0; 4]));
        if version != VERSION {
            return Err(format!("version {version}, expected {VERSION}"));
        }
        if u64_at(8) != self.fingerprint {
            return Err("written for another model".into());
        }
        let (n_tok, n_pay, sum) = (u64_at(16), u64_at(24), u64_at(32));
        let expected = (HEADER as u64)
            .checked_add(n_tok.checked_mul(4).ok_or("token count overflows")?)
            .and_then(|v| v.checked_add(n_pay))
            .ok_or("lengths overflow")?;
        if bytes.len() as u64 != expected {
            return Err(format!("{} bytes, the header says {expected}", bytes.len()));
        }
        if n_tok != tokens.len() as u64
            || bytes[HEADER..HEADER + 4 * tokens.len()] != tokens_bytes(tokens)[..]
        {
            return Err("stored tokens differ from the prompt's prefix".into());
        }
        if checksum(self.fingerprint, &bytes[HEADER..]) != sum {
            return Err("checksum mismatch".into());
        }
        Ok(bytes[HEADER + 4 * tokens.len()..].to_vec())
    }
}

impl Drop for DiskCache {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        if let Ok(entries) = self.entries() {
            for e in entries {
                let _ = fs::remove_file(e.path);
            }
        }
        if self.created_dir {
            // Only succeeds when empty: someone else's files are never removed.
            let _ = fs::remove_dir(&self.dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(n: usize, seed: u8) -> Vec<u8> {
        (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
    }

    fn files(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn longest_prefix_hit_and_cold_miss() {
        let t = tempfile::tempdir().unwrap();
        let c = DiskCache::open(t.path(), 1 << 20, true, 42).unwrap();
        assert_eq!(c.get(&[1, 2, 3]).unwrap(), Err(Miss::None));
        assert!(c.put(&[1, 2], &payload(100, 1)).unwrap());
        assert!(c.put(&[1, 2, 3, 4], &payload(200, 2)).unwrap());
        let hit = c.get(&[1, 2, 3, 4, 5, 6]).unwrap().unwrap();
        assert_eq!((hit.tokens, hit.payload), (4, payload(200, 2)));
        let hit = c.get(&[1, 2, 3]).unwrap().unwrap();
        assert_eq!((hit.tokens, hit.payload), (2, payload(100, 1)));
        assert_eq!(c.get(&[2, 1]).unwrap(), Err(Miss::None));
        // Another model's cache in the same directory sees none of these.
        let other = DiskCache::open(t.path(), 1 << 20, true, 43).unwrap();
        assert_eq!(other.get(&[1, 2, 3, 4]).unwrap(), Err(Miss::None));
    }

    #[test]
    fn corrupt_or_truncated_entries_are_rejected_deleted_and_fall_back() {
        let t = tempfile::tempdir().unwrap();
        let c = DiskCache::open(t.path(), 1 << 20, true, 7).unwrap();
        c.put(&[5, 6], &payload(64, 3)).unwrap();
        c.put(&[5, 6, 7], &payload(64, 4)).unwrap();
        let long = c.entry_path(prefix_hash(&[5, 6, 7]));
        // Flip one payload byte: checksum mismatch, the shorter entry is used instead.
        let mut b = fs::read(&long).unwrap();
        let last = b.len() - 1;
        b[last] ^= 1;
        fs::write(&long, &b).unwrap();
        let hit = c.get(&[5, 6, 7, 8]).unwrap().unwrap();
        assert_eq!(hit.tokens, 2);
        assert!(!long.exists(), "the corrupt entry is deleted");
        // Truncate the remaining one: rejected with the reason, nothing left to use.
        let short = c.entry_path(prefix_hash(&[5, 6]));
        let b = fs::read(&short).unwrap();
        fs::write(&short, &b[..b.len() - 10]).unwrap();
        match c.get(&[5, 6, 7]).unwrap() {
            Err(Miss::Rejected(why)) => assert!(why.contains("the header says"), "{why}"),
            other => panic!("expected a rejection, got {other:?}"),
        }
        assert!(!short.exists());
    }

    #[test]
    fn stays_under_its_limit_evicting_least_recently_used() {
        let t = tempfile::tempdir().unwrap();
        let entry = (HEADER + 4 + 1000) as u64;
        let c = DiskCache::open(t.path(), 3 * entry, true, 1).unwrap();
        for i in 0..3u32 {
            c.put(&[i], &payload(1000, i as u8)).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // Use entry 0 so entry 1 is the least recently used.
        assert!(c.get(&[0]).unwrap().is_ok());
        std::thread::sleep(std::time::Duration::from_millis(20));
        c.put(&[3], &payload(1000, 3)).unwrap();
        assert!(c.bytes().unwrap() <= 3 * entry);
        assert!(c.get(&[1]).unwrap().is_err(), "entry 1 was evicted");
        for i in [0u32, 2, 3] {
            assert!(c.get(&[i]).unwrap().is_ok(), "entry {i} kept");
        }
        // Larger than the whole limit: not stored.
        assert!(!c.put(&[9], &payload(4000, 9)).unwrap());
        assert!(c.bytes().unwrap() <= 3 * entry);
    }

    #[test]
    fn leftover_temp_files_are_removed_and_nothing_kept_unless_asked() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("kv");
        {
            let c = DiskCache::open(&dir, 1 << 20, true, 5).unwrap();
            c.put(&[1], &payload(10, 0)).unwrap();
        }
        fs::write(dir.join(format!("{TMP_PREFIX}999-abc")), b"half").unwrap();
        fs::write(dir.join("notes.txt"), b"someone else's").unwrap();
        {
            let c = DiskCache::open(&dir, 1 << 20, false, 5).unwrap();
            assert_eq!(files(&dir).len(), 2, "temp file removed: {:?}", files(&dir));
            assert!(c.get(&[1, 2]).unwrap().is_ok(), "kept from the first run");
        }
        assert_eq!(files(&dir), vec!["notes.txt".to_string()]);
        // A directory the cache created itself goes away when it is not kept.
        let fresh = t.path().join("fresh");
        {
            let c = DiskCache::open(&fresh, 1 << 20, false, 5).unwrap();
            c.put(&[1], &payload(10, 0)).unwrap();
        }
        assert!(!fresh.exists());
    }
}

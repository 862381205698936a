//! The in-memory KV cache ([`KvCache`]): per layer, the keys and values (f32, after RoPE for
//! the keys) of every position so far, and the position counter.
//!
//! Layout per layer: position after position, each `kv_dim = n_head_kv * head_dim` floats,
//! head after head. Memory grows with the positions actually filled, up to a fixed capacity.
//! What must not live here: attention itself (`ops.rs`), a disk tier (later work).

use super::config::LlamaConfig;
use super::error::ModelError;

/// Keys and values of every layer for positions `0..len()`.
#[derive(Clone, Debug)]
pub struct KvCache {
    n_layer: usize,
    kv_dim: usize,
    capacity: usize,
    len: usize,
    k: Vec<Vec<f32>>,
    v: Vec<Vec<f32>>,
}

impl KvCache {
    /// An empty cache of `n_layer` layers of `kv_dim` floats per position, holding at most
    /// `capacity` positions.
    pub fn new(n_layer: usize, kv_dim: usize, capacity: usize) -> Self {
        KvCache {
            n_layer,
            kv_dim,
            capacity,
            len: 0,
            k: vec![Vec::new(); n_layer],
            v: vec![Vec::new(); n_layer],
        }
    }

    /// An empty cache for `config` holding at most `capacity` positions.
    pub fn for_config(config: &LlamaConfig, capacity: usize) -> Self {
        Self::new(config.n_layer, config.kv_dim(), capacity)
    }

    /// Positions filled.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no position is filled.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Most positions the cache holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Layers.
    pub fn n_layer(&self) -> usize {
        self.n_layer
    }

    /// Floats per position and layer (keys, and again values).
    pub fn kv_dim(&self) -> usize {
        self.kv_dim
    }

    /// Forgets every position from `len` on (no-op if `len >= self.len()`): the next forward
    /// pass continues at position `len`.
    pub fn truncate(&mut self, len: usize) {
        if len >= self.len {
            return;
        }
        self.len = len;
        for buf in self.k.iter_mut().chain(self.v.iter_mut()) {
            buf.truncate(len * self.kv_dim);
        }
    }

    /// Forgets every position.
    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// Checks that the cache fits `config` and has room for `n` more positions.
    pub(crate) fn check(&self, config: &LlamaConfig, n: usize) -> Result<(), ModelError> {
        if self.n_layer != config.n_layer || self.kv_dim != config.kv_dim() {
            return Err(ModelError::CacheShape {
                reason: format!(
                    "cache has {} layers x {} floats, model {} x {}",
                    self.n_layer,
                    self.kv_dim,
                    config.n_layer,
                    config.kv_dim()
                ),
            });
        }
        if self.len.checked_add(n).is_none_or(|end| end > self.capacity) {
            return Err(ModelError::Context { pos: self.len, n, limit: self.capacity });
        }
        Ok(())
    }

    /// Stores keys `k` and values `v` of the positions `len()..len() + n` for `layer` (`n`
    /// columns of `kv_dim`), replacing anything a failed pass left there, and returns every key
    /// and value of the layer so far (positions `0..len() + n`).
    pub(crate) fn store(&mut self, layer: usize, k: &[f32], v: &[f32]) -> (&[f32], &[f32]) {
        let start = self.len * self.kv_dim;
        let (kb, vb) = (&mut self.k[layer], &mut self.v[layer]);
        kb.truncate(start);
        kb.extend_from_slice(k);
        vb.truncate(start);
        vb.extend_from_slice(v);
        (kb, vb)
    }

    /// Counts `n` more positions as filled (after every layer has stored them).
    pub(crate) fn advance(&mut self, n: usize) {
        self.len += n;
    }
}

/// The serialized state: for every layer, the keys then the values of every position, as
/// little-endian f32 (`2 * n_layer * len * kv_dim * 4` bytes). Used by the disk prompt cache,
/// which validates the bytes before handing them back.
impl KvCache {
    /// The keys and values of every position so far, as bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let n = self.len * self.kv_dim;
        let mut out = Vec::with_capacity(2 * self.n_layer * n * 4);
        for l in 0..self.n_layer {
            for v in self.k[l][..n].iter().chain(&self.v[l][..n]) {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        out
    }

    /// Replaces the cache's contents with `len` positions from [`KvCache::to_bytes`] output.
    /// Errors (leaving the cache empty) when the byte count does not match this cache's shape
    /// or `len` exceeds its capacity.
    pub fn restore(&mut self, bytes: &[u8], len: usize) -> Result<(), ModelError> {
        self.clear();
        let n = len.checked_mul(self.kv_dim);
        let want = n.and_then(|n| n.checked_mul(8 * self.n_layer));
        if len > self.capacity || want != Some(bytes.len()) {
            return Err(ModelError::CacheShape {
                reason: format!(
                    "{} bytes for {len} positions of {} layers x {} floats (capacity {})",
                    bytes.len(),
                    self.n_layer,
                    self.kv_dim,
                    self.capacity
                ),
            });
        }
        let n = len * self.kv_dim;
        let mut floats =
            bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        for l in 0..self.n_layer {
            self.k[l].clear();
            self.k[l].extend(floats.by_ref().take(n));
            self.v[l].clear();
            self.v[l].extend(floats.by_ref().take(n));
        }
        self.len = len;
        Ok(())
    }
}

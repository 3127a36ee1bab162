//! The wire form of a flowset: compact (the table is sparse: empty cells are left out, counts
//! are varints), versioned, and bounds-checked (a malformed input is an error, never a panic).
//!
//! ```text
//! offset  size  field
//! 0       4     magic "FRS" and version (1)
//! 4       4     switch id (big-endian)
//! 8       8     epoch number
//! 16      1     sub-tables k (1..=8)
//! 17      3     reserved, zero
//! 20      4     cells per sub-table (1 .. 2^28)
//! 24      8     table seed
//! 32      8     filter seed
//! 40      4     filter blocks (64 bytes each, 0 .. 2^24)
//! 44      4     non-empty cells
//! 48      ...   filter blocks, each 8 little-endian u64 words
//! then per non-empty cell, in index order: varint gap to the previous index (first: the
//! index), 13 bytes of FlowXor (the key layout), 2 bytes of Check (big-endian), varints
//! FlowCount, PacketCount, ByteCount
//! ```
//!
//! Varints are LEB128 (7 bits per byte, low first, at most 10 bytes).

use crate::flowradar::filter::{Block, FlowFilter};
use crate::flowradar::flowset::{Cell, FlowSet, MAX_HASHES};

/// Magic bytes and the version this code writes.
pub const MAGIC: [u8; 3] = *b"FRS";
/// The wire version.
pub const VERSION: u8 = 1;
const HEADER: usize = 48;

/// Why bytes are not a flowset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FlowSetWireError {
    /// The input ends early.
    #[error("flowset ends early")]
    Truncated,
    /// Not a flowset.
    #[error("not a flowset (bad magic)")]
    BadMagic,
    /// A version this code does not read.
    #[error("flowset version {0} is not supported (this reads version 1)")]
    UnsupportedVersion(u8),
    /// A header field is out of range.
    #[error("flowset field {0} is out of range")]
    BadField(&'static str),
    /// A cell index beyond the table, or out of order.
    #[error("flowset cell index out of range")]
    BadIndex,
    /// A varint longer than 10 bytes or a value that does not fit its counter.
    #[error("flowset counter is malformed")]
    BadCounter,
    /// Bytes after the last cell.
    #[error("flowset has trailing bytes")]
    TrailingBytes,
}

/// A flowset with where and when it was taken.
#[derive(Debug, Clone, PartialEq)]
pub struct EpochFlowSet {
    /// The switch.
    pub switch_id: u32,
    /// The epoch number.
    pub epoch: u64,
    /// The flowset.
    pub flowset: FlowSet,
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], FlowSetWireError> {
        let end = self.at.checked_add(n).ok_or(FlowSetWireError::Truncated)?;
        let s = self
            .b
            .get(self.at..end)
            .ok_or(FlowSetWireError::Truncated)?;
        self.at = end;
        Ok(s)
    }

    fn u32(&mut self) -> Result<u32, FlowSetWireError> {
        Ok(u32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn u64(&mut self) -> Result<u64, FlowSetWireError> {
        Ok(u64::from_be_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    fn varint(&mut self) -> Result<u64, FlowSetWireError> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.take(1)?[0];
            if i == 9 && b > 1 {
                return Err(FlowSetWireError::BadCounter);
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(FlowSetWireError::BadCounter)
    }
}

/// Serialises a flowset.
pub fn encode(e: &EpochFlowSet) -> Vec<u8> {
    let fs = &e.flowset;
    let nonempty = fs.cells().iter().filter(|c| !c.is_empty()).count();
    let mut out = Vec::with_capacity(HEADER + fs.filter().blocks().len() * 64 + nonempty * 20);
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.extend_from_slice(&e.switch_id.to_be_bytes());
    out.extend_from_slice(&e.epoch.to_be_bytes());
    out.push(fs.hashes());
    out.extend_from_slice(&[0; 3]);
    out.extend_from_slice(&fs.cells_per_table().to_be_bytes());
    out.extend_from_slice(&fs.table_seed().to_be_bytes());
    out.extend_from_slice(&fs.filter().seed().to_be_bytes());
    out.extend_from_slice(&(fs.filter().blocks().len() as u32).to_be_bytes());
    out.extend_from_slice(&(nonempty as u32).to_be_bytes());
    for b in fs.filter().blocks() {
        for w in b.0 {
            out.extend_from_slice(&w.to_le_bytes());
        }
    }
    let mut prev = 0usize;
    for (i, c) in fs.cells().iter().enumerate().filter(|(_, c)| !c.is_empty()) {
        put_varint(&mut out, (i - prev) as u64);
        prev = i;
        out.extend_from_slice(&c.key_xor.to_be_bytes()[3..]);
        out.extend_from_slice(&c.check.to_be_bytes());
        put_varint(&mut out, u64::from(c.flow_count));
        put_varint(&mut out, u64::from(c.packets));
        put_varint(&mut out, c.bytes);
    }
    out
}

/// Parses a flowset.
pub fn decode(bytes: &[u8]) -> Result<EpochFlowSet, FlowSetWireError> {
    let mut r = Reader { b: bytes, at: 0 };
    let head = r.take(4)?;
    if head[..3] != MAGIC {
        return Err(FlowSetWireError::BadMagic);
    }
    if head[3] != VERSION {
        return Err(FlowSetWireError::UnsupportedVersion(head[3]));
    }
    let switch_id = r.u32()?;
    let epoch = r.u64()?;
    let k = r.take(4)?[0];
    if k == 0 || k > MAX_HASHES {
        return Err(FlowSetWireError::BadField("sub-tables"));
    }
    let per_table = r.u32()?;
    if per_table == 0 || per_table > 1 << 28 {
        return Err(FlowSetWireError::BadField("cells per sub-table"));
    }
    let table_seed = r.u64()?;
    let filter_seed = r.u64()?;
    let blocks = r.u32()? as usize;
    if blocks == 0 || blocks > 1 << 24 {
        return Err(FlowSetWireError::BadField("filter blocks"));
    }
    let total = per_table as usize * usize::from(k);
    let nonempty = r.u32()? as usize;
    if nonempty > total {
        return Err(FlowSetWireError::BadField("non-empty cells"));
    }
    // Check the filter fits before allocating for it.
    let filter_bytes = blocks * 64;
    if bytes.len().saturating_sub(r.at) < filter_bytes {
        return Err(FlowSetWireError::Truncated);
    }
    let mut filter = Vec::with_capacity(blocks);
    for _ in 0..blocks {
        let raw = r.take(64)?;
        let mut b = Block::default();
        for (w, chunk) in b.0.iter_mut().zip(raw.chunks_exact(8)) {
            *w = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        }
        filter.push(b);
    }
    let mut cells = vec![Cell::default(); total];
    let mut index = 0usize;
    for n in 0..nonempty {
        let gap = r.varint()?;
        if n > 0 && gap == 0 {
            return Err(FlowSetWireError::BadIndex);
        }
        index = index
            .checked_add(usize::try_from(gap).map_err(|_| FlowSetWireError::BadIndex)?)
            .ok_or(FlowSetWireError::BadIndex)?;
        if index >= total {
            return Err(FlowSetWireError::BadIndex);
        }
        let mut key = [0u8; 16];
        key[3..].copy_from_slice(r.take(13)?);
        let check = u16::from_be_bytes(r.take(2)?.try_into().expect("2 bytes"));
        let flow_count = u16::try_from(r.varint()?).map_err(|_| FlowSetWireError::BadCounter)?;
        let packets = u32::try_from(r.varint()?).map_err(|_| FlowSetWireError::BadCounter)?;
        let bytes = r.varint()?;
        cells[index] = Cell {
            key_xor: u128::from_be_bytes(key),
            flow_count,
            packets,
            bytes,
            check,
        };
    }
    if r.at != bytes.len() {
        return Err(FlowSetWireError::TrailingBytes);
    }
    let flowset = FlowSet::from_parts(
        FlowFilter::from_blocks(filter, filter_seed),
        cells,
        k,
        table_seed,
    )
    .ok_or(FlowSetWireError::BadField("table size"))?;
    Ok(EpochFlowSet {
        switch_id,
        epoch,
        flowset,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flowradar::flowset::FlowSetConfig;
    use crate::flowradar::key::FlowKey;
    use proptest::prelude::*;

    fn sample(flows: u32, seed: u32) -> EpochFlowSet {
        let mut fs = FlowSet::new(&FlowSetConfig::for_flows(flows.max(1), seed));
        for i in 0..flows {
            let k = FlowKey {
                src: i ^ seed,
                dst: i.wrapping_mul(31),
                src_port: i as u16,
                dst_port: 443,
                protocol: 6,
            };
            for p in 0..(1 + i % 7) {
                fs.update(&k, 100 + p * 10 + i);
            }
        }
        EpochFlowSet {
            switch_id: seed,
            epoch: 42,
            flowset: fs,
        }
    }

    #[test]
    fn round_trip_and_size() {
        let e = sample(10_000, 3);
        let bytes = encode(&e);
        assert_eq!(decode(&bytes).unwrap(), e);
        // Sparse and varint cells: well under the in-memory table.
        assert!(
            bytes.len() < e.flowset.memory_bytes() * 2 / 3,
            "{} vs {}",
            bytes.len(),
            e.flowset.memory_bytes()
        );
        let empty = sample(0, 1);
        assert_eq!(decode(&encode(&empty)).unwrap(), empty);
    }

    #[test]
    fn malformed_inputs_are_errors() {
        let e = sample(100, 5);
        let good = encode(&e);
        assert_eq!(
            decode(&good[..10]).unwrap_err(),
            FlowSetWireError::Truncated
        );
        assert_eq!(
            decode(&good[..good.len() - 1]).unwrap_err(),
            FlowSetWireError::Truncated
        );
        let mut bad = good.clone();
        bad[0] = b'X';
        assert_eq!(decode(&bad).unwrap_err(), FlowSetWireError::BadMagic);
        let mut bad = good.clone();
        bad[3] = 9;
        assert_eq!(
            decode(&bad).unwrap_err(),
            FlowSetWireError::UnsupportedVersion(9)
        );
        let mut bad = good.clone();
        bad[16] = 0;
        assert_eq!(
            decode(&bad).unwrap_err(),
            FlowSetWireError::BadField("sub-tables")
        );
        let mut long = good.clone();
        long.push(0);
        assert_eq!(decode(&long).unwrap_err(), FlowSetWireError::TrailingBytes);
        let mut huge = good.clone();
        huge[40..44].copy_from_slice(&(1u32 << 24).to_be_bytes());
        assert_eq!(
            decode(&huge).unwrap_err(),
            FlowSetWireError::Truncated,
            "no giant allocation for a lying header"
        );
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = decode(&bytes);
        }

        #[test]
        fn mutated_flowsets_never_panic(flips in proptest::collection::vec((0usize..2000, any::<u8>()), 1..6), cut in 0usize..2500) {
            let mut b = encode(&sample(40, 9));
            for (at, v) in flips {
                if at < b.len() {
                    b[at] ^= v;
                }
            }
            b.truncate(cut.max(1));
            let _ = decode(&b);
        }

        #[test]
        fn round_trips(flows in 0u32..300, seed in any::<u32>()) {
            let e = sample(flows, seed);
            prop_assert_eq!(decode(&encode(&e)).unwrap(), e);
        }
    }
}

//! The wire form of a flowset: compact (the table is sparse: empty cells are left out, counts
//! are varints), versioned, and bounds-checked (a malformed input is an error, never a panic).
//!
//! ```text
//! offset  size  field
//! 0       4     magic "FRS" and version (3)
//! 4       4     switch id (big-endian)
//! 8       8     epoch number
//! 16      1     sub-tables k (1..=8)
//! 17      3     reserved, zero
//! 20      4     cells per sub-table (1 .. 2^24 / k)
//! 24      8     table seed
//! 32      8     filter seed
//! 40      4     filter blocks (64 bytes each, 1 .. 2^22)
//! 44      4     non-empty cells
//! 48      4     non-empty filter blocks
//! 52      ...   per non-empty filter block, in index order: varint gap to the previous
//!               index (first: the index), then its 8 words, little-endian
//! then per non-empty cell, in index order: varint gap to the previous index (first: the
//! index), 13 bytes of FlowXor (the key layout), 2 bytes of Check (big-endian, below the
//! prime [`crate::flowradar::check::MODULUS`]), varints FlowCount, PacketCount, ByteCount
//!
//! Version 2 summed the check modulo 2^16; version 3 modulo the prime, so a version-2
//! flowset's checks do not read as version 3's and it is refused.
//! ```
//!
//! Varints are LEB128 (7 bits per byte, low first, at most 10 bytes). A flowset of a quiet
//! epoch is a few dozen bytes; a decoder that knows the flowset's shape (from the switch's
//! hello) rejects any other before allocating for it.

use crate::flowradar::check;
use crate::flowradar::filter::{Block, FlowFilter};
use crate::flowradar::flowset::{Cell, FlowSet, MAX_HASHES};
use crate::wire::bytes::{ReadError, Reader, put_varint};

/// Magic bytes and the version this code writes.
pub const MAGIC: [u8; 3] = *b"FRS";
/// The wire version.
pub const VERSION: u8 = 3;
const HEADER: usize = 52;
/// Most cells a flowset may have (sub-tables times cells per sub-table).
pub const MAX_CELLS: usize = 1 << 24;
/// Most filter blocks a flowset may have.
pub const MAX_FILTER_BLOCKS: usize = 1 << 22;
/// Most memory [`decode`] allocates for a flowset whose shape nobody declared (a sparse
/// flowset of a few bytes may describe a large table): 64 MiB, room for about a million
/// flows. Larger flowsets are read with [`decode_shaped`] and the shape their switch declared.
pub const MAX_UNDECLARED_BYTES: usize = 64 << 20;

/// The sizes of a flowset, as a switch declares them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Sub-tables `k`.
    pub hashes: u8,
    /// Cells per sub-table.
    pub cells_per_table: u32,
    /// Filter blocks.
    pub filter_blocks: u32,
}

impl Shape {
    /// The shape of `fs`.
    pub fn of(fs: &FlowSet) -> Shape {
        Shape {
            hashes: fs.hashes(),
            cells_per_table: fs.cells_per_table(),
            filter_blocks: fs.filter().blocks().len() as u32,
        }
    }
}

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
    #[error("flowset version {0} is not supported (this reads version 3)")]
    UnsupportedVersion(u8),
    /// Sizes other than the switch declared.
    #[error("flowset sizes differ from the ones the switch declared")]
    WrongShape,
    /// A header field is out of range.
    #[error("flowset field {0} is out of range")]
    BadField(&'static str),
    /// A cell index beyond the table, or out of order.
    #[error("flowset cell index out of range")]
    BadIndex,
    /// A filter block index beyond the filter, or out of order.
    #[error("flowset filter block index out of range")]
    BadBlockIndex,
    /// A varint longer than 10 bytes or a value that does not fit its counter.
    #[error("flowset counter is malformed")]
    BadCounter,
    /// Bytes after the last cell.
    #[error("flowset has trailing bytes")]
    TrailingBytes,
    /// A table larger than an undeclared flowset may be.
    #[error("flowset of {0} bytes in memory exceeds the limit for a flowset of undeclared shape")]
    TooLarge(usize),
    /// The reader could not allocate the table (the process's memory or address-space
    /// limit): the flowset was not read, through no fault of its own.
    #[error("no memory for a flowset table of {0} bytes")]
    NoMemory(usize),
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

impl From<ReadError> for FlowSetWireError {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Truncated => FlowSetWireError::Truncated,
            ReadError::BadVarint => FlowSetWireError::BadCounter,
        }
    }
}

/// The index of the `n`-th entry of a sparse list: a varint gap after `prev` (the first: the
/// index itself), increasing, below `limit`.
fn next_index(
    r: &mut Reader<'_>,
    n: usize,
    prev: usize,
    limit: usize,
    bad: FlowSetWireError,
) -> Result<usize, FlowSetWireError> {
    let gap = r.varint()?;
    if n > 0 && gap == 0 {
        return Err(bad);
    }
    let index = prev
        .checked_add(usize::try_from(gap).map_err(|_| bad)?)
        .ok_or(bad)?;
    if index >= limit {
        return Err(bad);
    }
    Ok(index)
}

/// The most bytes [`encode_parts`] writes for a flowset of `cells` counting-table cells
/// and `blocks` filter blocks (every cell and block in use, every count at its widest).
pub const fn max_encoded_len(cells: usize, blocks: usize) -> usize {
    // A varint gap below 2^24 takes at most 4 bytes; a cell's flow and packet counts
    // (u32) at most 5 each, its bytes (u64) 10.
    HEADER + blocks * (4 + 64) + cells * (4 + 13 + 2 + 5 + 5 + 10)
}

/// Serialises a flowset.
pub fn encode(e: &EpochFlowSet) -> Vec<u8> {
    encode_parts(e.switch_id, e.epoch, &e.flowset)
}

/// Serialises flowset `fs` of switch `switch_id` for epoch `epoch`.
pub fn encode_parts(switch_id: u32, epoch: u64, fs: &FlowSet) -> Vec<u8> {
    // A quiet epoch's flowset is known to be empty without a pass over its cells.
    let clear = fs.is_clear();
    let blocks = if clear { &[][..] } else { fs.filter().blocks() };
    let cells = if clear { &[][..] } else { fs.cells() };
    let nonempty = cells.iter().filter(|c| !c.is_empty()).count();
    let used_blocks = blocks.iter().filter(|b| b.0 != [0; 8]).count();
    let mut out = Vec::with_capacity(HEADER + used_blocks * 66 + nonempty * 24);
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.extend_from_slice(&switch_id.to_be_bytes());
    out.extend_from_slice(&epoch.to_be_bytes());
    out.push(fs.hashes());
    out.extend_from_slice(&[0; 3]);
    out.extend_from_slice(&fs.cells_per_table().to_be_bytes());
    out.extend_from_slice(&fs.table_seed().to_be_bytes());
    out.extend_from_slice(&fs.filter().seed().to_be_bytes());
    out.extend_from_slice(&(fs.filter().blocks().len() as u32).to_be_bytes());
    out.extend_from_slice(&(nonempty as u32).to_be_bytes());
    out.extend_from_slice(&(used_blocks as u32).to_be_bytes());
    let mut prev = 0usize;
    for (i, b) in blocks.iter().enumerate().filter(|(_, b)| b.0 != [0; 8]) {
        put_varint(&mut out, (i - prev) as u64);
        prev = i;
        for w in b.0 {
            out.extend_from_slice(&w.to_le_bytes());
        }
    }
    let mut prev = 0usize;
    for (i, c) in cells.iter().enumerate().filter(|(_, c)| !c.is_empty()) {
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

/// Parses a flowset of any shape that fits in [`MAX_UNDECLARED_BYTES`].
pub fn decode(bytes: &[u8]) -> Result<EpochFlowSet, FlowSetWireError> {
    decode_shaped(bytes, None)
}

/// Parses a flowset, rejecting one whose sizes are not `shape` (when given; the caller has
/// accepted that shape's memory) or, without a shape, one that would take more than
/// [`MAX_UNDECLARED_BYTES`], before allocating anything for it.
pub fn decode_shaped(bytes: &[u8], shape: Option<Shape>) -> Result<EpochFlowSet, FlowSetWireError> {
    let mut table = Table::default();
    let head = read(bytes, shape, &mut table)?;
    let mut flowset = FlowSet::from_parts(
        FlowFilter::from_blocks(table.filter, head.filter_seed),
        table.cells,
        head.hashes,
        head.table_seed,
    )
    .ok_or(FlowSetWireError::BadField("table size"))?;
    if head.quiet {
        // A quiet epoch: every cell and block is zero, as read.
        flowset.known_clear();
    }
    Ok(EpochFlowSet {
        switch_id: head.switch_id,
        epoch: head.epoch,
        flowset,
    })
}

/// Checks a flowset as [`decode_shaped`] would, without allocating its table: for a
/// flowset the reader has no room to keep, so that a malformed one is still refused.
/// Returns its header.
pub fn check_shaped(bytes: &[u8], shape: Option<Shape>) -> Result<FlowSetHead, FlowSetWireError> {
    read(bytes, shape, &mut ())
}

/// What [`read`] gives each part of a flowset to.
trait Entries {
    /// The header, before any entry; fails only when there is no memory for the entries.
    fn sized(&mut self, head: &FlowSetHead) -> Result<(), FlowSetWireError>;
    /// Non-empty filter block `i`.
    fn block(&mut self, i: usize, words: [u64; 8]);
    /// Non-empty cell `i`.
    fn cell(&mut self, i: usize, cell: Cell);
}

/// Checking only: nothing kept.
impl Entries for () {
    fn sized(&mut self, _: &FlowSetHead) -> Result<(), FlowSetWireError> {
        Ok(())
    }
    fn block(&mut self, _: usize, _: [u64; 8]) {}
    fn cell(&mut self, _: usize, _: Cell) {}
}

/// The filter and the cells, as decoded.
#[derive(Default)]
struct Table {
    filter: Vec<Block>,
    cells: Vec<Cell>,
}

impl Entries for Table {
    fn sized(&mut self, head: &FlowSetHead) -> Result<(), FlowSetWireError> {
        // Fallible: the table may be as large as its switch declared, and a reader short of
        // memory drops the flowset rather than abort.
        let no_memory = |_| FlowSetWireError::NoMemory(head.memory());
        self.filter
            .try_reserve_exact(head.blocks)
            .map_err(no_memory)?;
        self.cells
            .try_reserve_exact(head.cells)
            .map_err(no_memory)?;
        self.filter.resize(head.blocks, Block::default());
        self.cells.resize(head.cells, Cell::default());
        Ok(())
    }
    fn block(&mut self, i: usize, words: [u64; 8]) {
        self.filter[i].0 = words;
    }
    fn cell(&mut self, i: usize, cell: Cell) {
        self.cells[i] = cell;
    }
}

/// Bytes a decoded table of `cells` cells and `blocks` filter blocks takes.
fn table_memory(cells: usize, blocks: usize) -> usize {
    cells * std::mem::size_of::<Cell>() + blocks * std::mem::size_of::<Block>()
}

/// A flowset's header fields, as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowSetHead {
    /// The switch.
    pub switch_id: u32,
    /// The epoch number.
    pub epoch: u64,
    /// Sub-tables `k`.
    pub hashes: u8,
    /// The counting table's seed.
    pub table_seed: u64,
    /// The flow filter's seed.
    pub filter_seed: u64,
    /// Cells in all.
    pub cells: usize,
    /// Filter blocks.
    pub blocks: usize,
    /// Whether no cell and no block is in use.
    pub quiet: bool,
}

impl FlowSetHead {
    /// Bytes its table takes once decoded.
    pub fn memory(&self) -> usize {
        table_memory(self.cells, self.blocks)
    }
}

/// Reads and checks a flowset, giving its header, then each non-empty filter block and
/// cell by index, to `out`.
fn read(
    bytes: &[u8],
    shape: Option<Shape>,
    out: &mut impl Entries,
) -> Result<FlowSetHead, FlowSetWireError> {
    let mut r = Reader::new(bytes);
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
    if per_table == 0 || per_table as usize * usize::from(k) > MAX_CELLS {
        return Err(FlowSetWireError::BadField("cells per sub-table"));
    }
    let table_seed = r.u64()?;
    let filter_seed = r.u64()?;
    let blocks = r.u32()? as usize;
    if blocks == 0 || blocks > MAX_FILTER_BLOCKS {
        return Err(FlowSetWireError::BadField("filter blocks"));
    }
    let total = per_table as usize * usize::from(k);
    match shape {
        Some(s)
            if s.hashes != k
                || s.cells_per_table != per_table
                || s.filter_blocks as usize != blocks =>
        {
            return Err(FlowSetWireError::WrongShape);
        }
        Some(_) => {}
        None => {
            let memory = table_memory(total, blocks);
            if memory > MAX_UNDECLARED_BYTES {
                return Err(FlowSetWireError::TooLarge(memory));
            }
        }
    }
    let nonempty = r.u32()? as usize;
    if nonempty > total {
        return Err(FlowSetWireError::BadField("non-empty cells"));
    }
    let used_blocks = r.u32()? as usize;
    if used_blocks > blocks {
        return Err(FlowSetWireError::BadField("non-empty filter blocks"));
    }
    // The sparse parts must fit in what is left before anything is allocated for them.
    let left = bytes.len().saturating_sub(r.position());
    if left < used_blocks * 65 + nonempty * 19 {
        return Err(FlowSetWireError::Truncated);
    }
    let head = FlowSetHead {
        switch_id,
        epoch,
        hashes: k,
        table_seed,
        filter_seed,
        cells: total,
        blocks,
        quiet: nonempty == 0 && used_blocks == 0,
    };
    out.sized(&head)?;
    let mut index = 0usize;
    for n in 0..used_blocks {
        index = next_index(&mut r, n, index, blocks, FlowSetWireError::BadBlockIndex)?;
        let raw = r.take(64)?;
        let mut words = [0u64; 8];
        for (w, chunk) in words.iter_mut().zip(raw.chunks_exact(8)) {
            *w = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        }
        out.block(index, words);
    }
    let mut index = 0usize;
    for n in 0..nonempty {
        index = next_index(&mut r, n, index, total, FlowSetWireError::BadIndex)?;
        let mut key = [0u8; 16];
        key[3..].copy_from_slice(r.take(13)?);
        let check = u16::from_be_bytes(r.take(2)?.try_into().expect("2 bytes"));
        if check >= check::MODULUS {
            return Err(FlowSetWireError::BadField("check"));
        }
        let flow_count = u16::try_from(r.varint()?).map_err(|_| FlowSetWireError::BadCounter)?;
        let packets = u32::try_from(r.varint()?).map_err(|_| FlowSetWireError::BadCounter)?;
        let bytes = r.varint()?;
        out.cell(
            index,
            Cell {
                key_xor: u128::from_be_bytes(key),
                flow_count,
                packets,
                bytes,
                check,
            },
        );
    }
    if r.position() != bytes.len() {
        return Err(FlowSetWireError::TrailingBytes);
    }
    Ok(head)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flowradar::flowset::FlowSetConfig;
    use crate::flowradar::key::FlowKey;
    use proptest::prelude::*;

    /// A flowset known to be clear (a quiet epoch's) is encoded without a pass over its
    /// cells, to the same bytes the pass gives; one count makes it not clear, and clearing it
    /// makes it what a new one is.
    #[test]
    fn a_quiet_epoch_encodes_as_the_scan_would() {
        let cfg = FlowSetConfig::for_flows(500, 3);
        let mut fs = FlowSet::new(&cfg);
        assert!(fs.is_clear());
        let quiet = encode_parts(3, 9, &fs);
        let scanned = FlowSet::from_parts(
            fs.filter().clone(),
            fs.cells().to_vec(),
            fs.hashes(),
            fs.table_seed(),
        )
        .unwrap();
        assert!(!scanned.is_clear(), "parts are not known to be clear");
        assert_eq!(encode_parts(3, 9, &scanned), quiet);
        // Read back, it is known to be clear again, and decodes to no flow at once.
        let read = decode(&quiet).unwrap().flowset;
        assert!(read.is_clear());
        assert_eq!(read, fs);
        let d = crate::flowradar::single_decode(&read);
        assert!(d.complete && d.flows.is_empty() && d.remaining_cells == 0);
        let key = FlowKey {
            src: 1,
            dst: 2,
            src_port: 3,
            dst_port: 4,
            protocol: 17,
        };
        fs.add(&key, 0, 0);
        assert!(!fs.is_clear(), "even a count of nothing");
        let one = encode_parts(3, 9, &fs);
        assert_ne!(one, quiet);
        let read = decode(&one).unwrap().flowset;
        assert_eq!(read, fs);
        assert!(!read.is_clear());
        let d = crate::flowradar::single_decode(&read);
        assert_eq!(d.flows.len(), 1);
        fs.clear();
        assert!(fs.is_clear());
        assert_eq!(encode_parts(3, 9, &fs), quiet);
        assert_eq!(fs, FlowSet::new(&cfg));
    }

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
        let bytes = encode(&empty);
        assert_eq!(decode(&bytes).unwrap(), empty);
        assert_eq!(bytes.len(), HEADER, "a quiet epoch is its header alone");
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
        // A check no writer sums to (at or above the prime) is refused; the largest reads.
        let with_check = |value: u16| {
            let fs = &e.flowset;
            let mut cells = fs.cells().to_vec();
            let i = cells.iter().position(|c| !c.is_empty()).unwrap();
            cells[i].check = value;
            let fs = FlowSet::from_parts(fs.filter().clone(), cells, fs.hashes(), fs.table_seed());
            encode_parts(e.switch_id, e.epoch, &fs.unwrap())
        };
        assert_eq!(
            decode(&with_check(check::MODULUS)).unwrap_err(),
            FlowSetWireError::BadField("check")
        );
        assert!(decode(&with_check(check::MODULUS - 1)).is_ok());
        let mut long = good.clone();
        long.push(0);
        assert_eq!(decode(&long).unwrap_err(), FlowSetWireError::TrailingBytes);
        let mut huge = good.clone();
        huge[44..48].copy_from_slice(&(1u32 << 20).to_be_bytes());
        huge[20..24].copy_from_slice(&(1u32 << 22).to_be_bytes());
        assert!(
            matches!(decode(&huge).unwrap_err(), FlowSetWireError::TooLarge(_)),
            "no giant allocation for a lying header"
        );
        let declared = Shape {
            hashes: huge[16],
            cells_per_table: 1 << 22,
            filter_blocks: u32::from_be_bytes(huge[40..44].try_into().unwrap()),
        };
        assert_eq!(
            decode_shaped(&huge, Some(declared)).unwrap_err(),
            FlowSetWireError::Truncated,
            "a declared shape still needs the bytes its header announces"
        );
        // 112 bytes asking for 2^21 cells in each of 8 sub-tables and 2^22 filter blocks
        // (768 MiB): refused before any allocation.
        let mut giant = good[..HEADER].to_vec();
        giant[16] = 8;
        giant[20..24].copy_from_slice(&(1u32 << 21).to_be_bytes());
        giant[40..44].copy_from_slice(&(1u32 << 22).to_be_bytes());
        giant[44..52].fill(0);
        giant.resize(112, 0);
        assert_eq!(
            decode(&giant).unwrap_err(),
            FlowSetWireError::TooLarge((8 << 21) * 32 + (1 << 22) * 64)
        );
        let shape = Shape::of(&e.flowset);
        assert_eq!(decode_shaped(&good, Some(shape)).unwrap(), e);
        let other = Shape {
            cells_per_table: shape.cells_per_table + 1,
            ..shape
        };
        assert_eq!(
            decode_shaped(&good, Some(other)).unwrap_err(),
            FlowSetWireError::WrongShape
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

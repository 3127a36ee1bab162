//! Reading and writing the project's binary formats: big-endian integers, LEB128 varints,
//! and a reader that never reads past its input (every read is checked).

/// Why a read failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadError {
    /// The input ends before the value.
    Truncated,
    /// A varint longer than 10 bytes or beyond 64 bits.
    BadVarint,
}

/// `v` (below 2^56) as a LEB128 varint in the low bytes of a little-endian word, and its
/// length in bytes (at most eight): one store writes it.
#[inline(always)]
fn varint_word(mut v: u64) -> (u64, usize) {
    let (mut word, mut n) = (0u64, 0u32);
    loop {
        let b = v & 0x7f;
        v >>= 7;
        if v == 0 {
            word |= b << (8 * n);
            return (word, n as usize + 1);
        }
        word |= (b | 0x80) << (8 * n);
        n += 1;
    }
}

/// Writes `v` as a LEB128 varint at `at` in `buf` and returns where the next field starts.
/// It may write zeros into the eight bytes from `at` beyond the varint, so `buf` needs
/// eight bytes from `at` (ten for values of 2^56 and above).
#[inline(always)]
pub fn write_varint(buf: &mut [u8], mut at: usize, mut v: u64) -> usize {
    if v < 1 << 56 {
        let (word, n) = varint_word(v);
        buf[at..at + 8].copy_from_slice(&word.to_le_bytes());
        return at + n;
    }
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            buf[at] = b;
            return at + 1;
        }
        buf[at] = b | 0x80;
        at += 1;
    }
}

/// Appends `v` as a LEB128 varint (7 bits per byte, low first).
#[inline]
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    if v < 1 << 56 {
        // At most eight bytes: built in a word, written whole, the unused ones cut off (one
        // store instead of a push per byte).
        let (word, n) = varint_word(v);
        out.extend_from_slice(&word.to_le_bytes());
        out.truncate(out.len() - (8 - n));
        return;
    }
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

/// A cursor over bytes.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `b`.
    pub fn new(b: &'a [u8]) -> Reader<'a> {
        Reader { b, at: 0 }
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.at
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.b.len() - self.at
    }

    /// The bytes not read yet (reading them does not move the reader: see
    /// [`Reader::skip`]).
    pub fn rest(&self) -> &'a [u8] {
        &self.b[self.at..]
    }

    /// Moves past `n` bytes (at most [`Reader::remaining`]).
    pub fn skip(&mut self, n: usize) -> Result<(), ReadError> {
        self.take(n).map(|_| ())
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], ReadError> {
        let end = self.at.checked_add(n).ok_or(ReadError::Truncated)?;
        let s = self.b.get(self.at..end).ok_or(ReadError::Truncated)?;
        self.at = end;
        Ok(s)
    }

    /// A byte.
    pub fn u8(&mut self) -> Result<u8, ReadError> {
        Ok(self.take(1)?[0])
    }

    /// A big-endian u16.
    pub fn u16(&mut self) -> Result<u16, ReadError> {
        Ok(u16::from_be_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }

    /// A big-endian u32.
    pub fn u32(&mut self) -> Result<u32, ReadError> {
        Ok(u32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    /// A big-endian u64.
    pub fn u64(&mut self) -> Result<u64, ReadError> {
        Ok(u64::from_be_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    /// A LEB128 varint.
    pub fn varint(&mut self) -> Result<u64, ReadError> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.u8()?;
            if i == 9 && b > 1 {
                return Err(ReadError::BadVarint);
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(ReadError::BadVarint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writing in place gives the bytes appending gives, for every length, back to back
    /// (each write's spare zeros overwritten by the next).
    #[test]
    fn varints_written_in_place_are_the_appended_ones() {
        let values: Vec<u64> = (0..64).flat_map(|b| [(1u64 << b) - 1, 1u64 << b]).collect();
        let mut appended = Vec::new();
        let mut buf = vec![0xa5u8; values.len() * 10 + 8];
        let mut at = 0;
        for &v in &values {
            put_varint(&mut appended, v);
            at = write_varint(&mut buf, at, v);
        }
        assert_eq!(&buf[..at], &appended[..]);
    }

    #[test]
    fn varints_round_trip_and_stop_at_the_end() {
        let mut out = Vec::new();
        for v in [0u64, 1, 127, 128, 300, u64::MAX] {
            put_varint(&mut out, v);
        }
        let mut r = Reader::new(&out);
        for v in [0u64, 1, 127, 128, 300, u64::MAX] {
            assert_eq!(r.varint(), Ok(v));
        }
        assert_eq!(r.u8(), Err(ReadError::Truncated));
        assert_eq!(Reader::new(&[0xff; 11]).varint(), Err(ReadError::BadVarint));
        assert_eq!(Reader::new(&[0xff; 9]).varint(), Err(ReadError::Truncated));
        // Literal bytes on both sides of the eight-byte word the writer builds.
        let bytes = |v| {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            out
        };
        assert_eq!(bytes(300), [0xac, 0x02]);
        assert_eq!(
            bytes((1 << 56) - 1),
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]
        );
        assert_eq!(
            bytes(1 << 56),
            [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]
        );
        // Every length, back to back.
        let values: Vec<u64> = (0..64).flat_map(|b| [(1u64 << b) - 1, 1u64 << b]).collect();
        let mut out = Vec::new();
        for &v in &values {
            put_varint(&mut out, v);
        }
        let mut r = Reader::new(&out);
        for &v in &values {
            assert_eq!(r.varint(), Ok(v));
        }
        assert_eq!(r.remaining(), 0);
        assert_eq!(Reader::new(&[1, 2]).u32(), Err(ReadError::Truncated));
        assert_eq!(Reader::new(&[1, 2]).u16(), Ok(0x0102));
    }
}

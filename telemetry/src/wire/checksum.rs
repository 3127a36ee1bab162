//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).

/// One's-complement sum of `data` as big-endian 16-bit words (an odd last byte is padded
/// with zero), folded to 16 bits. The checksum field is the complement of this sum.
pub fn ones_complement_sum(data: &[u8]) -> u16 {
    let mut sum: u64 = 0;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        // Two 32-bit halves of big-endian words; the carries are folded at the end.
        sum += u64::from(u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
        sum += u64::from(u32::from_be_bytes([c[4], c[5], c[6], c[7]]));
    }
    let rest = chunks.remainder();
    let mut pairs = rest.chunks_exact(2);
    for p in &mut pairs {
        sum += u64::from(u16::from_be_bytes([p[0], p[1]]));
    }
    if let [last] = pairs.remainder() {
        sum += u64::from(u16::from_be_bytes([*last, 0]));
    }
    fold(sum)
}

/// Folds a wide one's-complement accumulator to 16 bits.
#[inline]
pub fn fold(mut sum: u64) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The checksum field value for `data` whose checksum field is zero (RFC 1071).
pub fn checksum(data: &[u8]) -> u16 {
    !ones_complement_sum(data)
}

/// RFC 1624 eqn. 3: the new checksum `HC'` after a 16-bit word of the covered data changes
/// from `old` to `new`, given the old checksum `HC`: `HC' = ~(~HC + ~m + m')`.
#[inline]
pub fn update_word(hc: u16, old: u16, new: u16) -> u16 {
    let sum = u32::from(!hc) + u32::from(!old) + u32::from(new);
    !fold(u64::from(sum))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3 example: words 0001 f203 f4f5 f6f7 sum to ddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(ones_complement_sum(&data), 0xddf2);
        assert_eq!(checksum(&data), !0xddf2);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(ones_complement_sum(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
    }

    #[test]
    fn rfc1624_corner_case() {
        // RFC 1624 section 4: a header whose checksum is 0xdd2f, one word 0x5555 -> 0x3285.
        assert_eq!(update_word(0xdd2f, 0x5555, 0x3285), 0x0000);
    }
}

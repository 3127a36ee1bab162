//! Ethernet II frames and IEEE 802.1Q / 802.1ad VLAN tags.
//!
//! Layout (offsets in bytes): `[0..6)` destination MAC, `[6..12)` source MAC, `[12..14)`
//! EtherType. A VLAN tag is 4 bytes: `[0..2)` TCI, `[2..4)` the inner EtherType.

use core::fmt;
use core::str::FromStr;

use super::{Result, WireError};

/// A 48-bit IEEE MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// The broadcast address ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);

    /// Whether the group bit (least significant bit of the first octet) is set.
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 1 == 1
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Why a string is not a MAC address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a MAC address (expected six hex octets separated by ':' or '-', e.g. 02:00:00:00:00:01)"
)]
pub struct MacParseError(pub String);

impl FromStr for MacAddr {
    type Err = MacParseError;

    fn from_str(s: &str) -> core::result::Result<Self, Self::Err> {
        let err = || MacParseError(s.to_owned());
        let mut out = [0u8; 6];
        let mut parts = s.split([':', '-']);
        for byte in &mut out {
            let part = parts.next().ok_or_else(err)?;
            if part.is_empty() || part.len() > 2 {
                return Err(err());
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| err())?;
        }
        if parts.next().is_some() {
            return Err(err());
        }
        Ok(MacAddr(out))
    }
}

impl serde::Serialize for MacAddr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// EtherType values the switch recognises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EtherType;

impl EtherType {
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// ARP.
    pub const ARP: u16 = 0x0806;
    /// IEEE 802.1Q customer VLAN tag.
    pub const VLAN: u16 = 0x8100;
    /// IEEE 802.1ad service VLAN tag (QinQ outer tag).
    pub const QINQ: u16 = 0x88a8;
    /// IPv6.
    pub const IPV6: u16 = 0x86dd;
    /// IEEE 802 local experimental EtherType 1, the default outer type of the PINT shim.
    pub const LOCAL_EXPERIMENTAL_1: u16 = 0x88b5;

    /// Whether `ty` announces a VLAN tag.
    #[inline]
    pub fn is_vlan(ty: u16) -> bool {
        ty == Self::VLAN || ty == Self::QINQ
    }
}

/// A read/write view of an Ethernet II header at the start of a buffer.
#[derive(Debug, Clone)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use core::ops::Range;
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Length of the Ethernet II header without tags.
    pub const HEADER_LEN: usize = 14;

    /// Wraps a buffer without checking its length; accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// Wraps a buffer that holds at least a full header.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < Self::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(EthernetFrame { buffer })
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Destination MAC.
    #[inline]
    pub fn dst(&self) -> MacAddr {
        let mut m = [0; 6];
        m.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        MacAddr(m)
    }

    /// Source MAC.
    #[inline]
    pub fn src(&self) -> MacAddr {
        let mut m = [0; 6];
        m.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        MacAddr(m)
    }

    /// The EtherType right after the MACs (a VLAN TPID when the frame is tagged).
    #[inline]
    pub fn ethertype(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::ETHERTYPE];
        u16::from_be_bytes([b[0], b[1]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination MAC.
    #[inline]
    pub fn set_dst(&mut self, mac: MacAddr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&mac.0);
    }

    /// Sets the source MAC.
    #[inline]
    pub fn set_src(&mut self, mac: MacAddr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&mac.0);
    }

    /// Sets the EtherType after the MACs.
    #[inline]
    pub fn set_ethertype(&mut self, ty: u16) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&ty.to_be_bytes());
    }
}

/// A view of one 4-byte VLAN tag (the bytes after a TPID of 0x8100 or 0x88a8).
#[derive(Debug, Clone)]
pub struct VlanTag<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanTag<T> {
    /// Length of a tag: TCI and the next EtherType.
    pub const LEN: usize = 4;

    /// Wraps a buffer that holds at least a full tag.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < Self::LEN {
            return Err(WireError::Truncated);
        }
        Ok(VlanTag { buffer })
    }

    /// The VLAN identifier (12 bits of the TCI).
    #[inline]
    pub fn vid(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[0], b[1]]) & 0x0fff
    }

    /// The priority code point (3 bits of the TCI).
    #[inline]
    pub fn pcp(&self) -> u8 {
        self.buffer.as_ref()[0] >> 5
    }

    /// The EtherType of what follows the tag.
    #[inline]
    pub fn inner_ethertype(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[2], b[3]])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_parse_and_print() {
        let m: MacAddr = "02:0a:FF:00:00:01".parse().unwrap();
        assert_eq!(m.0, [0x02, 0x0a, 0xff, 0, 0, 1]);
        assert_eq!(m.to_string(), "02:0a:ff:00:00:01");
        for bad in [
            "",
            "02:00:00:00:00",
            "02:00:00:00:00:00:00",
            "0g:00:00:00:00:00",
            "002:0:0:0:0:0",
        ] {
            assert!(bad.parse::<MacAddr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn frame_fields() {
        let mut buf = [0u8; 18];
        buf[12] = 0x81;
        let mut f = EthernetFrame::new_checked(&mut buf[..]).unwrap();
        f.set_dst(MacAddr([1, 2, 3, 4, 5, 6]));
        f.set_src(MacAddr([7, 8, 9, 10, 11, 12]));
        assert_eq!(f.ethertype(), EtherType::VLAN);
        f.set_ethertype(EtherType::IPV4);
        assert_eq!(f.dst(), MacAddr([1, 2, 3, 4, 5, 6]));
        assert_eq!(f.src(), MacAddr([7, 8, 9, 10, 11, 12]));
        assert_eq!(&buf[12..14], &[8, 0]);
        assert_eq!(
            EthernetFrame::new_checked(&buf[..13]).unwrap_err(),
            WireError::Truncated
        );
    }

    #[test]
    fn vlan_tag_fields() {
        let tag = VlanTag::new_checked(&[0xa0, 0x64, 0x08, 0x00][..]).unwrap();
        assert_eq!(tag.pcp(), 5);
        assert_eq!(tag.vid(), 100);
        assert_eq!(tag.inner_ethertype(), EtherType::IPV4);
        assert!(VlanTag::new_checked(&[0u8; 3][..]).is_err());
    }
}

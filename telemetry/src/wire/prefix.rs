//! IPv4 prefixes as configurations and queries write them (`10.1.0.0/16`).

use core::fmt;
use core::net::Ipv4Addr;
use core::str::FromStr;

use serde::Serialize;

/// An IPv4 prefix such as `10.1.0.0/16` (host bits must be zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ipv4Prefix {
    /// Network address as a host-order integer.
    pub addr: u32,
    /// Prefix length, 0 to 32.
    pub len: u8,
}

impl Ipv4Prefix {
    /// The netmask of this prefix length as a host-order integer.
    pub fn mask(&self) -> u32 {
        if self.len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(self.len))
        }
    }

    /// Whether `addr` (host order) falls inside this prefix.
    pub fn contains(&self, addr: u32) -> bool {
        addr & self.mask() == self.addr
    }
}

impl fmt::Display for Ipv4Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from(self.addr), self.len)
    }
}

impl FromStr for Ipv4Prefix {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (a, l) = s.split_once('/').ok_or_else(|| {
            format!("`{s}` is not a prefix (expected ADDRESS/LENGTH, e.g. 10.1.0.0/16)")
        })?;
        let addr: Ipv4Addr = a
            .parse()
            .map_err(|_| format!("`{a}` is not an IPv4 address"))?;
        // Digits only: `u8`'s parser also takes a sign (`/+8`).
        let len: u8 = Some(l)
            .filter(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|l| l.parse().ok())
            .filter(|l| *l <= 32)
            .ok_or_else(|| format!("`{l}` is not a prefix length (0 to 32)"))?;
        let p = Ipv4Prefix {
            addr: u32::from(addr),
            len,
        };
        if p.addr & !p.mask() != 0 {
            let net = Ipv4Prefix {
                addr: p.addr & p.mask(),
                len,
            };
            return Err(format!("`{s}` has host bits set (did you mean {net}?)"));
        }
        Ok(p)
    }
}

impl Serialize for Ipv4Prefix {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        let p: Ipv4Prefix = "10.1.0.0/16".parse().unwrap();
        assert!(p.contains(u32::from(Ipv4Addr::new(10, 1, 200, 3))));
        assert!(!p.contains(u32::from(Ipv4Addr::new(10, 2, 0, 0))));
        assert_eq!(p.to_string(), "10.1.0.0/16");
        for bad in ["10.0.0.0/+8", "10.0.0.0/", "10.0.0.0/33", "10.0.0.0/ 8"] {
            assert!(bad.parse::<Ipv4Prefix>().is_err(), "{bad}");
        }
        let d: Ipv4Prefix = "0.0.0.0/0".parse().unwrap();
        assert!(d.contains(0xffff_ffff));
        assert!(
            "10.1.2.3/16"
                .parse::<Ipv4Prefix>()
                .unwrap_err()
                .contains("did you mean 10.1.0.0/16")
        );
        assert!("10.1.0.0/33".parse::<Ipv4Prefix>().is_err());
        assert!("10.1.0.0".parse::<Ipv4Prefix>().is_err());
        assert!("10.1.0/8".parse::<Ipv4Prefix>().is_err());
    }
}

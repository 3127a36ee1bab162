//! Typed views over packet bytes, in the style of smoltcp's `wire` module: a `Packet<T>`
//! wraps a buffer, `new_checked` validates the length before any accessor runs, accessors
//! read fixed, documented offsets, and setters exist where the switch rewrites a field.

pub mod bytes;
pub mod checksum;
pub mod ethernet;
pub mod ipv4;
pub mod prefix;
pub mod probe;
pub mod shim;
pub mod transport;

pub use ethernet::{EtherType, EthernetFrame, MacAddr, VlanTag};
pub use ipv4::{Ipv4Addr, Ipv4Packet};
pub use shim::{ShimHeader, ShimRepr};
pub use transport::{TcpHeader, TransportPorts};

/// Why a buffer could not be viewed as a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The buffer ends before the header (or the length a header field claims) does.
    #[error("buffer too short for the header")]
    Truncated,
    /// A header field holds a value the format does not allow.
    #[error("malformed header field")]
    Malformed,
}

/// Result of building a view or parsing a representation.
pub type Result<T> = core::result::Result<T, WireError>;

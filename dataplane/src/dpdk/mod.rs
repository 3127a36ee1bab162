//! A safe layer over DPDK: EAL, mempools, owned mbufs, stack bursts, ports and their queues.
//! Set-up paths are `#[cold]`; the burst paths call one C wrapper per burst.

pub mod burst;
pub mod eal;
pub mod error;
pub mod mbuf;
pub mod mempool;
pub mod port;

pub use burst::{BURST_SIZE, Burst};
pub use eal::{Eal, ThreadRegistration, tsc};
pub use error::{DpdkError, Errno};
pub use mbuf::Mbuf;
pub use mempool::Mempool;
pub use port::{LinkStatus, Port, PortReport, PortSetup, PortStats, RxQueue, TxQueue};

//! Receive state per sender and number. Flows and probe streams are numbered by the
//! generator that sends them, so a receiver that hears several generators (every host of a
//! lab hears all the others) sees the same numbers from each: counted by number alone, their
//! sequence numbers interleave into false loss, lateness and duplicates. A sender is told
//! apart by its packets' IPv4 source address (a flow's, or a probe stream's, never changes).

use rustc_hash::FxHashMap;

/// Most (sender, number) pairs kept beyond the first sender of each number; packets of
/// further pairs are refused (counted as foreign by the callers), so that traffic from many
/// addresses cannot grow the state without bound.
pub const MAX_OTHER_SENDERS: usize = 1 << 20;

/// State `T` per (sender, number). The first sender seen with a number keeps it in a table
/// indexed by the number (one compare per packet: the single-generator case); every other
/// sender's state for that number lives in a map.
#[derive(Debug, Clone)]
pub struct PerSender<T> {
    first: Vec<Slot<T>>,
    others: FxHashMap<(u32, u32), T>,
}

#[derive(Debug, Clone, Default)]
struct Slot<T> {
    /// The sender that owns the slot (None: unused).
    sender: Option<u32>,
    state: T,
}

impl<T> Default for PerSender<T> {
    fn default() -> Self {
        PerSender {
            first: Vec::new(),
            others: FxHashMap::default(),
        }
    }
}

impl<T: Default + Clone> PerSender<T> {
    /// The state of `number` from `sender`, created empty on first use; None when the pair
    /// is new and [`MAX_OTHER_SENDERS`] pairs are already kept apart. `number` must be below
    /// a bound the caller enforces (the table grows to it).
    #[inline]
    pub fn get_mut(&mut self, sender: u32, number: u32) -> Option<&mut T> {
        let PerSender { first, others } = self;
        let i = number as usize;
        if i >= first.len() {
            first.resize((i + 1).next_power_of_two(), Slot::default());
        }
        let slot = &mut first[i];
        match slot.sender {
            Some(s) if s == sender => Some(&mut slot.state),
            None => {
                slot.sender = Some(sender);
                Some(&mut slot.state)
            }
            Some(_) => {
                if others.len() >= MAX_OTHER_SENDERS && !others.contains_key(&(sender, number)) {
                    return None;
                }
                Some(others.entry((sender, number)).or_default())
            }
        }
    }

    /// Every pair's state: ((sender, number), state), in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = ((u32, u32), &T)> {
        let first = self
            .first
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.sender.map(|sender| ((sender, i as u32), &s.state)));
        first.chain(self.others.iter().map(|(k, v)| (*k, v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_sender_has_its_own_state_for_a_number() {
        let mut p = PerSender::<u32>::default();
        *p.get_mut(7, 3).unwrap() += 1;
        *p.get_mut(7, 3).unwrap() += 1;
        *p.get_mut(9, 3).unwrap() += 10;
        *p.get_mut(9, 0).unwrap() += 100;
        let mut all: Vec<_> = p.iter().map(|(k, v)| (k, *v)).collect();
        all.sort();
        assert_eq!(all, vec![((7, 3), 2), ((9, 0), 100), ((9, 3), 10)]);
    }
}

//! How a new plan reaches the workers: the control thread stores it in a [`PlanCell`] and
//! bumps the cell's generation; each worker checks the generation once per burst (one relaxed
//! load) and, when it changed, takes the new plan at that burst boundary, keeping the one
//! before it so that packets already tagged with it still encode correctly (a hot reload
//! never mixes two plans in one digest).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwapOption;
use telemetry::pint::encoder::SwitchPlan;

/// The current plan of a switch, shared by its workers.
#[derive(Default)]
pub struct PlanCell {
    plan: ArcSwapOption<SwitchPlan>,
    generation: AtomicU64,
}

impl PlanCell {
    /// A cell holding `plan`.
    pub fn new(plan: Option<Arc<SwitchPlan>>) -> PlanCell {
        PlanCell {
            plan: ArcSwapOption::new(plan),
            generation: AtomicU64::new(1),
        }
    }

    /// Installs a new plan; workers take it at their next burst.
    pub fn install(&self, plan: Arc<SwitchPlan>) {
        self.plan.store(Some(plan));
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// The generation (changes whenever a plan is installed).
    #[inline(always)]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The current plan.
    pub fn current(&self) -> Option<Arc<SwitchPlan>> {
        self.plan.load_full()
    }
}

/// A worker's view of the plans: the current one and the one before.
#[derive(Clone, Default)]
pub struct WorkerPlans {
    /// The plan edge ports stamp into new shims.
    pub current: Option<Arc<SwitchPlan>>,
    /// The plan before it (packets in flight may still carry its tag).
    pub previous: Option<Arc<SwitchPlan>>,
    generation: u64,
}

impl WorkerPlans {
    /// Takes a new plan from `cell` if one was installed since the last call; returns
    /// whether the plans changed.
    #[inline(always)]
    pub fn refresh(&mut self, cell: &PlanCell) -> bool {
        let g = cell.generation();
        if g == self.generation {
            return false;
        }
        self.generation = g;
        let new = cell.current();
        if new.as_ref().map(|p| p.version()) == self.current.as_ref().map(|p| p.version()) {
            return false;
        }
        self.previous = self.current.take();
        self.current = new;
        true
    }

    /// Plan 0 (current) or 1 (previous), if held.
    #[inline(always)]
    pub fn get(&self, which: u8) -> Option<&SwitchPlan> {
        match which {
            0 => self.current.as_deref(),
            _ => self.previous.as_deref(),
        }
    }

    /// Plan 0 (current) or 1 (previous), if held, as a shared handle.
    #[inline(always)]
    pub fn get_arc(&self, which: u8) -> Option<Arc<SwitchPlan>> {
        match which {
            0 => self.current.clone(),
            _ => self.previous.clone(),
        }
    }

    /// The plan a shim's tag names, if this worker holds it.
    #[inline(always)]
    pub fn by_tag(&self, tag: u16) -> Option<&Arc<SwitchPlan>> {
        match (&self.current, &self.previous) {
            (Some(c), _) if c.tag() == tag => Some(c),
            (_, Some(p)) if p.tag() == tag => Some(p),
            _ => None,
        }
    }
}

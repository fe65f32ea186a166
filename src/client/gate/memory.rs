//! An in-memory gate store for the simulator: deterministic (ordered maps,
//! no threads, no clock) and crashable.
//!
//! Fault model: the store has a *visible* state (what reads see) and a
//! *durable* state (what survives [`MemoryGateStore::crash`]). In
//! [`Commit::Immediate`] mode, the default, every operation is durable when
//! it returns, as with SQLite in WAL mode with `synchronous=FULL`. In
//! [`Commit::OnSync`] mode, operations are visible at once but durable only
//! at [`MemoryGateStore::sync`]: a crash before it loses them, which is how
//! a simulation checks that nothing relies on an unsynced claim. Injected
//! failures ([`MemoryGateStore::fail_next`]) make operations fail before
//! they write anything.
//!
//! Clones share one store, so several simulated application instances can
//! race on it in one thread.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use serde_json::Value;

use super::{Claim, GateError, GateRecord, GateStore};
use crate::client::ids::{CommandId, EffectKey, RequestId};
use crate::client::reconcile::{Resolution, ResolutionStore};

/// When the memory store's writes become durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commit {
    /// Every operation is durable when it returns.
    Immediate,
    /// Operations are durable only after [`MemoryGateStore::sync`].
    OnSync,
}

#[derive(Debug)]
struct Inner {
    mode: Commit,
    visible: BTreeMap<RequestId, GateRecord>,
    durable: BTreeMap<RequestId, GateRecord>,
    resolutions_visible: BTreeMap<EffectKey, Resolution>,
    resolutions_durable: BTreeMap<EffectKey, Resolution>,
    fail_next: u32,
    ops_count: u64,
}

/// A crashable, shareable in-memory [`GateStore`].
#[derive(Debug, Clone)]
pub struct MemoryGateStore {
    inner: Rc<RefCell<Inner>>,
}

impl MemoryGateStore {
    /// An empty store.
    pub fn new(mode: Commit) -> MemoryGateStore {
        MemoryGateStore {
            inner: Rc::new(RefCell::new(Inner {
                mode,
                visible: BTreeMap::new(),
                durable: BTreeMap::new(),
                resolutions_visible: BTreeMap::new(),
                resolutions_durable: BTreeMap::new(),
                fail_next: 0,
                ops_count: 0,
            })),
        }
    }

    /// Makes everything written so far durable.
    pub fn sync(&self) {
        let mut i = self.inner.borrow_mut();
        i.durable = i.visible.clone();
        i.resolutions_durable = i.resolutions_visible.clone();
    }

    /// The process holding the store died: what was not durable is gone.
    pub fn crash(&self) {
        let mut i = self.inner.borrow_mut();
        i.visible = i.durable.clone();
        i.resolutions_visible = i.resolutions_durable.clone();
        i.fail_next = 0;
    }

    /// The next `n` operations fail with [`GateError::Store`] and write
    /// nothing.
    pub fn fail_next(&self, n: u32) {
        self.inner.borrow_mut().fail_next = n;
    }

    /// Every visible row, by request id.
    pub fn rows(&self) -> Vec<GateRecord> {
        self.inner.borrow().visible.values().cloned().collect()
    }

    /// Operations attempted so far (a simulation's progress measure).
    pub fn ops_count(&self) -> u64 {
        self.inner.borrow().ops_count
    }

    fn begin(&self) -> Result<std::cell::RefMut<'_, Inner>, GateError> {
        let mut i = self.inner.borrow_mut();
        i.ops_count += 1;
        if i.fail_next > 0 {
            i.fail_next -= 1;
            return Err(GateError::Store("injected store failure".into()));
        }
        Ok(i)
    }
}

fn commit(i: &mut Inner, key: &RequestId) {
    if i.mode == Commit::Immediate {
        match i.visible.get(key).cloned() {
            Some(r) => {
                i.durable.insert(key.clone(), r);
            }
            None => {
                i.durable.remove(key);
            }
        }
    }
}

impl GateStore for MemoryGateStore {
    fn claim(&mut self, proposed: &GateRecord) -> Result<Claim, GateError> {
        let mut i = self.begin()?;
        if let Some(r) = i.visible.get(&proposed.request_id) {
            return Ok(Claim::Existing(r.clone()));
        }
        let clash = i
            .visible
            .values()
            .any(|r| r.command_id == proposed.command_id);
        if clash {
            return Err(GateError::Store(format!(
                "command id {} already maps to another request",
                proposed.command_id
            )));
        }
        debug_assert!(proposed.outcome.is_none());
        i.visible
            .insert(proposed.request_id.clone(), proposed.clone());
        commit(&mut i, &proposed.request_id);
        Ok(Claim::Won)
    }

    fn record_outcome(
        &mut self,
        request: &RequestId,
        command: &CommandId,
        outcome: &Value,
    ) -> Result<Option<Value>, GateError> {
        let mut i = self.begin()?;
        let Some(r) = i.visible.get_mut(request) else {
            return Ok(None);
        };
        if &r.command_id == command && r.outcome.is_none() {
            r.outcome = Some(outcome.clone());
        }
        let stored = r.outcome.clone();
        commit(&mut i, request);
        Ok(stored)
    }

    fn get(&mut self, request: &RequestId) -> Result<Option<GateRecord>, GateError> {
        let i = self.begin()?;
        Ok(i.visible.get(request).cloned())
    }
}

impl ResolutionStore for MemoryGateStore {
    fn resolve_if_absent(&mut self, r: &Resolution) -> Result<Resolution, GateError> {
        let mut i = self.begin()?;
        let stored = i
            .resolutions_visible
            .entry(r.key.clone())
            .or_insert_with(|| r.clone())
            .clone();
        if i.mode == Commit::Immediate {
            i.resolutions_durable.insert(r.key.clone(), stored.clone());
        }
        Ok(stored)
    }

    fn resolution(&mut self, key: &EffectKey) -> Result<Option<Resolution>, GateError> {
        let i = self.begin()?;
        Ok(i.resolutions_visible.get(key).cloned())
    }
}

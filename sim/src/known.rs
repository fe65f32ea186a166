//! What a simulated client knows of its session from the view events it
//! saw: the turns queued and running, background tasks, pending
//! approvals, the state revision. Both clients (`client.rs`, the legacy
//! one, and `sdk_client.rs`, the SDK core's) pick their next command from
//! it, so they read events the same way.

use std::collections::BTreeSet;

use serde_json::{json, Value};

/// A client's knowledge of its session.
#[derive(Debug, Clone, Default)]
pub struct Known {
    /// The running turn.
    pub running: Option<String>,
    /// Turns queued, oldest first.
    pub queued: Vec<String>,
    /// Every turn ever started, in order.
    pub seen_turns: Vec<String>,
    /// Background tasks running.
    pub tasks: BTreeSet<String>,
    /// Approvals requested and not resolved.
    pub approvals: BTreeSet<String>,
    /// The highest state revision seen.
    pub revision: i64,
}

impl Known {
    /// Folds one view event `m` with params `p` of the client's session.
    pub fn observe(&mut self, m: &str, p: &Value) {
        let turn = p["turnId"].as_str().map(str::to_string);
        match m {
            "turn/started" => {
                if let Some(t) = turn {
                    self.queued.retain(|q| *q != t);
                    if !self.seen_turns.contains(&t) {
                        self.seen_turns.push(t.clone());
                    }
                    self.running = Some(t);
                }
            }
            "turn/completed" | "turn/unqueued" => {
                if let Some(t) = turn {
                    self.queued.retain(|q| *q != t);
                    if self.running.as_deref() == Some(t.as_str()) {
                        self.running = None;
                    }
                }
            }
            "item/started" | "item/completed" => {
                let item = &p["item"];
                if item["tool"] == json!("background") {
                    if let Some(id) = item["itemId"].as_str() {
                        if m == "item/started" {
                            self.tasks.insert(id.to_string());
                        } else {
                            self.tasks.remove(id);
                        }
                    }
                }
            }
            "approval/requested" | "approval/request" => {
                if let Some(a) = p["approvalId"].as_str() {
                    self.approvals.insert(a.to_string());
                }
            }
            "approval/resolved" => {
                if let Some(a) = p["approvalId"].as_str() {
                    self.approvals.remove(a);
                }
            }
            "state/updated" => {
                self.revision = self.revision.max(p["revision"].as_i64().unwrap_or(0))
            }
            _ => {}
        }
    }

    /// Starts over from a `ViewSnapshot`'s `state` (a resume that sent a
    /// snapshot instead of the events after the client's cursor).
    pub fn reset_from(&mut self, st: &Value) {
        let ids = |list: &Value, key: &str| -> Vec<String> {
            list.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|t| t[key].as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        self.running = st["activeTurn"]["turnId"].as_str().map(str::to_string);
        self.queued = ids(&st["queuedTurns"], "turnId");
        self.approvals = ids(&st["pendingApprovals"], "approvalId")
            .into_iter()
            .collect();
        self.revision = st["revision"].as_i64().unwrap_or(0);
    }
}

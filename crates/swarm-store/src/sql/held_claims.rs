//! The lead-side claims: inbox messages (`slack_inbox_message`), mentioning channels
//! (`unread_mentions`), urgent mail (`urgent_mail`) and task results (`task_result`).
//! Each kind is claimed by its own module's poll claim, with a lease held by the polling
//! runner (`lease_holder`) and a delivery count (`deliveries`); their leases are
//! extended, released, run out and come back the same way, which is this module: one
//! table of what differs (names), one statement shape each.
//!
//! A claim belongs to the agent run that took it: when the run ends, the runner releases
//! what it left undone ([`HeldClaim::release`]); when its runner dies, the lease runs out
//! ([`HeldClaim::return_expired`]). Either way an item handed over `max_deliveries`
//! times is set aside as a dead letter instead of going back to the poll.
//!
//! Every name is a constant of this module, never input: the statements built from them
//! are safe to run as text.

use swarm_domain::id::AgentId;
use uuid::Uuid;

use super::Dialect;
use crate::HeldItems;

/// One kind of held claim, by the names that differ.
#[derive(Debug)]
pub struct HeldClaim {
    table: &'static str,
    /// The agent the rows belong to.
    owner: &'static str,
    /// The column naming one item of this kind in a trigger (with `owner`).
    item: &'static str,
    /// The rows a poll has claimed.
    claimed: &'static str,
    /// What returns a row to where a poll finds it, or sets it aside when `{dead}` holds;
    /// `{now}` is the time of the return.
    release: &'static str,
    /// True of a row set aside as a dead letter.
    dead_letter: &'static str,
}

pub const INBOX: HeldClaim = HeldClaim {
    table: "inbox_messages",
    owner: "agent_id",
    item: "id",
    claimed: "status = 'processing'",
    release: "status = CASE WHEN {dead} THEN 'dead_letter' ELSE 'unread' END, last_updated_at = {now}",
    dead_letter: "status = 'dead_letter'",
};
pub const MENTIONS: HeldClaim = HeldClaim {
    table: "channel_reads",
    owner: "agent_id",
    item: "channel_id",
    claimed: "processing_since IS NOT NULL",
    release: "processing_since = NULL, dead_lettered_at = CASE WHEN {dead} THEN {now} END",
    dead_letter: "dead_lettered_at IS NOT NULL",
};
pub const MAIL: HeldClaim = HeldClaim {
    table: "mail",
    owner: "to_agent_id",
    item: "id",
    claimed: "status = 'processing'",
    release: "status = 'unread', processing_since = NULL, dead_lettered_at = CASE WHEN {dead} THEN {now} END",
    dead_letter: "dead_lettered_at IS NOT NULL",
};
pub const RESULTS: HeldClaim = HeldClaim {
    table: "task_awaits",
    owner: "agent_id",
    item: "task_id",
    claimed: "processing_since IS NOT NULL AND delivered_at IS NULL",
    release: "processing_since = NULL, dead_lettered_at = CASE WHEN {dead} THEN {now} END",
    dead_letter: "dead_lettered_at IS NOT NULL",
};
pub const ALL: [&HeldClaim; 4] = [&INBOX, &MENTIONS, &MAIL, &RESULTS];

/// Agents whose held claims came back, by kind, once per row.
#[derive(Debug, Default)]
pub struct Returned {
    pub inbox: Vec<AgentId>,
    pub mentions: Vec<AgentId>,
    pub mail: Vec<AgentId>,
    pub results: Vec<AgentId>,
}

/// Which of a holder's claims a release covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseScope {
    /// Every claim the holder has on the agent's items (a runner that restarted
    /// releases what its previous life held).
    All,
    /// Only the items named (an agent run that ended), bound as one list parameter.
    Items,
}

impl HeldClaim {
    pub fn table(&self) -> &'static str {
        self.table
    }

    /// The items of this kind that `items` names.
    pub fn named(&self, items: &HeldItems) -> Vec<Uuid> {
        match self.table {
            "inbox_messages" => items.inbox.iter().map(|id| id.as_uuid()).collect(),
            "channel_reads" => items.channels.iter().map(|id| id.as_uuid()).collect(),
            "mail" => items.mail.iter().map(|id| id.as_uuid()).collect(),
            _ => items.results.iter().map(|id| id.as_uuid()).collect(),
        }
    }

    /// A heartbeat extends the agent's claims that its runner holds and those no runner
    /// holds, never another runner's. Parameters: the new lease end, the agent, the
    /// runner (or NULL).
    pub fn extend_leases(&self, dialect: Dialect) -> String {
        format!(
            "UPDATE {table} SET lease_expires_at = {until} WHERE {owner} = {agent} AND {claimed} \
             AND (lease_holder IS NULL OR lease_holder = {runner})",
            table = self.table,
            owner = self.owner,
            claimed = self.claimed,
            until = dialect.param(1),
            agent = dialect.param(2),
            runner = dialect.param(3),
        )
    }

    /// [`HeldClaim::extend_leases`] for many heartbeats at once (PostgreSQL): parameters
    /// are three arrays of equal length, the agents, their runners (or NULL) and their
    /// new lease ends; a lease never moves back, and an `offline` agent's stay as they are.
    pub fn extend_leases_in_batch(&self) -> String {
        format!(
            "UPDATE {table} SET lease_expires_at = b.until \
             FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[]) AS b(agent, runner, until) \
             WHERE {owner} = b.agent AND {claimed} \
             AND (lease_holder IS NULL OR lease_holder = b.runner) \
             AND (lease_expires_at IS NULL OR lease_expires_at < b.until) \
             AND EXISTS (SELECT 1 FROM agents a WHERE a.id = b.agent AND a.status <> 'offline')",
            table = self.table,
            owner = self.owner,
            claimed = self.claimed,
        )
    }

    /// The rescuer: claims whose lease ran out go back to where a poll finds them (or
    /// are set aside after too many deliveries), returning their owners, once per row.
    /// Parameters: now, the most deliveries.
    pub fn return_expired(&self, dialect: Dialect) -> String {
        format!(
            "UPDATE {table} SET {release}, lease_expires_at = NULL, lease_holder = NULL \
             WHERE {claimed} AND lease_expires_at IS NOT NULL AND lease_expires_at < {now} \
             RETURNING {owner}",
            table = self.table,
            release = self.release_set(dialect),
            claimed = self.claimed,
            now = dialect.param(1),
            owner = self.owner,
        )
    }

    /// The holder gives back the agent's items it still holds in their claimed state: a
    /// row another runner took meanwhile, or that the run finished (read, answered,
    /// delivered), is left alone. Returns, per row, whether it became a dead letter.
    /// Parameters: now, the most deliveries, the agent, the holder, and for
    /// [`ReleaseScope::Items`] the items (SQLite: a JSON array of text; PostgreSQL: an
    /// array of UUIDs).
    pub fn release(&self, dialect: Dialect, scope: ReleaseScope) -> String {
        let items = match (scope, dialect) {
            (ReleaseScope::All, _) => String::new(),
            (ReleaseScope::Items, Dialect::Sqlite) => {
                format!(" AND {} IN (SELECT value FROM json_each(?5))", self.item)
            }
            (ReleaseScope::Items, Dialect::Postgres) => format!(" AND {} = ANY($5)", self.item),
        };
        format!(
            "UPDATE {table} SET {release}, lease_expires_at = NULL, lease_holder = NULL \
             WHERE {owner} = {agent} AND {claimed} AND lease_holder = {holder}{items} \
             RETURNING {dead_letter}",
            table = self.table,
            release = self.release_set(dialect),
            owner = self.owner,
            agent = dialect.param(3),
            claimed = self.claimed,
            holder = dialect.param(4),
            dead_letter = self.dead_letter,
        )
    }

    /// The `SET` list of a return: `{now}` is parameter 1, the most deliveries 2.
    fn release_set(&self, dialect: Dialect) -> String {
        let dead = format!("deliveries >= {}", dialect.param(2));
        self.release.replace("{dead}", &dead).replace("{now}", &dialect.param(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_is_guarded_by_the_holder_and_the_claimed_state() {
        for claim in ALL {
            let sql = claim.release(Dialect::Postgres, ReleaseScope::Items);
            assert!(sql.contains("lease_holder = $4"), "{sql}");
            assert!(sql.contains(claim.claimed), "{sql}");
            assert!(sql.contains("= ANY($5)"), "{sql}");
            assert!(!sql.contains("{"), "every placeholder filled: {sql}");
            let all = claim.release(Dialect::Sqlite, ReleaseScope::All);
            assert!(!all.contains("?5"), "{all}");
        }
    }
}

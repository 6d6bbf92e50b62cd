//! `GET /metrics`: the hub in the Prometheus text format (version 0.0.4).
//!
//! Two kinds of numbers. HTTP requests are counted here as they pass the edge
//! middleware (by method, matched route and status, with a latency histogram). The rest
//! is read at scrape time: the service's activity counters (atomics, no lock) and the
//! store's task and agent counts (one snapshot read, two `GROUP BY status` queries), so
//! a hub nobody scrapes pays nothing for them.

use std::{
    sync::{Arc, atomic::AtomicU64},
    time::{Duration, Instant},
};

use axum::{
    Router,
    extract::{MatchedPath, Request, State},
    http::{HeaderValue, Method, header},
    response::{IntoResponse, Response},
    routing::get,
};
use prometheus_client::{
    encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet, prometheus_text},
    metrics::MetricType,
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};
use swarm_domain::stats::Stats;
use swarm_service::timings::HistogramSnapshot;

use crate::{AppState, error::ApiError};

/// The path Prometheus scrapes.
pub const METRICS_PATH: &str = "/metrics";

/// Latency buckets in seconds: sub-millisecond API calls up to a long-poll's 60 s wait.
const LATENCY_BUCKETS: [f64; 14] =
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0, 60.0];

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: &'static str,
    /// The route's pattern (`/api/tasks/{id}`), never the raw path: one series per route,
    /// whatever ids clients send.
    route: Arc<str>,
    status: u16,
}

type LatencyFamily = Family<RequestLabels, Histogram, fn() -> Histogram>;

/// What the hub counts itself, and whether scraping needs the API key.
pub struct Metrics {
    /// Requests begun plus requests answered: whether the hub has been quiet.
    comings_and_goings: std::sync::atomic::AtomicU64,
    requests: Family<RequestLabels, Counter>,
    latency: LatencyFamily,
    public: bool,
    /// Shared label for requests that matched no route (scanners, typos): one series.
    unmatched: Arc<str>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").field("public", &self.public).finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new(false)
    }
}

impl Metrics {
    /// `public`: `GET /metrics` answers without the API key (`--metrics-public`).
    pub fn new(public: bool) -> Self {
        Metrics {
            comings_and_goings: std::sync::atomic::AtomicU64::new(0),
            requests: Family::default(),
            latency: Family::new_with_constructor(|| Histogram::new(LATENCY_BUCKETS)),
            public,
            unmatched: Arc::from("unmatched"),
        }
    }

    pub fn is_public(&self) -> bool {
        self.public
    }

    /// Requests this hub has begun to serve so far plus those it has answered: unchanged
    /// over a while, the hub was quiet (a parked poll that answers is not). Probes and
    /// scrapes (`GET /health`, `GET /metrics`) do not count: a liveness probe every few
    /// seconds would otherwise keep a hub that serves nobody from ever being quiet.
    pub fn requests_begun_and_answered(&self) -> u64 {
        self.comings_and_goings.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The labels of a request, read before the handler consumes it.
    pub(crate) fn start(&self, request: &Request) -> RequestStart {
        let counted = !matches!(request.uri().path(), "/health" | METRICS_PATH);
        if counted {
            self.comings_and_goings.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let route = request
            .extensions()
            .get::<MatchedPath>()
            .map_or_else(|| self.unmatched.clone(), |path| Arc::from(path.as_str()));
        RequestStart { method: method_label(request.method()), route, at: Instant::now(), counted }
    }

    /// Counts a finished request. A streamed answer (`GET /api/events`) counts when its
    /// headers go out, which is when a client knows it was accepted.
    pub(crate) fn finish(&self, start: RequestStart, response: &Response) {
        if start.counted {
            self.comings_and_goings.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let labels =
            RequestLabels { method: start.method, route: start.route, status: response.status().as_u16() };
        self.requests.get_or_create(&labels).inc();
        self.latency.get_or_create(&labels).observe(seconds(start.at.elapsed()));
    }

    /// The whole exposition: what this process counted plus what `stats` says now.
    fn render(
        &self,
        activity: &swarm_service::ActivitySnapshot,
        stats: &Stats,
        backend: &'static str,
        store: &StoreObservations,
    ) -> String {
        let mut registry = Registry::with_prefix("swarm");
        registry.register(
            "http_requests",
            "HTTP requests answered, by method, matched route and status",
            self.requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "Time from a request reaching the hub to its answer's headers, by method, route and status",
            self.latency.clone(),
        );

        let gauge = |registry: &mut Registry, name: &str, help: &str, value: i64| {
            let metric = Gauge::<i64>::default();
            metric.set(value);
            registry.register(name, help, metric);
        };
        let counter = |registry: &mut Registry, name: &str, help: &str, value: u64| {
            let metric = Counter::<u64>::default();
            metric.inc_by(value);
            registry.register(name, help, metric);
        };
        gauge(&mut registry, "parked_polls", "Polls waiting for a trigger right now", activity.parked_polls);
        counter(
            &mut registry,
            "polls_answered",
            "Polls answered, with a trigger or without one",
            activity.polls_answered,
        );
        let triggers = Family::<[(&'static str, &'static str); 1], Counter>::default();
        for (kind, handed) in activity.triggers_handed {
            triggers.get_or_create(&[("kind", kind)]).inc_by(handed);
        }
        registry.register("triggers_handed_out", "Triggers handed to agents by polls, by kind", triggers);
        counter(
            &mut registry,
            "scheduler_passes",
            "Scheduler passes over due triggers",
            activity.scheduler_passes,
        );
        counter(
            &mut registry,
            "slack_sweeps",
            "Slack bridge passes over finished and progressing Slack tasks",
            activity.slack_sweeps,
        );
        counter(&mut registry, "rescue_passes", "Rescuer passes", activity.rescue_passes);
        counter(
            &mut registry,
            "lease_expiries",
            "Task claims whose lease ran out and that the rescuer took back",
            activity.leases_expired,
        );
        counter(
            &mut registry,
            "agents_silenced",
            "Agents marked offline for want of a heartbeat",
            activity.agents_silenced,
        );
        let beats = activity.heartbeats;
        counter(
            &mut registry,
            "heartbeats",
            "Agents' heartbeats heard (pings, parked polls, MCP sessions)",
            beats.heard,
        );
        counter(
            &mut registry,
            "heartbeat_writes",
            "Database transactions written for heartbeats: one per heartbeat written at once, one per batch",
            beats.written_at_once + beats.batches,
        );
        counter(
            &mut registry,
            "heartbeats_batched",
            "Agents' heartbeats written inside batches (one transaction for many agents)",
            beats.batched,
        );
        counter(
            &mut registry,
            "lead_claims_returned",
            "Lead-side claims (inbox, mentions, urgent mail, task results) the rescuer returned",
            activity.lead_claims_returned,
        );

        counter(&mut registry, "retention_passes", "Retention passes finished", activity.retention_passes);
        let removed = Family::<[(&'static str, &'static str); 1], Counter>::default();
        for (kind, rows) in activity.retention_removed {
            removed.get_or_create(&[("kind", kind)]).inc_by(rows);
        }
        registry.register(
            "retention_removed_rows",
            "Rows of finished work that retention removed, by kind",
            removed,
        );
        counter(
            &mut registry,
            "retention_reclaimed_pages",
            "Database pages retention gave back to the file system (SQLite)",
            activity.pages_reclaimed,
        );

        registry.register(
            "trigger_wait_seconds",
            "Time from a trigger's creation (its task, message or mail) to its hand-out by a poll, by kind",
            Histograms { label: "kind", series: activity.trigger_age.clone() },
        );
        registry.register(
            "store_call_duration_seconds",
            "Duration of the service's main store calls, by call",
            Histograms { label: "call", series: activity.store_calls.clone() },
        );
        let inbound = Family::<[(&'static str, &'static str); 2], Counter>::default();
        for (source, outcome, count) in &activity.inbound {
            inbound.get_or_create(&[("source", source), ("outcome", outcome)]).inc_by(*count);
        }
        registry.register(
            "inbound_events",
            "Slack events and webhook deliveries: received, rejected (bad signature or body), duplicate",
            inbound,
        );
        let runs = Family::<[(&'static str, &'static str); 1], Counter>::default();
        for (outcome, count) in &activity.run_reports {
            runs.get_or_create(&[("outcome", outcome)]).inc_by(*count);
        }
        registry.register(
            "run_reports",
            "What agents and runners reported: tasks finished (completed, failed), sessions ended (session_ok, session_error)",
            runs,
        );
        let spawns = Family::<[(&'static str, &'static str); 2], Counter>::default();
        for (cli, outcome, count) in &activity.runner_spawns {
            spawns.get_or_create(&[("cli", cli), ("outcome", outcome)]).inc_by(*count);
        }
        registry.register(
            "runner_spawns",
            "Agent CLI starts reported by runners, by CLI (claude, codex, other) and outcome (started, not_started)",
            spawns,
        );
        if let Some((open, idle)) = store.pool {
            gauge(
                &mut registry,
                "store_pool_connections",
                "Open connections of the PostgreSQL pool",
                i64::from(open),
            );
            gauge(
                &mut registry,
                "store_pool_idle_connections",
                "Idle connections of the PostgreSQL pool",
                i64::from(idle),
            );
        }
        if let Some(served) = store.views_from_memory {
            counter(
                &mut registry,
                "store_poll_views_from_memory",
                "Polls that found nothing and were answered without reading the database",
                served,
            );
        }
        if let Some(writer) = store.writer {
            counter(
                &mut registry,
                "store_writer_transactions",
                "Write transactions of the SQLite writer thread, each a group of writes",
                writer.transactions,
            );
            counter(
                &mut registry,
                "store_writer_writes",
                "Writes the SQLite writer thread ran",
                writer.writes,
            );
            let busy = Counter::<f64, AtomicU64>::default();
            busy.inc_by(writer.busy.as_secs_f64());
            registry.register(
                "store_writer_busy_seconds",
                "Time the SQLite writer thread spent writing; its rate near 1 means writes queue for it",
                busy,
            );
        }

        let tasks = Family::<[(&'static str, &'static str); 1], Gauge>::default();
        let counts = &stats.tasks;
        for (status, n) in [
            ("backlog", counts.backlog),
            ("unassigned", counts.unassigned),
            ("offered", counts.offered),
            ("reviewing", counts.reviewing),
            ("pending", counts.pending),
            ("in_progress", counts.in_progress),
            ("paused", counts.paused),
            ("completed", counts.completed),
            ("failed", counts.failed),
            ("cancelled", counts.cancelled),
        ] {
            tasks.get_or_create(&[("status", status)]).set(n);
        }
        registry.register("tasks", "Tasks in the database, by status", tasks);
        gauge(
            &mut registry,
            "pool_depth",
            "Pool tasks (unassigned) waiting for any worker to claim them",
            counts.unassigned,
        );
        let agents = Family::<[(&'static str, &'static str); 1], Gauge>::default();
        for (status, n) in
            [("idle", stats.agents.idle), ("busy", stats.agents.busy), ("offline", stats.agents.offline)]
        {
            agents.get_or_create(&[("status", status)]).set(n);
        }
        registry.register("agents", "Registered agents, by status", agents);
        let info = Family::<[(&'static str, &'static str); 2], Gauge>::default();
        info.get_or_create(&[("version", env!("CARGO_PKG_VERSION")), ("database", backend)]).set(1);
        registry.register("build", "This hub's version and database backend (always 1)", info);

        let mut text = String::with_capacity(16 * 1024);
        // Writing into a String cannot fail.
        let _ = prometheus_text::encode(&mut text, &registry);
        text
    }
}

/// Histograms the service counted itself (lock-free buckets), one series per label value.
#[derive(Debug)]
struct Histograms {
    label: &'static str,
    series: Vec<(&'static str, HistogramSnapshot)>,
}

impl EncodeMetric for Histograms {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (value, histogram) in &self.series {
            let labels = [(self.label, *value)];
            encoder.encode_family(&labels)?.encode_histogram::<NoLabelSet>(
                histogram.sum_seconds,
                histogram.count,
                &histogram.buckets,
                None,
            )?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

pub(crate) struct RequestStart {
    method: &'static str,
    route: Arc<str>,
    at: Instant,
    /// Whether it counts in [`Metrics::requests_begun_and_answered`].
    counted: bool,
}

/// Methods a client invents would each make a series; they count as `other`.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        Method::HEAD => "HEAD",
        _ => "other",
    }
}

/// What the store reports of itself, each where it applies.
struct StoreObservations {
    /// PostgreSQL's pool: `(open, idle)` connections.
    pool: Option<(u32, u32)>,
    views_from_memory: Option<u64>,
    /// SQLite's writer thread.
    writer: Option<swarm_service::WriterUsage>,
}

fn seconds(elapsed: Duration) -> f64 {
    elapsed.as_secs_f64()
}

pub(crate) fn router() -> Router<AppState> {
    Router::new().route(METRICS_PATH, get(scrape))
}

async fn scrape(State(state): State<AppState>) -> Result<Response, ApiError> {
    let activity = state.service.activity();
    let stats = state.service.stats().await?;
    let text = state.metrics.render(
        &activity,
        &stats,
        state.service.backend_name(),
        &StoreObservations {
            pool: state.service.store_pool_usage(),
            views_from_memory: state.service.store_poll_views_from_memory(),
            writer: state.service.store_writer_usage(),
        },
    );
    let mut response = text.into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(prometheus_text::CONTENT_TYPE));
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_count_toward_activity_but_probes_and_scrapes_do_not() {
        let metrics = Metrics::new(false);
        let request = |path: &str| Request::builder().uri(path).body(axum::body::Body::empty()).unwrap();
        let answer = || axum::http::StatusCode::OK.into_response();
        for path in ["/health", METRICS_PATH] {
            let start = metrics.start(&request(path));
            metrics.finish(start, &answer());
        }
        assert_eq!(metrics.requests_begun_and_answered(), 0, "a probe and a scrape leave the hub quiet");

        let start = metrics.start(&request("/api/poll?wait=30"));
        assert_eq!(metrics.requests_begun_and_answered(), 1, "a poll that begins is activity");
        metrics.finish(start, &answer());
        assert_eq!(metrics.requests_begun_and_answered(), 2, "and so is its answer");
    }
}

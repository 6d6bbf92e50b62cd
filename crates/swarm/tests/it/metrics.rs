//! `GET /metrics`: Prometheus text that a strict parser accepts, numbers that move with
//! the work done, and the API key in front of it unless `--metrics-public`.

use std::collections::{BTreeMap, HashMap};

use serde_json::json;

use crate::hub::{Hub, sqlite_file};

const KEY: &str = "metrics-test-key";

/// One sample line: `name{label="value",...} value`.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A scrape, parsed by the rules of the text format 0.0.4 that a scraper enforces: every
/// sample belongs to a family declared by `# TYPE` before it, names and label names are
/// valid, label values are properly quoted and escaped, no series appears twice, and
/// each histogram's buckets are cumulative up to `+Inf`, which equals its `_count`.
pub(crate) struct Exposition {
    samples: Vec<Sample>,
}

fn parse(text: &str) -> Exposition {
    let mut types: HashMap<String, String> = HashMap::new();
    let mut samples = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (number, line) in text.lines().enumerate() {
        let at = || format!("line {}: {line:?}", number + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# ") {
            let mut words = rest.splitn(3, ' ');
            let (keyword, name) = (words.next().unwrap(), words.next().unwrap_or(""));
            assert!(valid_name(name), "bad metric name in {}", at());
            match keyword {
                "TYPE" => {
                    let kind = words.next().unwrap_or("");
                    assert!(
                        ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                        "unknown type in {}",
                        at()
                    );
                    assert!(
                        types.insert(name.to_string(), kind.to_string()).is_none(),
                        "second TYPE in {}",
                        at()
                    );
                }
                "HELP" => {
                    assert!(words.next().is_some_and(|help| !help.is_empty()), "empty HELP in {}", at())
                }
                _ => panic!("unknown comment keyword in {}", at()),
            }
            continue;
        }
        assert!(!line.starts_with('#'), "malformed comment in {}", at());
        let sample = parse_sample(line).unwrap_or_else(|why| panic!("{why} in {}", at()));
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| {
                sample
                    .name
                    .strip_suffix(suffix)
                    .filter(|base| types.get(*base).is_some_and(|t| t == "histogram"))
            })
            .unwrap_or(&sample.name);
        assert!(types.contains_key(family), "sample before its # TYPE in {}", at());
        assert!(seen.insert((sample.name.clone(), sample.labels.clone())), "duplicate series in {}", at());
        samples.push(sample);
    }
    assert!(!samples.is_empty(), "an exposition with no sample: {text}");
    let exposition = Exposition { samples };
    for (name, kind) in &types {
        if kind == "histogram" {
            exposition.check_histogram(name);
        }
    }
    exposition
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|first| first.is_ascii_alphabetic() || first == '_' || first == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line.find(['{', ' ']).ok_or("no value")?;
    let name = &line[..name_end];
    if !valid_name(name) {
        return Err(format!("bad name {name:?}"));
    }
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(mut inner) = rest.strip_prefix('{') {
        loop {
            if let Some(after) = inner.strip_prefix('}') {
                rest = after;
                break;
            }
            let eq = inner.find('=').ok_or("label without =")?;
            let key = &inner[..eq];
            if !valid_name(key) || key.contains(':') {
                return Err(format!("bad label name {key:?}"));
            }
            let mut chars = inner[eq + 1..].char_indices();
            if chars.next().map(|(_, c)| c) != Some('"') {
                return Err("unquoted label value".into());
            }
            let (mut value, mut end) = (String::new(), None);
            while let Some((index, c)) = chars.next() {
                match c {
                    '\\' => match chars.next().map(|(_, c)| c) {
                        Some('\\') => value.push('\\'),
                        Some('"') => value.push('"'),
                        Some('n') => value.push('\n'),
                        other => return Err(format!("bad escape {other:?}")),
                    },
                    '"' => {
                        end = Some(eq + 1 + index + 1);
                        break;
                    }
                    '\n' => return Err("raw newline in a label value".into()),
                    c => value.push(c),
                }
            }
            let end = end.ok_or("unterminated label value")?;
            if labels.insert(key.to_string(), value).is_some() {
                return Err(format!("label {key} twice"));
            }
            inner = &inner[end..];
            inner = inner.strip_prefix(',').unwrap_or(inner);
        }
    }
    let value = rest.strip_prefix(' ').ok_or("no space before the value")?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        number => number.parse::<f64>().map_err(|_| format!("bad value {number:?}"))?,
    };
    Ok(Sample { name: name.to_string(), labels, value })
}

impl Exposition {
    /// The value of the one series with exactly these labels.
    pub(crate) fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let wanted: BTreeMap<String, String> =
            labels.iter().map(|(key, value)| (key.to_string(), value.to_string())).collect();
        self.samples.iter().find(|sample| sample.name == name && sample.labels == wanted).map(|s| s.value)
    }

    pub(crate) fn get(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.value(name, labels).unwrap_or_else(|| panic!("no series {name}{labels:?}"))
    }

    fn check_histogram(&self, name: &str) {
        let mut series: BTreeMap<BTreeMap<String, String>, Vec<(f64, f64)>> = BTreeMap::new();
        for sample in self.samples.iter().filter(|sample| sample.name == format!("{name}_bucket")) {
            let mut labels = sample.labels.clone();
            let le = labels.remove("le").unwrap_or_else(|| panic!("{name}_bucket without le"));
            let le = if le == "+Inf" { f64::INFINITY } else { le.parse().expect("numeric le") };
            series.entry(labels).or_default().push((le, sample.value));
        }
        for (labels, buckets) in series {
            assert!(
                buckets.windows(2).all(|pair| pair[0].0 < pair[1].0 && pair[0].1 <= pair[1].1),
                "{name}{labels:?}"
            );
            let last = buckets.last().unwrap();
            assert_eq!(last.0, f64::INFINITY, "{name}{labels:?} ends with +Inf");
            let count = self.samples.iter().find(|s| s.name == format!("{name}_count") && s.labels == labels);
            assert_eq!(count.map(|s| s.value), Some(last.1), "{name}{labels:?}: +Inf bucket is the count");
        }
    }
}

pub(crate) async fn scrape(hub: &Hub) -> Exposition {
    let response = hub.request(reqwest::Method::GET, "/metrics", None).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"].to_str().unwrap().to_string();
    assert!(content_type.starts_with("text/plain; version=0.0.4"), "{content_type}");
    parse(&response.text().await.unwrap())
}

#[tokio::test]
async fn metrics_parse_and_count_the_work_done() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let before = scrape(&hub).await;
    assert_eq!(before.get("swarm_tasks", &[("status", "unassigned")]), 0.0);
    let created = ("method", "POST");
    let tasks_route = [created, ("route", "/api/tasks"), ("status", "201")];
    assert_eq!(before.value("swarm_http_requests_total", &tasks_route), None);

    let worker = uuid::Uuid::new_v4().to_string();
    let (status, body) =
        hub.post("/api/agents", Some(&worker), json!({"name": "metered", "maxTasks": 2})).await;
    assert_eq!(status, 201, "{body}");
    let mut ids = Vec::new();
    for n in 0..3 {
        let (status, task) = hub.post("/api/tasks", None, json!({"task": format!("pool work {n}")})).await;
        assert_eq!(status, 201, "{task}");
        ids.push(task["id"].as_str().unwrap().to_string());
    }
    let mut claimed = Vec::new();
    for _ in 0..2 {
        let (status, body) = hub.get("/api/poll", Some(&worker)).await;
        assert_eq!((status, body["trigger"]["type"].as_str()), (200, Some("task_assigned")), "{body}");
        claimed.push(body["trigger"]["taskId"].as_str().unwrap().to_string());
    }
    let (status, _) = hub.get(&format!("/api/tasks/{}", ids[0]), None).await;
    assert_eq!(status, 200);
    let (status, _) = hub.get("/no/such/route", None).await;
    assert_eq!(status, 404);

    let after = scrape(&hub).await;
    assert_eq!(after.get("swarm_tasks", &[("status", "unassigned")]), 1.0);
    assert_eq!(after.get("swarm_tasks", &[("status", "in_progress")]), 2.0);
    assert_eq!(after.get("swarm_pool_depth", &[]), 1.0);
    assert_eq!(
        after.get("swarm_agents", &[("status", "idle")]) + after.get("swarm_agents", &[("status", "busy")]),
        1.0
    );
    let handed = |exposition: &Exposition| {
        exposition.get("swarm_triggers_handed_out_total", &[("kind", "task_assigned")])
    };
    assert_eq!(handed(&after) - handed(&before), 2.0);
    assert!(
        after.get("swarm_polls_answered_total", &[]) - before.get("swarm_polls_answered_total", &[]) >= 2.0
    );
    assert_eq!(after.get("swarm_http_requests_total", &tasks_route), 3.0);
    assert_eq!(after.get("swarm_http_request_duration_seconds_count", &tasks_route), 3.0);
    // Routes are labelled by pattern, never by the ids in the path.
    let one_task = [("method", "GET"), ("route", "/api/tasks/{id}"), ("status", "200")];
    assert_eq!(after.get("swarm_http_requests_total", &one_task), 1.0);
    let unmatched = [("method", "GET"), ("route", "unmatched"), ("status", "404")];
    assert_eq!(after.get("swarm_http_requests_total", &unmatched), 1.0);
    assert!(after.samples.iter().all(|sample| !sample.labels.values().any(|value| value.contains(&ids[0]))));

    // A parked long-poll (the worker is full) shows as a gauge while it waits; finishing
    // a task frees a slot, and the poll takes the last pool task.
    assert_eq!(after.get("swarm_parked_polls", &[]), 0.0);
    let parked = hub.request(reqwest::Method::GET, "/api/poll?wait=30", Some(&worker));
    let waiting = tokio::spawn(parked.send());
    hub.parked_polls(1).await;
    assert_eq!(scrape(&hub).await.get("swarm_parked_polls", &[]), 1.0);
    let finish = json!({"status": "completed", "output": "done"});
    let (status, body) = hub.post(&format!("/api/tasks/{}/finish", claimed[0]), Some(&worker), finish).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(waiting.await.unwrap().unwrap().status(), 200);
    let last = scrape(&hub).await;
    assert_eq!(last.get("swarm_parked_polls", &[]), 0.0);
    assert_eq!(last.get("swarm_tasks", &[("status", "completed")]), 1.0);
    assert_eq!(last.get("swarm_pool_depth", &[]), 0.0);
    assert_eq!(handed(&last) - handed(&before), 3.0);
}

#[tokio::test]
async fn metrics_need_the_key_unless_made_public() {
    let dir = tempfile::tempdir().unwrap();
    let keyed = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let anonymous = reqwest::Client::new();
    let status = anonymous.get(keyed.url("/metrics")).send().await.unwrap().status();
    assert_eq!(status, 401);
    let status = anonymous.get(keyed.url("/metrics")).bearer_auth("wrong").send().await.unwrap().status();
    assert_eq!(status, 401);
    scrape(&keyed).await;
    drop(keyed);

    let public = Hub::start_with(&sqlite_file(dir.path()), Some(KEY), &["--metrics-public"]);
    let response = anonymous.get(public.url("/metrics")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    parse(&response.text().await.unwrap());
    // Only the metrics are public: the API still wants the key.
    let status = anonymous.get(public.url("/api/stats")).send().await.unwrap().status();
    assert_eq!(status, 401);
}

#[tokio::test]
async fn metrics_count_trigger_waits_store_calls_webhooks_and_run_reports() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let before = scrape(&hub).await;
    let delta = |after: &Exposition, name: &str, labels: &[(&str, &str)]| {
        after.get(name, labels) - before.value(name, labels).unwrap_or(0.0)
    };

    let trigger = json!({"name": "alerts", "type": "webhook", "webhookSecret": "s3cret-0123456789abcdef", "target": "pool"});
    let (status, created) = hub.post("/api/triggers", None, trigger).await;
    assert_eq!(status, 201, "{created}");
    let body = br#"{"alert":"disk full"}"#;
    let signature = swarm_service::sign_body("s3cret-0123456789abcdef", body);
    let webhook = |signature: String| {
        let request = reqwest::Client::new()
            .post(hub.url("/api/webhooks/alerts"))
            .header("content-type", "application/json")
            .header("x-hub-signature-256", signature)
            .body(body.to_vec());
        crate::hub::send(request)
    };
    assert_eq!(webhook(signature.clone()).await.0, 202, "fired");
    assert_eq!(webhook(signature).await.0, 202, "a replay is accepted and ignored");
    assert_eq!(webhook("sha256=00".into()).await.0, 401);

    let worker = uuid::Uuid::new_v4().to_string();
    let (status, body) = hub.post("/api/agents", Some(&worker), json!({"name": "w", "maxTasks": 1})).await;
    assert_eq!(status, 201, "{body}");
    let (status, task) = hub.post("/api/tasks", None, json!({"task": "assigned", "agentId": worker})).await;
    assert_eq!(status, 201, "{task}");
    let (status, polled) = hub.get("/api/poll", Some(&worker)).await;
    assert_eq!((status, polled["trigger"]["type"].as_str()), (200, Some("task_assigned")), "{polled}");
    let task_id = polled["trigger"]["taskId"].as_str().unwrap().to_string();
    let cost = json!({"sessionId": "s-1", "agentId": worker, "totalCostUsd": 0.01, "taskId": task_id});
    let (status, body) = hub.post("/api/session-costs", Some(&worker), cost).await;
    assert_eq!(status, 201, "{body}");
    let finish = json!({"status": "completed", "output": "done"});
    let (status, body) = hub.post(&format!("/api/tasks/{task_id}/finish"), Some(&worker), finish).await;
    assert_eq!(status, 200, "{body}");

    let after = scrape(&hub).await;
    let inbound = |outcome| [("source", "webhook"), ("outcome", outcome)];
    assert_eq!(delta(&after, "swarm_inbound_events_total", &inbound("received")), 3.0);
    assert_eq!(delta(&after, "swarm_inbound_events_total", &inbound("duplicate")), 1.0);
    assert_eq!(delta(&after, "swarm_inbound_events_total", &inbound("rejected")), 1.0);
    let slack = [("source", "slack"), ("outcome", "received")];
    assert_eq!(delta(&after, "swarm_inbound_events_total", &slack), 0.0);
    let assigned = [("kind", "task_assigned")];
    assert_eq!(delta(&after, "swarm_trigger_wait_seconds_count", &assigned), 1.0);
    let waited = delta(&after, "swarm_trigger_wait_seconds_sum", &assigned);
    assert!((0.0..30.0).contains(&waited), "created and handed out within the test: {waited} s");
    for (call, at_least) in
        [("poll_claim", 1.0), ("poll_view", 1.0), ("task_create", 1.0), ("task_apply", 1.0)]
    {
        let calls = delta(&after, "swarm_store_call_duration_seconds_count", &[("call", call)]);
        assert!(calls >= at_least, "{call}: {calls} timed");
    }
    assert_eq!(delta(&after, "swarm_run_reports_total", &[("outcome", "completed")]), 1.0);
    assert_eq!(delta(&after, "swarm_run_reports_total", &[("outcome", "session_ok")]), 1.0);
    assert_eq!(delta(&after, "swarm_run_reports_total", &[("outcome", "failed")]), 0.0);
    assert_eq!(after.value("swarm_store_pool_connections", &[]), None, "SQLite has no pool");
    // The trigger, the agent, the task, its claim, the session's cost and the finish: each
    // a write of its own on SQLite's writer thread, grouped into as many transactions or
    // fewer, and time spent on them.
    let writes = delta(&after, "swarm_store_writer_writes_total", &[]);
    let transactions = delta(&after, "swarm_store_writer_transactions_total", &[]);
    assert!(writes >= 6.0, "{writes} writes counted");
    assert!((1.0..=writes).contains(&transactions), "{transactions} transactions for {writes} writes");
    assert!(delta(&after, "swarm_store_writer_busy_seconds_total", &[]) > 0.0);

    // A full agent's polls: the first reads the database, later ones are answered from
    // the view it kept while nothing commits (the writer's own upkeep may commit between
    // two of them, so a few are asked). It fills up with the webhook's pool task.
    let idle = uuid::Uuid::new_v4().to_string();
    let (status, body) = hub.post("/api/agents", Some(&idle), json!({"name": "idle", "maxTasks": 1})).await;
    assert_eq!(status, 201, "{body}");
    let (status, polled) = hub.get("/api/poll", Some(&idle)).await;
    assert_eq!((status, polled["trigger"]["task"]["source"].as_str()), (200, Some("webhook")), "{polled}");
    for _ in 0..10 {
        let (status, polled) = hub.get("/api/poll", Some(&idle)).await;
        assert_eq!((status, &polled["trigger"]), (200, &serde_json::Value::Null), "{polled}");
    }
    let polled = scrape(&hub).await;
    let from_memory = polled.get("swarm_store_poll_views_from_memory_total", &[])
        - after.value("swarm_store_poll_views_from_memory_total", &[]).unwrap_or(0.0);
    assert!(from_memory >= 1.0, "{from_memory} of 10 empty polls answered from memory");

    // The dashboard's last hour: a point taken at start-up, in camelCase.
    let (status, history) = hub.get("/api/stats/history", None).await;
    assert_eq!(status, 200, "{history}");
    let first = &history["points"][0];
    assert!(
        first["queueDepth"].is_i64() && first["runsFinished"].is_u64() && first["at"].is_string(),
        "{history}"
    );
    assert!(first.get("triggerWaitP95Ms").is_some(), "{history}");
}

#[test]
fn the_test_parser_rejects_what_a_scraper_would() {
    let bad = [
        "swarm_x 1\n",                                                                    // no # TYPE
        "# TYPE swarm_x gauge\nswarm_x{a=\"1} 1\n", // unterminated label value
        "# TYPE swarm_x gauge\nswarm_x one\n",      // not a number
        "# TYPE swarm_x gauge\nswarm_x 1\nswarm_x 2\n", // duplicate series
        "# TYPE swarm_x gauge\nswarm_x{a=\"\\q\"} 1\n", // bad escape
        "# TYPE 1x gauge\n",                        // bad name
        "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n", // not cumulative
    ];
    for text in bad {
        assert!(std::panic::catch_unwind(|| parse(text)).is_err(), "accepted: {text:?}");
    }
    let good = parse(
        "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 2\n",
    );
    assert_eq!(good.get("h_count", &[]), 2.0);
}

//! The MCP server handler: lists the tools the caller's role may use and dispatches
//! calls to them. Written by hand rather than with rmcp's tool macros so that the list
//! depends on who asks and the server is named `swarm`.

use std::sync::Arc;

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult, PaginatedRequestParams,
        ServerCapabilities, ServerConfig, Tool,
    },
    service::RequestContext,
};
use serde_json::Value;
use swarm_service::{Service, ServiceError};

use crate::{
    context::{CallerInfo, Identity, ToolCall},
    registry::Registry,
    reply::Reply,
};

/// The one tool that changes who the caller is.
const JOIN_SWARM: &str = "join-swarm";

const INSTRUCTIONS: &str = "swarm coordinates a crew of AI coding agents: a lead that delegates and \
workers that take tasks. Join with join-swarm (then send your agent id as the X-Agent-ID header), \
see the crew with get-swarm and the work with get-tasks. Workers wait for work with poll-task, accept \
or reject offers with task-action, and report with store-progress. Every tool answers with \
{yourAgentId, success, message, ...}; success false comes with the reason.";

/// One MCP server: the tools of one surface (HTTP or stdio), over one service.
#[derive(Clone)]
pub struct McpServer {
    service: Service,
    identity: Identity,
    registry: Arc<Registry>,
}

impl McpServer {
    pub(crate) fn new(service: Service, identity: Identity, registry: Arc<Registry>) -> Self {
        McpServer { service, identity, registry }
    }

    async fn caller(&self, context: &RequestContext<RoleServer>) -> Result<CallerInfo, CallerError> {
        let parts = context.extensions.get::<http::request::Parts>();
        let id = self.identity.agent_id(parts).map_err(CallerError::BadHeader)?;
        let session_task = self.identity.session_task(parts).map_err(CallerError::BadHeader)?;
        let mut caller = CallerInfo::resolve(&self.service, id).await.map_err(CallerError::Service)?;
        caller.session_task = session_task;
        caller.authenticated = self.identity.authenticated(parts);
        if let Some(agent) = &caller.agent {
            // A session that talks to the hub is alive: an agent driven by a person (no
            // runner polling for it) stays online while its session is live.
            self.service.agent_seen(agent).await;
        }
        Ok(caller)
    }
}

enum CallerError {
    BadHeader(String),
    Service(ServiceError),
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = if self.identity.is_header() {
            ServerCapabilities::builder().enable_tools().build()
        } else {
            // A stdio process's tools change when it joins the swarm, and it can say so.
            ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build()
        };
        ServerConfig::new(capabilities)
            .with_server_info(
                Implementation::new("swarm", env!("CARGO_PKG_VERSION"))
                    .with_title("swarm: a coordination hub for crews of AI coding agents"),
            )
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = match self.caller(&context).await {
            Ok(caller) => caller,
            Err(CallerError::BadHeader(message)) => return Err(ErrorData::invalid_request(message, None)),
            Err(CallerError::Service(err)) => {
                tracing::error!(error = %err, "cannot look up the caller of tools/list");
                return Err(ErrorData::internal_error("the hub could not look up the caller", None));
            }
        };
        let tools: Vec<Tool> =
            self.registry.visible_to(caller.role()).map(|spec| spec.tool.clone()).collect();
        // The list depends on the caller. rmcp marks it `cacheScope: private, ttlMs: 0`
        // for 2026-07-28 clients (no shared cache may hand it to another agent); older
        // revisions have no cache hints.
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(spec) = self.registry.find(&request.name) else {
            return Err(ErrorData::invalid_params(format!("unknown tool: {}", request.name), None));
        };
        let caller = match self.caller(&context).await {
            Ok(caller) => caller,
            Err(CallerError::BadHeader(message)) => {
                return Ok(Reply::refused(message).into_result(None).into());
            }
            Err(CallerError::Service(err)) => return Ok(Reply::from(err).into_result(None).into()),
        };
        let role = caller.role();
        if !spec.audience.admits(role) {
            let reply = Reply::refused(spec.audience.refusal(spec.name(), role));
            return Ok(reply.into_result(caller.id).into());
        }
        let caller_id = caller.id;
        let call = ToolCall { service: self.service.clone(), caller, identity: self.identity.clone() };
        let arguments = request.arguments.map_or(Value::Null, Value::Object);
        let reply = spec.call(call, arguments).await;
        if reply.is_success() && !self.identity.is_header() && spec.name() == JOIN_SWARM {
            // A stdio process that just joined has a role now, and so other tools.
            let _ = context.peer.notify_tool_list_changed().await;
        }
        Ok(reply.into_result(caller_id).into())
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.registry.find(name).map(|spec| spec.tool.clone())
    }
}

"use strict";
const KEY = "swarm-api-key";
const el = (tag, attrs = {}, ...children) => {
  const node = document.createElement(tag);
  Object.entries(attrs).forEach(([k, v]) => node.setAttribute(k, v));
  children.forEach(c => node.append(c));
  return node;
};
function resolve(spec, schema) {
  if (schema && schema.$ref) return spec.components.schemas[schema.$ref.split("/").pop()] || schema;
  return schema;
}
function describe(spec, schema, depth = 0) {
  schema = resolve(spec, schema);
  if (!schema || depth > 4) return schema;
  if (schema.properties) {
    const out = {};
    for (const [name, prop] of Object.entries(schema.properties)) {
      const required = (schema.required || []).includes(name);
      const inner = resolve(spec, prop);
      out[name + (required ? "" : "?")] = inner.properties ? describe(spec, inner, depth + 1)
        : (inner.type ? [].concat(inner.type).join("|") : (inner.enum ? inner.enum.join("|") : (inner.oneOf || inner.allOf ? "object" : "any")))
          + (inner.items ? " of " + ((resolve(spec, inner.items) || {}).type || "object") : "");
    }
    return out;
  }
  if (schema.allOf) return Object.assign({}, ...schema.allOf.map(s => describe(spec, s, depth + 1)));
  return schema;
}
function render(spec) {
  document.getElementById("subtitle").textContent = `${spec.info.title} ${spec.info.version} · OpenAPI ${spec.openapi}`;
  const content = document.getElementById("content");
  content.append(el("p", {}, spec.info.description || ""));
  const byTag = {};
  for (const [path, item] of Object.entries(spec.paths)) {
    for (const [method, op] of Object.entries(item)) {
      const tag = (op.tags || ["other"])[0];
      (byTag[tag] = byTag[tag] || []).push({ path, method, op });
    }
  }
  for (const [tag, ops] of Object.entries(byTag)) {
    content.append(el("h2", {}, tag));
    for (const { path, method, op } of ops) {
      const body = el("div", { class: "body" });
      if (op.description) body.append(el("p", {}, op.description));
      if (op.parameters && op.parameters.length) {
        const table = el("table", {}, el("tr", {}, el("th", {}, "parameter"), el("th", {}, "in"), el("th", {}, "description")));
        op.parameters.forEach(p => table.append(el("tr", {}, el("td", {}, el("code", {}, p.name + (p.required ? "" : "?"))), el("td", {}, p.in), el("td", {}, p.description || ""))));
        body.append(table);
      }
      const request = op.requestBody && op.requestBody.content && op.requestBody.content["application/json"];
      if (request) body.append(el("h4", {}, "Request body"), el("pre", {}, JSON.stringify(describe(spec, request.schema), null, 2)));
      for (const [status, response] of Object.entries(op.responses || {})) {
        const json = response.content && response.content["application/json"];
        body.append(el("h4", {}, `${status} ${response.description || ""}`));
        if (json) body.append(el("pre", {}, JSON.stringify(describe(spec, json.schema), null, 2)));
      }
      content.append(el("details", {}, el("summary", {}, el("span", { class: "method " + method }, method.toUpperCase()), el("span", { class: "path" }, path), el("span", {}, op.summary || "")), body));
    }
  }
}
async function load() {
  const key = sessionStorage.getItem(KEY);
  const response = await fetch("/openapi.json", { headers: key ? { Authorization: "Bearer " + key } : {} });
  if (response.status === 401) {
    document.getElementById("login").style.display = "block";
    document.getElementById("subtitle").textContent = "API key required";
    if (key) document.getElementById("login-error").textContent = "That key was refused.";
    return;
  }
  document.getElementById("login").style.display = "none";
  render(await response.json());
}
document.getElementById("login").addEventListener("submit", event => {
  event.preventDefault();
  sessionStorage.setItem(KEY, document.getElementById("key").value);
  load();
});
load();

// Every call to the hub goes through `api()`: the key from this browser's localStorage
// as a Bearer header (never in a URL), JSON in and out, and one place that notices a 401.
//
// localStorage, not sessionStorage: a link opened in a new tab is signed in too. The
// trade-off (docs/dashboard.md): the key stays on this browser profile until "Sign out"
// or a refused key clears it, readable by any script of this origin (the dashboard only
// sets hub data as text, never as markup).

export const KEY_STORAGE = 'swarm.apiKey';

export class Unauthorized extends Error {}

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

let unauthorizedHandler = () => {};

/** Called whenever the hub answers 401: the app shows its login form. */
export function onUnauthorized(handler) {
  unauthorizedHandler = handler;
}

export function apiKey() {
  return localStorage.getItem(KEY_STORAGE) || '';
}

export function setApiKey(key) {
  if (key) localStorage.setItem(KEY_STORAGE, key);
  else localStorage.removeItem(KEY_STORAGE);
}

export function authHeaders(extra = {}) {
  const headers = { ...extra };
  const key = apiKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  return headers;
}

export function unauthorized() {
  unauthorizedHandler();
}

/** `path` with the query parameters that are set. */
export function withQuery(path, params) {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== '') query.set(name, value);
  }
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}

export async function api(path, { method = 'GET', body } = {}) {
  const init = { method, headers: authHeaders(body === undefined ? {} : { 'Content-Type': 'application/json' }) };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(path, init);
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = { error: text };
    }
  }
  if (response.status === 401) {
    unauthorizedHandler();
    throw new Unauthorized(data?.error || 'Unauthorized');
  }
  if (!response.ok) throw new ApiError(response.status, data?.error || response.statusText);
  return data;
}

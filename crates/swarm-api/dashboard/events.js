// Live changes from `GET /api/events`. EventSource cannot send an Authorization header,
// so the stream is read with fetch() and parsed here: the key stays out of URLs and logs.
// A dropped stream reconnects with backoff; every (re)connection starts with `ready`,
// on which the page re-reads what it shows, so nothing missed while away stays stale.

import { authHeaders, unauthorized } from './api.js';

const RETRY_FIRST_MS = 500;
const RETRY_MAX_MS = 10000;

/**
 * Start listening. `onEvent(type, data)` gets `ready`, `change` (data parsed) and
 * `resync`; `onState(state)` gets `live` or `reconnecting`. Returns a stop function.
 */
export function startEvents({ onEvent, onState }) {
  let stopped = false;
  let controller = null;
  let delay = RETRY_FIRST_MS;

  async function run() {
    while (!stopped) {
      controller = new AbortController();
      try {
        const response = await fetch('/api/events', {
          headers: authHeaders({ Accept: 'text/event-stream' }),
          signal: controller.signal,
          cache: 'no-store',
        });
        if (response.status === 401) {
          unauthorized();
          return;
        }
        if (!response.ok || !response.body) throw new Error(`status ${response.status}`);
        await readEvents(response.body, (type, data) => {
          if (type === 'ready') {
            delay = RETRY_FIRST_MS;
            onState('live');
          }
          onEvent(type, data);
        });
      } catch {
        // Fall through to the retry: a network error, or the hub restarting.
      }
      if (stopped) return;
      onState('reconnecting');
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, RETRY_MAX_MS);
    }
  }

  run();
  return () => {
    stopped = true;
    controller?.abort();
  };
}

/** Parse a text/event-stream body (the WHATWG format) until it ends. */
async function readEvents(body, dispatch) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n/g, '\n');
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let type = 'message';
      const data = [];
      for (const line of block.split('\n')) {
        if (!line || line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let text = colon < 0 ? '' : line.slice(colon + 1);
        if (text.startsWith(' ')) text = text.slice(1);
        if (field === 'event') type = text;
        else if (field === 'data') data.push(text);
      }
      let parsed = data.join('\n');
      try {
        parsed = JSON.parse(parsed);
      } catch {
        // Not JSON: pass the text on.
      }
      dispatch(type, parsed);
    }
  }
}

// The shell: sign-in, navigation, hash routing, and the live stream handed to the page
// on screen. Changes are batched (a burst of commits is one re-read per page).

import { api, apiKey, KEY_STORAGE, onUnauthorized, setApiKey, Unauthorized } from './api.js';
import { startEvents } from './events.js';
import { pages } from './pages/index.js';
import { errorBox, fill, h } from './ui.js';

const BATCH_MS = 150;

const view = document.getElementById('view');
const nav = document.getElementById('nav');
const live = document.getElementById('live');
const login = document.getElementById('login');
const loginForm = document.getElementById('login-form');
const loginKey = document.getElementById('login-key');
const loginError = document.getElementById('login-error');
const signOut = document.getElementById('sign-out');
const menuToggle = document.getElementById('menu-toggle');
const header = document.querySelector('header.top');

let current = null;
let stopEvents = null;
let batch = [];
let batchTimer = null;
let renderSeq = 0;

function route() {
  const hash = location.hash.replace(/^#\/?/, '');
  const [path, query = ''] = hash.split('?');
  return { parts: path.split('/').filter(Boolean).map(decodeURIComponent), params: new URLSearchParams(query) };
}

async function render() {
  const seq = ++renderSeq;
  current?.handle?.dispose?.();
  current = null;
  const where = route();
  const page = pages.find((candidate) => candidate.name === where.parts[0]) || pages[0];
  for (const link of nav.querySelectorAll('a')) link.classList.toggle('active', link.dataset.page === page.name);
  document.title = `${page.title} · swarm`;
  const root = h('section', { class: 'page', id: `page-${page.name}` });
  fill(view, root);
  try {
    const module = await import(`./pages/${page.module.slice(2)}`);
    if (seq !== renderSeq) return;
    current = { page, handle: module.mount(root, where) || {} };
  } catch (error) {
    fill(root, errorBox(error));
  }
}

function deliver(change) {
  batch.push(change);
  if (batchTimer) return;
  batchTimer = setTimeout(() => {
    const changes = batch;
    batch = [];
    batchTimer = null;
    current?.handle?.onChange?.(changes);
  }, BATCH_MS);
}

function setLive(state) {
  live.dataset.state = state;
  live.textContent = state === 'live' ? 'live' : state;
}

function showLogin() {
  stopEvents?.();
  stopEvents = null;
  current?.handle?.dispose?.();
  current = null;
  const refused = Boolean(apiKey());
  setApiKey('');
  document.body.classList.remove('starting', 'signed-in');
  document.body.classList.add('signed-out');
  login.hidden = false;
  view.hidden = true;
  signOut.hidden = true;
  setLive('offline');
  loginError.textContent = refused
    ? 'The hub refused this key (401 Unauthorized). Check it against the hub\'s key file (./swarm.db.key by default) or the API_KEY it was started with.'
    : '';
  loginKey.focus();
}

function showApp() {
  document.body.classList.remove('starting', 'signed-out');
  document.body.classList.add('signed-in');
  login.hidden = true;
  view.hidden = false;
  signOut.hidden = !apiKey();
  if (!stopEvents) {
    stopEvents = startEvents({
      onEvent: (type, data) => {
        if (type === 'change') deliver(data);
        // After a (re)connection or a gap, whatever is shown may be stale.
        else if (type === 'ready' || type === 'resync') deliver({ kind: 'resync' });
      },
      onState: setLive,
    });
  }
  render();
}

loginForm.addEventListener('submit', async (event) => {
  event.preventDefault();
  loginError.textContent = '';
  setApiKey(loginKey.value.trim());
  try {
    await api('/api/stats');
    loginKey.value = '';
    showApp();
  } catch (error) {
    if (!(error instanceof Unauthorized)) loginError.textContent = `Cannot reach the hub: ${error.message}`;
  }
});

signOut.addEventListener('click', () => {
  setApiKey('');
  showLogin();
});

window.addEventListener('hashchange', () => {
  setMenu(false);
  if (!view.hidden) render();
});

// A narrow screen folds the page links behind a menu button (style.css).
function setMenu(open) {
  header.classList.toggle('menu-open', open);
  menuToggle.setAttribute('aria-expanded', String(open));
}
menuToggle.addEventListener('click', () => setMenu(!header.classList.contains('menu-open')));

// Signed out (or in) in another tab of this browser: follow it here.
window.addEventListener('storage', (event) => {
  if (event.key !== KEY_STORAGE && event.key !== null) return;
  if (!apiKey() && !view.hidden && !signOut.hidden) showLogin();
  else if (apiKey() && !login.hidden) showApp();
});

/** `swarm serve` prints a link with the key in its fragment (`#key=...`, which browsers
 *  never send): keep the key in this browser and take it out of the address bar and history. */
function takeKeyFromLink() {
  const match = location.hash.match(/^#key=([^&]+)$/);
  if (!match) return;
  setApiKey(decodeURIComponent(match[1]));
  history.replaceState(null, '', location.pathname + location.search);
}

async function start() {
  takeKeyFromLink();
  fill(nav, pages.map((page) => h('a', { href: `#/${page.name}`, dataset: { page: page.name } }, page.title)));
  onUnauthorized(showLogin);
  try {
    // Open hubs (no API_KEY) answer without a key; others say 401 and we ask for it.
    await api('/api/stats');
    showApp();
  } catch (error) {
    if (error instanceof Unauthorized) return;
    document.body.classList.remove('starting');
    fill(view, errorBox(new Error(`Cannot reach the hub: ${error.message}`)));
  }
}

start();

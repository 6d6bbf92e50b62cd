// Triggers: what turns a schedule, a webhook or a click into a task, when each fires
// next, and the two things people do with them: fire one now, enable or disable it.
// Both are the REST calls any client makes (POST /api/triggers/:name/fire, PATCH).

import { api } from '../api.js';
import { agentLink, agentsById, ago, badge, errorBox, fill, h, shortId, table } from '../ui.js';

const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const pad = (n) => String(n).padStart(2, '0');
const isNumber = (field) => /^\d+$/.test(field);

/** The common cron shapes in words ("every day at 09:00", "every 15 minutes"); null
 *  for the rest, which are shown as they are. */
export function describeCron(schedule) {
  const fields = String(schedule || '').trim().split(/\s+/);
  if (fields.length !== 5) return null;
  const [minute, hour, dayOfMonth, month, dayOfWeek] = fields;
  const everyDay = dayOfMonth === '*' && month === '*';
  const step = (field) => field.match(/^\*\/(\d+)$/)?.[1];
  if (everyDay && dayOfWeek === '*') {
    if (minute === '*' && hour === '*') return 'every minute';
    if (step(minute) && hour === '*') return `every ${step(minute)} minutes`;
    if (isNumber(minute) && hour === '*') return `every hour at :${pad(minute)}`;
    if (isNumber(minute) && step(hour)) return `every ${step(hour)} hours at :${pad(minute)}`;
  }
  if (!isNumber(minute) || !isNumber(hour) || month !== '*') return null;
  const at = `at ${pad(hour)}:${pad(minute)}`;
  if (dayOfMonth === '*' && dayOfWeek === '*') return `every day ${at}`;
  if (dayOfMonth === '*' && (dayOfWeek === '1-5' || dayOfWeek === 'MON-FRI')) return `weekdays ${at}`;
  if (dayOfMonth === '*' && isNumber(dayOfWeek) && Number(dayOfWeek) <= 7) return `every ${DAYS[Number(dayOfWeek) % 7]} ${at}`;
  if (isNumber(dayOfMonth) && dayOfWeek === '*') return `day ${dayOfMonth} of each month ${at}`;
  return null;
}

/** A time in the browser's zone, the zone named ("28/11/2026, 17:00:00 CET"). */
function localTime(iso) {
  return new Date(iso).toLocaleString(undefined, { timeZoneName: 'short' });
}

function when(trigger) {
  switch (trigger.type) {
    case 'cron': return h('span', { class: 'cron' },
      `${describeCron(trigger.schedule) ?? 'cron'} (${trigger.timezone || 'UTC'} time) `, h('code', {}, trigger.schedule));
    case 'interval': return `every ${trigger.intervalMs / 1000} s`;
    case 'once': return trigger.runAt ? `at ${localTime(trigger.runAt)}` : 'once';
    case 'webhook':
    case 'github': return trigger.webhookPath || 'webhook';
    default: return 'by hand';
  }
}

function target(trigger, byId) {
  if (trigger.target === 'pool' || trigger.target === 'lead') return trigger.target;
  return agentLink(trigger.target, byId);
}

export function mount(root) {
  const body = h('div', { id: 'trigger-list' });
  const notice = h('p', { id: 'trigger-notice', class: 'muted', role: 'status' });
  fill(root, h('h1', {}, 'Triggers'), notice, body);

  async function act(path, options, done) {
    notice.classList.remove('error');
    try {
      const answer = await api(path, options);
      notice.textContent = done(answer);
      await load();
    } catch (error) {
      notice.textContent = error.message || String(error);
      notice.classList.add('error');
    }
  }

  function fireButton(trigger) {
    const button = h('button', { type: 'button', class: 'fire', 'data-trigger': trigger.name }, 'Fire now');
    button.addEventListener('click', () => act(
      `/api/triggers/${encodeURIComponent(trigger.name)}/fire`, { method: 'POST', body: {} },
      (answer) => `${trigger.name} fired: task ${shortId(answer.task.id)} created.`));
    return button;
  }

  function toggleButton(trigger) {
    const label = trigger.enabled ? 'Disable' : 'Enable';
    const button = h('button', { type: 'button', class: 'toggle', 'data-trigger': trigger.name }, label);
    button.addEventListener('click', () => act(
      `/api/triggers/${encodeURIComponent(trigger.name)}`, { method: 'PATCH', body: { enabled: !trigger.enabled } },
      () => `${trigger.name} ${trigger.enabled ? 'disabled' : 'enabled'}.`));
    return button;
  }

  async function load() {
    try {
      const [{ triggers }, { agents }] = await Promise.all([api('/api/triggers'), api('/api/agents')]);
      const byId = agentsById(agents);
      fill(body, table([
        ['Name', (trigger) => [h('strong', {}, trigger.name), trigger.description ? h('div', { class: 'muted' }, trigger.description) : '']],
        ['Type', (trigger) => trigger.type],
        ['When', (trigger) => when(trigger)],
        ['For', (trigger) => target(trigger, byId)],
        ['Session', (trigger) => trigger.sessionMode],
        ['State', (trigger) => badge(trigger.enabled ? 'enabled' : 'disabled')],
        ['Last run', (trigger) => ago(trigger.lastRunAt)],
        ['Runs', (trigger) => String(trigger.runCount)],
        ['Next run', (trigger) => (trigger.nextRunAt
          ? h('time', { class: 'next-run', datetime: trigger.nextRunAt, title: 'in this browser\'s time zone' }, localTime(trigger.nextRunAt))
          : '-')],
        ['', (trigger) => [fireButton(trigger), ' ', toggleButton(trigger)]],
      ], triggers, {
        empty: 'No triggers yet: create one with `swarm trigger create`, POST /api/triggers or create-schedule.',
        rowAttributes: (trigger) => ({ 'data-name': trigger.name }),
      }));
    } catch (error) {
      fill(body, errorBox(error));
    }
  }

  load();
  return {
    onChange(changes) {
      // A firing creates a task; a scheduled one changes the trigger's last and next run.
      if (changes.some((change) => ['task', 'external', 'resync'].includes(change.kind))) load();
    },
  };
}

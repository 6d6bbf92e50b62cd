// "Needs you" (issue 49): what waits for a person, first on the overview, each with the
// one action that moves it on. Read from the hub's lists (no endpoint of its own):
// - failed tasks of the last 7 days, with their reason: retry (a new task with the same
//   text, in the pool or for a chosen worker), or dismiss;
// - agents offline while holding work: release it to the pool, or reassign it;
// - offers and reviews waiting on an agent that is online: reassign;
// - work handed back (a stalled run given back, or taken from a gone agent), with the
//   reason: assign it, or send it from the backlog to the pool;
// - tasks whose dependency failed or was cancelled (they can never start): cancel;
// - mail whose sender waits for an answer, urgent mail not yet read;
// - the lead's inbox messages set aside as dead letters: requeue;
// - today's budget refusals: raise the budget.
// A retried or dismissed failure is remembered in this browser (localStorage), since a
// failed task stays failed on the hub.

import { api, withQuery } from './api.js';
import { agentLink, ago, badge, clip, errorBox, fill, h, taskLink } from './ui.js';

const HELD = ['pending', 'in_progress', 'paused', 'offered', 'reviewing'];
const WAITING = ['backlog', 'unassigned', 'offered', 'pending'];
const LIST_LIMIT = 200;
const LOG_LIMIT = 300;
const WEEK_MS = 7 * 24 * 3600 * 1000;
const HANDLED_STORAGE = 'swarm.needsYou.handled';

const handled = () => new Set(JSON.parse(localStorage.getItem(HANDLED_STORAGE) || '[]'));
function markHandled(id) {
  const ids = [...handled(), id].slice(-500);
  localStorage.setItem(HANDLED_STORAGE, JSON.stringify(ids));
}

const holderOf = (task) => (['offered', 'reviewing'].includes(task.status) ? task.offeredTo : task.agentId);
const post = (path, body = {}) => api(path, { method: 'POST', body });
const taskPath = (id, action) => `/api/tasks/${encodeURIComponent(id)}/${action}`;

/** A button that runs `action`, then `done`; its error shows beside it. */
function actionButton(label, attributes, action, done) {
  const status = h('span', { class: 'form-status', role: 'status' });
  const button = h('button', { type: 'button', ...attributes }, label);
  button.addEventListener('click', async () => {
    button.disabled = true;
    status.textContent = '';
    status.classList.remove('error');
    try {
      const said = await action();
      if (said) status.textContent = said;
      await done();
    } catch (error) {
      status.textContent = error.message || String(error);
      status.classList.add('error');
      button.disabled = false;
    }
  });
  return [button, status];
}

// The worker picked in each picker, by task: the list is rebuilt at every change in the
// hub (a heartbeat is one), which must not undo a choice being made.
const picked = new Map();

function picker(key, className, options) {
  const select = h('select', { class: className, 'aria-label': 'worker' }, options);
  if (picked.has(key) && [...select.options].some((option) => option.value === picked.get(key))) select.value = picked.get(key);
  select.addEventListener('change', () => picked.set(key, select.value));
  return select;
}

/** A worker picker and a button that hands the task to the one picked. */
function reassignControl(task, workers, done, { evenIfOnline = false } = {}) {
  const others = workers.filter((agent) => agent.id !== holderOf(task) && agent.status !== 'offline');
  if (!others.length) return h('span', { class: 'muted' }, 'no other worker online');
  const select = picker(`reassign:${task.id}`, 'reassign-to', others.map((agent) => h('option', { value: agent.id }, agent.name)));
  return [select, actionButton('Reassign', { class: 'reassign' }, async () => {
    await post(taskPath(task.id, 'reassign'), { agentId: select.value, evenIfOnline });
    return 'reassigned';
  }, done)];
}

function retryControls(task, workers, done) {
  const retry = async (agentId) => {
    const body = { task: task.task, priority: task.priority, tags: task.tags || [] };
    if (task.taskType) body.taskType = task.taskType;
    if (task.model) body.model = task.model;
    if (agentId) body.agentId = agentId;
    const created = await api('/api/tasks', { method: 'POST', body });
    markHandled(task.id);
    return `retried as ${created.id.slice(-8)}`;
  };
  const online = workers.filter((agent) => agent.status !== 'offline');
  const select = picker(`retry:${task.id}`, 'retry-on', [h('option', { value: '' }, 'any worker'),
    online.map((agent) => h('option', { value: agent.id }, agent.name))]);
  return [
    select,
    actionButton('Retry', { class: 'retry' }, () => retry(select.value), done),
    actionButton('Dismiss', { class: 'dismiss secondary' }, async () => markHandled(task.id), done),
  ];
}

function item(kind, attributes, what, why, when, actions) {
  return h('li', { class: `needs-item needs-${kind}`, ...attributes },
    h('div', { class: 'needs-what' }, what),
    why ? h('div', { class: 'needs-why' }, why) : '',
    h('div', { class: 'needs-when muted' }, when),
    h('div', { class: 'needs-actions' }, actions));
}

function group(title, kind, items) {
  if (!items.length) return '';
  return h('div', { class: 'needs-group', dataset: { kind } },
    h('h3', {}, title, ' ', h('span', { class: 'needs-count' }, String(items.length))), h('ul', {}, items));
}

/** Today's date, UTC, as the budgets count it. */
const utcToday = () => new Date().toISOString().slice(0, 10);

export function needsYou() {
  const element = h('div', { id: 'needs-you' });

  async function load(byId, agentList) {
    try {
      const [failed, held, waiting, logs, pendingMail, deadLetters, refusals] = await Promise.all([
        api(withQuery('/api/tasks', { status: 'failed', limit: 50 })),
        api(withQuery('/api/tasks', { status: HELD.join(','), limit: LIST_LIMIT })),
        api(withQuery('/api/tasks', { status: WAITING.join(','), limit: LIST_LIMIT })),
        api(withQuery('/api/logs', { limit: LOG_LIMIT })),
        api(withQuery('/api/mail', { pending: true, limit: 50 })).catch(() => ({ mail: [] })),
        api(withQuery('/api/inbox', { status: 'dead_letter' })).catch(() => ({ messages: [] })),
        api('/api/budgets/refusals').catch(() => ({ refusals: [] })),
      ]);
      const workers = agentList.filter((agent) => !agent.isLead);
      const done = () => load(byId, agentList);
      const seen = handled();
      const now = Date.now();

      const failures = failed.tasks.filter((task) => !seen.has(task.id)
        && now - new Date(task.finishedAt || task.lastUpdatedAt).getTime() < WEEK_MS);
      const failedItems = failures.map((task) => item('failed', { dataset: { taskId: task.id } },
        [badge('failed'), ' ', taskLink(task.id, clip(task.task, 90))],
        h('span', { class: 'failure-reason' }, task.failureReason || 'no reason given'),
        ago(task.finishedAt || task.lastUpdatedAt), retryControls(task, workers, done)));

      const offline = new Set(agentList.filter((agent) => agent.status === 'offline').map((agent) => agent.id));
      const stranded = held.tasks.filter((task) => offline.has(holderOf(task)));
      const strandedItems = stranded.map((task) => item('offline', { dataset: { taskId: task.id, agentId: holderOf(task) } },
        [agentLink(holderOf(task), byId), ' is offline holding ', badge(task.status), ' ', taskLink(task.id, clip(task.task, 80))],
        null, ago(task.lastUpdatedAt),
        [actionButton('Release', { class: 'release' }, async () => {
          await post(taskPath(task.id, 'release'));
          return 'released to the pool';
        }, done), reassignControl(task, workers, done)]));

      const offers = held.tasks.filter((task) => ['offered', 'reviewing'].includes(task.status) && !offline.has(holderOf(task)));
      const offerItems = offers.map((task) => item('offer', { dataset: { taskId: task.id } },
        [badge(task.status), ' ', taskLink(task.id, clip(task.task, 80)), ' for ', agentLink(holderOf(task), byId)],
        task.status === 'offered' ? 'waiting to be accepted or rejected' : 'being reviewed before it is accepted',
        ago(task.offeredAt || task.lastUpdatedAt), reassignControl(task, workers, done, { evenIfOnline: true })));

      const waitingIds = new Map(waiting.tasks.map((task) => [task.id, task]));
      const handBacks = new Map();
      for (const event of logs.logs) {
        // The latest hand-back of each task; one a person made (the hub's reason for a
        // release or reassign by the operator or the lead) needs nobody.
        // A runner's give-back (a stalled run) is a release that says why.
        const givenBack = event.eventType === 'task_released' && event.metadata?.reason;
        if ((event.eventType !== 'task_handed_back' && !givenBack) || handBacks.has(event.taskId)) continue;
        const byPerson = /^(released|reassigned) by the (operator|lead)\b/.test(event.metadata?.reason || '');
        handBacks.set(event.taskId, null);
        if (!byPerson && waitingIds.has(event.taskId)) {
          const task = waitingIds.get(event.taskId);
          if (task.status === 'backlog' || task.status === 'unassigned') handBacks.set(event.taskId, { task, event });
        }
      }
      const handBackItems = [...handBacks.values()].filter(Boolean).map(({ task, event }) => item('handed-back', { dataset: { taskId: task.id } },
        [badge(task.status), ' ', taskLink(task.id, clip(task.task, 80)), ' handed back',
          event.metadata?.fromAgentId ? [' by ', agentLink(event.metadata.fromAgentId, byId)] : ''],
        event.metadata?.reason || '', ago(event.createdAt),
        [task.status === 'backlog'
          ? actionButton('To the pool', { class: 'from-backlog' }, async () => {
            await post(taskPath(task.id, 'from-backlog'));
            return 'in the pool';
          }, done)
          : '',
        reassignControl(task, workers, done)]));

      const dead = new Map([...failed.tasks].map((task) => [task.id, task]));
      const blocked = waiting.tasks.filter((task) => (task.dependsOn || []).some((dep) => dead.has(dep)));
      const blockedItems = blocked.map((task) => {
        const failedDeps = task.dependsOn.filter((dep) => dead.has(dep));
        return item('blocked', { dataset: { taskId: task.id } },
          [badge(task.status), ' ', taskLink(task.id, clip(task.task, 80))],
          ['waits on failed ', failedDeps.map((dep) => [taskLink(dep), ' '])], ago(task.lastUpdatedAt),
          actionButton('Cancel', { class: 'cancel danger' }, async () => {
            await post(taskPath(task.id, 'cancel'), { reason: `its dependency ${failedDeps[0]} failed` });
            return 'cancelled';
          }, done));
      });

      const mailItems = (pendingMail.mail || []).map((mail) => item('mail', { dataset: { mailId: mail.id } },
        [badge(mail.priority), ' ',
          h('strong', {}, mail.subject || '(no subject)'), ' from ', agentLink(mail.fromAgentId, byId),
          ' to ', agentLink(mail.toAgentId, byId)],
        mail.awaitingResponse ? 'waits for an answer' : 'urgent, not read yet', ago(mail.createdAt),
        h('a', { href: `#/mail?agentId=${encodeURIComponent(mail.toAgentId || '')}` }, 'Open the mail')));

      const deadItems = (deadLetters.messages || []).map((message) => item('dead-letter', { dataset: { messageId: message.id } },
        ['Inbox message set aside: ', clip(message.content, 90)],
        'handed to the lead too many times without being handled', ago(message.createdAt),
        actionButton('Requeue', { class: 'requeue' }, async () => {
          await post(`/api/inbox/${encodeURIComponent(message.id)}/requeue`);
          return 'requeued';
        }, done)));

      const today = utcToday();
      const refusalItems = (refusals.refusals || []).filter((refusal) => refusal.date === today)
        .filter((refusal, index, all) => all.findIndex((other) => other.agentId === refusal.agentId && other.cause === refusal.cause) === index)
        .map((refusal) => item('budget', { dataset: { agentId: refusal.agentId } },
          [agentLink(refusal.agentId, byId), ' was refused work: ', refusal.cause === 'global' ? 'the global budget' : 'its budget', ' is reached'],
          refusal.cause === 'global'
            ? `$${refusal.globalSpendUsd?.toFixed(2)} of $${refusal.globalBudgetUsd?.toFixed(2)} spent today`
            : `$${refusal.agentSpendUsd?.toFixed(2)} of $${refusal.agentBudgetUsd?.toFixed(2)} spent today`,
          ago(refusal.createdAt), h('a', { href: '#/overview-budgets', onclick: (event) => {
            event.preventDefault();
            document.getElementById('overview-budgets')?.scrollIntoView();
          } }, 'See the budgets')));

      const groups = [
        group('Failed', 'failed', failedItems),
        group('Offline while holding work', 'offline', strandedItems),
        group('Handed back', 'handed-back', handBackItems),
        group('Blocked by a failed dependency', 'blocked', blockedItems),
        group('Offers and reviews waiting', 'offers', offerItems),
        group('Mail waiting for an answer', 'mail', mailItems),
        group('Dead letters', 'dead-letters', deadItems),
        group('Budget refusals today', 'budget', refusalItems),
      ].filter(Boolean);
      fill(element, groups.length ? groups : h('p', { class: 'empty needs-nothing' }, 'Nothing needs you right now.'));
      element.dataset.count = String(groups.length);
    } catch (error) {
      fill(element, errorBox(error));
    }
  }

  return { element, load };
}

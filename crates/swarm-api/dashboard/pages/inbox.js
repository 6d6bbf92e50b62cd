// The lead's inbox: Slack messages routed to the lead, and what became of each
// (answered in the thread, delegated as a task). The lead acts on them itself.
// Dead letters (handed to the lead's runs MAX_DELIVERIES times, never handled) are
// shown apart, each with a button that puts it back in the inbox.

import { api, withQuery } from '../api.js';
import { agentLink, agentsById, ago, badge, errorBox, fill, h, table, taskLink } from '../ui.js';

const LIMIT = 100;
const OPEN = 'unread,processing';
const DEAD = 'dead_letter';

export function mount(root, route) {
  const showAll = route.params.get('all') === '1';
  const body = h('div', { id: 'inbox-messages' });
  fill(root,
    h('h1', {}, 'Lead inbox'),
    h('p', { class: 'filters' },
      showAll ? h('a', { href: '#/inbox' }, 'Show open only') : h('a', { href: '#/inbox?all=1' }, 'Show all (answered, delegated)')),
    body);

  async function load() {
    try {
      const [{ agents }, health] = await Promise.all([api('/api/agents'), api('/health')]);
      const byId = agentsById(agents);
      // Without a Slack bot nothing reaches this inbox: "all answered" would be untrue.
      const slackNote = health.slackConfigured ? '' : h('p', { class: 'note', id: 'inbox-no-slack' },
        'Slack is not configured on this hub (no SLACK_BOT_TOKEN), so no Slack message reaches the lead\'s inbox. '
        + 'See docs/slack.md to connect a Slack app.');
      const lead = agents.find((agent) => agent.isLead);
      if (!lead) {
        fill(body, slackNote, h('p', { class: 'empty' }, 'No lead has joined: Slack messages for the lead wait for one (swarm lead).'));
        return;
      }
      const { messages } = await api(withQuery('/api/inbox', { agentId: lead.id, status: showAll ? '' : OPEN, limit: LIMIT }));
      const dead = (await api(withQuery('/api/inbox', { agentId: lead.id, status: DEAD, limit: LIMIT }))).messages;
      const requeue = (message) => h('button', {
        class: 'requeue',
        onclick: async () => {
          try {
            await api(`/api/inbox/${message.id}/requeue`, { method: 'POST' });
            load();
          } catch (error) {
            fill(body, errorBox(error));
          }
        },
      }, 'Requeue');
      const nothingOpen = health.slackConfigured ? 'Nothing open: every message was answered or delegated.'
        : 'No messages: Slack is not configured.';
      fill(body, slackNote,
        dead.length === 0 ? '' : h('section', { id: 'inbox-dead-letters' },
          h('h2', {}, `Dead letters (${dead.length})`),
          h('p', { class: 'muted' }, 'Handed to the lead\'s runs again and again without an answer or a delegation. Requeue one to offer it again.'),
          table([
            ['Received', (message) => ago(message.createdAt)],
            ['From', (message) => message.slackUserId || ''],
            ['Message', (message) => h('div', { class: 'prose' }, message.content)],
            ['', requeue],
          ], dead, { empty: '' })),
        h('p', { class: 'muted' }, 'Inbox of ', agentLink(lead.id, byId), showAll ? '' : ': messages still open, oldest first'),
        table([
          ['Received', (message) => ago(message.createdAt)],
          ['Status', (message) => badge(message.status)],
          ['From', (message) => message.slackUserId || ''],
          ['Message', (message) => h('div', { class: 'prose' }, message.content)],
          ['Outcome', (message) => [
            message.delegatedToTaskId ? ['delegated: ', taskLink(message.delegatedToTaskId)] : '',
            message.responseText ? h('div', { class: 'muted' }, `answered: ${message.responseText}`) : '',
            message.matchedText ? h('div', { class: 'muted' }, message.matchedText) : '',
          ]],
        ], messages, { empty: showAll ? 'The inbox is empty.' : nothingOpen }));
    } catch (error) {
      fill(body, errorBox(error));
    }
  }

  load();
  return {
    onChange(changes) {
      if (changes.some((change) => ['inbox', 'agent', 'external', 'resync'].includes(change.kind))) load();
    },
  };
}

// Channels: the channel list, a channel's latest messages, threads, and posting as a
// person (a message without an agent).

import { api } from '../api.js';
import { agentsById, ago, errorBox, fill, form, h, shortId, taskLink } from '../ui.js';

const LIMIT = 100;

export function mount(root, route) {
  const [, channelId, what, threadId] = route.parts;
  const sidebar = h('nav', { class: 'channels', id: 'channel-list' });
  const main = h('div', { class: 'channel' });
  fill(root, h('h1', {}, 'Channels'), h('div', { class: 'split' }, sidebar, main));
  let channels = [];
  let byId = new Map();

  async function load() {
    try {
      const [list, agents] = await Promise.all([api('/api/channels'), api('/api/agents')]);
      channels = list.channels;
      byId = agentsById(agents.agents);
      const selected = channels.find((channel) => channel.id === channelId) || channels.find((channel) => channel.name === 'general') || channels[0];
      fill(sidebar, channels.map((channel) => h('a', {
        href: `#/channels/${channel.id}`,
        class: channel.id === selected?.id ? 'active' : '',
      }, channel.type === 'dm' ? '@ ' : '# ', channel.name)));
      if (!selected) {
        fill(main, h('p', { class: 'empty' }, 'No channels.'));
        return;
      }
      if (what === 'thread' && threadId) await showThread(selected, threadId);
      else await showChannel(selected);
    } catch (error) {
      fill(main, errorBox(error));
    }
  }

  async function showChannel(channel) {
    const { messages } = await api(`/api/channels/${channel.id}/messages?limit=${LIMIT}`);
    const replies = new Map();
    for (const message of messages) {
      if (message.replyToId) replies.set(message.replyToId, (replies.get(message.replyToId) || 0) + 1);
    }
    const roots = messages.filter((message) => !message.replyToId || !messages.some((other) => other.id === message.replyToId));
    fill(main,
      h('h2', {}, `# ${channel.name}`),
      channel.description ? h('p', { class: 'muted' }, channel.description) : '',
      h('ol', { class: 'messages', id: 'messages' }, roots.map((message) => messageItem(channel, message, replies.get(message.id) || 0))),
      postForm(channel, null, load));
  }

  async function showThread(channel, rootId) {
    const { messages } = await api(`/api/channels/${channel.id}/messages/${rootId}/thread`);
    fill(main,
      h('p', { class: 'crumbs' }, h('a', { href: `#/channels/${channel.id}` }, `# ${channel.name}`), ' / thread'),
      h('ol', { class: 'messages thread', id: 'messages' }, messages.map((message) => messageItem(channel, message, 0, true))),
      postForm(channel, rootId, load));
  }

  function messageItem(channel, message, nReplies, inThread = false) {
    const author = message.agentId ? (byId.get(message.agentId)?.name || shortId(message.agentId)) : 'a person';
    return h('li', { class: 'message', dataset: { messageId: message.id } },
      h('div', { class: 'meta' }, h('strong', {}, author), ' ', ago(message.createdAt),
        message.mentions?.length ? h('span', { class: 'muted' }, ` → ${message.mentions.map((id) => byId.get(id)?.name || shortId(id)).join(', ')}`) : ''),
      h('div', { class: 'prose' }, message.content),
      message.taskIds?.length ? h('div', { class: 'muted' }, 'tasks: ', message.taskIds.map((id) => [taskLink(id), ' '])) : '',
      inThread ? '' : h('a', { class: 'thread-link', href: `#/channels/${channel.id}/thread/${message.id}` },
        nReplies ? `${nReplies} repl${nReplies === 1 ? 'y' : 'ies'}` : 'reply'));
  }

  load();
  return {
    onChange(changes) {
      if (changes.some((change) => ['channelMessage', 'external', 'resync'].includes(change.kind))) load();
    },
  };
}

function postForm(channel, replyToId, reload) {
  return form({ class: 'card post', id: 'post-message' }, [
    h('textarea', { name: 'content', rows: 2, required: true, placeholder: replyToId ? 'Reply in the thread (as a person)' : `Message #${channel.name} as a person; @name mentions an agent` }),
    h('button', { type: 'submit' }, replyToId ? 'Reply' : 'Post'),
  ], async (data, element) => {
    const body = { content: String(data.get('content')) };
    if (replyToId) body.replyToId = replyToId;
    await api(`/api/channels/${channel.id}/messages`, { method: 'POST', body });
    element.reset();
    await reload();
  });
}

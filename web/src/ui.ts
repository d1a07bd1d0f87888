/** Small DOM helpers and the message area where every error is said in words. */
import { ApiError } from './api';
import { CognitoError } from './cognito';

type Props<K extends keyof HTMLElementTagNameMap> = Partial<Omit<HTMLElementTagNameMap[K], 'style'>> &
  Record<string, unknown>;

export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props<K> = {},
  ...children: (string | Node)[]
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'ariaLabel') e.setAttribute('aria-label', String(v));
    else if (k === 'role') e.setAttribute('role', String(v));
    else (e as unknown as Record<string, unknown>)[k] = v;
  }
  e.append(...children);
  return e;
}

/** An error as the page says it: the API's or Cognito's message, else the error as text. */
export const words = (e: unknown) => (e instanceof ApiError || e instanceof CognitoError ? e.message : String(e));

export type Level = 'error' | 'warn' | 'info';

/**
 * Messages for the person at the page. One with a topic replaces the last one on that topic
 * (a repeated failure stays one line); each can be dismissed; infos fade after a while.
 */
export class Messages {
  private readonly byTopic = new Map<string, HTMLElement>();
  constructor(readonly el: HTMLElement) {}

  private say(level: Level, text: string, topic?: string): void {
    const item = document.createElement('div');
    item.className = `message ${level}`;
    item.setAttribute('role', level === 'error' ? 'alert' : 'status');
    item.dataset.level = level;
    const close = document.createElement('button');
    close.type = 'button';
    close.textContent = '×';
    close.title = 'Dismiss';
    close.onclick = () => item.remove();
    item.append(text, close);
    if (topic) {
      this.byTopic.get(topic)?.remove();
      this.byTopic.set(topic, item);
      item.dataset.topic = topic;
    }
    this.el.append(item);
    while (this.el.children.length > 5) this.el.firstElementChild?.remove();
    if (level === 'info') setTimeout(() => item.remove(), 6000);
  }
  error(text: string, topic?: string): void {
    this.say('error', text, topic);
  }
  warn(text: string, topic?: string): void {
    if (topic && this.byTopic.get(topic)?.isConnected) return;
    this.say('warn', text, topic);
  }
  info(text: string, topic?: string): void {
    this.say('info', text, topic);
  }
  dismiss(topic: string): void {
    this.byTopic.get(topic)?.remove();
    this.byTopic.delete(topic);
  }
}

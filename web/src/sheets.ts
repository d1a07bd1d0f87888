/**
 * The sheets this browser has created or opened, newest first: the list in modes without a
 * catalog (none, iam, jwt). In cognito mode the list is the server's (`Catalog` below).
 */
const KEY = 'sheetlog.sheets';

export interface Known {
  id: string;
  opened: string;
}

export function known(): Known[] {
  try {
    const v = JSON.parse(localStorage.getItem(KEY) ?? '[]') as Known[];
    return Array.isArray(v) ? v.filter((k) => typeof k?.id === 'string') : [];
  } catch {
    return [];
  }
}

export function remember(id: string): void {
  const rest = known().filter((k) => k.id !== id);
  localStorage.setItem(KEY, JSON.stringify([{ id, opened: new Date().toISOString() }, ...rest].slice(0, 200)));
}

export function forget(id: string): void {
  localStorage.setItem(KEY, JSON.stringify(known().filter((k) => k.id !== id)));
}

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

// ---- The server's catalog (cognito mode): names, roles, members. ----------------------------

export type Role = 'viewer' | 'editor' | 'owner';
export const ROLES: Role[] = ['viewer', 'editor', 'owner'];

export interface SheetInfo {
  logId: string;
  name: string;
  role: Role;
  owner: string;
  createdAt: string;
  updatedAt: string;
}
export interface SheetsPage {
  sheets: SheetInfo[];
  cursor: string | null;
}
export interface Member {
  userId: string;
  email: string | null;
  role: Role;
}

/**
 * A share by email nobody has claimed yet: listed the same whether or not anyone signs in with
 * the address; the person who does joins by opening the sheet or their list (docs/api.md).
 */
export interface Invitation {
  email: string;
  role: Role;
  invitedAt: string;
}

export interface Roster {
  /** The sheet's name (absent when it is not in the catalog). */
  name?: string;
  members: Member[];
  invitations: Invitation[];
}

/** What a role may do on the page (the API decides; the page only hides what it would refuse). */
export function can(role: Role | undefined, what: 'edit' | 'share'): boolean {
  if (what === 'edit') return role === 'editor' || role === 'owner';
  return role === 'owner';
}

/** The longest name the page lets you type; the server has the last word. */
export const MAX_NAME = 200;

/** A name as the page sends it: trimmed, never empty. */
export function cleanName(name: string): string {
  const n = name.trim().replace(/\s+/g, ' ');
  return n ? n.slice(0, MAX_NAME) : 'Untitled';
}

/**
 * A last-change time as a person reads it, in their language (`Intl.RelativeTimeFormat`): "now",
 * "5 minutes ago", "3 hours ago" within a day, else the date.
 */
export function ago(iso: string, now = Date.now(), locale?: string): string {
  const t = Date.parse(iso);
  if (!Number.isFinite(t)) return '';
  const s = Math.round((now - t) / 1000);
  const rtf = new Intl.RelativeTimeFormat(locale, { numeric: 'auto' });
  if (s < 60) return rtf.format(0, 'second');
  if (s < 3600) return rtf.format(-Math.floor(s / 60), 'minute');
  if (s < 86_400) return rtf.format(-Math.floor(s / 3600), 'hour');
  return new Date(t).toLocaleDateString(locale);
}

type Caller = <T>(method: string, path: string, body?: unknown) => Promise<T>;

/** The catalog's routes (docs/api.md), through the page's `call` (or a test's stand-in). */
export class Catalog {
  constructor(private readonly call: Caller) {}

  list(cursor?: string | null, limit = 50): Promise<SheetsPage> {
    const q = new URLSearchParams({ limit: String(limit) });
    if (cursor) q.set('cursor', cursor);
    return this.call<SheetsPage>('GET', `/sheets?${q}`);
  }
  create(name: string): Promise<{ logId: string }> {
    return this.call('POST', '/logs', { name: cleanName(name) });
  }
  rename(logId: string, name: string): Promise<SheetInfo> {
    return this.call('PATCH', `/logs/${logId}`, { name: cleanName(name) });
  }
  async members(logId: string): Promise<Roster> {
    const r = await this.call<Partial<Roster>>('GET', `/logs/${logId}/members`);
    return { name: r.name, members: r.members ?? [], invitations: r.invitations ?? [] };
  }
  /**
   * Shares by email (`202 {email, role}`: an invitation, the same answer whether or not anyone
   * signs in with the address, so it says nothing of who has an account) or by user id (`200`
   * the member).
   */
  add(logId: string, who: string, role: Role): Promise<{ email?: string; userId?: string; role: Role }> {
    const w = who.trim();
    const body = w.includes('@') ? { email: w, role } : { userId: w, role };
    return this.call('POST', `/logs/${logId}/members`, body);
  }
  setRole(logId: string, userId: string, role: Role): Promise<Member> {
    return this.call('PUT', `/logs/${logId}/members/${encodeURIComponent(userId)}`, { role });
  }
  remove(logId: string, userId: string): Promise<void> {
    return this.call('DELETE', `/logs/${logId}/members/${encodeURIComponent(userId)}`);
  }
  /** Withdraws an invitation (owners). */
  uninvite(logId: string, email: string): Promise<void> {
    return this.call('DELETE', `/logs/${logId}/invitations/${encodeURIComponent(email)}`);
  }
  /** This person's role on a sheet, from its members; undefined when they are not one. */
  async roleOf(logId: string, userId: string): Promise<Role | undefined> {
    return (await this.members(logId)).members.find((m) => m.userId === userId)?.role;
  }
}

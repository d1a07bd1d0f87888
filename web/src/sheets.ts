/** The sheets this browser has created or opened, newest first (the API has no list of logs). */
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
